#include "server/server_metrics.h"

#include <gtest/gtest.h>

#include "server/engine_stats_testdata.h"

namespace tern {
namespace {

bool Contains(const std::string& text, const std::string& line) {
  return text.find(line) != std::string::npos;
}

// Expects every one of `lines` in the rendered `text`.
void ExpectAll(const std::string& text, std::initializer_list<const char*> lines) {
  for (const char* line : lines) EXPECT_TRUE(Contains(text, line)) << line;
}

TEST(ServerMetricsTest, RendersHistogramBucketsCumulatively) {
  ServerMetrics m;
  RequestMetrics r = {.queue_s = 0.0005, .ttft_s = 0.003, .tpot_s = 0.02, .e2e_s = 0.07,
                      .itl_s = {0.02, 0.03}, .generated_tokens = 3};
  m.Observe(r);
  r.ttft_s = 3.0;
  m.Observe(r);
  std::string text = m.Render("stories", nullptr);
  ExpectAll(text,
            {"# TYPE tern:time_to_first_token_seconds histogram\n",
             "tern:time_to_first_token_seconds_bucket{le=\"0.001\",model_name=\"stories\"} 0\n",
             "tern:time_to_first_token_seconds_bucket{le=\"0.005\",model_name=\"stories\"} 1\n",
             "tern:time_to_first_token_seconds_bucket{le=\"5\",model_name=\"stories\"} 2\n",
             "tern:time_to_first_token_seconds_bucket{le=\"+Inf\",model_name=\"stories\"} 2\n",
             "tern:time_to_first_token_seconds_count{model_name=\"stories\"} 2\n",
             "tern:inter_token_latency_seconds_count{model_name=\"stories\"} 4\n",
             "# HELP tern:e2e_request_latency_seconds ",
             "tern:request_queue_time_seconds_sum{model_name=\"stories\"} 0.001"});
}

TEST(ServerMetricsTest, RendersEngineGaugesAndCounters) {
  ServerMetrics m;
  const EngineStats s = testdata::LoadedEngineStats();
  std::string text = m.Render("a\"b", &s);
  ExpectAll(text,
            {"# TYPE tern:kv_evicted_tokens_total counter\n",
             "tern:kv_evicted_tokens_total{model_name=\"a\\\"b\"} 4096\n",
             "# TYPE tern:num_requests_running gauge\n",
             "tern:num_requests_running{model_name=\"a\\\"b\"} 3\n",
             "tern:kv_cache_usage_perc{model_name=\"a\\\"b\"} 0.25\n",
             "# TYPE tern:kv_cache_capacity_tokens gauge\n",
             "tern:kv_cache_capacity_tokens{model_name=\"a\\\"b\"} 3264\n",
             "# TYPE tern:prompt_tokens_total counter\n",
             "tern:generation_tokens_total{model_name=\"a\\\"b\"} 50\n",
             "tern:prefix_cache_hits_total{model_name=\"a\\\"b\"} 16\n",
             "tern:request_success_total{finished_reason=\"length\",model_name=\"a\\\"b\"} 5\n",
             "tern:request_success_total{finished_reason=\"abort\",model_name=\"a\\\"b\"} 0\n"});
}

TEST(ServerMetricsTest, RendersSpeculativeDecodingCounters) {
  ServerMetrics m;
  EngineStats s;
  std::string text = m.Render("m", &s);
  // Off: the counters are there at 0 (the dashboard then shows n/a).
  ExpectAll(text, {"# TYPE tern:spec_decode_num_drafts_total counter\n",
                   "tern:spec_decode_num_draft_tokens_total{model_name=\"m\"} 0\n"});
  EXPECT_FALSE(Contains(text, "tern:spec_decode_num_accepted_tokens_per_pos_total{"));
  s.spec_num_drafts_total = 10;
  s.spec_num_draft_tokens_total = 40;
  s.spec_num_accepted_tokens_total = 25;
  s.spec_accepted_per_position = {9, 8, 5, 3};
  text = m.Render("m", &s);
  ExpectAll(
      text,
      {"tern:spec_decode_num_drafts_total{model_name=\"m\"} 10\n",
       "tern:spec_decode_num_draft_tokens_total{model_name=\"m\"} 40\n",
       "tern:spec_decode_num_accepted_tokens_total{model_name=\"m\"} 25\n",
       "tern:spec_decode_num_accepted_tokens_per_pos_total{position=\"0\",model_name=\"m\"} 9\n",
       "tern:spec_decode_num_accepted_tokens_per_pos_total{position=\"3\",model_name=\"m\"} 3\n"});
}

TEST(ServerMetricsTest, PrefixNamesEveryMetric) {
  ServerMetrics m("vllm");
  const EngineStats s = testdata::LoadedEngineStats();
  m.Observe({.ttft_s = 0.01, .itl_s = {}, .generated_tokens = 1});
  const std::string text = m.Render("stories", &s);
  // The names a scheduler built for vLLM reads (the Gateway API Inference
  // Extension's endpoint picker by default, for one).
  ExpectAll(text, {"# TYPE vllm:num_requests_waiting gauge\n",
                   "vllm:num_requests_waiting{model_name=\"stories\"} 1\n",
                   "vllm:num_requests_running{model_name=\"stories\"} 3\n",
                   "vllm:kv_cache_usage_perc{model_name=\"stories\"} 0.25\n",
                   "# TYPE vllm:gpu_cache_usage_perc gauge\n",
                   "vllm:gpu_cache_usage_perc{model_name=\"stories\"} 0.25\n",
                   "# TYPE vllm:prefix_cache_queries_total counter\n",
                   "vllm:prefix_cache_queries_total{model_name=\"stories\"} 80\n",
                   "vllm:prefix_cache_hits_total{model_name=\"stories\"} 16\n",
                   "vllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"204\",model_name="
                   "\"stories\"} 1\n",
                   "vllm:time_to_first_token_seconds_count{model_name=\"stories\"} 1\n"});
  // Every sample and every HELP/TYPE line is in the one namespace.
  size_t lines = 0;
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('\n', at);
    const std::string line = text.substr(at, end - at);
    at = end == std::string::npos ? text.size() : end + 1;
    ++lines;
    const std::string name = line.starts_with("# ") ? line.substr(7) : line;
    EXPECT_TRUE(name.starts_with("vllm:")) << line;
  }
  EXPECT_GT(lines, 50u);
}

TEST(ServerMetricsTest, OlderKvNameOnlyUnderVllmAndInfoOnlyOnceLoaded) {
  const EngineStats loaded_without_shape;  // block_size 0: nothing to describe
  EngineStats s;
  s.block_size = 16;
  s.num_kv_blocks = 8;
  const std::string tern = ServerMetrics().Render("m", &s);
  EXPECT_FALSE(Contains(tern, "gpu_cache_usage_perc"));
  EXPECT_TRUE(Contains(tern, "tern:cache_config_info{block_size=\"16\",num_gpu_blocks=\"8\","));
  const std::string other = ServerMetrics("my_llm").Render("m", &s);
  EXPECT_TRUE(Contains(other, "my_llm:num_requests_waiting{model_name=\"m\"} 0\n"));
  EXPECT_FALSE(Contains(other, "tern:"));
  EXPECT_FALSE(Contains(other, "gpu_cache_usage_perc"));
  // While the model loads there is no KV cache to describe.
  const std::string loading = ServerMetrics("vllm").Render("m", nullptr);
  EXPECT_FALSE(Contains(loading, "cache_config_info"));
  EXPECT_FALSE(Contains(ServerMetrics().Render("m", &loaded_without_shape), "cache_config_info"));
  EXPECT_TRUE(Contains(loading, "vllm:kv_cache_usage_perc{model_name=\"m\"} 0\n"));
}

TEST(ServerMetricsTest, ValidatesThePrefix) {
  for (const char* good : {"tern", "vllm", "_x", "a1_B"}) {
    EXPECT_TRUE(ValidateMetricsPrefix(good).ok()) << good;
  }
  for (const char* bad : {"", "1abc", "a:b", "vllm:", "a-b", "a b", "t\xc3\xa9rn"}) {
    const Status st = ValidateMetricsPrefix(bad);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(st.message().find("--metrics-prefix"), std::string::npos) << st.message();
  }
}

}  // namespace
}  // namespace tern
