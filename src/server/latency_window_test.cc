#include "server/latency_window.h"

#include <gtest/gtest.h>

namespace tern {
namespace {

RequestMetrics Finished(double ttft_s, std::vector<double> itl_s) {
  RequestMetrics m;
  m.ttft_s = ttft_s;
  m.itl_s = std::move(itl_s);
  m.generated_tokens = (int32_t)m.itl_s.size() + 1;
  m.tpot_s = m.itl_s.empty() ? 0 : m.itl_s[0];
  m.e2e_s = ttft_s + 1;
  return m;
}

TEST(LatencyWindowTest, ExactPercentilesOfTheWindowOnly) {
  LatencyWindow w;
  const auto t0 = LatencyWindow::Clock::now();
  w.Observe(Finished(9.0, {0.9}), t0);  // falls out of a 60 s window
  for (int i = 1; i <= 5; ++i) w.Observe(Finished(0.1 * i, {0.01 * i, 0.02 * i}), t0 + std::chrono::seconds(100));
  const LatencySummaries s = w.Summaries(60, t0 + std::chrono::seconds(101));
  EXPECT_EQ(s.ttft.count, 5u);
  EXPECT_DOUBLE_EQ(s.ttft.p50, 0.3);
  EXPECT_DOUBLE_EQ(s.ttft.max, 0.5);
  EXPECT_EQ(s.itl.count, 10u);
  EXPECT_DOUBLE_EQ(s.itl.max, 0.1);
  EXPECT_EQ(s.tpot.count, 5u);
  const LatencySummaries all = w.Summaries(200, t0 + std::chrono::seconds(101));
  EXPECT_EQ(all.ttft.count, 6u);
  EXPECT_DOUBLE_EQ(all.ttft.max, 9.0);
}

TEST(LatencyWindowTest, OneTokenRequestsHaveNoTpotAndNoTokensNoTtft) {
  LatencyWindow w;
  w.Observe(Finished(0.2, {}));
  RequestMetrics aborted;  // nothing generated
  aborted.e2e_s = 0.5;
  w.Observe(aborted);
  const LatencySummaries s = w.Summaries(60);
  EXPECT_EQ(s.ttft.count, 1u);
  EXPECT_EQ(s.tpot.count, 0u);
  EXPECT_EQ(s.e2e.count, 2u);
}

TEST(LatencyWindowTest, KeepsAtMostMaxSamples) {
  LatencyWindow w;
  RequestMetrics m = Finished(0.1, {});
  for (size_t i = 0; i < LatencyWindow::kMaxSamples + 10; ++i) w.Observe(m);
  EXPECT_EQ(w.Summaries(60).ttft.count, LatencyWindow::kMaxSamples);
}

}  // namespace
}  // namespace tern
