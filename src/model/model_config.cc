#include "model/model_config.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace tern {
namespace {

// Reads a required positive integer key "<arch>.<suffix>".
StatusOr<int32_t> RequiredInt(const gguf::GgufFile& file, const std::string& key) {
  std::optional<int64_t> v = file.GetInt(key);
  if (!v) return NotFound(file.path() + ": missing metadata key '" + key + "'");
  if (*v <= 0 || *v > (int64_t)1 << 30) {
    return InvalidArgument(file.path() + ": metadata key '" + key + "' has value " +
                           std::to_string(*v) + ", expected a positive count");
  }
  return (int32_t)*v;
}

int32_t OptionalInt(const gguf::GgufFile& file, const std::string& key, int32_t def) {
  std::optional<int64_t> v = file.GetInt(key);
  return v ? (int32_t)*v : def;
}

float OptionalFloat(const gguf::GgufFile& file, const std::string& key, float def) {
  std::optional<double> v = file.GetFloat(key);
  return v ? (float)*v : def;
}

StatusOr<int32_t> VocabSize(const gguf::GgufFile& file) {
  if (const gguf::Value* tokens = file.Find("tokenizer.ggml.tokens");
      tokens && tokens->type == gguf::ValueType::kArray && !tokens->array.empty()) {
    return (int32_t)tokens->array.size();
  }
  for (const char* name : {"token_embd.weight", "output.weight"}) {
    const gguf::TensorInfo* t = file.FindTensor(name);
    if (t && t->shape.size() == 2) return (int32_t)t->shape[1];
  }
  return NotFound(file.path() +
                  ": cannot tell the vocabulary size (no tokenizer.ggml.tokens and no "
                  "token_embd.weight)");
}

// What the family does beyond the llama recipe (see ModelConfig's traits).
Status SetFamilyTraits(const gguf::GgufFile& file, ModelConfig* c) {
  const std::string p = c->arch + ".";
  const bool gemma = c->arch == "gemma2" || c->arch == "gemma3";
  c->qk_norm = c->arch == "qwen3" || c->arch == "gemma3";
  c->post_norms = gemma;
  c->ffn_gelu = gemma;
  c->embed_scale = gemma ? std::sqrt((float)c->n_embd) : 1.0f;
  if (gemma) {
    // The largest gemma2/gemma3 models scale queries by n_embd / n_head, not
    // head_dim (the files do not say; the layer count tells the model).
    const bool big = (c->arch == "gemma2" && c->n_layer == 46) ||
                     (c->arch == "gemma3" && c->n_layer == 62);
    c->attn_scale = 1.0f / std::sqrt(big ? (float)(c->n_embd / c->n_head) : (float)c->head_dim);
  }
  if (c->arch == "gemma2") {
    c->attn_softcap = OptionalFloat(file, p + "attn_logit_softcapping", 50.0f);
    c->final_softcap = OptionalFloat(file, p + "final_logit_softcapping", 30.0f);
  } else if (c->arch == "gemma3") {
    c->final_softcap = OptionalFloat(file, p + "final_logit_softcapping", 0.0f);
  }
  if (c->attn_softcap < 0 || c->final_softcap < 0) {
    return InvalidArgument(file.path() + ": logit soft-capping must not be negative");
  }
  c->sliding_window_pattern = OptionalInt(file, p + "attention.sliding_window_pattern",
                                          c->arch == "gemma2"   ? 2
                                          : c->arch == "gemma3" ? 6
                                                                : 0);
  if (c->sliding_window_pattern < 0) {
    return InvalidArgument(file.path() + ": attention.sliding_window_pattern must not be negative");
  }
  c->rope_freq_base_swa = OptionalFloat(file, p + "rope.freq_base_swa",
                                        c->arch == "gemma3" ? 10000.0f : c->rope_freq_base);
  return Status::Ok();
}

}  // namespace

int64_t WindowedKvBytes(int64_t bytes_per_token, int32_t num_layers, int32_t windowed_layers,
                        int32_t window, int64_t num_tokens) {
  if (num_layers <= 0 || window <= 0) return bytes_per_token * num_tokens;
  const int64_t per_layer_token = bytes_per_token / num_layers;
  return per_layer_token * ((int64_t)(num_layers - windowed_layers) * num_tokens +
                            (int64_t)windowed_layers * std::min<int64_t>(num_tokens, window));
}

bool IsSupportedArchitecture(const std::string& arch) {
  for (const char* a : {"llama", "qwen2", "qwen3", "gemma2", "gemma3", "phi3"}) {
    if (arch == a) return true;
  }
  return false;
}

