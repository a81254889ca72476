#include "grammar/constraint_cache.h"

namespace tern::grammar {

StatusOr<std::shared_ptr<const GrammarConstraint>> ConstraintCache::Get(
    const std::string& key, const std::function<StatusOr<Grammar>()>& compile) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(key);
    if (it != entries_.end()) return it->second;
  }
  // Compiled outside the lock; two racing requests may both compile.
  StatusOr<Grammar> g = compile();
  if (!g.ok()) return g.status();
  auto c = std::make_shared<const GrammarConstraint>(std::move(*g), trie_);
  std::lock_guard<std::mutex> lock(mu_);
  if (entries_.emplace(key, c).second) {
    order_.push_back(key);
    if (order_.size() > kMaxEntries) {
      entries_.erase(order_.front());
      order_.pop_front();
    }
  }
  return std::shared_ptr<const GrammarConstraint>(entries_.count(key) ? entries_[key] : c);
}

}  // namespace tern::grammar
