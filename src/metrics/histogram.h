// Histogram: fixed upper bounds, like a Prometheus histogram — a count per
// bucket, exposed cumulatively (le="bound"), plus sum and count. Cheap to
// Observe; Percentile estimates by linear interpolation inside a bucket.
//
// Thread rules: not synchronised; the owner locks if shared.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tern {

class Histogram {
 public:
  // bounds: strictly increasing upper bounds; a final +Inf bucket is implied.
  explicit Histogram(std::vector<double> bounds);

  // Bucket bounds for latencies in seconds (1 ms .. 80 s).
  static std::vector<double> LatencyBoundsSeconds();
  // Bucket bounds for token counts (1 .. 128k, roughly x2 steps).
  static std::vector<double> TokenCountBounds();

  void Observe(double value);
  void Merge(const Histogram& other);  // same bounds

  const std::vector<double>& bounds() const { return bounds_; }
  // Cumulative counts, one per bound plus the +Inf bucket (== count()).
  std::vector<uint64_t> CumulativeCounts() const;
  uint64_t count() const { return count_; }
  double sum() const { return sum_; }
  // Estimated q-quantile (q in [0, 1]); 0 when empty.
  double Percentile(double q) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // bounds_.size() + 1
  uint64_t count_ = 0;
  double sum_ = 0;
};

}  // namespace tern
