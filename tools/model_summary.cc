#include "tools/model_summary.h"

#include <cmath>
#include <cstdio>
#include <vector>

#include "base/progress.h"
#include "kv/kv_config.h"

namespace tern {
namespace {

std::string Format(const char* fmt, double a, double b = 0, double c = 0) {
  char buf[160];
  std::snprintf(buf, sizeof buf, fmt, a, b, c);
  return buf;
}

std::string Line(const std::string& key, const std::string& value) {
  std::string k = key + ":";
  if (k.size() < 18) k.resize(18, ' ');
  return "  " + k + value + "\n";
}

}  // namespace

std::string KvBytesLine(const ModelConfig& c, int64_t num_tokens, DType kv_dtype) {
  const int64_t per_token = KvBytesPerToken(c.n_layer, c.n_head_kv, c.head_dim, kv_dtype, kv_dtype);
  const double naive = (double)per_token * (double)num_tokens;
  if (c.NumWindowedLayers() == 0) return "naive " + FormatBytes(naive) + " (no sliding window)";
  const double windowed = (double)WindowedKvBytes(per_token, c.n_layer, c.NumWindowedLayers(),
                                                  c.sliding_window, num_tokens);
  return "naive " + FormatBytes(naive) + ", windowed " + FormatBytes(windowed) + " (" +
         std::to_string(c.NumWindowedLayers()) + " of " + std::to_string(c.n_layer) +
         " layers keep only the last " + std::to_string(c.sliding_window) + " positions)";
}

std::string ModelSummary(const ModelConfig& c, const gguf::GgufFile& f) {
  std::string s;
  s += Line("architecture", c.arch);
  s += Line("layers", std::to_string(c.n_layer) + ", embedding " + std::to_string(c.n_embd) +
                          ", feed-forward " + std::to_string(c.n_ff) + ", vocab " +
                          std::to_string(c.n_vocab));
  s += Line("heads", std::to_string(c.n_head) + " (" + std::to_string(c.n_head_kv) +
                         " KV), head dim " + std::to_string(c.head_dim));
  s += Line("context", std::to_string(c.n_ctx_train) + " tokens (trained)");
  std::string base = Format("%g", c.rope_freq_base);
  if (c.NumWindowedLayers() > 0 && (c.arch == "gemma3" || c.rope_freq_base_swa != c.rope_freq_base)) {
    base += Format(" (windowed layers %g)", c.rope_freq_base_swa);
  }
  s += Line("rope base", base);
  s += Line("rope", std::string(c.rope_neox ? "neox" : "normal") + ", dim " +
                        std::to_string(c.rope_dim) +
                        (c.rope_scaling_type.empty() ? "" : ", scaling " + c.rope_scaling_type +
                                                                Format(" x%g", c.rope_scaling_factor)));
  if (c.sliding_window > 0) {
    std::string w = std::to_string(c.sliding_window) + " tokens on " +
                    std::to_string(c.NumWindowedLayers()) + " of " + std::to_string(c.n_layer) +
                    " layers";
    if (c.sliding_window_pattern > 0) w += " (pattern " + std::to_string(c.sliding_window_pattern) + ")";
    s += Line("sliding window", w);
  } else {
    s += Line("sliding window", "none");
  }
  if (c.attn_softcap > 0 || c.final_softcap > 0) {
    s += Line("soft-capping", Format("attention %g, final %g", c.attn_softcap, c.final_softcap));
  }
  if (c.embed_scale != 1.0f) s += Line("embedding scale", Format("%g", c.embed_scale));
  const float q_scale = c.attn_scale > 0 ? c.attn_scale : 1.0f / std::sqrt((float)c.head_dim);
  s += Line("query scale", Format("%g", q_scale));
  std::vector<std::string> traits;
  if (c.qk_norm) traits.push_back("qk-norm");
  if (c.post_norms) traits.push_back("post-norms");
  traits.push_back(c.ffn_gelu ? "GeGLU" : "SwiGLU");
  if (f.FindTensor("blk.0.attn_qkv.weight")) traits.push_back("fused QKV");
  if (!f.FindTensor("blk.0.ffn_gate.weight")) traits.push_back("fused gate-up");
  if (c.arch == "qwen2") traits.push_back("QKV bias");
  if (c.tied_embeddings) traits.push_back("tied embeddings");
  std::string t;
  for (const std::string& x : traits) t += (t.empty() ? "" : ", ") + x;
  s += Line("traits", t);
  s += Line("KV at context", KvBytesLine(c, c.n_ctx_train, DType::kF16) + " at f16, one sequence");
  return s;
}

}  // namespace tern
