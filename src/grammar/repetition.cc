#include "grammar/repetition.h"

#include <algorithm>
#include <cctype>

namespace tern::grammar {
namespace {

bool ReadCount(std::string_view t, size_t* i, int32_t* out) {
  const size_t start = *i;
  int64_t v = 0;
  while (*i < t.size() && t[*i] >= '0' && t[*i] <= '9') {
    v = std::min<int64_t>(v * 10 + (t[*i] - '0'), 1 << 30);
    ++*i;
  }
  *out = (int32_t)v;
  return *i > start;
}

}  // namespace

Repetition ReadRepetition(std::string_view t, size_t* pos, bool regex_syntax) {
  Repetition r;
  if (*pos >= t.size()) return r;
  size_t i = *pos;
  const auto skip_space = [&] {  // GBNF: white space and # comments
    while (!regex_syntax && i < t.size()) {
      if (t[i] == '#') {
        while (i < t.size() && t[i] != '\n') ++i;
      } else if (std::isspace((unsigned char)t[i])) {
        ++i;
      } else {
        break;
      }
    }
  };
  const auto fail = [&](const char* what) {
    r.error = what;
    return r;
  };
  switch (t[i]) {
    case '*': r.min = 0, r.max = -1; break;
    case '+': r.max = -1; break;
    case '?': r.min = 0; break;
    case '{':
      ++i;
      skip_space();
      if (!ReadCount(t, &i, &r.min)) {
        return fail(regex_syntax ? "'{' without a count (escape it as \\{)" : "'{' needs a count");
      }
      r.max = r.min;
      skip_space();
      if (i < t.size() && t[i] == ',') {
        ++i;
        skip_space();
        if (!ReadCount(t, &i, &r.max)) r.max = -1;
        skip_space();
      }
      if (i >= t.size() || t[i] != '}') return fail("unclosed {m,n}");
      if (r.max >= 0 && r.max < r.min) return fail("{m,n} with n < m");
      if (r.min > kMaxRepeat || r.max > kMaxRepeat) return fail("repeat count above 1000");
      break;
    default:
      return r;
  }
  r.found = true;
  *pos = i + 1;
  return r;
}

}  // namespace tern::grammar
