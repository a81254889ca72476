#include "grammar/grammar.h"

#include <algorithm>
#include <functional>

#include "base/check.h"

namespace tern::grammar {
namespace {
constexpr size_t kMaxStateInts = size_t{1} << 18;
}  // namespace

Sequence Literal(std::string_view text) {
  Sequence seq;
  for (char c : text) seq.push_back(Symbol::Byte((uint8_t)c));
  return seq;
}

ByteSet Range(std::string_view spec) {
  ByteSet set;
  for (size_t i = 0; i < spec.size(); ++i) {
    const uint8_t lo = (uint8_t)spec[i];
    if (i + 2 < spec.size() && spec[i + 1] == '-') {
      for (int c = lo; c <= (uint8_t)spec[i + 2]; ++c) set.set(c);
      i += 2;
    } else {
      set.set(lo);
    }
  }
  return set;
}

int32_t Grammar::NewRule(std::string name) {
  names_.push_back(std::move(name));
  rules_.emplace_back();
  return (int32_t)rules_.size() - 1;
}

void Grammar::AddAlternative(int32_t rule, Sequence seq) {
  CHECK_LT(rule, (int32_t)rules_.size());
  rules_[rule].push_back(std::move(seq));
}

int32_t Grammar::LiteralRule(std::string_view text) {
  const int32_t r = NewRule("literal");
  AddAlternative(r, Literal(text));
  return r;
}

int32_t Grammar::Choice(std::vector<Sequence> alternatives) {
  const int32_t r = NewRule("choice");
  for (Sequence& s : alternatives) AddAlternative(r, std::move(s));
  return r;
}

int32_t Grammar::Optional(Sequence seq) { return Choice({std::move(seq), {}}); }

int32_t Grammar::Repeat(int32_t item, int32_t min, int32_t max) {
  Sequence seq(min, Symbol::Rule(item));
  if (max < 0) {
    const int32_t star = NewRule("star");
    AddAlternative(star, {Symbol::Rule(item), Symbol::Rule(star)});
    AddAlternative(star, {});
    seq.push_back(Symbol::Rule(star));
  } else if (max > min) {
    // O_k := item O_{k-1} | "" : at most max - min more.
    int32_t tail = Optional({Symbol::Rule(item)});
    for (int32_t k = 1; k < max - min; ++k) tail = Optional({Symbol::Rule(item), Symbol::Rule(tail)});
    seq.push_back(Symbol::Rule(tail));
  }
  const int32_t r = NewRule("repeat");
  AddAlternative(r, std::move(seq));
  return r;
}

int32_t Grammar::SeparatedList(int32_t item, std::string_view sep, int32_t min, int32_t max) {
  const int32_t r = NewRule("list");
  if (max == 0) {
    AddAlternative(r, {});
    return r;
  }
  if (min == 0) AddAlternative(r, {});
  // (sep item) as one rule, repeated.
  Sequence next = Literal(sep);
  next.push_back(Symbol::Rule(item));
  const int32_t sep_item = NewRule("sep_item");
  AddAlternative(sep_item, std::move(next));
  const int32_t first = std::max(min, 1);
  const int32_t rest = Repeat(sep_item, first - 1, max < 0 ? -1 : max - 1);
  AddAlternative(r, {Symbol::Rule(item), Symbol::Rule(rest)});
  return r;
}

Status Grammar::Finalize(int32_t root) {
  CHECK_GE(root, 0);
  CHECK_LT(root, (int32_t)rules_.size());
  root_ = root;
  elements_.clear();
  byte_sets_.clear();
  alt_starts_.assign(rules_.size(), {});
  for (size_t r = 0; r < rules_.size(); ++r) {
    if (rules_[r].empty()) return InvalidArgument("grammar rule '" + names_[r] + "' has no alternatives");
    for (const Sequence& seq : rules_[r]) {
      alt_starts_[r].push_back((int32_t)elements_.size());
      for (const Symbol& s : seq) {
        if (s.rule >= 0) {
          if (s.rule >= (int32_t)rules_.size()) return InvalidArgument("grammar refers to an undefined rule");
          elements_.push_back({kRule, s.rule});
        } else {
          if (s.bytes.none()) return InvalidArgument("grammar rule '" + names_[r] + "' has an empty byte class");
          elements_.push_back({kBytes, (int32_t)byte_sets_.size()});
          byte_sets_.push_back(s.bytes);
        }
      }
      elements_.push_back({kEnd, 0});
    }
  }
  rules_.clear();
  rules_.shrink_to_fit();
  ComputeMinBytes();
  if (rule_min_bytes_[root] >= kInfiniteBytes) {
    return InvalidArgument("the grammar can never finish (every alternative recurses forever)");
  }
  return CheckLeftRecursion();
}

void Grammar::ComputeMinBytes() {
  rule_min_bytes_.assign(alt_starts_.size(), kInfiniteBytes);
  min_bytes_.assign(elements_.size(), kInfiniteBytes);
  bool changed = true;
  while (changed) {
    changed = false;
    // Backwards, so each element sees its successor's value of this pass.
    for (int32_t p = (int32_t)elements_.size() - 1; p >= 0; --p) {
      const Element& e = elements_[p];
      int64_t v = 0;
      if (e.kind == kBytes) v = 1 + min_bytes_[p + 1];
      if (e.kind == kRule) v = rule_min_bytes_[e.arg] + min_bytes_[p + 1];
      v = std::min(v, kInfiniteBytes);
      if (v != min_bytes_[p]) {
        min_bytes_[p] = v;
        changed = true;
      }
    }
    for (size_t r = 0; r < alt_starts_.size(); ++r) {
      int64_t best = kInfiniteBytes;
      for (int32_t start : alt_starts_[r]) best = std::min(best, min_bytes_[start]);
      if (best != rule_min_bytes_[r]) {
        rule_min_bytes_[r] = best;
        changed = true;
      }
    }
  }
}

Status Grammar::CheckLeftRecursion() const {
  // Edge r -> s: s can be expanded before r consumes a byte.
  const int32_t n = (int32_t)alt_starts_.size();
  std::vector<std::vector<int32_t>> left(n);
  for (int32_t r = 0; r < n; ++r) {
    for (int32_t p : alt_starts_[r]) {
      for (; elements_[p].kind == kRule; ++p) {
        left[r].push_back(elements_[p].arg);
        if (rule_min_bytes_[elements_[p].arg] != 0) break;
      }
    }
  }
  std::vector<int8_t> mark(n, 0);  // 0 new, 1 on the path, 2 done
  std::function<bool(int32_t)> cyclic = [&](int32_t r) {
    if (mark[r] == 1) return true;
    if (mark[r] == 2) return false;
    mark[r] = 1;
    for (int32_t s : left[r]) {
      if (cyclic(s)) return true;
    }
    mark[r] = 2;
    return false;
  };
  for (int32_t r = 0; r < n; ++r) {
    if (cyclic(r)) return InvalidArgument("grammar rule '" + names_[r] + "' is left-recursive");
  }
  return Status::Ok();
}

void Grammar::AddStack(const std::vector<int32_t>& stack, State* out) {
  // Already there? Stacks are [length, bottom .. top]; most differ in the top.
  const int32_t len = (int32_t)stack.size();
  // A pathologically ambiguous grammar could grow a state without bound;
  // dropping parses keeps every output valid (each kept stack is one).
  if (out->size() > kMaxStateInts) return;
  for (size_t i = 0; i < out->size(); i += (*out)[i] + 1) {
    if ((*out)[i] != len) continue;
    if (len > 0 && (*out)[i + len] != stack.back()) continue;
    if (std::equal(stack.begin(), stack.end(), out->begin() + i + 1)) return;
  }
  out->push_back(len);
  out->insert(out->end(), stack.begin(), stack.end());
}

void Grammar::Expand(std::vector<int32_t>& stack, State* out, int depth,
                     std::vector<int32_t>* popped_entries) const {
  CHECK_LT(depth, 100000);
  // Pops restore on return: the caller's stack is unchanged. The popped
  // entries go to the caller's buffer, shared by the whole recursion (this
  // runs per byte of a mask walk).
  std::vector<int32_t>& popped = *popped_entries;
  const size_t popped_base = popped.size();
  while (!stack.empty() && elements_[stack.back()].kind == kEnd) {
    popped.push_back(stack.back());
    stack.pop_back();
  }
  if (stack.empty() || elements_[stack.back()].kind == kBytes) {
    AddStack(stack, out);
  } else {
    const int32_t p = stack.back();
    stack.pop_back();
    const bool push_return = elements_[p + 1].kind != kEnd;  // tail call: no return
    if (push_return) stack.push_back(p + 1);
    for (int32_t start : alt_starts_[elements_[p].arg]) {
      stack.push_back(start);
      Expand(stack, out, depth + 1, popped_entries);
      stack.pop_back();
    }
    if (push_return) stack.pop_back();
    stack.push_back(p);
  }
  while (popped.size() > popped_base) {
    stack.push_back(popped.back());
    popped.pop_back();
  }
}

State Grammar::Start() const {
  CHECK_GE(root_, 0);
  State out;
  std::vector<int32_t> stack, popped;
  for (int32_t start : alt_starts_[root_]) {
    stack.assign(1, start);
    Expand(stack, &out, 0, &popped);
  }
  return out;
}

void Grammar::Advance(const State& s, uint8_t b, State* out) const {
  AdvanceScratch scratch;
  Advance(s, b, out, &scratch);
}

void Grammar::Advance(const State& s, uint8_t b, State* out, AdvanceScratch* scratch) const {
  out->clear();
  std::vector<int32_t>& stack = scratch->stack;
  for (size_t i = 0; i < s.size(); i += s[i] + 1) {
    const int32_t len = s[i];
    if (len == 0) continue;
    const int32_t top = s[i + len];
    if (!byte_sets_[elements_[top].arg][b]) continue;
    stack.assign(s.begin() + i + 1, s.begin() + i + 1 + len);
    stack.back() = top + 1;
    Expand(stack, out, 0, &scratch->popped);
  }
}

bool Grammar::Accepts(std::string_view text) const {
  State s = Start(), next;
  AdvanceScratch scratch;
  for (char c : text) {
    Advance(s, (uint8_t)c, &next, &scratch);
    if (next.empty()) return false;
    s.swap(next);
  }
  return CanEnd(s);
}

bool Grammar::CanEnd(const State& s) const {
  for (size_t i = 0; i < s.size(); i += s[i] + 1) {
    if (s[i] == 0) return true;
  }
  return false;
}

ByteSet Grammar::NextBytes(const State& s) const {
  ByteSet set;
  for (size_t i = 0; i < s.size(); i += s[i] + 1) {
    if (s[i] > 0) set |= byte_sets_[elements_[s[i + s[i]]].arg];
  }
  return set;
}

int64_t Grammar::MinBytes(const State& s) const {
  int64_t best = kInfiniteBytes;
  for (size_t i = 0; i < s.size(); i += s[i] + 1) {
    int64_t sum = 0;
    for (int32_t k = 1; k <= s[i]; ++k) sum = std::min(sum + min_bytes_[s[i + k]], kInfiniteBytes);
    best = std::min(best, sum);
  }
  return best;
}

}  // namespace tern::grammar
