#include "metrics/histogram.h"

#include <algorithm>

#include "base/check.h"

namespace tern {

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {
  for (size_t i = 1; i < bounds_.size(); ++i) CHECK(bounds_[i - 1] < bounds_[i]);
}

std::vector<double> Histogram::LatencyBoundsSeconds() {
  return {0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
          0.75,  1.0,    2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0};
}

std::vector<double> Histogram::TokenCountBounds() {
  std::vector<double> b;
  for (double x = 1; x <= 131072; x *= 2) b.push_back(x);
  return b;
}

void Histogram::Observe(double value) {
  const size_t i = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  ++counts_[i];
  ++count_;
  sum_ += value;
}

void Histogram::Merge(const Histogram& other) {
  CHECK(other.bounds_ == bounds_);
  for (size_t i = 0; i < counts_.size(); ++i) counts_[i] += other.counts_[i];
  count_ += other.count_;
  sum_ += other.sum_;
}

std::vector<uint64_t> Histogram::CumulativeCounts() const {
  std::vector<uint64_t> out(counts_.size());
  uint64_t running = 0;
  for (size_t i = 0; i < counts_.size(); ++i) out[i] = running += counts_[i];
  return out;
}

double Histogram::Percentile(double q) const {
  if (count_ == 0) return 0;
  q = std::clamp(q, 0.0, 1.0);
  const double rank = q * (double)count_;
  uint64_t below = 0;
  for (size_t i = 0; i < counts_.size(); ++i) {
    if (counts_[i] == 0 || (double)(below + counts_[i]) < rank) {
      below += counts_[i];
      continue;
    }
    const double lo = i == 0 ? 0.0 : bounds_[i - 1];
    if (i == bounds_.size()) return lo;  // +Inf bucket: the last finite bound
    const double frac = (rank - (double)below) / (double)counts_[i];
    return lo + (bounds_[i] - lo) * std::clamp(frac, 0.0, 1.0);
  }
  return bounds_.empty() ? 0 : bounds_.back();
}

}  // namespace tern
