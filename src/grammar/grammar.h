// Grammar: a context-free grammar over bytes, the form every constraint
// (JSON schema, json_object, regex, choice list) compiles to, and the
// byte-level pushdown automaton that runs it.
//
// A grammar is rules; a rule is alternatives; an alternative is a sequence of
// symbols, each a byte set or a reference to a rule. Built with NewRule /
// AddAlternative, then Finalize() flattens it:
//
//   elements: [ a0 a1 END | b0 R7 b2 END | END | ... ]   one run per alternative
//              ^alt 0 of rule 0   ^alt 1       ^empty alternative
//
// Automaton state: the set of parse stacks that are still alive. A stack is
// element positions, bottom first; its top is the byte set that must match
// next, the entries below are return positions (the element after a rule
// reference). A reference in tail position pushes no return (so repetition
// written as right recursion, R := x R | "", keeps a constant-size stack and
// the state inside a long string repeats exactly, which the mask cache uses).
// The empty stack means the input may end here. States are flat vectors
// (each stack as its length, then its entries) so they hash and compare as
// plain data.
//
// Finalize rejects left recursion (the automaton would expand forever) and
// rules that can never finish, and computes, per element, the fewest bytes
// that finish the rest of its alternative: MinBytes(state) is then how many
// bytes at least the output still needs (the budget check of token_masker.h).
//
// Thread rules: build on one thread; after Finalize every method is const and
// may be called from any thread.
#pragma once

#include <bitset>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace tern::grammar {

using ByteSet = std::bitset<256>;
using State = std::vector<int32_t>;

// The working memory of Grammar::Advance (the stack being advanced, the
// entries Expand pops and restores). Owned by whoever advances states over
// and over (a generation's constraint state, a mask walk) so that Advance
// allocates nothing once the vectors have grown; one per thread at a time.
struct AdvanceScratch {
  std::vector<int32_t> stack;
  std::vector<int32_t> popped;
};

struct Symbol {
  int32_t rule = -1;  // >= 0: reference to a rule; else the byte set
  ByteSet bytes;
  static Symbol Rule(int32_t r) { Symbol s; s.rule = r; return s; }
  static Symbol Byte(uint8_t b) { Symbol s; s.bytes.set(b); return s; }
  static Symbol Bytes(const ByteSet& set) { Symbol s; s.bytes = set; return s; }
};

using Sequence = std::vector<Symbol>;

// The symbols of a literal byte string.
Sequence Literal(std::string_view text);
// A byte set from ranges written like a regex class body: "a-z0-9_".
ByteSet Range(std::string_view spec);

inline constexpr int64_t kInfiniteBytes = int64_t{1} << 40;

class Grammar {
 public:
  // ---- building ----
  int32_t NewRule(std::string name);
  void AddAlternative(int32_t rule, Sequence seq);
  // Helpers returning a new rule.
  int32_t LiteralRule(std::string_view text);
  int32_t Choice(std::vector<Sequence> alternatives);
  int32_t Optional(Sequence seq);
  // min..max copies of item (max < 0: unbounded), no separator.
  int32_t Repeat(int32_t item, int32_t min, int32_t max);
  // min..max items separated by sep (max < 0: unbounded).
  int32_t SeparatedList(int32_t item, std::string_view sep, int32_t min, int32_t max);
  int32_t num_rules() const { return (int32_t)rules_.size(); }
  const std::string& rule_name(int32_t r) const { return names_[r]; }
  // Flattens, checks and computes the byte minimums. root: the start rule.
  Status Finalize(int32_t root);

  // ---- running (after Finalize) ----
  State Start() const;
  // The stacks of s that accept byte b, advanced past it (empty: rejected).
  // scratch: the caller's working memory (see AdvanceScratch).
  void Advance(const State& s, uint8_t b, State* out, AdvanceScratch* scratch) const;
  // As above with working memory of its own (allocated per call: tests,
  // one-off checks).
  void Advance(const State& s, uint8_t b, State* out) const;
  bool Accepts(std::string_view text) const;  // the whole text, from Start
  bool CanEnd(const State& s) const;
  // The bytes some stack of s accepts next.
  ByteSet NextBytes(const State& s) const;
  int64_t MinBytes(const State& s) const;
  int32_t num_elements() const { return (int32_t)elements_.size(); }

 private:
  enum Kind : uint8_t { kBytes, kRule, kEnd };
  struct Element {
    Kind kind;
    int32_t arg;  // kBytes: index into byte_sets_; kRule: rule id
  };

  Status CheckLeftRecursion() const;
  void ComputeMinBytes();
  // popped: Expand's own working memory (entries it pops and restores).
  void Expand(std::vector<int32_t>& stack, State* out, int depth,
              std::vector<int32_t>* popped) const;
  static void AddStack(const std::vector<int32_t>& stack, State* out);

  std::vector<std::string> names_;
  std::vector<std::vector<Sequence>> rules_;  // while building
  std::vector<Element> elements_;
  std::vector<ByteSet> byte_sets_;
  std::vector<std::vector<int32_t>> alt_starts_;  // per rule
  std::vector<int64_t> min_bytes_;                // per element: to its END
  std::vector<int64_t> rule_min_bytes_;
  int32_t root_ = -1;
};

}  // namespace tern::grammar
