#include "grammar/regex.h"

#include <string>

#include "base/utf8.h"
#include "grammar/repetition.h"

namespace tern::grammar {
namespace {

constexpr int kMaxNesting = 100;  // ( ) groups inside each other

// A set of code points: ASCII exactly, everything above as one flag.
struct CharClass {
  std::bitset<128> ascii;
  bool non_ascii = false;
  void Negate() {
    ascii.flip();
    non_ascii = true;
  }
};

class RegexCompiler {
 public:
  RegexCompiler(std::string_view p, RegexTarget target, Grammar* g)
      : p_(p), target_(target), g_(g) {}

  StatusOr<int32_t> Compile() {
    if (!p_.empty() && p_[0] == '^') ++i_;
    StatusOr<int32_t> r = ParseAlternation();
    if (!r.ok()) return r;
    if (i_ < p_.size()) return Error(p_[i_] == ')' ? "unbalanced ')'" : "unexpected character");
    return r;
  }

 private:
  Status Error(const std::string& what) const {
    return InvalidArgument("pattern '" + std::string(p_) + "': " + what + " at offset " +
                           std::to_string(i_));
  }
  bool AtEnd() const { return i_ >= p_.size(); }
  // `$` closes the pattern only at its very end.
  bool AtDollarEnd() const { return i_ + 1 == p_.size() && p_[i_] == '$'; }

  StatusOr<int32_t> ParseAlternation() {
    std::vector<Sequence> alts;
    while (true) {
      StatusOr<Sequence> seq = ParseSequence();
      if (!seq.ok()) return seq.status();
      alts.push_back(std::move(*seq));
      if (AtEnd() || p_[i_] != '|') break;
      ++i_;
    }
    return g_->Choice(std::move(alts));
  }

  StatusOr<Sequence> ParseSequence() {
    Sequence seq;
    while (!AtEnd() && p_[i_] != '|' && p_[i_] != ')') {
      if (AtDollarEnd()) {
        ++i_;
        break;
      }
      TERN_ASSIGN_OR_RETURN(const int32_t atom, ParseAtom());
      TERN_ASSIGN_OR_RETURN(const int32_t quantified, ParseQuantifier(atom));
      seq.push_back(Symbol::Rule(quantified));
    }
    return seq;
  }

  StatusOr<int32_t> ParseQuantifier(int32_t atom) {
    const Repetition r = ReadRepetition(p_, &i_, /*regex_syntax=*/true);
    if (!r.error.empty()) return Error(r.error);
    if (!r.found) return atom;
    if (!AtEnd() && p_[i_] == '?') ++i_;  // lazy: same language
    if (!AtEnd() && (p_[i_] == '*' || p_[i_] == '+' || p_[i_] == '?' || p_[i_] == '{')) {
      return Error("quantifier after a quantifier");
    }
    return g_->Repeat(atom, r.min, r.max);
  }

  StatusOr<int32_t> ParseAtom() {
    const char c = p_[i_];
    if (c == '(') {
      ++i_;
      if (!AtEnd() && p_[i_] == '?') {
        if (i_ + 1 < p_.size() && p_[i_ + 1] == ':') {
          i_ += 2;
        } else {
          return Error("lookaround and named groups are not supported");
        }
      }
      // Groups recurse: a bound keeps a hostile pattern off the stack's end.
      if (++depth_ > kMaxNesting) return Error("groups nested deeper than 100");
      StatusOr<int32_t> r = ParseAlternation();
      --depth_;
      if (!r.ok()) return r;
      if (AtEnd() || p_[i_] != ')') return Error("unclosed '('");
      ++i_;
      return r;
    }
    if (c == '[') return ParseClass();
    if (c == '.') {
      ++i_;
      CharClass cc;
      cc.ascii.set('\n');
      cc.Negate();
      return ClassRule(cc);
    }
    if (c == '*' || c == '+' || c == '?' || c == '{') return Error("quantifier without an atom");
    if (c == '^' || c == '$') return Error("'^'/'$' only at the start/end of the pattern");
    if (c == '\\') {
      CharClass cc;
      uint32_t cp = 0;
      StatusOr<bool> is_class = ParseEscape(&cc, &cp);
      if (!is_class.ok()) return is_class.status();
      return *is_class ? ClassRule(cc) : CodePointRule(cp);
    }
    uint32_t cp = 0;
    if (!DecodeUtf8(&cp)) return Error("invalid UTF-8");
    return CodePointRule(cp);
  }

  bool DecodeUtf8(uint32_t* cp) {
    const uint8_t b = (uint8_t)p_[i_];
    int len = b < 0x80 ? 1 : b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 0;
    if (len == 0 || i_ + len > p_.size()) return false;
    uint32_t v = len == 1 ? b : b & (0x7F >> len);
    for (int k = 1; k < len; ++k) v = (v << 6) | ((uint8_t)p_[i_ + k] & 0x3F);
    i_ += len;
    *cp = v;
    return true;
  }

