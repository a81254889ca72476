#include "sample/request_checks.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

namespace tern {
namespace {

// The field at fault and its message for one changed value ("" = accepted).
std::string Broken(const std::function<void(SamplingParams&)>& change) {
  SamplingParams p;
  change(p);
  MaybeFieldError e = CheckSamplingParams(p);
  return e ? e->Text(e->field) : "";
}

TEST(RequestChecksTest, DefaultsPass) {
  EXPECT_EQ(Broken([](SamplingParams&) {}), "");
}

TEST(RequestChecksTest, EachRangeNamesItsFieldAndValue) {
  struct Case {
    std::function<void(SamplingParams&)> change;
    std::string text;
  };
  const Case cases[] = {
      {[](SamplingParams& p) { p.temperature = -0.5f; }, "temperature must be between 0 and 100, got -0.5"},
      {[](SamplingParams& p) { p.temperature = 101; }, "temperature must be between 0 and 100, got 101"},
      {[](SamplingParams& p) { p.temperature = std::numeric_limits<float>::infinity(); },
       "temperature must be between 0 and 100, got inf"},
      {[](SamplingParams& p) { p.top_k = -1; }, "top_k must be between 0 and 1073741824 (0 = off), got -1"},
      {[](SamplingParams& p) { p.top_p = 0; }, "top_p must be in (0, 1], got 0"},
      {[](SamplingParams& p) { p.top_p = 1.5f; }, "top_p must be in (0, 1], got 1.5"},
      {[](SamplingParams& p) { p.min_p = 2; }, "min_p must be between 0 and 1, got 2"},
      {[](SamplingParams& p) { p.repetition_penalty = 0; },
       "repetition_penalty must be in (0, 100] (1 = off), got 0"},
      {[](SamplingParams& p) { p.presence_penalty = 3; }, "presence_penalty must be between -2 and 2, got 3"},
      {[](SamplingParams& p) { p.frequency_penalty = -2.5f; },
       "frequency_penalty must be between -2 and 2, got -2.5"},
      {[](SamplingParams& p) { p.max_tokens = 0; }, "max_tokens must be >= 1, got 0"},
      {[](SamplingParams& p) { p.logprobs = 21; }, "logprobs must be between 0 and 20, got 21"},
      {[](SamplingParams& p) { p.logprobs = -2; }, "logprobs must be between 0 and 20, got -2"},
  };
  for (const Case& c : cases) EXPECT_EQ(Broken(c.change), c.text);
}

TEST(RequestChecksTest, BoundsThemselvesPass) {
  EXPECT_EQ(Broken([](SamplingParams& p) {
              p.temperature = 0;
              p.top_k = limits::kMaxTopK;
              p.top_p = 1;
              p.min_p = 1;
              p.repetition_penalty = 100;
              p.presence_penalty = -2;
              p.frequency_penalty = 2;
              p.max_tokens = 1;
              p.logprobs = 20;
            }),
            "");
  EXPECT_EQ(Broken([](SamplingParams& p) { p.logprobs = -1; }), "");  // none
}

TEST(RequestChecksTest, RequestLimits) {
  EXPECT_FALSE(CheckChoices(1));
  EXPECT_FALSE(CheckChoices(16));
  EXPECT_EQ(CheckChoices(17)->Text("'n'"), "'n' must be between 1 and 16, got 17");
  EXPECT_EQ(CheckChoices(0)->field, "n");
  EXPECT_EQ(CheckLogprobs(5, 4)->problem, "must be between 0 and 4, got 5");

  EXPECT_FALSE(CheckStopStrings({"a", "b", "c", "d", "e"}));  // no count limit
  EXPECT_EQ(CheckStopStrings({"a", "b", "c", "d", "e"}, 4)->problem,
            "may hold at most 4 strings, got 5");
  EXPECT_EQ(CheckStopStrings({"a", ""})->Text("--stop"), "--stop strings must not be empty");

  EXPECT_FALSE(CheckSeedFlag(-1));
  EXPECT_FALSE(CheckSeedFlag(7));
  EXPECT_EQ(CheckSeedFlag(-2)->Text("--seed"), "--seed must be >= 0 (or -1 = random), got -2");
}

TEST(RequestChecksTest, ContextRoom) {
  EXPECT_FALSE(CheckContextRoom(3, 253, 256));
  MaybeFieldError e = CheckContextRoom(3, 254, 256);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->field, "max_tokens");
  EXPECT_EQ(e->problem, "prompt (3 tokens) + max_tokens (254) = 257 exceeds max_model_len 256");
  EXPECT_FALSE(CheckContextRoom(1000, 1000, 0));  // 0: no limit
}

TEST(RequestChecksTest, ClampToInt32) {
  EXPECT_EQ(ClampToInt32(5), 5);
  EXPECT_EQ(ClampToInt32(int64_t{1} << 40), std::numeric_limits<int32_t>::max());
  EXPECT_EQ(ClampToInt32(-(int64_t{1} << 40)), std::numeric_limits<int32_t>::min());
}

}  // namespace
}  // namespace tern
