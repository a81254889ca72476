#include "sample/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

#include "sample/rng.h"

namespace tern {
namespace {

// Logits of a fixed 6-token distribution.
const std::vector<double> kProbs = {0.40, 0.25, 0.15, 0.10, 0.06, 0.04};

std::vector<float> Logits() {
  std::vector<float> l;
  for (double p : kProbs) l.push_back((float)std::log(p));
  return l;
}

constexpr int kDraws = 20000;

std::vector<int> Histogram(const SamplingParams& params, uint64_t seed) {
  const std::vector<float> logits = Logits();
  Rng rng(seed);
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < kDraws; ++i) ++counts[SampleToken(logits, params, {}, rng.Uniform()).token_id];
  return counts;
}

// Pearson chi-square of counts against expected probabilities; tokens with
// expected probability 0 must never be drawn.
double ChiSquare(const std::vector<int>& counts, const std::vector<double>& expected) {
  double chi2 = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (expected[i] == 0) {
      EXPECT_EQ(counts[i], 0) << "token " << i << " should be filtered out";
      continue;
    }
    const double e = expected[i] * kDraws;
    chi2 += (counts[i] - e) * (counts[i] - e) / e;
  }
  return chi2;
}

std::vector<double> Normalised(std::vector<double> p) {
  double s = 0;
  for (double x : p) s += x;
  for (double& x : p) x /= s;
  return p;
}

// Critical value: chi-square with <= 5 degrees of freedom exceeds 25 with
// probability < 2e-4; a wrong distribution (e.g. a filter off by one token)
// gives hundreds or thousands at 20000 draws.
constexpr double kCritical = 25.0;

TEST(SamplerTest, TemperatureOneSamplesTheSoftmax) {
  SamplingParams p;
  p.temperature = 1.0f;
  EXPECT_LT(ChiSquare(Histogram(p, 1), kProbs), kCritical);
}

TEST(SamplerTest, TemperatureSharpensAsPowerOfProbabilities) {
  SamplingParams p;
  p.temperature = 0.5f;
  std::vector<double> want;
  for (double q : kProbs) want.push_back(q * q);  // p^(1/T)
  EXPECT_LT(ChiSquare(Histogram(p, 2), Normalised(want)), kCritical);
  // And the plain softmax is clearly rejected: the test has power.
  EXPECT_GT(ChiSquare(Histogram(p, 2), kProbs), 10 * kCritical);
}

TEST(SamplerTest, TopKKeepsTheKMostLikely) {
  SamplingParams p;
  p.top_k = 3;
  EXPECT_LT(ChiSquare(Histogram(p, 3), Normalised({0.40, 0.25, 0.15, 0, 0, 0})), kCritical);
}

TEST(SamplerTest, TopPKeepsTheSmallestPrefixReachingP) {
  SamplingParams p;
  p.top_p = 0.75f;  // 0.40 + 0.25 = 0.65 < 0.75 <= 0.80
  EXPECT_LT(ChiSquare(Histogram(p, 4), Normalised({0.40, 0.25, 0.15, 0, 0, 0})), kCritical);
}

TEST(SamplerTest, MinPDropsTokensBelowFractionOfTheBest) {
  SamplingParams p;
  p.min_p = 0.3f;  // threshold 0.12: keeps 0.40, 0.25, 0.15
  EXPECT_LT(ChiSquare(Histogram(p, 5), Normalised({0.40, 0.25, 0.15, 0, 0, 0})), kCritical);
}

TEST(SamplerTest, FiltersCombineInOrder) {
  SamplingParams p;
  p.top_k = 4;       // 0.40 .25 .15 .10 -> /0.9
  p.top_p = 0.7f;    // .444 + .278 = .722 >= .7: keeps 2
  EXPECT_LT(ChiSquare(Histogram(p, 6), Normalised({0.40, 0.25, 0, 0, 0, 0})), kCritical);
}

TEST(SamplerTest, TopPOverLargeVocabularyMatchesFullSort) {
  // 1000 nearly flat tokens: the nucleus is beyond the 256-token prefix.
  std::vector<float> logits(1000);
  for (int i = 0; i < 1000; ++i) logits[i] = 0.001f * (i % 97);
  SamplingParams p;
  p.top_p = 0.9f;
  const std::vector<TokenProb> c = FilteredDistribution(logits, p);
  EXPECT_GT(c.size(), 800u);
  EXPECT_LT(c.size(), 1000u);
  for (size_t i = 1; i < c.size(); ++i) EXPECT_GE(c[i - 1].prob, c[i].prob);
}

TEST(SamplerTest, GreedyPicksArgmaxLowestIdOnTies) {
  SamplingParams p;
  p.temperature = 0;
  const std::vector<float> logits = {1.0f, 3.0f, -2.0f, 3.0f};
  EXPECT_EQ(SampleToken(logits, p, {}, 0.99).token_id, 1);
  EXPECT_EQ(Argmax(logits), 1);
}

