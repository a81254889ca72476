#include "jinja/string_ops.h"

#include <cctype>

namespace tern {
namespace {

bool IsAsciiSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}
bool IsAsciiAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
char Lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }
char Upper(char c) { return (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c; }

}  // namespace

std::string AsciiLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = Lower(c);
  return out;
}

std::string AsciiUpper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = Upper(c);
  return out;
}

std::string Capitalize(std::string_view s) {
  std::string out = AsciiLower(s);
  if (!out.empty()) out[0] = Upper(out[0]);
  return out;
}

std::string TitleCase(std::string_view s) {
  std::string out(s);
  bool prev_letter = false;
  for (char& c : out) {
    if (IsAsciiAlpha(c)) {
      c = prev_letter ? Lower(c) : Upper(c);
      prev_letter = true;
    } else {
      // Bytes of multi-byte UTF-8 characters count as letters (no case change).
      prev_letter = (static_cast<unsigned char>(c) >= 0x80);
    }
  }
  return out;
}

std::string Strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right) {
  auto strip_char = [&](char c) {
    return chars.has_value() ? chars->find(c) != std::string::npos : IsAsciiSpace(c);
  };
  size_t begin = 0, end = s.size();
  if (left) {
    while (begin < end && strip_char(s[begin])) ++begin;
  }
  if (right) {
    while (end > begin && strip_char(s[end - 1])) --end;
  }
  return std::string(s.substr(begin, end - begin));
}

std::vector<std::string> SplitWhitespace(std::string_view s, int64_t maxsplit) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && IsAsciiSpace(s[i])) ++i;
    if (i >= s.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
      size_t end = s.size();
      while (end > i && IsAsciiSpace(s[end - 1])) --end;
      out.emplace_back(s.substr(i, end - i));
      break;
    }
    size_t start = i;
    while (i < s.size() && !IsAsciiSpace(s[i])) ++i;
    out.emplace_back(s.substr(start, i - start));
  }
  return out;
}

std::vector<std::string> SplitOn(std::string_view s, std::string_view sep, int64_t maxsplit) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) break;
    size_t p = s.find(sep, start);
    if (p == std::string_view::npos) break;
    out.emplace_back(s.substr(start, p - start));
    start = p + sep.size();
  }
  out.emplace_back(s.substr(start));
  return out;
}

std::vector<std::string> SplitLines(std::string_view s) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\n' || s[i] == '\r') {
      out.emplace_back(s.substr(start, i - start));
      if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
      start = i + 1;
    }
  }
  if (start < s.size()) out.emplace_back(s.substr(start));
  return out;
}

StatusOr<Value> Replace(std::string_view s, std::string_view old_s, std::string_view new_s,
                        int64_t count, size_t max_bytes) {
  std::string out;
  int64_t done = 0;
  auto check = [&]() -> Status {
    if (out.size() > max_bytes) {
      return ResourceExhausted("replace: result larger than " + std::to_string(max_bytes) + " bytes");
    }
    return Status::Ok();
  };
  if (old_s.empty()) {
    std::vector<size_t> bounds = Utf8Boundaries(s);
    for (size_t i = 0; i + 1 < bounds.size(); ++i) {
      if (count < 0 || done < count) {
        out += new_s;
        ++done;
      }
      out.append(s.substr(bounds[i], bounds[i + 1] - bounds[i]));
      TERN_RETURN_IF_ERROR(check());
    }
    if (count < 0 || done < count) out += new_s;
    TERN_RETURN_IF_ERROR(check());
    return Value(std::move(out));
  }
  size_t start = 0;
  while (count < 0 || done < count) {
    size_t p = s.find(old_s, start);
    if (p == std::string_view::npos) break;
    out.append(s.substr(start, p - start));
    out.append(new_s);
    TERN_RETURN_IF_ERROR(check());
    start = p + old_s.size();
    ++done;
  }
  out.append(s.substr(start));
  TERN_RETURN_IF_ERROR(check());
  return Value(std::move(out));
}

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string HtmlEscape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

bool CharClassTest(std::string_view s, std::string_view method) {
  if (s.empty()) return false;
  if (method == "islower" || method == "isupper") {
    bool cased = false;
    for (char c : s) {
      if (!IsAsciiAlpha(c)) continue;
      cased = true;
      if (method == "islower" ? (c >= 'A' && c <= 'Z') : (c >= 'a' && c <= 'z')) return false;
    }
    return cased;
  }
  for (char c : s) {
    unsigned char u = static_cast<unsigned char>(c);
    bool ok = method == "isdigit"   ? std::isdigit(u) != 0
              : method == "isalpha" ? IsAsciiAlpha(c)
              : method == "isalnum" ? (IsAsciiAlpha(c) || std::isdigit(u) != 0)
                                    : IsAsciiSpace(c);
    if (!ok) return false;
  }
  return true;
}

}  // namespace tern
