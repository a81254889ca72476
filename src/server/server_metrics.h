// ServerMetrics: the /metrics page in Prometheus text format (version 0.0.4).
// Names follow vLLM's with the prefix "tern:" and a model_name label:
//   histograms  time_to_first_token_seconds, time_per_output_token_seconds,
//               inter_token_latency_seconds, e2e_request_latency_seconds,
//               request_queue_time_seconds   (_bucket{le=..}, _sum, _count)
//   gauges      num_requests_running, num_requests_waiting, kv_cache_usage_perc,
//               kv_cache_capacity_tokens
//   counters    prompt_tokens_total, generation_tokens_total,
//               prefix_cache_queries_total, prefix_cache_hits_total,
//               num_preemptions_total, request_success_total{finished_reason},
//               kv_evicted_tokens_total (streaming KV eviction)
// Histograms (metrics/histogram.h) are filled here from each finished
// request's RequestMetrics; gauges and counters come from the engine's
// EngineStats snapshot.
//
// Thread rules: Observe and Render may be called from any thread.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "metrics/histogram.h"
#include "server/latency_window.h"

namespace tern {

class ServerMetrics {
 public:
  ServerMetrics();

  // One finished request (any finish reason) that produced metrics.
  void Observe(const RequestMetrics& m);
  // stats: null while the model loads (gauges and counters read 0).
  std::string Render(const std::string& model_name, const EngineStats* stats) const;
  // Percentiles since start, estimated from the histograms (max reads 0).
  LatencySummaries Totals() const;
  // The last minutes' raw latencies, for exact recent percentiles (/stats).
  const LatencyWindow& recent() const { return recent_; }

 private:
  mutable std::mutex mu_;
  Histogram ttft_;
  Histogram tpot_;
  Histogram itl_;
  Histogram e2e_;
  Histogram queue_;
  LatencyWindow recent_;  // its own lock
};

}  // namespace tern
