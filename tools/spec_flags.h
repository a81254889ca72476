// Speculative-decoding flags shared by `tern serve`, `tern batch` and
// `tern generate` (docs/speculative.md):
//
//   --speculative-method draft|ngram   (draft is implied by --speculative-model)
//   --speculative-model DRAFT.gguf     (same vocabulary as the model)
//   --num-speculative-tokens K         (1..64; default 4 when speculation is on)
//   --ngram-max N --ngram-min M        (ngram only; default 4 and 1)
//   --speculative-adaptive on|off      (default on)
//
// Inconsistent combinations (ngram flags without ngram, a draft model with
// ngram, K without any method) are errors naming the flags.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "engine/engine.h"
#include "tools/arg_parser.h"

namespace tern {

struct SpecFlags {
  std::string method;       // "" = from --speculative-model (draft) or off
  std::string model;
  int64_t num_tokens = -1;  // -1 = not given
  int64_t ngram_max = -1;
  int64_t ngram_min = -1;
  std::string adaptive = "on";

  // Fills the speculative fields of config (errors name the flags).
  Status Apply(EngineConfig* config) const;
};

void AddSpecFlags(ArgParser& parser, SpecFlags* flags);

}  // namespace tern
