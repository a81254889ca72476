// Helpers the grammar tests share (grammar_test, regex_test, gbnf_test,
// json_schema_test): which texts a compiled grammar accepts as a whole, and
// random garbage to compile.
#pragma once

#include <gtest/gtest.h>

#include <initializer_list>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"

namespace tern::grammar {

// Expects `g` to accept every text of `accepted` and none of `rejected`.
inline void ExpectLanguage(const Grammar& g, std::initializer_list<std::string_view> accepted,
                           std::initializer_list<std::string_view> rejected) {
  for (std::string_view text : accepted) EXPECT_TRUE(g.Accepts(text)) << "rejects " << text;
  for (std::string_view text : rejected) EXPECT_FALSE(g.Accepts(text)) << "accepts " << text;
}

// 1 to max_pieces pieces picked at random and joined: garbage for the
// compilers' never-crash tests.
inline std::string RandomJoin(std::mt19937& rng, const std::vector<std::string>& pieces,
                              int max_pieces) {
  std::string text;
  const int len = 1 + static_cast<int>(rng() % max_pieces);
  for (int k = 0; k < len; ++k) text += pieces[rng() % pieces.size()];
  return text;
}

}  // namespace tern::grammar