// Argmax against the one scan it replaced (`best = i where logits[i] >
// logits[best]`): NaNs, signed zeros, infinities, ties and lengths around
// its 8 lanes.
TEST(SamplerTest, ArgmaxMatchesOneScanOnNansZerosAndTies) {
  const auto scan = [](const std::vector<float>& x) {
    int32_t best = 0;
    for (int32_t i = 1; i < (int32_t)x.size(); ++i) {
      if (x[i] > x[best]) best = i;
    }
    return best;
  };
  const float nan = NAN, inf = INFINITY;
  std::vector<std::vector<float>> cases = {
      {},
      {nan, 5.0f, 7.0f},
      {1.0f, nan, 7.0f, nan},
      {-0.0f, 0.0f, -1.0f},
      {-3.0f, 0.0f, -0.0f, -1.0f},
      {-3.0f, -0.0f, 0.0f, -1.0f},
      {-inf, -inf, -inf},
      {1.0f, inf, 2.0f, inf},
      {nan, nan},
  };
  for (int n : {1, 7, 8, 9, 15, 16, 17, 31, 33, 1000}) {
    std::vector<float> x(n);
    for (int i = 0; i < n; ++i) x[i] = (float)((i * 37) % 11);  // ties of 10
    cases.push_back(x);
    x[n - 1] = 11.0f;  // the last element wins
    cases.push_back(x);
    x[n / 2] = nan;
    cases.push_back(x);
  }
  for (const std::vector<float>& x : cases) {
    EXPECT_EQ(Argmax(x), scan(x)) << "size " << x.size();
  }
}

TEST(SamplerTest, SameSeedGivesSameTokens) {
  SamplingParams p;
  p.temperature = 0.9f;
  p.top_p = 0.95f;
  EXPECT_EQ(Histogram(p, 42), Histogram(p, 42));
  Rng a(7), b(7), c(8);
  for (int i = 0; i < 100; ++i) {
    const uint64_t x = a.Next();
    EXPECT_EQ(x, b.Next());
    EXPECT_NE(x, c.Next());
  }
}

TEST(SamplerTest, RngIsFixedAcrossPlatforms) {
  // xoshiro256** seeded by splitmix64(0): pinned outputs.
  Rng rng(0);
  EXPECT_EQ(rng.Next(), 0x99ec5f36cb75f2b4ull);
  EXPECT_EQ(rng.Next(), 0xbf6e1f784956452aull);
  EXPECT_EQ(rng.Next(), 0x1a5f849d4933e6e0ull);
  const double u = Rng(123).Uniform();
  EXPECT_GE(u, 0.0);
  EXPECT_LT(u, 1.0);
}

TEST(SamplerTest, RepetitionPenaltyDividesPositiveAndMultipliesNegative) {
  std::vector<float> logits = {4.0f, -1.0f, 2.0f, 5.0f};
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  const std::vector<int32_t> history = {0, 1, 1, 0};
  ApplyPenalties(logits, p, history);
  EXPECT_FLOAT_EQ(logits[0], 2.0f);
  EXPECT_FLOAT_EQ(logits[1], -2.0f);
  EXPECT_FLOAT_EQ(logits[2], 2.0f);
  EXPECT_FLOAT_EQ(logits[3], 5.0f);
}

TEST(SamplerTest, PresenceAndFrequencyPenaltiesFollowOpenAiFormula) {
  std::vector<float> logits = {1.0f, 1.0f, 1.0f};
  SamplingParams p;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  const std::vector<int32_t> history = {2, 2, 2, 0};
  ApplyPenalties(logits, p, history);
  EXPECT_FLOAT_EQ(logits[0], 1.0f - 0.5f - 0.25f);
  EXPECT_FLOAT_EQ(logits[1], 1.0f);
  EXPECT_FLOAT_EQ(logits[2], 1.0f - 0.5f - 0.75f);
}

TEST(SamplerTest, PenaltiesChangeTheGreedyChoice) {
  const std::vector<float> logits = {2.0f, 1.9f};
  SamplingParams p;
  p.temperature = 0;
  p.presence_penalty = 0.2f;
  const std::vector<int32_t> history = {0};
  EXPECT_EQ(SampleToken(logits, p, {}, 0.5).token_id, 0);
  EXPECT_EQ(SampleToken(logits, p, history, 0.5).token_id, 1);
}

TEST(SamplerTest, LogprobsAreRawLogSoftmaxWithTopAlternatives) {
  const std::vector<float> logits = Logits();
  SamplingParams p;
  p.temperature = 0.3f;            // does not change reported logprobs
  p.presence_penalty = 1.0f;       // neither do penalties
  p.logprobs = 2;
  const std::vector<int32_t> history = {0};
  const SampledToken t = SampleToken(logits, p, history, 0.999);
  EXPECT_NEAR(t.logprob, std::log(kProbs[t.token_id]), 1e-5);
  ASSERT_EQ(t.top.size(), 2u);
  EXPECT_EQ(t.top[0].token_id, 0);
  EXPECT_NEAR(t.top[0].logprob, std::log(0.40), 1e-5);
  EXPECT_EQ(t.top[1].token_id, 1);
  EXPECT_NEAR(t.top[1].logprob, std::log(0.25), 1e-5);
}

}  // namespace
}  // namespace tern
