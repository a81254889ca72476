// Proposer: what speculative decoding asks for once per engine step — up to
// k tokens that each speculating sequence will probably produce next. The
// engine verifies them in the same step with the target model (spec/verify.h),
// so a proposer can never change the output, only how fast it comes.
//
//   sequence: [ prompt ........ | output ... t ]   t: last token, not yet
//                                                     computed by the target
//   proposals:                                [ d1 d2 .. dk ]
//   step's rows for it:                    [ t d1 d2 .. dk ]   (k + 1 logits rows)
//
// Two proposers: NgramProposer (prompt lookup in the sequence itself) and
// DraftModelProposer (a small model with the same vocabulary).
//
// Thread rules: the engine thread only.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sample/rng.h"
#include "sample/sampler.h"
#include "sample/sampling_params.h"

namespace tern {

// How proposals are made (--speculative-method).
enum class SpecMethod { kNone, kNgram, kDraft };
const char* SpecMethodName(SpecMethod m);  // "none", "ngram", "draft"

struct ProposalRequest {
  std::string_view request_id;
  std::span<const int32_t> tokens;   // prompt + output so far
  int32_t num_prompt_tokens = 0;
  int32_t max_proposals = 0;         // k: propose at most this many
  const SamplingParams* sampling = nullptr;
  Rng* rng = nullptr;                // the proposer's own draws (draft sampling)

  // Filled by Propose.
  std::vector<int32_t> proposals;
  // Per proposal, the proposer's distribution q it was drawn from (sampling
  // only; the survivors of the same filters as the target's). Empty: each
  // proposal is a point mass (q = 1 on it), as n-gram proposals are.
  std::vector<std::vector<TokenProb>> q;
};

// Acceptance figures from the counters: acceptance rate = accepted /
// proposed; mean accepted length = tokens emitted per verification step =
// 1 + accepted / drafts (the target's own token included), 1 without drafts.
struct SpecSummary {
  int64_t drafts = 0;
  int64_t draft_tokens = 0;
  int64_t accepted_tokens = 0;
  double AcceptanceRate() const { return draft_tokens > 0 ? (double)accepted_tokens / draft_tokens : 0; }
  double MeanAcceptedLength() const { return drafts > 0 ? 1.0 + (double)accepted_tokens / drafts : 1; }
};

class Proposer {
 public:
  virtual ~Proposer() = default;
  virtual SpecMethod method() const = 0;
  // Fills proposals (and q) for every request; fewer than max_proposals, or
  // none, is always allowed.
  virtual void Propose(std::span<ProposalRequest> requests) = 0;
  // The request finished or was preempted: drop any state kept for it.
  virtual void Release(std::string_view request_id) {}
};

}  // namespace tern
