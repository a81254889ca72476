// ModelConfig: hyper-parameters read from GGUF metadata (<arch>.*), with the
// format's defaults where a key is absent.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "gguf/gguf_file.h"

namespace tern {

struct ModelConfig {
  std::string arch;            // "llama", "qwen2"
  std::string name;            // general.name
  int32_t n_vocab = 0;
  int32_t n_ctx_train = 0;     // <arch>.context_length
  int32_t n_embd = 0;
  int32_t n_layer = 0;
  int32_t n_head = 0;
  int32_t n_head_kv = 0;
  int32_t head_dim = 0;        // n_embd / n_head unless attention.key_length says
  int32_t n_ff = 0;
  float rms_eps = 1e-5f;
  float rope_freq_base = 10000.0f;
  int32_t rope_dim = 0;        // rope.dimension_count (default head_dim)
  bool rope_neox = false;      // qwen2: rotate halves, not pairs
  std::string rope_scaling_type;  // "", "linear", "yarn", "llama3"
  float rope_freq_scale = 1.0f;   // 1 / rope.scaling.factor for linear
  float rope_scaling_factor = 1.0f;
  int32_t rope_orig_ctx = 0;       // rope.scaling.original_context_length
  int32_t sliding_window = 0;      // 0 = none
  bool tied_embeddings = false;    // output.weight absent

  static StatusOr<ModelConfig> FromGguf(const gguf::GgufFile& file);
};

// The one context check of every front end: a context of num_tokens (prompt
// + output) asked for through `flag` ("-c", "--max-model-len") must not pass
// the trained context (n_ctx_train; 0 = unknown, then anything goes):
// positions the model never saw in training give garbage, not an error.
// InvalidArgument "FLAG N exceeds the model's context length M (PATH)".
Status CheckContextLength(const ModelConfig& config, int64_t num_tokens, const std::string& flag,
                          const std::string& model_path);

}  // namespace tern
