#include "metrics/histogram.h"

#include <gtest/gtest.h>

namespace tern {
namespace {

TEST(HistogramTest, CountsCumulativelyLikePrometheus) {
  Histogram h({1, 2, 5});
  for (double v : {0.5, 1.0, 1.5, 3.0, 10.0}) h.Observe(v);
  EXPECT_EQ(h.count(), 5u);
  EXPECT_DOUBLE_EQ(h.sum(), 16.0);
  // le=1 holds 0.5 and 1.0 (bounds are inclusive).
  EXPECT_EQ(h.CumulativeCounts(), (std::vector<uint64_t>{2, 3, 4, 5}));
}

TEST(HistogramTest, PercentileInterpolatesInsideBucket) {
  Histogram h({10, 20});
  for (int i = 0; i < 10; ++i) h.Observe(15);
  EXPECT_DOUBLE_EQ(h.Percentile(0.5), 15.0);
  EXPECT_DOUBLE_EQ(h.Percentile(1.0), 20.0);
  EXPECT_DOUBLE_EQ(Histogram({1}).Percentile(0.5), 0.0);
}

TEST(HistogramTest, MergeAddsCounts) {
  Histogram a({1, 2});
  Histogram b({1, 2});
  a.Observe(0.5);
  b.Observe(1.5);
  a.Merge(b);
  EXPECT_EQ(a.CumulativeCounts(), (std::vector<uint64_t>{1, 2, 2}));
}

}  // namespace
}  // namespace tern
