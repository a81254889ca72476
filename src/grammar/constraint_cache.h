// ConstraintCache: compiled constraints by a canonical key (the kind and the
// schema text), so requests with the same schema share one GrammarConstraint
// and its mask cache. At most kMaxEntries grammars; the oldest goes first.
//
// Thread rules: any thread.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "base/status.h"
#include "grammar/grammar_constraint.h"

namespace tern::grammar {

class ConstraintCache {
 public:
  static constexpr size_t kMaxEntries = 16;  // x 16 MiB of masks at most each
  explicit ConstraintCache(std::shared_ptr<const TokenTrie> trie) : trie_(std::move(trie)) {}

  StatusOr<std::shared_ptr<const GrammarConstraint>> Get(
      const std::string& key, const std::function<StatusOr<Grammar>()>& compile);
  const TokenTrie& trie() const { return *trie_; }

 private:
  std::shared_ptr<const TokenTrie> trie_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<const GrammarConstraint>> entries_;
  std::deque<std::string> order_;
};

}  // namespace tern::grammar