StatusOr<ModelConfig> ModelConfig::FromGguf(const gguf::GgufFile& file) {
  ModelConfig c;
  std::optional<std::string> arch = file.GetString("general.architecture");
  if (!arch) return NotFound(file.path() + ": missing metadata key 'general.architecture'");
  c.arch = *arch;
  c.name = file.GetString("general.name").value_or("");
  const std::string p = c.arch + ".";

  TERN_ASSIGN_OR_RETURN(c.n_ctx_train, RequiredInt(file, p + "context_length"));
  TERN_ASSIGN_OR_RETURN(c.n_embd, RequiredInt(file, p + "embedding_length"));
  TERN_ASSIGN_OR_RETURN(c.n_layer, RequiredInt(file, p + "block_count"));
  TERN_ASSIGN_OR_RETURN(c.n_ff, RequiredInt(file, p + "feed_forward_length"));
  TERN_ASSIGN_OR_RETURN(c.n_head, RequiredInt(file, p + "attention.head_count"));
  c.n_head_kv = c.n_head;
  if (file.Find(p + "attention.head_count_kv")) {
    TERN_ASSIGN_OR_RETURN(c.n_head_kv, RequiredInt(file, p + "attention.head_count_kv"));
  }
  if (c.n_head % c.n_head_kv != 0) {
    return InvalidArgument(file.path() + ": attention.head_count " + std::to_string(c.n_head) +
                           " is not a multiple of attention.head_count_kv " +
                           std::to_string(c.n_head_kv));
  }
  if (file.Find(p + "attention.key_length")) {
    TERN_ASSIGN_OR_RETURN(c.head_dim, RequiredInt(file, p + "attention.key_length"));
  } else {
    if (c.n_embd % c.n_head != 0) {
      return InvalidArgument(file.path() + ": embedding_length " + std::to_string(c.n_embd) +
                             " is not a multiple of attention.head_count " +
                             std::to_string(c.n_head));
    }
    c.head_dim = c.n_embd / c.n_head;
  }
  if (int32_t v_len = OptionalInt(file, p + "attention.value_length", c.head_dim);
      v_len != c.head_dim) {
    return Unimplemented(file.path() + ": attention.value_length " + std::to_string(v_len) +
                         " differs from key_length " + std::to_string(c.head_dim) +
                         " (not supported)");
  }
  c.rms_eps = OptionalFloat(file, p + "attention.layer_norm_rms_epsilon", 1e-5f);
  c.rope_freq_base = OptionalFloat(file, p + "rope.freq_base", 10000.0f);
  c.rope_dim = OptionalInt(file, p + "rope.dimension_count", c.head_dim);
  if (c.rope_dim <= 0 || c.rope_dim > c.head_dim || c.rope_dim % 2 != 0) {
    return InvalidArgument(file.path() + ": rope.dimension_count " + std::to_string(c.rope_dim) +
                           " must be even and in (0, head_dim " + std::to_string(c.head_dim) +
                           "]");
  }
  c.rope_neox = c.arch != "llama";
  c.rope_scaling_type = file.GetString(p + "rope.scaling.type").value_or("");
  if (c.rope_scaling_type == "none") c.rope_scaling_type = "";
  c.rope_scaling_factor = OptionalFloat(file, p + "rope.scaling.factor", 1.0f);
  // Older files store only rope.scale_linear.
  if (!file.Find(p + "rope.scaling.factor") && file.Find(p + "rope.scale_linear")) {
    c.rope_scaling_factor = OptionalFloat(file, p + "rope.scale_linear", 1.0f);
    if (c.rope_scaling_type.empty() && c.rope_scaling_factor != 1.0f) c.rope_scaling_type = "linear";
  }
  if (c.rope_scaling_factor <= 0) {
    return InvalidArgument(file.path() + ": rope.scaling.factor must be positive");
  }
  if (c.rope_scaling_type == "linear") c.rope_freq_scale = 1.0f / c.rope_scaling_factor;
  c.rope_orig_ctx = OptionalInt(file, p + "rope.scaling.original_context_length", 0);
  c.sliding_window = OptionalInt(file, p + "attention.sliding_window", c.arch == "gemma2" ? 4096 : 0);
  if (c.sliding_window < 0) c.sliding_window = 0;
  TERN_RETURN_IF_ERROR(SetFamilyTraits(file, &c));
  TERN_ASSIGN_OR_RETURN(c.n_vocab, VocabSize(file));
  c.tied_embeddings = file.FindTensor("output.weight") == nullptr;
  return c;
}

Status CheckContextLength(const ModelConfig& config, int64_t num_tokens, const std::string& flag,
                          const std::string& model_path) {
  if (config.n_ctx_train <= 0 || num_tokens <= config.n_ctx_train) return Status::Ok();
  return InvalidArgument(flag + " " + std::to_string(num_tokens) +
                         " exceeds the model's context length " +
                         std::to_string(config.n_ctx_train) + " (" + model_path + ")");
}

}  // namespace tern
