#include "grammar/regex.h"

#include <gtest/gtest.h>

#include <random>

#include "grammar/grammar_test_util.h"

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
  ExpectLanguage(g, {"Ab 12", "Abc 123-x", "Abc 123y"}, {"Abc 1234", "ab 12", "A 12"});
}

TEST(RegexTest, NegatedClassesAndDotTakeUtf8) {
  Grammar g = Compile("[^0-9]+.");
  // "héllo" is in; a leading digit, or "a" with half a character, is not.
  ExpectLanguage(g, {"h\xC3\xA9llo"}, {"1x", "a\xC3"});
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
  std::vector<std::string> alphabet;
  for (char c : std::string_view("ab()[]{}|*+?.^$\\-,0123u:=!")) alphabet.emplace_back(1, c);
  std::mt19937 rng(5);
  int ok = 0;
  for (int i = 0; i < 3000; ++i) {
    const std::string p = RandomJoin(rng, alphabet, 12);
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
