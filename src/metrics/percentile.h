// Exact percentiles of a sample (batch summaries, benchmarks), with linear
// interpolation between closest ranks: p in [0, 100].
//
// Thread rules: pure functions.
#pragma once

#include <cstddef>
#include <vector>

namespace tern {

struct PercentileSummary {
  double p50 = 0;
  double p90 = 0;
  double p99 = 0;
  double mean = 0;
  double max = 0;
  size_t count = 0;
};

// p-th percentile of values (copied and sorted); 0 when empty.
double Percentile(std::vector<double> values, double p);
PercentileSummary Summarize(std::vector<double> values);

}  // namespace tern
