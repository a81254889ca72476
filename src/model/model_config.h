// ModelConfig: hyper-parameters read from GGUF metadata (<arch>.*), with the
// format's defaults where a key is absent.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "gguf/gguf_file.h"

namespace tern {

struct ModelConfig {
  std::string arch;            // one of kSupportedArchitectures
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
  // Which layers use the window: 0 = every layer (mistral, phi3); P > 1 =
  // layer l is windowed unless l % P == P - 1 (gemma2: P = 2, the even
  // layers; gemma3: P = 6, five local layers then one global).
  // attention.sliding_window_pattern in the file, else the family's value.
  int32_t sliding_window_pattern = 0;
  float rope_freq_base_swa = 10000.0f;  // windowed layers' RoPE base (gemma3)
  bool tied_embeddings = false;    // output.weight absent

  // Family traits (set from arch; see docs/models.md).
  bool qk_norm = false;          // qwen3, gemma3: RMSNorm of each q/k head
  bool post_norms = false;       // gemma2/3: RMSNorm of attention and FFN outputs
  bool ffn_gelu = false;         // gemma: GeGLU (tanh GELU), else SwiGLU
  float embed_scale = 1.0f;      // gemma: sqrt(n_embd)
  float attn_scale = 0.0f;       // query scale; 0 = 1 / sqrt(head_dim)
  float attn_softcap = 0.0f;     // gemma2: cap * tanh(score / cap); 0 = none
  float final_softcap = 0.0f;    // gemma2: the same on the logits; 0 = none

  // True when layer l attends through the sliding window.
  bool LayerIsWindowed(int32_t layer) const {
    if (sliding_window <= 0) return false;
    if (sliding_window_pattern <= 0) return true;
    return layer % sliding_window_pattern < sliding_window_pattern - 1;
  }
  // The window of layer l (0 = it sees the whole context).
  int32_t LayerWindow(int32_t layer) const {
    return LayerIsWindowed(layer) ? sliding_window : 0;
  }
  int32_t NumWindowedLayers() const {
    int32_t n = 0;
    for (int32_t l = 0; l < n_layer; ++l) n += LayerIsWindowed(l);
    return n;
  }

  static StatusOr<ModelConfig> FromGguf(const gguf::GgufFile& file);
};

// KV bytes of one sequence of num_tokens when windowed_layers of num_layers
// keep only their last `window` positions; the naive figure is
// bytes_per_token x num_tokens:
//   bytes_per_token / num_layers
//     x ((num_layers - windowed_layers) x num_tokens + windowed_layers x min(num_tokens, window))
int64_t WindowedKvBytes(int64_t bytes_per_token, int32_t num_layers, int32_t windowed_layers,
                        int32_t window, int64_t num_tokens);

// The architectures Model::Load runs, for error messages:
// "llama, qwen2, qwen3, gemma2, gemma3, phi3".
inline constexpr const char* kSupportedArchitectures = "llama, qwen2, qwen3, gemma2, gemma3, phi3";
bool IsSupportedArchitecture(const std::string& arch);

// The one context check of every front end: a context of num_tokens (prompt
// + output) asked for through `flag` ("-c", "--max-model-len") must not pass
// the trained context (n_ctx_train; 0 = unknown, then anything goes):
// positions the model never saw in training give garbage, not an error.
// InvalidArgument "FLAG N exceeds the model's context length M (PATH)".
Status CheckContextLength(const ModelConfig& config, int64_t num_tokens, const std::string& flag,
                          const std::string& model_path);

}  // namespace tern
