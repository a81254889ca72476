// Regex -> grammar rules, for JSON-schema `pattern`/`format` and for
// guided_regex. The subset: literals, `.`, classes `[a-z_]`/`[^...]`, escapes
// \d \w \s \D \W \S and escaped punctuation, groups `( )` `(?: )`,
// alternation `|`, quantifiers `* + ? {n} {n,} {n,m}` (a lazy `?` after one is
// accepted and means nothing here), `^` at the start and `$` at the end.
// Backreferences, lookaround and non-ASCII class ranges are refused with a
// message.
//
// A regex matches code points; the grammar matches their bytes. Two targets:
//   kRaw:        the bytes themselves (guided_regex output text).
//   kJsonString: the body of a JSON string whose decoded value matches, so
//                `"` and `\` come out escaped and control characters, which
//                the JSON string cannot hold raw, are left out of classes.
// Negated classes and `.` admit every non-ASCII code point as UTF-8.
#pragma once

#include <string_view>

#include "base/status.h"
#include "grammar/grammar.h"

namespace tern::grammar {

enum class RegexTarget { kRaw, kJsonString };

// Adds rules for `pattern` to g; returns the rule that matches it whole.
StatusOr<int32_t> AddRegexRule(std::string_view pattern, RegexTarget target, Grammar* g);

// One UTF-8 encoded code point of any length (>= U+0080).
int32_t AddUtf8NonAsciiRule(Grammar* g);

}  // namespace tern::grammar
