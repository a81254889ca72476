// StringOps: Python-style string helpers behind the template's string filters
// and methods (strip, split, replace, title, ...). Operate on UTF-8 bytes;
// whitespace and case mapping are ASCII only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "jinja/value.h"

namespace tern {

std::string AsciiLower(std::string_view s);
std::string AsciiUpper(std::string_view s);
std::string Capitalize(std::string_view s);  // first letter upper, rest lower
std::string TitleCase(std::string_view s);   // letters after a non-letter upper, rest lower
// Strips `chars` (ASCII whitespace when nullopt) from the chosen ends.
std::string Strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right);
// str.split() with no separator: runs of whitespace, no empty parts.
std::vector<std::string> SplitWhitespace(std::string_view s, int64_t maxsplit);
// str.split(sep) with a non-empty separator.
std::vector<std::string> SplitOn(std::string_view s, std::string_view sep, int64_t maxsplit);
// str.splitlines() on \n, \r\n and \r.
std::vector<std::string> SplitLines(std::string_view s);
// str.replace(old, new, count); errors when the result passes max_bytes.
StatusOr<Value> Replace(std::string_view s, std::string_view old_s, std::string_view new_s,
                        int64_t count, size_t max_bytes);
bool StartsWith(std::string_view s, std::string_view prefix);
bool EndsWith(std::string_view s, std::string_view suffix);
std::string HtmlEscape(std::string_view s);
// str.isdigit/isalpha/isalnum/isspace/islower/isupper (ASCII).
bool CharClassTest(std::string_view s, std::string_view method);

}  // namespace tern
