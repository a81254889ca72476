// Verification of proposals against the target model's logits, exact: the
// tokens it returns are distributed exactly as if the target had produced
// them one at a time.
//
// Rows: logits of the target at the k + 1 positions [t d1 .. dk] (row i
// predicts the token after d_i; row 0 the token after t).
//
//   greedy (temperature <= 0 or top_k == 1): accept d_{i+1} while the
//     target's argmax of row i (penalties applied) equals it; the first
//     mismatch is replaced by the argmax, and when all k match the argmax of
//     row k follows (the bonus token). Equal to decoding without
//     speculation, bit for bit.
//   sampling: the rejection-sampling rule. p = the target's distribution at
//     row i after every sampling parameter (penalties on the history
//     including the accepted proposals, temperature, top-k, top-p, min-p);
//     q = the proposer's distribution after the same parameters (a point
//     mass for n-gram proposals). Accept d with probability min(1, p(d)/q(d));
//     on rejection draw from norm(max(0, p - q)) and stop; when all k are
//     accepted draw the bonus token from p at row k.
//
// Random draws come from the request's own Rng: greedy takes one per emitted
// token (as the non-speculative sampler does), sampling one per acceptance
// test and one per drawn token.
//
// Thread rules: pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sample/rng.h"
#include "sample/sampler.h"
#include "sample/sampling_params.h"

namespace tern {

struct VerifyResult {
  // Emitted tokens: the accepted proposals, then one token from the target.
  std::vector<int32_t> tokens;
  int32_t num_accepted = 0;  // leading proposals kept (tokens.size() - 1)
};

// logits: [(proposals.size() + 1) x n_vocab]; q: per proposal, or empty for
// point masses; history: the output so far (penalties).
VerifyResult VerifyProposals(std::span<const float> logits, int32_t n_vocab,
                             std::span<const int32_t> proposals,
                             std::span<const std::vector<TokenProb>> q,
                             const SamplingParams& params, std::span<const int32_t> history,
                             Rng& rng);

// The target's distribution after every sampling parameter (sampling only):
// penalties on history, then FilteredDistribution.
std::vector<TokenProb> TargetDistribution(std::span<const float> logits,
                                          const SamplingParams& params,
                                          std::span<const int32_t> history);

// Draws from probs (already normalised) by inverse CDF with u in [0, 1).
int32_t DrawFrom(std::span<const TokenProb> probs, double u);

inline bool IsGreedy(const SamplingParams& p) { return p.temperature <= 0.0f || p.top_k == 1; }

}  // namespace tern
