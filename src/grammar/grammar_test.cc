#include "grammar/grammar.h"

#include <gtest/gtest.h>

#include "grammar/grammar_test_util.h"

namespace tern::grammar {
namespace {

TEST(GrammarTest, RepeatAndListAcceptExactlyTheirCounts) {
  Grammar g;
  const int32_t digit = g.Choice({{Symbol::Bytes(Range("0-9"))}});
  const int32_t list = g.SeparatedList(digit, ", ", 2, 3);
  const int32_t root = g.Choice({{Symbol::Byte('['), Symbol::Rule(list), Symbol::Byte(']')}});
  ASSERT_TRUE(g.Finalize(root).ok());
  ExpectLanguage(g, {"[1, 2]", "[1, 2, 3]"}, {"[]", "[1]", "[1, 2, 3, 4]", "[1,2]"});
  EXPECT_EQ(g.MinBytes(g.Start()), 6);  // "[1, 2]"
}

TEST(GrammarTest, TailRecursionKeepsTheStateConstant) {
  Grammar g;
  const int32_t star = g.Repeat(g.Choice({{Symbol::Byte('a')}}), 0, -1);
  const int32_t root = g.Choice({{Symbol::Byte('"'), Symbol::Rule(star), Symbol::Byte('"')}});
  ASSERT_TRUE(g.Finalize(root).ok());
  State s = g.Start(), a, b;
  g.Advance(s, '"', &a);
  g.Advance(a, 'a', &b);
  State c;
  g.Advance(b, 'a', &c);
  EXPECT_EQ(b, c);  // the mask cache relies on this
  EXPECT_FALSE(g.CanEnd(c));
  EXPECT_EQ(g.MinBytes(c), 1);
  State d;
  g.Advance(c, '"', &d);
  EXPECT_TRUE(g.CanEnd(d));
  EXPECT_TRUE(g.NextBytes(d).none());
}

TEST(GrammarTest, RefusesLeftRecursionAndEndlessRules) {
  Grammar g;
  const int32_t r = g.NewRule("r");
  g.AddAlternative(r, {Symbol::Rule(r), Symbol::Byte('a')});
  g.AddAlternative(r, {Symbol::Byte('b')});
  Status s = g.Finalize(r);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("left-recursive"), std::string::npos) << s.message();

  Grammar h;
  const int32_t e = h.NewRule("endless");
  h.AddAlternative(e, {Symbol::Byte('a'), Symbol::Rule(e)});
  s = h.Finalize(e);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("never finish"), std::string::npos) << s.message();
}

TEST(GrammarTest, AmbiguousAlternativesRunInParallel) {
  Grammar g;
  const int32_t root = g.Choice({Literal("abc"), Literal("abd"), Literal("ab")});
  ASSERT_TRUE(g.Finalize(root).ok());
  ExpectLanguage(g, {"ab", "abc", "abd"}, {"abe"});
  State s = g.Start(), a, b;
  g.Advance(s, 'a', &a);
  g.Advance(a, 'b', &b);
  EXPECT_TRUE(g.CanEnd(b));
  EXPECT_EQ(g.NextBytes(b).count(), 2u);
}

}  // namespace
}  // namespace tern::grammar
