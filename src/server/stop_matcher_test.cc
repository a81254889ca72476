#include "server/stop_matcher.h"

#include <gtest/gtest.h>

namespace tern {
namespace {

TEST(StopMatcherTest, PassesTextThroughWithoutStops) {
  StopMatcher m({});
  EXPECT_EQ(m.Push("hello "), "hello ");
  EXPECT_EQ(m.Push("world"), "world");
  EXPECT_EQ(m.Flush(), "");
  EXPECT_FALSE(m.matched());
}

TEST(StopMatcherTest, HoldsBackPossiblePrefixAcrossPieces) {
  StopMatcher m({"END"});
  EXPECT_EQ(m.Push("the E"), "the ");
  EXPECT_EQ(m.Push("N"), "");
  EXPECT_EQ(m.Push("D and more"), "");
  EXPECT_TRUE(m.matched());
  EXPECT_EQ(m.Push("later"), "");
  EXPECT_EQ(m.released_bytes(), 4u);
}

TEST(StopMatcherTest, ReleasesHeldTextWhenPrefixBreaks) {
  StopMatcher m({"END"});
  EXPECT_EQ(m.Push("EN"), "");
  EXPECT_EQ(m.Push("x"), "ENx");
  EXPECT_FALSE(m.matched());
}

TEST(StopMatcherTest, CutsAtEarliestOfSeveralStops) {
  StopMatcher m({"world", "lo w"});
  EXPECT_EQ(m.Push("hello world"), "hel");
  EXPECT_TRUE(m.matched());
}

TEST(StopMatcherTest, FlushReleasesHeldPrefixAtEnd) {
  StopMatcher m({"\n\n"});
  EXPECT_EQ(m.Push("line\n"), "line");
  EXPECT_EQ(m.Flush(), "\n");
  EXPECT_FALSE(m.matched());
}

TEST(StopMatcherTest, MatchesStopInsideOnePiece) {
  StopMatcher m({"."});
  EXPECT_EQ(m.Push("Hi. There."), "Hi");
  EXPECT_TRUE(m.matched());
}

}  // namespace
}  // namespace tern
