#include "model/logprob_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

namespace tern {
namespace {

// Two positions over a 3-token vocabulary.
LogprobFile Sample(float shift) {
  LogprobFile f;
  f.n_vocab = 3;
  f.ctx = 8;
  f.token_ids = {0, 2};
  const double rows[2][3] = {{0.7, 0.2, 0.1}, {0.1, 0.3, 0.6}};
  for (const auto& row : rows) {
    double z = 0;
    for (int i = 0; i < 3; ++i) z += row[i] * std::exp(i == 0 ? shift : 0.0);
    for (int i = 0; i < 3; ++i) {
      f.logprobs.push_back((float)std::log(row[i] * std::exp(i == 0 ? shift : 0.0) / z));
    }
  }
  return f;
}

TEST(LogprobFileTest, RoundTripsThroughDisk) {
  const std::string path = testing::TempDir() + "/round.lp";
  const LogprobFile f = Sample(0);
  ASSERT_TRUE(WriteLogprobFile(path, f).ok());
  auto back = ReadLogprobFile(path);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->n_vocab, 3);
  EXPECT_EQ(back->ctx, 8);
  EXPECT_EQ(back->token_ids, f.token_ids);
  EXPECT_EQ(back->logprobs, f.logprobs);
}

TEST(LogprobFileTest, RejectsForeignAndTruncatedFiles) {
  const std::string path = testing::TempDir() + "/bad.lp";
  std::ofstream(path) << "not a logprob file at all";
  auto bad = ReadLogprobFile(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), testing::HasSubstr("bad magic"));
  ASSERT_TRUE(WriteLogprobFile(path, Sample(0)).ok());
  std::ofstream(path, std::ios::app) << "x";
  EXPECT_FALSE(ReadLogprobFile(path).ok());
}

TEST(LogprobFileTest, IdenticalRunsHaveZeroKlAndFullAgreement) {
  auto kl = CompareLogprobs(Sample(0), Sample(0));
  ASSERT_TRUE(kl.ok());
  EXPECT_NEAR(kl->mean_kl, 0, 1e-7);
  EXPECT_DOUBLE_EQ(kl->top1_agreement, 1.0);
  EXPECT_NEAR(kl->ppl, kl->base_ppl, 1e-9);
  EXPECT_NEAR(kl->base_ppl, std::exp(-(std::log(0.7) + std::log(0.6)) / 2), 1e-5);
}

TEST(LogprobFileTest, ShiftedRunHasPositiveKlAndLowerAgreement) {
  auto kl = CompareLogprobs(Sample(0), Sample(3.0f));  // token 0 boosted
  ASSERT_TRUE(kl.ok());
  EXPECT_GT(kl->mean_kl, 0.1);
  EXPECT_GE(kl->p99_kl, kl->mean_kl);
  EXPECT_DOUBLE_EQ(kl->top1_agreement, 0.5);  // second row's argmax flips
  EXPECT_GT(kl->ppl, kl->base_ppl);
}

TEST(LogprobFileTest, RefusesRunsOnDifferentTokens) {
  LogprobFile other = Sample(0);
  other.token_ids[1] = 1;
  auto kl = CompareLogprobs(Sample(0), other);
  ASSERT_FALSE(kl.ok());
  EXPECT_THAT(kl.status().message(), testing::HasSubstr("token ids differ"));
  other = Sample(0);
  other.n_vocab = 4;
  EXPECT_THAT(CompareLogprobs(Sample(0), other).status().message(),
              testing::HasSubstr("vocabulary sizes differ"));
}

TEST(LogprobFileTest, CheckSameRunSaysWhatDiffers) {
  const LogprobFile base = Sample(0);  // ctx 8, tokens {0, 2}
  EXPECT_TRUE(CheckSameRun(base, 3, 8, {0, 2}).ok());
  EXPECT_THAT(CheckSameRun(base, 3, 16, {0, 2}).message(),
              testing::HasSubstr("context sizes differ: base 8, this run 16"));
  EXPECT_THAT(CheckSameRun(base, 3, 8, {0, 2, 1}).message(),
              testing::HasSubstr("the base run scored 2 positions, this run would score 3"));
  EXPECT_THAT(CheckSameRun(base, 3, 8, {0, 1}).message(),
              testing::HasSubstr("at scored position 1 of 2 (base 2, this run 1)"));
}

}  // namespace
}  // namespace tern
