#include "spec/ngram_proposer.h"

#include <algorithm>

#include "base/check.h"

namespace tern {

const char* SpecMethodName(SpecMethod m) {
  switch (m) {
    case SpecMethod::kNone: return "none";
    case SpecMethod::kNgram: return "ngram";
    case SpecMethod::kDraft: return "draft";
  }
  return "none";
}

NgramProposer::NgramProposer(int32_t ngram_min, int32_t ngram_max)
    : ngram_min_(ngram_min), ngram_max_(ngram_max) {
  CHECK_GE(ngram_min_, 1);
  CHECK_GE(ngram_max_, ngram_min_);
}

std::vector<int32_t> NgramProposer::Lookup(std::span<const int32_t> tokens, int32_t k) const {
  const int64_t size = (int64_t)tokens.size();
  if (k <= 0) return {};
  for (int64_t n = std::min<int64_t>(ngram_max_, size - 1); n >= ngram_min_; --n) {
    std::span<const int32_t> pattern = tokens.subspan(size - n, n);
    // Latest start j < size - n whose n tokens equal the pattern (j + n <
    // size, so at least one token follows the match).
    for (int64_t j = size - n - 1; j >= 0; --j) {
      if (!std::equal(pattern.begin(), pattern.end(), tokens.begin() + j)) continue;
      const int64_t from = j + n;
      const int64_t to = std::min<int64_t>(size, from + k);
      return std::vector<int32_t>(tokens.begin() + from, tokens.begin() + to);
    }
  }
  return {};
}

void NgramProposer::Propose(std::span<ProposalRequest> requests) {
  for (ProposalRequest& r : requests) {
    r.proposals = Lookup(r.tokens, r.max_proposals);
    r.q.clear();
  }
}

}  // namespace tern
