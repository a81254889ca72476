// UTF-8 encoding of one code point, shared by the tokenizers, the Jinja
// lexer (\u escapes) and the grammar compilers (GBNF/regex escapes).
#pragma once

#include <cstdint>
#include <string>

namespace tern {

// Appends cpt as UTF-8; surrogates (U+D800..U+DFFF) and values past U+10FFFF
// become U+FFFD, so the output is always valid UTF-8.
void AppendUtf8(uint32_t cpt, std::string* out);

inline std::string Utf8(uint32_t cpt) {
  std::string s;
  AppendUtf8(cpt, &s);
  return s;
}

}  // namespace tern
