// The probes' stopping rule and summary, on hand-written rounds (no timing:
// the rounds are given, not measured), and one tiny settled probe that must
// stop within its cap and report a consistent best/median/worst.
#include "kernels/machine_probe.h"

#include <gtest/gtest.h>

#include <vector>

namespace tern::kernels {
namespace {

SettleRule Rule(int min_rounds, int stable, int max_rounds) {
  SettleRule r;
  r.min_rounds = min_rounds;
  r.stable_rounds = stable;
  r.max_rounds = max_rounds;
  r.tolerance = 0.01;
  return r;
}

TEST(ProbeSettledTest, NeedsMinRoundsAndKRoundsWithoutAGainAboveTolerance) {
  const SettleRule rule = Rule(4, 3, 40);
  EXPECT_FALSE(ProbeSettled({}, rule));
  EXPECT_FALSE(ProbeSettled({50, 50, 50}, rule));      // under min_rounds
  EXPECT_TRUE(ProbeSettled({50, 50, 50, 50}, rule));   // 3 rounds after the best's last gain
  EXPECT_FALSE(ProbeSettled({50, 49, 48, 60}, rule));  // the last round raised the best 20%
  EXPECT_FALSE(ProbeSettled({50, 49, 48, 60, 59, 58}, rule));  // 2 rounds since
  EXPECT_TRUE(ProbeSettled({50, 49, 48, 60, 59, 58, 40}, rule));
  // Gains within the tolerance (here 0.5% each) do not restart the count.
  EXPECT_TRUE(ProbeSettled({50, 50.25, 50.5, 50.75}, rule));
  // Each step 0.8% over the best before it: no single gain above 1%, so the
  // slow climb counts as settled (the cap bounds what a steady climb costs).
  EXPECT_TRUE(ProbeSettled({50, 50.4, 50.8, 51.2}, rule));
  // A gain of 2% three rounds back, then nothing: settled.
  EXPECT_TRUE(ProbeSettled({50, 51, 40, 41, 42}, rule));
  EXPECT_FALSE(ProbeSettled({50, 40, 41, 51, 42}, rule));
}

TEST(ProbeSettledTest, SummaryHasBestMedianWorstAndSpread) {
  const ProbeResult r = SummarizeRounds({40, 55, 50, 45, 52}, true);
  EXPECT_DOUBLE_EQ(r.best, 55);
  EXPECT_DOUBLE_EQ(r.median, 50);
  EXPECT_DOUBLE_EQ(r.worst, 40);
  EXPECT_EQ(r.rounds, 5);
  EXPECT_TRUE(r.settled);
  EXPECT_NEAR(r.Spread(), 15.0 / 55.0, 1e-12);
  const ProbeResult empty = SummarizeRounds({}, false);
  EXPECT_EQ(empty.rounds, 0);
  EXPECT_DOUBLE_EQ(empty.Spread(), 0);
}

TEST(ProbeSettledTest, SettledReadProbeStopsWithinItsCap) {
  ThreadPool pool(2);
  const SettleRule rule = Rule(3, 2, 12);
  // 8 MiB in 1 MiB chunks: small, so the test is quick; only the bookkeeping
  // is checked, not the speed.
  const ProbeResult r = MeasureReadBandwidthSettled(pool, 8 << 20, 1 << 20, rule);
  EXPECT_GE(r.rounds, 3);
  EXPECT_LE(r.rounds, 12);
  EXPECT_GT(r.worst, 0);
  EXPECT_LE(r.worst, r.median);
  EXPECT_LE(r.median, r.best);
  if (r.rounds < 12) {
    EXPECT_TRUE(r.settled);
  }
  const ProbeResult f = MeasureFmaPeakSettled(pool, Rule(2, 1, 4));
  EXPECT_GE(f.rounds, 2);
  EXPECT_LE(f.rounds, 4);
  EXPECT_GT(f.best, 0);
}

}  // namespace
}  // namespace tern::kernels
