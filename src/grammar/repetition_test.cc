#include "grammar/repetition.h"

#include <gtest/gtest.h>

namespace tern::grammar {
namespace {

Repetition Read(std::string_view text, bool regex, size_t* end = nullptr) {
  size_t pos = 0;
  Repetition r = ReadRepetition(text, &pos, regex);
  if (end != nullptr) *end = pos;
  return r;
}

TEST(RepetitionTest, ReadsEveryFormAndStopsAfterIt) {
  size_t end = 0;
  Repetition r = Read("*x", true, &end);
  EXPECT_TRUE(r.found);
  EXPECT_EQ(r.min, 0);
  EXPECT_EQ(r.max, -1);
  EXPECT_EQ(end, 1u);
  r = Read("+", true);
  EXPECT_EQ(r.min, 1);
  EXPECT_EQ(r.max, -1);
  r = Read("?", false);
  EXPECT_EQ(r.min, 0);
  EXPECT_EQ(r.max, 1);
  r = Read("{3}", true, &end);
  EXPECT_EQ(r.min, 3);
  EXPECT_EQ(r.max, 3);
  EXPECT_EQ(end, 3u);
  r = Read("{2,}", true);
  EXPECT_EQ(r.min, 2);
  EXPECT_EQ(r.max, -1);
  r = Read("{ 2 , 5 # five\n }", false);
  ASSERT_TRUE(r.found) << r.error;
  EXPECT_EQ(r.min, 2);
  EXPECT_EQ(r.max, 5);
  r = Read("a", true, &end);
  EXPECT_FALSE(r.found);
  EXPECT_EQ(end, 0u);
}

TEST(RepetitionTest, MalformedCountsSayWhatIsWrongAndConsumeNothing) {
  size_t end = 7;
  EXPECT_NE(Read("{", true, &end).error.find("without a count"), std::string::npos);
  EXPECT_EQ(end, 0u);
  EXPECT_EQ(Read("{ 2}", true).error, "'{' without a count (escape it as \\{)");  // no spaces in regex
  EXPECT_EQ(Read("{x}", false).error, "'{' needs a count");
  EXPECT_EQ(Read("{2,3", false).error, "unclosed {m,n}");
  EXPECT_EQ(Read("{5,2}", true).error, "{m,n} with n < m");
  EXPECT_EQ(Read("{1001}", true).error, "repeat count above 1000");
  EXPECT_EQ(Read("{99999999999}", false).error, "repeat count above 1000");
}

}  // namespace
}  // namespace tern::grammar
