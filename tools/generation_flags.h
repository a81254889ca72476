// The flags `tern generate` and `tern chat` share, registered, documented and
// validated in one place (after parsing, each error names its flag):
//   sampling   --temp --top-k --top-p --min-p --repeat-penalty
//              --presence-penalty --frequency-penalty --seed
//              (defaults: the one table, sample/defaults.h)
//   length     -n (tokens per reply; -1 = until end of text or context),
//              -c (context; above the model's trained context is refused)
//   text       --stop (repeatable; cut by StopMatcher, as the server does)
//   chat       --chat-template NAME|FILE, --system TEXT
//   KV         --kv-cache-dtype[-k|-v] f16|bf16|f32|q8_0|q4_0 (tools/kv_dtype_flags.h)
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "base/status.h"
#include "model/model_config.h"
#include "sample/defaults.h"
#include "sample/sampling_params.h"
#include "tensor/dtype.h"
#include "tools/arg_parser.h"
#include "tools/kv_dtype_flags.h"

namespace tern {

// Context when -c is not given: the model's trained context, at most this
// (a 128K-context model would otherwise reserve gigabytes of KV up front).
inline constexpr int32_t kCliMaxDefaultContext = 4096;

struct GenerationFlags {
  static constexpr int64_t kUnset = std::numeric_limits<int64_t>::min();

  double temperature = defaults::kTemperature;
  int64_t top_k = defaults::kTopK;
  double top_p = defaults::kTopP;
  double min_p = defaults::kMinP;
  double repeat_penalty = defaults::kRepetitionPenalty;
  double presence_penalty = defaults::kPresencePenalty;
  double frequency_penalty = defaults::kFrequencyPenalty;
  int64_t seed = -1;  // -1: random
  int64_t max_tokens = defaults::kMaxTokensUntilContext;
  int64_t ctx = kUnset;
  std::vector<std::string> stop;
  std::string chat_template;  // "" = the model's own
  std::string system;
  KvDtypeFlags kv;  // kv.k_dtype / kv.v_dtype, resolved by the checks

  // Sampling fields, seed (has_seed when --seed was given) and -n as
  // max_tokens (-1 stays -1: the caller fills in the room left).
  SamplingParams ToSamplingParams() const;

  // -c, or min(trained context, kCliMaxDefaultContext) when absent (the
  // trained context unknown: kCliMaxDefaultContext). -c above the trained
  // context is an error (CheckContextLength, as serve's --max-model-len).
  StatusOr<int32_t> ResolveContext(const ModelConfig& config, const std::string& model_path) const;
  // The same for the model file at model_path, from its header
  // (Model::ReadConfig: an unsupported architecture is named), before an
  // engine loads it.
  StatusOr<int32_t> ResolveContext(const std::string& model_path) const;
};

// Registers every flag above with its checks. reply_noun says what -n counts
// ("the reply", "the continuation") in the help text.
void AddGenerationFlags(ArgParser& parser, GenerationFlags* flags, const std::string& reply_noun);

// The paragraph --help shows about defaults (OpenAI's, and the llama.cpp set).
std::string SamplingDefaultsHelp();

}  // namespace tern
