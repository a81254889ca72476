#include "metrics/percentile.h"

#include <gtest/gtest.h>

namespace tern {
namespace {

TEST(PercentileTest, InterpolatesBetweenClosestRanks) {
  EXPECT_DOUBLE_EQ(Percentile({1, 2, 3, 4}, 50), 2.5);
  EXPECT_DOUBLE_EQ(Percentile({5}, 99), 5.0);
  EXPECT_DOUBLE_EQ(Percentile({}, 50), 0.0);
  PercentileSummary s = Summarize({3, 1, 2});
  EXPECT_DOUBLE_EQ(s.p50, 2.0);
  EXPECT_DOUBLE_EQ(s.mean, 2.0);
  EXPECT_DOUBLE_EQ(s.max, 3.0);
  EXPECT_NEAR(s.p99, 2.98, 1e-12);
}

}  // namespace
}  // namespace tern
