#include "grammar/gbnf.h"

#include <gtest/gtest.h>

#include <random>

#include "grammar/grammar_test_util.h"

namespace tern::grammar {
namespace {

TEST(GbnfTest, CompilesTheUsualNotation) {
  StatusOr<Grammar> g = CompileGbnf(R"(
    # key/value list
    root ::= "{" pair ( ", " pair )* "}"
    pair ::= [a-z]+ ": " ( num | "null" | "\u00e9" )
    num  ::= "-"? [0-9]{1,3}
  )");
  ASSERT_TRUE(g.ok()) << g.status().message();
  ExpectLanguage(*g, {"{a: 1}", "{ab: -123, c: null, d: \xC3\xA9}"},
                 {"{a: 1234}", "{A: 1}", "{a: 1,b: 2}"});
}

TEST(GbnfTest, ErrorsNameTheLineOrRule) {
  for (const auto& [text, needle] : std::vector<std::pair<const char*, const char*>>{
           {"root ::= x", "rule 'x' is used but not defined"},
           {"start ::= \"a\"", "no 'root' rule"},
           {"root ::= \"a\"\nroot ::= \"b\"", "line 2: rule 'root' is defined twice"},
           {"root ::= \"a", "unclosed string"},
           {"root ::= (\"a\"", "unclosed '('"},
           {"root ::= [a-", "unclosed '['"},
           {"root ::= root \"a\" | \"b\"", "left-recursive"},
           {"root ::= \"a\" root", "never finish"},
       }) {
    StatusOr<Grammar> g = CompileGbnf(text);
    ASSERT_FALSE(g.ok()) << text;
    EXPECT_NE(g.status().message().find(needle), std::string::npos) << g.status().message();
  }
}

TEST(GbnfTest, GroupsNestedDeeperThan100AreAnErrorNotAStackOverflow) {
  auto nested = [](int n) {
    return "root ::= " + std::string(n, '(') + "\"a\"" + std::string(n, ')');
  };
  EXPECT_TRUE(CompileGbnf(nested(100)).ok());
  StatusOr<Grammar> deep = CompileGbnf(nested(100000));  // found by fuzz_grammar
  ASSERT_FALSE(deep.ok());
  EXPECT_NE(deep.status().message().find("nested deeper than 100"), std::string::npos)
      << deep.status().message();
}

TEST(GbnfTest, GarbageNeverCrashes) {
  const std::vector<std::string> pieces = {"root", " ::= ", "a", "\"x\"", "\"\\u12\"", "[a-z]", "[^", "(", ")",
                                           "|", "*", "{2,1}", "{3}", ".", "#c\n", "\n", " b ::= "};
  std::mt19937 rng(9);
  int ok = 0;
  for (int i = 0; i < 3000; ++i) {
    ok += CompileGbnf(RandomJoin(rng, pieces, 10)).ok();
  }
  EXPECT_GT(ok, 0);  // some are well formed; none crashes
}

}  // namespace
}  // namespace tern::grammar
