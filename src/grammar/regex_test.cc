#include "grammar/regex.h"

#include <gtest/gtest.h>

#include <random>

namespace tern::grammar {
namespace {

Grammar Compile(const std::string& pattern, RegexTarget target = RegexTarget::kRaw) {
  Grammar g;
  StatusOr<int32_t> r = AddRegexRule(pattern, target, &g);
  EXPECT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(g.Finalize(*r).ok());
  return g;
}

TEST(RegexTest, GroupsNestedDeeperThan100AreAnErrorNotAStackOverflow) {
  auto nested = [](int n) { return std::string(n, '(') + "a" + std::string(n, ')'); };
  Grammar ok;
  EXPECT_TRUE(AddRegexRule(nested(100), RegexTarget::kRaw, &ok).ok());
  Grammar g;
  StatusOr<int32_t> deep = AddRegexRule(nested(100000), RegexTarget::kRaw, &g);  // fuzz_grammar
  ASSERT_FALSE(deep.ok());
  EXPECT_NE(deep.status().message().find("nested deeper than 100"), std::string::npos);
}

TEST(RegexTest, MatchesTheUsualSubset) {
  Grammar g = Compile("^[A-Z][a-z]+ \\d{2,3}(-x|y)?$");
  EXPECT_TRUE(g.Accepts("Ab 12"));
  EXPECT_TRUE(g.Accepts("Abc 123-x"));
  EXPECT_TRUE(g.Accepts("Abc 123y"));
  EXPECT_FALSE(g.Accepts("Abc 1234"));
  EXPECT_FALSE(g.Accepts("ab 12"));
  EXPECT_FALSE(g.Accepts("A 12"));
}

TEST(RegexTest, NegatedClassesAndDotTakeUtf8) {
  Grammar g = Compile("[^0-9]+.");
  EXPECT_TRUE(g.Accepts("h\xC3\xA9llo"));  // "héllo"
  EXPECT_FALSE(g.Accepts("1x"));
  EXPECT_FALSE(g.Accepts("a\xC3"));        // half a character
}

TEST(RegexTest, JsonStringTargetEscapesQuotesAndBackslashes) {
  Grammar g = Compile("a\"b\\\\c", RegexTarget::kJsonString);
  EXPECT_TRUE(g.Accepts("a\\\"b\\\\c"));
  EXPECT_FALSE(g.Accepts("a\"b\\c"));
}

TEST(RegexTest, RefusesWhatItCannotDoWithAMessage) {
  for (const char* bad : {"(?=a)b", "a**", "(ab", "[a-", "\\1", "a{3,2}", "x^y", "[é]"}) {
    Grammar g;
    StatusOr<int32_t> r = AddRegexRule(bad, RegexTarget::kRaw, &g);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_NE(r.status().message().find("pattern '"), std::string::npos);
    }
  }
}

TEST(RegexTest, GarbagePatternsCompileOrFailButNeverCrash) {
  const std::string alphabet = "ab()[]{}|*+?.^$\\-,0123u:=!";
  std::mt19937 rng(5);
  int ok = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string p;
    const int len = 1 + (int)(rng() % 12);
    for (int k = 0; k < len; ++k) p += alphabet[rng() % alphabet.size()];
    Grammar g;
    StatusOr<int32_t> r = AddRegexRule(p, RegexTarget::kJsonString, &g);
    if (r.ok() && g.Finalize(*r).ok()) {
      ++ok;
      g.Accepts("ab");
    }
  }
  EXPECT_GT(ok, 100);
}

}  // namespace
}  // namespace tern::grammar
