#include "server/stats_json.h"

#include <nlohmann/json.hpp>

namespace tern {
namespace {

using json = nlohmann::json;

json SummaryJson(const PercentileSummary& s) {
  return {{"p50", s.p50}, {"p90", s.p90},   {"p99", s.p99},
          {"mean", s.mean}, {"max", s.max}, {"count", s.count}};
}

json SummariesJson(const LatencySummaries& l) {
  return {{"ttft", SummaryJson(l.ttft)},
          {"tpot", SummaryJson(l.tpot)},
          {"itl", SummaryJson(l.itl)},
          {"e2e", SummaryJson(l.e2e)},
          {"queue", SummaryJson(l.queue)}};
}

uint64_t Finished(const EngineStats& s, const char* reason) {
  auto it = s.request_success_total.find(reason);
  return it == s.request_success_total.end() ? 0 : it->second;
}

json EngineJson(const EngineStats& s) {
  const double hit_rate = s.prefix_cache_queries_total == 0
                              ? 0.0
                              : (double)s.prefix_cache_hits_total / (double)s.prefix_cache_queries_total;
  return {{"running", s.num_running},
          {"waiting", s.num_waiting},
          {"kv_cache_usage", s.kv_cache_usage},
          {"peak_kv_cache_usage", s.peak_kv_cache_usage},
          {"kv_blocks", s.num_kv_blocks},
          {"kv_window_blocks", s.num_kv_window_blocks},
          {"block_size", s.block_size},
          {"kv_capacity_tokens", s.num_kv_blocks * (int64_t)s.block_size},
          {"kv_cache_bytes", s.kv_cache_bytes},
          {"max_model_len", s.max_model_len},
          {"max_num_seqs", s.max_num_seqs},
          {"prompt_tokens_total", s.prompt_tokens_total},
          {"generation_tokens_total", s.generation_tokens_total},
          {"prefix_cache_queries_total", s.prefix_cache_queries_total},
          {"prefix_cache_hits_total", s.prefix_cache_hits_total},
          {"prefix_cache_hit_rate", hit_rate},
          {"num_preemptions_total", s.num_preemptions_total},
          {"kv_evicted_tokens_total", s.kv_evicted_tokens_total},
          {"num_steps_total", s.num_steps_total},
          {"requests_finished",
           {{"stop", Finished(s, "stop")},
            {"length", Finished(s, "length")},
            {"abort", Finished(s, "abort")}}}};
}

json StepsJson(const EngineStats& s) {
  json steps = json::array();
  for (const StepStats& st : s.recent_steps) {
    steps.push_back({{"t_s", st.start_s},
                     {"batch_size", st.batch_size},
                     {"tokens", st.num_scheduled_tokens},
                     {"prefill_tokens", st.num_prefill_tokens},
                     {"decode_tokens", st.num_scheduled_tokens - st.num_prefill_tokens},
                     {"sampled_tokens", st.num_sampled_tokens},
                     {"preemptions", st.num_preemptions},
                     {"kv_usage", st.kv_cache_usage},
                     {"duration_ms", st.duration_s * 1e3}});
  }
  return steps;
}

}  // namespace

std::string StatsJson(const std::string& model_name, const EngineStats* stats,
                      const ServerMetrics& metrics, double uptime_s, double window_s) {
  const EngineStats s = stats ? *stats : EngineStats{};
  json latency = SummariesJson(metrics.recent().Summaries(window_s));
  latency["window_s"] = window_s;
  json out = {{"model", model_name},
              {"ready", stats != nullptr},
              {"uptime_s", uptime_s},
              {"engine", EngineJson(s)},
              {"latency", std::move(latency)},
              {"latency_total", SummariesJson(metrics.Totals())},
              {"steps", StepsJson(s)}};
  return out.dump();
}

}  // namespace tern
