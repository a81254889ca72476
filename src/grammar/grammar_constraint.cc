#include "grammar/grammar_constraint.h"

#include <algorithm>
#include <array>
#include <cmath>

namespace tern::grammar {
namespace {

// Mask cache budget per grammar (4 KiB a mask at 32k tokens, 19 KiB at 152k).
constexpr size_t kMaxCachedMaskBytes = 16u << 20;
constexpr size_t kMaxForcedBytes = 256;

std::string Key(const State& s) {
  return std::string(reinterpret_cast<const char*>(s.data()), s.size() * sizeof(int32_t));
}

class GrammarState : public TokenConstraintState {
 public:
  explicit GrammarState(std::shared_ptr<const GrammarConstraint> c)
      : c_(std::move(c)), state_(c_->grammar().Start()) {
    UpdateComplete();
  }

  void MaskLogits(std::span<float> logits, int32_t remaining_tokens) override {
    const Grammar& g = c_->grammar();
    const TokenTrie& trie = c_->trie();
    const int64_t budget = std::max<int64_t>(remaining_tokens - 1, 0);
    std::shared_ptr<const TokenMask> mask;
    if (!failed_ && !complete_) {
      mask = c_->Mask(state_, -1);
      if (mask->max_min_bytes > budget) mask = c_->Mask(state_, budget);
    }
    const int32_t n = std::min<int32_t>((int32_t)logits.size(), trie.vocab_size());
    bool any = false;
    for (int32_t id = 0; id < n; ++id) {
      if (mask && mask->Allowed(id)) {
        any = true;
      } else {
        logits[id] = -INFINITY;
      }
    }
    for (size_t id = n; id < logits.size(); ++id) logits[id] = -INFINITY;
    // End of generation: when the output may end here (or nothing else can
    // come, which only a vocabulary without the needed bytes causes).
    const bool can_end = failed_ || complete_ || g.CanEnd(state_) || !any;
    if (can_end && !trie.eog_ids().empty()) {
      const int32_t eog = trie.eog_ids()[0];
      if (eog < (int32_t)logits.size() && std::isinf(logits[eog])) logits[eog] = 0;
    }
  }

  void Accept(int32_t token) override {
    const TokenTrie& trie = c_->trie();
    if (std::count(trie.eog_ids().begin(), trie.eog_ids().end(), token)) {
      complete_ = true;
      return;
    }
    if (failed_ || complete_ || token < 0 || token >= trie.vocab_size()) {
      failed_ = true;
      return;
    }
    if (!AdvanceBytes(trie.piece(token))) failed_ = true;
    UpdateComplete();
  }

  std::vector<int32_t> ForcedTokens(int32_t max_tokens) override {
    std::vector<int32_t> out;
    if (failed_ || complete_) return out;
    const Grammar& g = c_->grammar();
    std::string forced;
    State s = state_, next;
    while (forced.size() < kMaxForcedBytes && !g.CanEnd(s)) {
      const ByteSet bytes = g.NextBytes(s);
      if (bytes.count() != 1) break;
      uint8_t b = 0;
      while (!bytes[b]) ++b;
      forced += (char)b;
      g.Advance(s, b, &next, &advance_scratch_);
      s.swap(next);
    }
    std::string_view rest(forced);
    while (!rest.empty() && (int32_t)out.size() < max_tokens) {
      size_t len = 0;
      const int32_t id = c_->trie().LongestPrefixToken(rest, &len);
      if (id < 0) break;
      out.push_back(id);
      Accept(id);
      rest.remove_prefix(len);
    }
    return out;
  }

  bool IsComplete() const override { return complete_; }

 private:
  bool AdvanceBytes(std::string_view bytes) {
    const Grammar& g = c_->grammar();
    for (char c : bytes) {
      g.Advance(state_, (uint8_t)c, &scratch_, &advance_scratch_);
      if (scratch_.empty()) return false;
      state_.swap(scratch_);
    }
    return true;
  }
  void UpdateComplete() {
    const Grammar& g = c_->grammar();
    if (!failed_ && g.CanEnd(state_) && g.NextBytes(state_).none()) complete_ = true;
  }

