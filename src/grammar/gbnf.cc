#include "grammar/gbnf.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <string>

#include "grammar/regex.h"
#include "base/utf8.h"
#include "grammar/repetition.h"

namespace tern::grammar {
namespace {

constexpr int kMaxNesting = 100;  // ( ) groups inside each other

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

class GbnfParser {
 public:
  explicit GbnfParser(std::string_view t) : t_(t) {}

  StatusOr<Grammar> Parse() {
    SkipSpace();
    while (!AtEnd()) {
      const std::string name = ParseName();
      if (name.empty()) return Error("expected a rule name");
      SkipSpace();
      if (t_.substr(i_, 3) != "::=") return Error("expected '::=' after '" + name + "'");
      i_ += 3;
      if (defined_.count(name)) return Error("rule '" + name + "' is defined twice");
      defined_[name] = true;
      StatusOr<std::vector<Sequence>> alts = ParseAlternatives();
      if (!alts.ok()) return alts.status();
      const int32_t r = RuleId(name);
      for (Sequence& s : *alts) g_.AddAlternative(r, std::move(s));
      SkipSpace();
    }
    for (const auto& [name, id] : ids_) {
      if (!defined_.count(name)) return InvalidArgument("grammar: rule '" + name + "' is used but not defined");
    }
    if (!ids_.count("root")) return InvalidArgument("grammar: no 'root' rule");
    TERN_RETURN_IF_ERROR(g_.Finalize(ids_["root"]));
    return std::move(g_);
  }

 private:
  Status Error(const std::string& what) const {
    const int line = 1 + (int)std::count(t_.begin(), t_.begin() + std::min(i_, t_.size()), '\n');
    return InvalidArgument("grammar line " + std::to_string(line) + ": " + what);
  }
  bool AtEnd() const { return i_ >= t_.size(); }
  void SkipSpace() {
    while (!AtEnd()) {
      if (t_[i_] == '#') {
        while (!AtEnd() && t_[i_] != '\n') ++i_;
      } else if (std::isspace((unsigned char)t_[i_])) {
        ++i_;
      } else {
        break;
      }
    }
  }
  std::string ParseName() {
    const size_t start = i_;
    while (!AtEnd() && IsNameChar(t_[i_])) ++i_;
    return std::string(t_.substr(start, i_ - start));
  }
  // At `name ::=`: the next rule starts here.
  bool AtRuleStart() {
    const size_t save = i_;
    const std::string name = ParseName();
    SkipSpace();
    const bool yes = !name.empty() && t_.substr(i_, 3) == "::=";
    i_ = save;
    return yes;
  }
  int32_t RuleId(const std::string& name) {
    auto it = ids_.find(name);
    if (it != ids_.end()) return it->second;
    const int32_t r = g_.NewRule(name);
    ids_[name] = r;
    return r;
  }

  StatusOr<std::vector<Sequence>> ParseAlternatives() {
    std::vector<Sequence> alts;
    while (true) {
      StatusOr<Sequence> seq = ParseSequence();
      if (!seq.ok()) return seq.status();
      alts.push_back(std::move(*seq));
      SkipSpace();
      if (AtEnd() || t_[i_] != '|') break;
      ++i_;
    }
    return alts;
  }

  StatusOr<Sequence> ParseSequence() {
    Sequence seq;
    while (true) {
      SkipSpace();
      if (AtEnd() || t_[i_] == '|' || t_[i_] == ')' || AtRuleStart()) break;
      TERN_ASSIGN_OR_RETURN(const int32_t atom, ParseAtom());
      TERN_ASSIGN_OR_RETURN(const int32_t quantified, ParseQuantifier(atom));
      seq.push_back(Symbol::Rule(quantified));
    }
    return seq;
  }

  StatusOr<int32_t> ParseAtom() {
    const char c = t_[i_];
    if (c == '"') return ParseLiteral();
    if (c == '[' || c == '.') {
      size_t end = i_ + 1;
      if (c == '[') {
        while (end < t_.size() && t_[end] != ']') end += t_[end] == '\\' ? 2 : 1;
        if (end >= t_.size()) return Error("unclosed '['");
        ++end;
      }
      StatusOr<int32_t> r = AddRegexRule(t_.substr(i_, end - i_), RegexTarget::kRaw, &g_);
      if (!r.ok()) return Error(r.status().message());
      i_ = end;
      return r;
    }
    if (c == '(') {
      ++i_;
      // Groups recurse: a bound keeps a hostile grammar off the stack's end.
      if (++depth_ > kMaxNesting) return Error("groups nested deeper than 100");
      StatusOr<std::vector<Sequence>> alts = ParseAlternatives();
      --depth_;
      if (!alts.ok()) return alts.status();
      SkipSpace();
      if (AtEnd() || t_[i_] != ')') return Error("unclosed '('");
      ++i_;
      return g_.Choice(std::move(*alts));
    }
    if (IsNameChar(c)) return RuleId(ParseName());
    return Error(std::string("unexpected '") + c + "'");
  }

  StatusOr<int32_t> ParseLiteral() {
    ++i_;
    std::string bytes;
    while (!AtEnd() && t_[i_] != '"') {
      if (t_[i_] != '\\') {
        bytes += t_[i_++];
        continue;
      }
      if (++i_ >= t_.size()) break;
      const char e = t_[i_++];
      auto hex = [&](int n) -> int64_t {
        if (i_ + n > t_.size()) return -1;
        const std::string h(t_.substr(i_, n));
        if (h.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos) return -1;
        i_ += n;
        return std::stol(h, nullptr, 16);
      };
      switch (e) {
        case 'n': bytes += '\n'; break;
        case 't': bytes += '\t'; break;
        case 'r': bytes += '\r'; break;
        case 'x': {
          const int64_t v = hex(2);
          if (v < 0) return Error("\\x needs 2 hex digits");
          bytes += (char)v;
          break;
        }
        case 'u': {
          const int64_t v = hex(4);
          if (v < 0) return Error("\\u needs 4 hex digits");
          bytes += Utf8((uint32_t)v);
          break;
        }
        default: bytes += e;
      }
    }
    if (AtEnd()) return Error("unclosed string literal");
    ++i_;
    return g_.LiteralRule(bytes);
  }

  StatusOr<int32_t> ParseQuantifier(int32_t atom) {
    const Repetition r = ReadRepetition(t_, &i_, /*regex_syntax=*/false);
    if (!r.error.empty()) return Error(r.error);
    return r.found ? g_.Repeat(atom, r.min, r.max) : atom;
  }

  std::string_view t_;
  size_t i_ = 0;
  int depth_ = 0;  // ( ) groups open
  Grammar g_;
  std::map<std::string, int32_t> ids_;
  std::map<std::string, bool> defined_;
};

}  // namespace

StatusOr<Grammar> CompileGbnf(std::string_view text) { return GbnfParser(text).Parse(); }

}  // namespace tern::grammar
