// Sampler: pure functions that pick the next token from one row of logits.
// No state: the caller passes the token history (for penalties) and a uniform
// draw u in [0, 1) from its own per-request Rng (sample/rng.h), so a request's
// tokens depend only on its logits, params and seed.
//
// Pipeline, in this order:
//   1. penalties on the tokens of `history` (the caller chooses which tokens
//      count, e.g. the generated ones, or prompt + generated):
//        repetition (CTRL style):  l > 0 ? l / r : l * r   (once per distinct token)
//        presence / frequency (OpenAI):  l -= presence * [count > 0] + frequency * count
//   2. temperature <= 0: greedy argmax (lowest id wins ties); stop here.
//   3. l / temperature, softmax.
//   4. top-k (keep the k most likely), top-p (the smallest most-likely prefix
//      whose mass reaches p), min-p (keep p_i >= min_p * p_max), each on the
//      renormalised survivors of the previous filter.
//   5. inverse-CDF draw with u over the survivors, ordered by (prob desc,
//      id asc) when a filter is set, else in id order (no sort).
//
// Log-probabilities (when params.logprobs >= 0) describe the model's raw
// distribution: log-softmax of the unpenalised logits at temperature 1, as
// OpenAI-compatible servers commonly report them; top alternatives ordered by
// (logprob desc, id asc).
//
// Thread rules: all functions are pure and reentrant.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sample/sampling_params.h"

namespace tern {

struct TokenAlternative {
  int32_t token_id = 0;
  float logprob = 0;
};

struct SampledToken {
  int32_t token_id = 0;
  float logprob = 0;                   // when params.logprobs >= 0, else 0
  std::vector<TokenAlternative> top;   // params.logprobs alternatives
};

struct TokenProb {
  int32_t token_id = 0;
  float prob = 0;
};

// Step 1 in place.
void ApplyPenalties(std::span<float> logits, const SamplingParams& params,
                    std::span<const int32_t> history);

// Steps 3-4 on already penalised logits (temperature > 0): the survivors with
// their renormalised probabilities, in the order step 5 walks them.
std::vector<TokenProb> FilteredDistribution(std::span<const float> logits,
                                            const SamplingParams& params);

// Argmax, lowest id on ties.
int32_t Argmax(std::span<const float> logits);

// The whole pipeline. logits: [n_vocab], not modified. u in [0, 1).
SampledToken SampleToken(std::span<const float> logits, const SamplingParams& params,
                         std::span<const int32_t> history, double u);

// Log-softmax of logits at token_id and the top n alternatives.
void ComputeLogprobs(std::span<const float> logits, int32_t token_id, int32_t n,
                     SampledToken* out);

}  // namespace tern
