#include "grammar/grammar.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

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

// One AdvanceScratch reused across calls and across two grammars gives the
// states a fresh one gives (the scratch carries nothing from call to call).
TEST(GrammarTest, ReusedAdvanceScratchGivesTheSameStates) {
  Grammar g;
  const int32_t digit = g.Choice({{Symbol::Bytes(Range("0-9"))}});
  const int32_t list = g.SeparatedList(digit, ", ", 1, -1);
  const int32_t root = g.Choice({{Symbol::Byte('['), Symbol::Rule(list), Symbol::Byte(']')},
                                 Literal("[]"), Literal("null")});
  ASSERT_TRUE(g.Finalize(root).ok());
  Grammar h;
  ASSERT_TRUE(h.Finalize(h.Choice({Literal("abc"), Literal("abd"), Literal("ab")})).ok());
  AdvanceScratch scratch;
  for (const auto& [grammar, text] :
       std::vector<std::pair<const Grammar*, std::string>>{
           {&g, "[1, 2, 33]"}, {&h, "abd"}, {&g, "[]"}, {&g, "[4, x"}, {&h, "abc"}}) {
    State shared = grammar->Start(), fresh = shared, next_shared, next_fresh;
    for (char c : text) {
      grammar->Advance(shared, (uint8_t)c, &next_shared, &scratch);
      grammar->Advance(fresh, (uint8_t)c, &next_fresh);
      ASSERT_EQ(next_shared, next_fresh) << text << " at '" << c << "'";
      EXPECT_TRUE(scratch.popped.empty());  // Expand restores what it pops
      shared.swap(next_shared);
      fresh.swap(next_fresh);
    }
    EXPECT_EQ(grammar->CanEnd(shared), grammar->Accepts(text)) << text;
  }
}

}  // namespace
}  // namespace tern::grammar
