// Lexer: splits template source into segments (literal text, `{{ }}`
// expressions, `{% %}` statements) and tokenizes the inside of each tag.
//
// Whitespace control is applied here, so the parser sees final text:
// `{%-`/`-%}` (and the same on `{{ }}`, `{# #}`) strip all whitespace on that
// side; trim_blocks drops the first newline after a block tag or comment;
// lstrip_blocks drops spaces/tabs before a block tag or comment that starts a
// line; `{%+` / `+%}` disable those two for one tag. Comments disappear and
// `{% raw %}...{% endraw %}` becomes literal text (only `-`, and lstrip before
// endraw, touch it). Newlines are normalised to
// "\n" and one trailing newline is dropped unless keep_trailing_newline.
//
// Invariant: every token and segment carries the 1-based line and column of
// its first character in the original source.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "jinja/template_options.h"

namespace tern {

struct Token {
  enum class Kind { kName, kString, kInt, kFloat, kOp, kEnd };
  Kind kind = Kind::kEnd;
  std::string text;  // name, operator, or decoded string literal
  int64_t int_value = 0;
  double float_value = 0;
  int line = 0;
  int column = 0;
};

struct Segment {
  enum class Kind { kText, kExpression, kStatement };
  Kind kind = Kind::kText;
  std::string text;           // kText only
  std::vector<Token> tokens;  // tag contents, ending with a kEnd token
  int line = 0;
  int column = 0;
};

StatusOr<std::vector<Segment>> LexTemplate(std::string_view source,
                                           const TemplateOptions& options);

}  // namespace tern
