#include "server/stats_json.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace tern {
namespace {

using json = nlohmann::json;

TEST(StatsJsonTest, EngineFiguresCapacityAndSteps) {
  ServerMetrics metrics;
  RequestMetrics r;
  r.ttft_s = 0.04;
  r.tpot_s = 0.01;
  r.itl_s = {0.01, 0.01};
  r.generated_tokens = 3;
  metrics.Observe(r);
  EngineStats s;
  s.num_running = 2;
  s.num_waiting = 5;
  s.kv_cache_usage = 0.5;
  s.num_kv_blocks = 100;
  s.block_size = 16;
  s.kv_cache_bytes = 1 << 20;
  s.prefix_cache_queries_total = 200;
  s.prefix_cache_hits_total = 50;
  s.request_success_total = {{"length", 3}};
  StepStats step;
  step.num_scheduled_tokens = 40;
  step.num_prefill_tokens = 32;
  step.duration_s = 0.002;
  s.recent_steps = {step, step};
  const json j = json::parse(StatsJson("m", &s, metrics, 12.5));
  EXPECT_EQ(j["model"], "m");
  EXPECT_TRUE(j["ready"]);
  EXPECT_EQ(j["engine"]["running"], 2);
  EXPECT_EQ(j["engine"]["waiting"], 5);
  EXPECT_EQ(j["engine"]["kv_capacity_tokens"], 1600);
  EXPECT_DOUBLE_EQ(j["engine"]["prefix_cache_hit_rate"].get<double>(), 0.25);
  EXPECT_EQ(j["engine"]["requests_finished"]["length"], 3);
  EXPECT_EQ(j["engine"]["requests_finished"]["stop"], 0);
  ASSERT_EQ(j["steps"].size(), 2u);
  EXPECT_EQ(j["steps"][0]["decode_tokens"], 8);
  EXPECT_DOUBLE_EQ(j["steps"][0]["duration_ms"].get<double>(), 2.0);
  EXPECT_EQ(j["latency"]["ttft"]["count"], 1);
  EXPECT_DOUBLE_EQ(j["latency"]["ttft"]["p99"].get<double>(), 0.04);
  EXPECT_EQ(j["latency"]["itl"]["count"], 2);
  EXPECT_EQ(j["latency_total"]["ttft"]["count"], 1);
  EXPECT_GT(j["latency_total"]["ttft"]["p50"].get<double>(), 0.02);  // bucket (0.02, 0.04]
  EXPECT_LE(j["latency_total"]["ttft"]["p50"].get<double>(), 0.04);
}

TEST(StatsJsonTest, LoadingServerReadsNotReady) {
  ServerMetrics metrics;
  const json j = json::parse(StatsJson("m", nullptr, metrics, 0));
  EXPECT_FALSE(j["ready"]);
  EXPECT_EQ(j["engine"]["running"], 0);
  EXPECT_TRUE(j["steps"].empty());
}

}  // namespace
}  // namespace tern