  // After '\\'. Returns true with a class, false with one code point.
  StatusOr<bool> ParseEscape(CharClass* cc, uint32_t* cp) {
    ++i_;
    if (AtEnd()) return Error("trailing backslash");
    const char c = p_[i_++];
    auto set_range = [&](char lo, char hi) {
      for (int x = lo; x <= hi; ++x) cc->ascii.set(x);
    };
    switch (c) {
      case 'd': case 'D':
        set_range('0', '9');
        break;
      case 'w': case 'W':
        set_range('a', 'z'), set_range('A', 'Z'), set_range('0', '9'), cc->ascii.set('_');
        break;
      case 's': case 'S':
        for (char x : std::string(" \t\n\r\f\v")) cc->ascii.set(x);
        break;
      case 'n': *cp = '\n'; return false;
      case 't': *cp = '\t'; return false;
      case 'r': *cp = '\r'; return false;
      case 'f': *cp = '\f'; return false;
      case 'v': *cp = '\v'; return false;
      case 'u': {
        if (i_ + 4 > p_.size() ||
            std::string(p_.substr(i_, 4)).find_first_not_of("0123456789abcdefABCDEF") != std::string::npos) {
          return Error("\\u needs 4 hex digits");
        }
        *cp = (uint32_t)std::stoul(std::string(p_.substr(i_, 4)), nullptr, 16);
        i_ += 4;
        return false;
      }
      default:
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
          --i_;
          return Error(std::string("escape \\") + c + " is not supported");
        }
        *cp = (uint8_t)c;
        return false;
    }
    if (c == 'D' || c == 'W' || c == 'S') cc->Negate();
    return true;
  }

  StatusOr<int32_t> ParseClass() {
    ++i_;  // '['
    CharClass cc;
    bool negate = false;
    if (!AtEnd() && p_[i_] == '^') negate = true, ++i_;
    bool first = true;
    while (!AtEnd() && (p_[i_] != ']' || first)) {
      first = false;
      uint32_t lo = 0;
      if (p_[i_] == '\\') {
        CharClass sub;
        StatusOr<bool> is_class = ParseEscape(&sub, &lo);
        if (!is_class.ok()) return is_class.status();
        if (*is_class) {
          cc.ascii |= sub.ascii;
          cc.non_ascii |= sub.non_ascii;
          continue;
        }
      } else if (!DecodeUtf8(&lo)) {
        return Error("invalid UTF-8");
      }
      uint32_t hi = lo;
      if (i_ + 1 < p_.size() && p_[i_] == '-' && p_[i_ + 1] != ']') {
        ++i_;
        if (p_[i_] == '\\') {
          CharClass sub;
          StatusOr<bool> is_class = ParseEscape(&sub, &hi);
          if (!is_class.ok()) return is_class.status();
          if (*is_class) return Error("class range ending in a class escape");
        } else if (!DecodeUtf8(&hi)) {
          return Error("invalid UTF-8");
        }
        if (hi < lo) return Error("class range out of order");
      }
      if (hi >= 0x80) return Error("non-ASCII characters in a class are not supported");
      for (uint32_t x = lo; x <= hi; ++x) cc.ascii.set(x);
    }
    if (AtEnd()) return Error("unclosed '['");
    ++i_;
    if (negate) cc.Negate();
    return ClassRule(cc);
  }

  int32_t CodePointRule(uint32_t cp) {
    if (cp < 0x80) {
      CharClass cc;
      cc.ascii.set(cp);
      return ClassRule(cc);
    }
    return g_->LiteralRule(Utf8(cp));
  }

  int32_t ClassRule(const CharClass& cc) {
    std::vector<Sequence> alts;
    ByteSet plain;
    for (int c = 0; c < 128; ++c) {
      if (!cc.ascii[c]) continue;
      const bool special = c < 0x20 || c == '"' || c == '\\';
      if (target_ == RegexTarget::kRaw || !special) {
        plain.set(c);
      } else if (c == '"') {
        alts.push_back(Literal("\\\""));
      } else if (c == '\\') {
        alts.push_back(Literal("\\\\"));
      } else if (c == '\n') {
        alts.push_back(Literal("\\n"));
      } else if (c == '\t') {
        alts.push_back(Literal("\\t"));
      } else if (c == '\r') {
        alts.push_back(Literal("\\r"));
      }  // other control characters: left out
    }
    if (plain.any()) alts.push_back({Symbol::Bytes(plain)});
    if (cc.non_ascii) {
      if (utf8_rule_ < 0) utf8_rule_ = AddUtf8NonAsciiRule(g_);
      alts.push_back({Symbol::Rule(utf8_rule_)});
    }
    if (alts.empty()) alts.push_back(Literal("\\u0000"));  // nothing matches: unreachable class
    return g_->Choice(std::move(alts));
  }

  std::string_view p_;
  RegexTarget target_;
  Grammar* g_;
  size_t i_ = 0;
  int depth_ = 0;  // ( ) groups open
  int32_t utf8_rule_ = -1;
};

}  // namespace

int32_t AddUtf8NonAsciiRule(Grammar* g) {
  // Well-formed UTF-8 only (no overlongs, surrogates or code points past
  // U+10FFFF), so every output decodes.
  auto b = [](const char* spec) { return Symbol::Bytes(Range(spec)); };
  const Symbol cont = b("\x80-\xBF");
  return g->Choice({
      {b("\xC2-\xDF"), cont},
      {b("\xE0"), b("\xA0-\xBF"), cont},
      {b("\xE1-\xEC\xEE-\xEF"), cont, cont},
      {b("\xED"), b("\x80-\x9F"), cont},
      {b("\xF0"), b("\x90-\xBF"), cont, cont},
      {b("\xF1-\xF3"), cont, cont, cont},
      {b("\xF4"), b("\x80-\x8F"), cont, cont},
  });
}

StatusOr<int32_t> AddRegexRule(std::string_view pattern, RegexTarget target, Grammar* g) {
  return RegexCompiler(pattern, target, g).Compile();
}

}  // namespace tern::grammar
