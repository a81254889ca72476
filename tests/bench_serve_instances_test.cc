// tools/bench_serve_instances: counters from Prometheus text (tern's and
// vLLM's names, label sets summed), the spread and the aggregate hit rate.
#include "tools/bench_serve_instances.h"

#include <gtest/gtest.h>

namespace tern {
namespace {

TEST(BenchServeInstancesTest, ParsesTernCountersSummingLabelSets) {
  const std::string text =
      "# HELP tern:prompt_tokens_total Number of prompt tokens.\n"
      "# TYPE tern:prompt_tokens_total counter\n"
      "tern:prompt_tokens_total{model_name=\"m\"} 1200\n"
      "tern:prefix_cache_queries_total{model_name=\"m\"} 1200\n"
      "tern:prefix_cache_hits_total{model_name=\"m\"} 900\n"
      "tern:request_success_total{finished_reason=\"stop\",model_name=\"a b\"} 3\n"
      "tern:request_success_total{finished_reason=\"length\",model_name=\"a b\"} 4\n"
      "tern:request_success_total{finished_reason=\"abort\",model_name=\"a b\"} 1\n"
      "tern:generation_tokens_total{model_name=\"m\"} 77\n";
  InstanceCounters c;
  ASSERT_TRUE(ParseInstanceCounters(text, &c));
  EXPECT_EQ(c.requests, 8);
  EXPECT_EQ(c.prompt_tokens, 1200);
  EXPECT_EQ(c.prefix_cache_queries, 1200);
  EXPECT_EQ(c.prefix_cache_hits, 900);
}

TEST(BenchServeInstancesTest, ReadsVllmNamesAndRejectsOtherPages) {
  InstanceCounters c;
  ASSERT_TRUE(ParseInstanceCounters(
      "vllm:prefix_cache_queries_total{engine=\"0\"} 10\nvllm:prefix_cache_hits 5\n", &c));
  EXPECT_EQ(c.prefix_cache_queries, 10);
  EXPECT_EQ(c.prefix_cache_hits, 5);
  EXPECT_FALSE(ParseInstanceCounters("process_cpu_seconds_total 3\nhello\n", &c));
  EXPECT_FALSE(ParseInstanceCounters("", &c));
}

TEST(BenchServeInstancesTest, SpreadIsBusiestOverMeanAndHitRateIsPooled) {
  std::vector<InstanceCounters> before(3), after(3);
  before[0].requests = 5;  // counts before the run are subtracted
  after[0] = {15, 1000, 1000, 900};
  after[1] = {10, 1000, 1000, 500};
  after[2] = {15, 2000, 2000, 1000};
  const InstanceSpread s = SummarizeInstances({"a", "b", "c"}, before, after);
  ASSERT_EQ(s.instances.size(), 3u);
  EXPECT_EQ(s.instances[0].delta.requests, 10);
  EXPECT_DOUBLE_EQ(s.mean_requests, 35.0 / 3);
  EXPECT_DOUBLE_EQ(s.max_over_mean, 15 / (35.0 / 3));
  EXPECT_DOUBLE_EQ(s.prefix_cache_hit_rate, 2400.0 / 4000);
  EXPECT_DOUBLE_EQ(s.instances[1].hit_rate(), 0.5);
  const nlohmann::json j = InstanceSpreadJson(s);
  EXPECT_EQ(j["instances"][2]["url"], "c");
  EXPECT_DOUBLE_EQ(j["prefix_cache_hit_rate"].get<double>(), 0.6);
  EXPECT_NE(FormatInstanceSpread(s).find("Busiest instance / mean requests:    1.29"),
            std::string::npos)
      << FormatInstanceSpread(s);
}

TEST(BenchServeInstancesTest, NoRequestsGiveZeroNotNan) {
  const InstanceSpread s = SummarizeInstances({"a"}, {InstanceCounters{}}, {InstanceCounters{}});
  EXPECT_EQ(s.max_over_mean, 0);
  EXPECT_EQ(s.prefix_cache_hit_rate, 0);
}

}  // namespace
}  // namespace tern
