// GrammarConstraint: a Grammar run over a model's vocabulary — the
// TokenConstraint (sample/token_constraint.h) that structured outputs use.
//
// Masking a step walks the TokenTrie from the request's grammar state,
// advancing the state byte by byte and pruning a subtree as soon as the
// grammar rejects its prefix. The resulting bit mask over the vocabulary is
// cached per grammar state (shared by every request of the same grammar), and
// inside a JSON string or a list the state repeats exactly, so most steps are
// a cache hit and cost one pass over the logits.
//
// Budget: every mask also records the most bytes any allowed token leaves to
// finish (MinBytes of the state after it). When the request's remaining
// tokens could not cover that, the step is masked again without the cache,
// keeping only tokens after which the grammar can finish with one byte per
// remaining token, so an output always completes within max_tokens (the
// vocabulary must hold the single bytes the grammar needs; byte-level and
// byte-fallback vocabularies do). FitsIn() tells at request time whether the
// grammar can finish within max_tokens at all.
//
// Jump-forward: while the grammar admits exactly one next byte, those bytes
// are forced; they are cut into the longest vocabulary tokens and appended
// without sampling.
//
// Thread rules: a GrammarConstraint may be shared across threads (the cache
// has a mutex); each state is used by one thread (the engine thread).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/token_trie.h"
#include "sample/token_constraint.h"

namespace tern::grammar {

struct TokenMask {
  std::vector<uint64_t> bits;   // allowed tokens (eog ids excluded)
  int64_t max_min_bytes = 0;    // max over allowed tokens of MinBytes(after it)
  bool Allowed(int32_t id) const { return (bits[id >> 6] >> (id & 63)) & 1; }
};

class GrammarConstraint : public TokenConstraint,
                          public std::enable_shared_from_this<GrammarConstraint> {
 public:
  GrammarConstraint(Grammar grammar, std::shared_ptr<const TokenTrie> trie);

  std::unique_ptr<TokenConstraintState> NewState() const override;
  // The fewest bytes a complete output has: with one byte per token at
  // worst, max_tokens must be at least this.
  int64_t MinOutputBytes() const { return grammar_.MinBytes(grammar_.Start()); }
  bool FitsIn(int32_t max_tokens) const { return MinOutputBytes() <= max_tokens; }

  const Grammar& grammar() const { return grammar_; }
  const TokenTrie& trie() const { return *trie_; }
  // The mask of a state: cached unless budget_bytes >= 0 (then only tokens
  // whose MinBytes after is <= budget_bytes, uncached).
  std::shared_ptr<const TokenMask> Mask(const State& s, int64_t budget_bytes) const;

  // Counters for benchmarks: masks computed (cache misses) and served.
  int64_t num_masks_computed() const;
  int64_t num_masks_served() const;

 private:
  std::shared_ptr<TokenMask> Compute(const State& s, int64_t budget_bytes) const;

  Grammar grammar_;
  std::shared_ptr<const TokenTrie> trie_;
  mutable std::mutex mu_;
  mutable std::unordered_map<std::string, std::shared_ptr<const TokenMask>> cache_;
  mutable int64_t num_computed_ = 0, num_served_ = 0;
};

}  // namespace tern::grammar
