#include "server/stats_json.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/engine_stats_testdata.h"

namespace tern {
namespace {

using json = nlohmann::json;

TEST(StatsJsonTest, EngineFiguresCapacityAndSteps) {
  ServerMetrics metrics;
  metrics.Observe({.ttft_s = 0.04, .tpot_s = 0.01, .itl_s = {0.01, 0.01}, .generated_tokens = 3});
  EngineStats s = testdata::LoadedEngineStats();
  StepStats step;
  step.num_scheduled_tokens = 40;
  step.num_prefill_tokens = 32;
  step.duration_s = 0.002;
  s.recent_steps = {step, step};
  const json j = json::parse(StatsJson("m", &s, metrics, 12.5));
  EXPECT_EQ(j["model"], "m");
  EXPECT_TRUE(j["ready"]);
  EXPECT_EQ(j["engine"]["running"], 3);
  EXPECT_EQ(j["engine"]["waiting"], 1);
  EXPECT_EQ(j["engine"]["kv_capacity_tokens"], 204 * 16);
  EXPECT_DOUBLE_EQ(j["engine"]["prefix_cache_hit_rate"].get<double>(), 0.2);
  EXPECT_EQ(j["engine"]["requests_finished"]["length"], 5);
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
