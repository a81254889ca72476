#include "metrics/percentile.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace tern {
namespace {

double SortedPercentile(const std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  const double rank = std::clamp(p, 0.0, 100.0) / 100.0 * (double)(v.size() - 1);
  const size_t lo = (size_t)std::floor(rank);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (rank - (double)lo);
}

}  // namespace

double Percentile(std::vector<double> values, double p) {
  std::sort(values.begin(), values.end());
  return SortedPercentile(values, p);
}

PercentileSummary Summarize(std::vector<double> values) {
  PercentileSummary s;
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  s.p50 = SortedPercentile(values, 50);
  s.p90 = SortedPercentile(values, 90);
  s.p99 = SortedPercentile(values, 99);
  s.mean = std::accumulate(values.begin(), values.end(), 0.0) / (double)values.size();
  s.max = values.back();
  s.count = values.size();
  return s;
}

}  // namespace tern
