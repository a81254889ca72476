#include "model/llama_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "base/check.h"
#include "base/fp16.h"
#include "quant/quant.h"

namespace tern {
namespace {

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

// out[t] = x[t] / rms(x[t]) * w, over num_tokens rows of n.
void RmsNorm(const float* x, const float* w, int64_t num_tokens, int64_t n, float eps,
             float* out) {
  for (int64_t t = 0; t < num_tokens; ++t) {
    const float* xt = x + t * n;
    float* ot = out + t * n;
    double ss = 0;
    for (int64_t i = 0; i < n; ++i) ss += (double)xt[i] * xt[i];
    const float scale = (float)(1.0 / std::sqrt(ss / n + eps));
    for (int64_t i = 0; i < n; ++i) ot[i] = xt[i] * scale * w[i];
  }
}

void AddBias(float* x, const float* b, int64_t num_tokens, int64_t n) {
  if (!b) return;
  for (int64_t t = 0; t < num_tokens; ++t)
    for (int64_t i = 0; i < n; ++i) x[t * n + i] += b[i];
}

void AddInPlace(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

// gate[i] = silu(gate[i]) * up[i]
void SwiGlu(float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    gate[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

}  // namespace

StatusOr<std::unique_ptr<Model>> LlamaModel::Create(std::unique_ptr<gguf::GgufFile> file,
                                                    const ModelConfig& config) {
  std::unique_ptr<LlamaModel> model(new LlamaModel());
  model->file_ = std::move(file);
  model->config_ = config;
  TERN_RETURN_IF_ERROR(model->BindWeights());
  return std::unique_ptr<Model>(std::move(model));
}

Status LlamaModel::BindMatrix(const std::string& name, int64_t rows, int64_t cols,
                              Weight* out) {
  const gguf::TensorInfo* t = file_->FindTensor(name);
  if (!t) return NotFound(file_->path() + ": missing tensor '" + name + "'");
  const std::vector<int64_t> want = {cols, rows};
  if (t->shape != want) {
    return InvalidArgument(file_->path() + ": tensor '" + name + "' has shape " +
                           ShapeString(t->shape) + ", expected " + ShapeString(want));
  }
  if (!quant::CanDequantize(t->dtype)) {
    return Unimplemented(file_->path() + ": tensor '" + name + "' has type " +
                         DTypeName(t->dtype) + ", which is not supported");
  }
  if (cols % BlockSize(t->dtype) != 0) {
    return InvalidArgument(file_->path() + ": tensor '" + name + "' rows of " +
                           std::to_string(cols) + " do not fit blocks of " +
                           std::to_string(BlockSize(t->dtype)) + " (" +
                           DTypeName(t->dtype) + ")");
  }
  out->view = kernels::WeightView{t->dtype, t->data, rows, cols};
  out->name = name;
  return Status::Ok();
}

Status LlamaModel::BindVector(const std::string& name, int64_t n, bool optional,
                              const float** out) {
  const gguf::TensorInfo* t = file_->FindTensor(name);
  if (!t) {
    if (optional) return Status::Ok();
    return NotFound(file_->path() + ": missing tensor '" + name + "'");
  }
  if (t->shape != std::vector<int64_t>{n}) {
    return InvalidArgument(file_->path() + ": tensor '" + name + "' has shape " +
                           ShapeString(t->shape) + ", expected " + ShapeString({n}));
  }
  if (t->dtype == DType::kF32) {
    *out = reinterpret_cast<const float*>(t->data);
    return Status::Ok();
  }
  if (!quant::CanDequantize(t->dtype) || n % BlockSize(t->dtype) != 0) {
    return Unimplemented(file_->path() + ": tensor '" + name + "' has type " +
                         DTypeName(t->dtype) + ", which is not supported for a vector");
  }
  owned_vectors_.push_back(std::make_unique<std::vector<float>>(n));
  quant::DequantizeRow(t->dtype, t->data, owned_vectors_.back()->data(), n);
  *out = owned_vectors_.back()->data();
  return Status::Ok();
}

Status LlamaModel::BindWeights() {
  const ModelConfig& c = config_;
  const int64_t q_dim = (int64_t)c.n_head * c.head_dim;
  const int64_t kv_dim = (int64_t)c.n_head_kv * c.head_dim;
  const bool qkv_bias = c.arch == "qwen2";

  TERN_RETURN_IF_ERROR(BindMatrix("token_embd.weight", c.n_vocab, c.n_embd, &token_embd_));
  TERN_RETURN_IF_ERROR(BindVector("output_norm.weight", c.n_embd, false, &output_norm_));
  if (c.tied_embeddings) {
    output_ = token_embd_;
  } else {
    TERN_RETURN_IF_ERROR(BindMatrix("output.weight", c.n_vocab, c.n_embd, &output_));
  }
  layers_.resize(c.n_layer);
  for (int l = 0; l < c.n_layer; ++l) {
    Layer& L = layers_[l];
    const std::string p = "blk." + std::to_string(l) + ".";
    TERN_RETURN_IF_ERROR(BindVector(p + "attn_norm.weight", c.n_embd, false, &L.attn_norm));
    TERN_RETURN_IF_ERROR(BindMatrix(p + "attn_q.weight", q_dim, c.n_embd, &L.wq));
    TERN_RETURN_IF_ERROR(BindMatrix(p + "attn_k.weight", kv_dim, c.n_embd, &L.wk));
    TERN_RETURN_IF_ERROR(BindMatrix(p + "attn_v.weight", kv_dim, c.n_embd, &L.wv));
    if (qkv_bias) {
      TERN_RETURN_IF_ERROR(BindVector(p + "attn_q.bias", q_dim, false, &L.bq));
      TERN_RETURN_IF_ERROR(BindVector(p + "attn_k.bias", kv_dim, false, &L.bk));
      TERN_RETURN_IF_ERROR(BindVector(p + "attn_v.bias", kv_dim, false, &L.bv));
    }
    TERN_RETURN_IF_ERROR(BindMatrix(p + "attn_output.weight", c.n_embd, q_dim, &L.wo));
    TERN_RETURN_IF_ERROR(BindVector(p + "ffn_norm.weight", c.n_embd, false, &L.ffn_norm));
    TERN_RETURN_IF_ERROR(BindMatrix(p + "ffn_gate.weight", c.n_ff, c.n_embd, &L.w_gate));
    TERN_RETURN_IF_ERROR(BindMatrix(p + "ffn_up.weight", c.n_ff, c.n_embd, &L.w_up));
    TERN_RETURN_IF_ERROR(BindMatrix(p + "ffn_down.weight", c.n_embd, c.n_ff, &L.w_down));
  }

  // RoPE frequencies: theta_i = pos * freq_scale * base^(-2i / rope_dim) / factor_i.
  if (!c.rope_scaling_type.empty() && c.rope_scaling_type != "linear") {
    return Unimplemented(file_->path() + ": rope scaling type '" + c.rope_scaling_type +
                         "' is not supported (supported: none, linear)");
  }
  const int half = c.rope_dim / 2;
  const float* freq_factors = nullptr;
  TERN_RETURN_IF_ERROR(BindVector("rope_freqs.weight", half, true, &freq_factors));
  rope_inv_freq_.resize(half);
  for (int i = 0; i < half; ++i) {
    double f = std::pow((double)c.rope_freq_base, -2.0 * i / c.rope_dim) * c.rope_freq_scale;
    if (freq_factors) f /= freq_factors[i];
    rope_inv_freq_[i] = (float)f;
  }
  return Status::Ok();
}

void LlamaModel::MatMul(const Weight& w, const float* x, int64_t num_tokens, float* y,
                        ThreadPool* pool) const {
  if (observer_) observer_->OnMatMul(w.name, x, num_tokens, w.view.cols);
  kernels::MatMul(w.view, x, num_tokens, y, pool);
}

void LlamaModel::GrowScratch(const ForwardBatch& batch, int num_threads) {
  const ModelConfig& c = config_;
  const size_t T = batch.num_tokens();
  auto grow = [](std::vector<float>& v, size_t n) {
    if (v.size() < n) v.resize(n);
  };
  grow(x_, T * c.n_embd);
  grow(xb_, T * c.n_embd);
  grow(q_, T * c.n_head * c.head_dim);
  grow(k_, T * c.n_head_kv * c.head_dim);
  grow(v_, T * c.n_head_kv * c.head_dim);
  grow(att_, T * c.n_head * c.head_dim);
  grow(hb_, T * c.n_ff);
  grow(hb2_, T * c.n_ff);
  grow(xl_, batch.logits_rows.size() * c.n_embd);
  grow(rope_cos_, T * c.rope_dim / 2);
  grow(rope_sin_, T * c.rope_dim / 2);
  int32_t max_context = 1;
  for (const ForwardSequence& s : batch.sequences) max_context = std::max(max_context, s.context_len);
  if ((int)att_scores_.size() < num_threads) att_scores_.resize(num_threads);
  if ((int)att_kv_row_.size() < num_threads) att_kv_row_.resize(num_threads);
  for (int i = 0; i < num_threads; ++i) {
    grow(att_scores_[i], max_context);
    grow(att_kv_row_[i], 2 * c.head_dim);
  }
}

// cos/sin of every (token, frequency) once per step, shared by all layers.
void LlamaModel::ComputeRope(const ForwardBatch& batch) {
  const int half = config_.rope_dim / 2;
  for (int t = 0; t < batch.num_tokens(); ++t) {
    for (int i = 0; i < half; ++i) {
      const double theta = (double)batch.positions[t] * rope_inv_freq_[i];
      rope_cos_[(size_t)t * half + i] = (float)std::cos(theta);
      rope_sin_[(size_t)t * half + i] = (float)std::sin(theta);
    }
  }
}

// x: [num_tokens, num_heads, head_dim]; rotates the first rope_dim dims of
// every head by its token's angles.
//   normal: pairs (2i, 2i+1)          neox: pairs (i, i + rope_dim/2)
void LlamaModel::ApplyRope(float* x, int num_heads, int64_t num_tokens) const {
  const int hd = config_.head_dim;
  const int half = config_.rope_dim / 2;
  for (int64_t t = 0; t < num_tokens; ++t) {
    const float* cs = &rope_cos_[t * half];
    const float* sn = &rope_sin_[t * half];
    for (int h = 0; h < num_heads; ++h) {
      float* v = x + (t * num_heads + h) * hd;
      for (int i = 0; i < half; ++i) {
        const int i0 = config_.rope_neox ? i : 2 * i;
        const int i1 = config_.rope_neox ? i + half : 2 * i + 1;
        const float x0 = v[i0], x1 = v[i1];
        v[i0] = x0 * cs[i] - x1 * sn[i];
        v[i1] = x0 * sn[i] + x1 * cs[i];
      }
    }
  }
}

void LlamaModel::WriteKv(const ForwardBatch& batch, int layer, KvStorage& kv) const {
  const int64_t kv_dim = kv.slot_elems();
  for (int t = 0; t < batch.num_tokens(); ++t) {
    kv.WriteSlot(layer, batch.slots[t], &k_[t * kv_dim], &v_[t * kv_dim]);
  }
}

// att[t, h] = sum_q softmax_q(q[t,h] . K[q, h/group] / sqrt(hd)) V[q, h/group]
// over the positions q the token at position p may see: [0, p], or
// (p - window, p] with a sliding window. K/V are read through the block table.
void LlamaModel::Attention(const ForwardBatch& batch, int layer, const KvStorage& kv,
                           ThreadPool* pool) {
  const ModelConfig& c = config_;
  const int hd = c.head_dim;
  const int group = c.n_head / c.n_head_kv;
  const int64_t q_stride = (int64_t)c.n_head * hd;
  const int64_t slot_elems = kv.slot_elems();
  const int block_size = kv.shape().block_size;
  const bool f16 = kv.shape().dtype == DType::kF16;
  const uint8_t* k_base = kv.KeyData(layer);
  const uint8_t* v_base = kv.ValueData(layer);
  const float scale = 1.0f / std::sqrt((float)hd);
  const int64_t num_units = (int64_t)batch.sequences.size() * c.n_head;

  auto body = [&](int64_t u0, int64_t u1, int thread) {
    float* scores = att_scores_[thread].data();
    float* krow = att_kv_row_[thread].data();
    float* vrow = krow + hd;
    for (int64_t u = u0; u < u1; ++u) {
      const ForwardSequence& seq = batch.sequences[u / c.n_head];
      const int h = (int)(u % c.n_head);
      const int64_t head_off = (int64_t)(h / group) * hd;
      // Pointer to K or V of position pos (converted to f32 for f16 KV).
      auto kv_row = [&](const uint8_t* base, int32_t pos, float* tmp) -> const float* {
        const int64_t slot = (int64_t)seq.block_table[pos / block_size] * block_size +
                             pos % block_size;
        const int64_t elem = slot * slot_elems + head_off;
        if (!f16) return reinterpret_cast<const float*>(base) + elem;
        const uint16_t* src = reinterpret_cast<const uint16_t*>(base) + elem;
        for (int d = 0; d < hd; ++d) tmp[d] = Fp16ToFp32(src[d]);
        return tmp;
      };
      for (int j = 0; j < seq.num_tokens; ++j) {
        const int t = seq.first_token + j;
        const int32_t p = batch.positions[t];
        const int32_t lo = c.sliding_window > 0 ? std::max(0, p - c.sliding_window + 1) : 0;
        const float* q = &q_[t * q_stride + (int64_t)h * hd];
        float max_score = -INFINITY;
        for (int32_t pos = lo; pos <= p; ++pos) {
          const float* k = kv_row(k_base, pos, krow);
          float dot = 0;
          for (int d = 0; d < hd; ++d) dot += q[d] * k[d];
          scores[pos - lo] = dot * scale;
          max_score = std::max(max_score, scores[pos - lo]);
        }
        float sum = 0;
        for (int32_t pos = lo; pos <= p; ++pos) {
          scores[pos - lo] = std::exp(scores[pos - lo] - max_score);
          sum += scores[pos - lo];
        }
        float* out = &att_[t * q_stride + (int64_t)h * hd];
        std::fill(out, out + hd, 0.0f);
        const float inv_sum = 1.0f / sum;
        for (int32_t pos = lo; pos <= p; ++pos) {
          const float* v = kv_row(v_base, pos, vrow);
          const float w = scores[pos - lo] * inv_sum;
          for (int d = 0; d < hd; ++d) out[d] += w * v[d];
        }
      }
    }
  };
  if (pool) pool->ParallelFor(num_units, body);
  else body(0, num_units, 0);
}

void LlamaModel::Forward(const ForwardBatch& batch, KvStorage& kv, float* logits,
                         ThreadPool* pool) {
  const ModelConfig& c = config_;
  const int64_t T = batch.num_tokens();
  if (T == 0) return;
  CHECK_EQ(kv.shape().num_layers, c.n_layer);
  CHECK_EQ(kv.shape().num_kv_heads, c.n_head_kv);
  CHECK_EQ(kv.shape().head_dim, c.head_dim);
  CHECK_EQ((int64_t)batch.positions.size(), T);
  CHECK_EQ((int64_t)batch.slots.size(), T);
  GrowScratch(batch, pool ? pool->num_threads() : 1);
  ComputeRope(batch);
  const int64_t n_embd = c.n_embd;
  const int64_t q_dim = (int64_t)c.n_head * c.head_dim;
  const int64_t kv_dim = (int64_t)c.n_head_kv * c.head_dim;
  float* x = x_.data();
  float* xb = xb_.data();

  // x = token_embd[token_ids]                          // [T, n_embd]
  for (int64_t t = 0; t < T; ++t) {
    const int32_t id = batch.token_ids[t];
    CHECK(id >= 0 && id < c.n_vocab);
    kernels::GetRow(token_embd_.view, id, x + t * n_embd);
  }

  for (int l = 0; l < c.n_layer; ++l) {
    const Layer& L = layers_[l];
    // Attention block.
    RmsNorm(x, L.attn_norm, T, n_embd, c.rms_eps, xb);  // [T, n_embd]
    MatMul(L.wq, xb, T, q_.data(), pool);      // [T, n_head * hd]
    MatMul(L.wk, xb, T, k_.data(), pool);      // [T, n_head_kv * hd]
    MatMul(L.wv, xb, T, v_.data(), pool);      // [T, n_head_kv * hd]
    AddBias(q_.data(), L.bq, T, q_dim);
    AddBias(k_.data(), L.bk, T, kv_dim);
    AddBias(v_.data(), L.bv, T, kv_dim);
    ApplyRope(q_.data(), c.n_head, T);
    ApplyRope(k_.data(), c.n_head_kv, T);
    WriteKv(batch, l, kv);                              // K, V -> batch.slots
    Attention(batch, l, kv, pool);                      // [T, n_head * hd]
    MatMul(L.wo, att_.data(), T, xb, pool);    // [T, n_embd]
    AddInPlace(x, xb, T * n_embd);

    // Feed-forward block: down(silu(gate(h)) * up(h)).
    RmsNorm(x, L.ffn_norm, T, n_embd, c.rms_eps, xb);   // [T, n_embd]
    MatMul(L.w_gate, xb, T, hb_.data(), pool); // [T, n_ff]
    MatMul(L.w_up, xb, T, hb2_.data(), pool);  // [T, n_ff]
    SwiGlu(hb_.data(), hb2_.data(), T * c.n_ff);
    MatMul(L.w_down, hb_.data(), T, xb, pool); // [T, n_embd]
    AddInPlace(x, xb, T * n_embd);
  }

  // Logits only for the rows asked for.
  const int64_t R = (int64_t)batch.logits_rows.size();
  if (R == 0) return;
  for (int64_t r = 0; r < R; ++r) {
    const int32_t t = batch.logits_rows[r];
    CHECK(t >= 0 && t < T);
    RmsNorm(x + t * n_embd, output_norm_, 1, n_embd, c.rms_eps, xl_.data() + r * n_embd);
  }
  MatMul(output_, xl_.data(), R, logits, pool);  // [R, n_vocab]
}

}  // namespace tern
