// LatencyWindow: the latencies of the requests that finished in the last
// minute or so, kept as raw values so their percentiles are exact (the
// /metrics histograms hold everything since start, in coarse buckets). The
// dashboard's live TTFT/TPOT/ITL/E2EL percentiles come from here (/stats).
//
// Each series keeps at most kMaxSamples values and drops those older than
// kMaxAgeS seconds on every Observe; Summaries() filters by its own window.
//
// Thread rules: Observe and Summaries may be called from any thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>
#include <mutex>
#include <utility>

#include "engine/engine.h"
#include "metrics/percentile.h"

namespace tern {

struct LatencySummaries {
  PercentileSummary ttft;   // seconds
  PercentileSummary tpot;
  PercentileSummary itl;
  PercentileSummary e2e;
  PercentileSummary queue;
};

class LatencyWindow {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr size_t kMaxSamples = 4096;
  static constexpr double kMaxAgeS = 300;

  void Observe(const RequestMetrics& m, Clock::time_point now = Clock::now());
  // Exact percentiles of the values observed within window_s before now.
  LatencySummaries Summaries(double window_s, Clock::time_point now = Clock::now()) const;

 private:
  using Series = std::deque<std::pair<Clock::time_point, double>>;
  static void Add(Series& s, Clock::time_point t, double v);
  static PercentileSummary Summarize(const Series& s, Clock::time_point since);

  mutable std::mutex mu_;
  Series ttft_, tpot_, itl_, e2e_, queue_;
};

}  // namespace tern
