// SamplingParams: how one request picks its next token. Plain record shared by
// the CLI, the engine and the server.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "sample/token_constraint.h"

namespace tern {

struct SamplingParams {
  float temperature = 1.0f;   // 0 = greedy
  int32_t top_k = 0;          // 0 = off
  float top_p = 1.0f;         // 1 = off
  float min_p = 0.0f;         // 0 = off
  float repetition_penalty = 1.0f;  // 1 = off (llama.cpp / CTRL style)
  float presence_penalty = 0.0f;    // OpenAI style
  float frequency_penalty = 0.0f;   // OpenAI style
  uint64_t seed = 0;          // per-request RNG seed
  bool has_seed = false;      // false: the engine picks a random seed
  int32_t max_tokens = 16;
  bool ignore_eos = false;
  std::vector<int32_t> stop_token_ids;  // besides the model's end-of-generation ids
  int32_t logprobs = -1;      // -1 = none; n >= 0: chosen + top-n alternatives
  // Structured output: only tokens the constraint allows (null: any).
  std::shared_ptr<const TokenConstraint> constraint;
};

}  // namespace tern
