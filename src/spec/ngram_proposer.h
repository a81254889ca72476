// NgramProposer: prompt lookup. For n from ngram_max down to ngram_min, finds
// the latest earlier occurrence of the sequence's last n tokens in its own
// prompt + output and proposes the up to k tokens that followed it.
//
//   tokens: [ a b c d e a b c ]   last 3 = "a b c", seen at 0
//   proposals (k = 3):  d e a
//
// No model: a sequence that repeats its prompt (edits, summaries quoting the
// text, code) gets long accepted runs at no cost; elsewhere it proposes
// nothing. Proposals are point masses (q = 1).
//
// Thread rules: stateless; the engine thread only.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "spec/proposer.h"

namespace tern {

class NgramProposer : public Proposer {
 public:
  // 1 <= ngram_min <= ngram_max.
  NgramProposer(int32_t ngram_min, int32_t ngram_max);
  SpecMethod method() const override { return SpecMethod::kNgram; }
  void Propose(std::span<ProposalRequest> requests) override;

  // The proposals for one sequence (at most k).
  std::vector<int32_t> Lookup(std::span<const int32_t> tokens, int32_t k) const;

 private:
  int32_t ngram_min_;
  int32_t ngram_max_;
};

}  // namespace tern
