// The repetition suffix after an atom, one reader for the GBNF and the
// regex compilers: `*` (0 or more), `+` (1 or more), `?` (0 or 1), `{m}`,
// `{m,}`, `{m,n}` (counts up to kMaxRepeat; GBNF allows white space and
// comments inside the braces).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tern::grammar {

constexpr int32_t kMaxRepeat = 1000;

struct Repetition {
  bool found = false;  // a quantifier starts at the position
  int32_t min = 1;
  int32_t max = 1;     // -1: unbounded
  std::string error;   // non-empty: malformed (the position is left at its start)
};

// Reads the quantifier at text[*pos], if any, and moves *pos past it.
Repetition ReadRepetition(std::string_view text, size_t* pos, bool regex_syntax);

}  // namespace tern::grammar
