// ServerMetrics: the /metrics page in Prometheus text format (version 0.0.4).
// Names follow vLLM's under a namespace, "tern:" by default (`tern serve
// --metrics-prefix NAME` sets another: with "vllm" the page reads as vLLM's
// for schedulers that expect its names), each with a model_name label:
//   histograms  time_to_first_token_seconds, time_per_output_token_seconds,
//               inter_token_latency_seconds, e2e_request_latency_seconds,
//               request_queue_time_seconds   (_bucket{le=..}, _sum, _count)
//   gauges      num_requests_running, num_requests_waiting, kv_cache_usage_perc,
//               kv_cache_capacity_tokens
//   counters    prompt_tokens_total, generation_tokens_total,
//               prefix_cache_queries_total, prefix_cache_hits_total,
//               num_preemptions_total, request_success_total{finished_reason},
//               kv_evicted_tokens_total (streaming KV eviction)
//   info        cache_config_info{block_size, num_gpu_blocks} 1 (once loaded)
//   with "vllm" only: gpu_cache_usage_perc, vLLM's older name of
//               kv_cache_usage_perc (older schedulers read it)
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

#include "base/status.h"
#include "engine/engine.h"
#include "metrics/histogram.h"
#include "server/latency_window.h"

namespace tern {

// The namespace of every metric name (the part before ':'): non-empty,
// letters, digits and '_', not starting with a digit (Prometheus's rule,
// less the ':'). InvalidArgument naming --metrics-prefix otherwise.
Status ValidateMetricsPrefix(const std::string& prefix);

class ServerMetrics {
 public:
  // prefix: a valid namespace (ValidateMetricsPrefix); checked (CHECK).
  explicit ServerMetrics(std::string prefix = "tern");

  // One finished request (any finish reason) that produced metrics.
  void Observe(const RequestMetrics& m);
  // stats: null while the model loads (gauges and counters read 0).
  std::string Render(const std::string& model_name, const EngineStats* stats) const;
  // Percentiles since start, estimated from the histograms (max reads 0).
  LatencySummaries Totals() const;
  // The last minutes' raw latencies, for exact recent percentiles (/stats).
  const LatencyWindow& recent() const { return recent_; }
  const std::string& prefix() const { return prefix_; }

 private:
  const std::string prefix_;
  mutable std::mutex mu_;
  Histogram ttft_;
  Histogram tpot_;
  Histogram itl_;
  Histogram e2e_;
  Histogram queue_;
  LatencyWindow recent_;  // its own lock
};

}  // namespace tern
