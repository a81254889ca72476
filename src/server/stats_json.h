// StatsJson: GET /stats, the engine and latency figures as one JSON object
// for the dashboard (and scripts): what /metrics says, plus exact recent
// percentiles, the KV cache's capacity and the engine's last steps.
//
//   {"model", "uptime_s", "ready",
//    "engine": {running, waiting, kv_cache_usage, peak_kv_cache_usage,
//               kv_blocks, kv_window_blocks (hybrid models), block_size, kv_capacity_tokens, kv_cache_bytes,
//               max_model_len, max_num_seqs, prompt_tokens_total,
//               generation_tokens_total, prefix_cache_queries_total,
//               prefix_cache_hits_total, prefix_cache_hit_rate,
//               num_preemptions_total, num_steps_total,
//               requests_finished: {stop, length, abort}},
//    "latency": {window_s, ttft, tpot, itl, e2e, queue},   exact, last window_s
//    "latency_total": {ttft, tpot, itl, e2e, queue},       histogram estimates
//        each {p50, p90, p99, mean, max, count}, seconds
//    "steps": [{t_s, batch_size, tokens, prefill_tokens, decode_tokens,
//               sampled_tokens, preemptions, kv_usage, duration_ms}, ...]}
//
// Thread rules: pure function of its arguments.
#pragma once

#include <string>

#include "engine/engine.h"
#include "server/server_metrics.h"

namespace tern {

// stats: null while the model loads (engine figures read 0, "ready": false).
std::string StatsJson(const std::string& model_name, const EngineStats* stats,
                      const ServerMetrics& metrics, double uptime_s, double window_s = 60);

}  // namespace tern