  std::shared_ptr<const GrammarConstraint> c_;
  State state_, scratch_;
  AdvanceScratch advance_scratch_;
  bool complete_ = false;
  bool failed_ = false;  // a token the grammar rejects was forced on us
};

}  // namespace

GrammarConstraint::GrammarConstraint(Grammar grammar, std::shared_ptr<const TokenTrie> trie)
    : grammar_(std::move(grammar)), trie_(std::move(trie)) {}

std::unique_ptr<TokenConstraintState> GrammarConstraint::NewState() const {
  return std::make_unique<GrammarState>(shared_from_this());
}

std::shared_ptr<const TokenMask> GrammarConstraint::Mask(const State& s, int64_t budget_bytes) const {
  if (budget_bytes >= 0) return Compute(s, budget_bytes);
  const std::string key = Key(s);
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++num_served_;
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
  }
  std::shared_ptr<const TokenMask> mask = Compute(s, -1);
  std::lock_guard<std::mutex> lock(mu_);
  ++num_computed_;
  if ((cache_.size() + 1) * mask->bits.size() * sizeof(uint64_t) > kMaxCachedMaskBytes) cache_.clear();
  cache_.emplace(key, mask);
  return mask;
}

namespace {

// The automaton's states met during one mask walk, interned, with their
// transitions filled in on first use: inside a string or a list most trie
// nodes lead back to a handful of states, so the walk is table lookups.
class LazyDfa {
 public:
  explicit LazyDfa(const Grammar& g) : g_(g) {}

  int32_t Intern(const State& s) {
    auto [it, added] = ids_.emplace(Key(s), (int32_t)states_.size());
    if (added) {
      states_.push_back(s);
      next_.emplace_back();
      next_.back().fill(kUnknown);
      min_bytes_.push_back(g_.MinBytes(s));
      next_bytes_.push_back(g_.NextBytes(s));
    }
    return it->second;
  }
  // -1: the byte is rejected.
  int32_t Step(int32_t id, uint8_t b) {
    int32_t& n = next_[id][b];
    if (n == kUnknown) {
      g_.Advance(states_[id], b, &scratch_, &advance_scratch_);
      const int32_t v = scratch_.empty() ? -1 : Intern(scratch_);
      next_[id][b] = v;  // next_ may have grown: index again
      return v;
    }
    return n;
  }
  int64_t min_bytes(int32_t id) const { return min_bytes_[id]; }
  const ByteSet& next_bytes(int32_t id) const { return next_bytes_[id]; }

 private:
  static constexpr int32_t kUnknown = -2;
  const Grammar& g_;
  std::unordered_map<std::string, int32_t> ids_;
  std::vector<State> states_;
  std::vector<std::array<int32_t, 256>> next_;
  std::vector<int64_t> min_bytes_;
  std::vector<ByteSet> next_bytes_;
  State scratch_;
  AdvanceScratch advance_scratch_;
};

}  // namespace

std::shared_ptr<TokenMask> GrammarConstraint::Compute(const State& s, int64_t budget_bytes) const {
  auto mask = std::make_shared<TokenMask>();
  mask->bits.assign((trie_->vocab_size() + 63) / 64, 0);
  const std::vector<TokenTrie::Node>& nodes = trie_->nodes();
  const std::vector<int32_t>& ids = trie_->token_ids();
  LazyDfa dfa(grammar_);
  struct Frame {
    int32_t node;
    int32_t next_child;
    int32_t state;  // dfa id after the node's bytes
  };
  std::vector<Frame> stack;
  stack.push_back({0, nodes[0].children_begin, dfa.Intern(s)});
  while (!stack.empty()) {
    Frame& f = stack.back();
    if (f.next_child >= nodes[f.node].children_end) {
      stack.pop_back();
      continue;
    }
    const int32_t child = f.next_child++;
    const uint8_t b = nodes[child].byte;
    if (!dfa.next_bytes(f.state)[b]) continue;
    const int32_t st = dfa.Step(f.state, b);
    if (st < 0) continue;
    const TokenTrie::Node& n = nodes[child];
    if (n.tokens_end > n.tokens_begin) {
      const int64_t need = dfa.min_bytes(st);
      if (budget_bytes < 0 || need <= budget_bytes) {
        mask->max_min_bytes = std::max(mask->max_min_bytes, need);
        for (int32_t t = n.tokens_begin; t < n.tokens_end; ++t) {
          mask->bits[ids[t] >> 6] |= uint64_t{1} << (ids[t] & 63);
        }
      }
    }
    if (n.children_end > n.children_begin) stack.push_back({child, n.children_begin, st});
  }
  return mask;
}

int64_t GrammarConstraint::num_masks_computed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return num_computed_;
}

int64_t GrammarConstraint::num_masks_served() const {
  std::lock_guard<std::mutex> lock(mu_);
  return num_served_;
}

}  // namespace tern::grammar
