#include "model/llama_model.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <span>
#include <string>

#include "base/check.h"
#include "base/log.h"
#include "model/exact_logits.h"
#include "quant/quant.h"

namespace tern {
namespace {

// Tokens per feed-forward pass in Forward (bounds the [tokens, n_ff] scratch;
// the weights are re-read once per chunk). 256 rather than 128: 16-bit
// weights are converted to f32 once per chunk (FloatLanes16), and the
// llama-3.2-1b F16 down matmul (2048 x 8192, AVX2, one thread, AMD EPYC
// Zen 4) ran 94.7 GFLOP/s in 128-token chunks, 98.9 in 256 (gate/up 103.8,
// 104.6); 512-token chunks read the down matmul's 16 MiB of activations
// from L3 (kernel alone: 104 GFLOP/s at 516 tokens, 111 at 258).
constexpr int64_t kFfnChunk = 256;

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

void AddBias(float* x, const float* b, int64_t num_tokens, int64_t n) {
  if (!b) return;
  for (int64_t t = 0; t < num_tokens; ++t)
    for (int64_t i = 0; i < n; ++i) x[t * n + i] += b[i];
}

void AddInPlace(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

// fn(begin, end) over rows [0, n) of a forward's element-wise steps (norms,
// RoPE, residual adds, the FFN gate), split among the pool's threads for a
// prefill and run inline for a few rows (decode), where the split would
// cost more than it saves. Every row's result is the same whoever computes
// it. Serial, these steps took 10% of a tinyllama Q4_0 pp512 on the
// AVX-512 table (Zen 5, 2 threads: 0.29 of 2.86 s, the other core idle).
constexpr int64_t kParallelRowsMin = 32;
template <class Fn>
void ForRows(ThreadPool* pool, int64_t n, int64_t rows_min, Fn&& fn) {
  if (pool == nullptr || pool->num_threads() <= 1 || n < rows_min) {
    if (n > 0) fn((int64_t)0, n);
    return;
  }
  pool->ParallelFor(n, [&](int64_t begin, int64_t end, int) { fn(begin, end); });
}

// out[i] = gelu(gate[i]) * up[i] with the tanh form of GELU (gemma's
// gelu_pytorch_tanh); out may alias gate or up.
void GeluMul(const float* gate, const float* up, int64_t n, float* out) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    const float gelu = 0.5f * g * (1.0f + std::tanh(kSqrt2OverPi * g * (1.0f + 0.044715f * g * g)));
    out[i] = gelu * up[i];
  }
}

// Does layer read and write the windowed group's slots and block tables
// (hybrid models, forward_batch.h), rather than the batch's main ones?
bool UsesWindowGroup(const ForwardBatch& batch, int layer, const KvStorage& kv) {
  return kv.LayerGroup(layer) == 1 && !batch.window_slots.empty();
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
                              Weight* out, bool pack) {
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
  if (pack) PackForKernels(out);
  return Status::Ok();
}

void LlamaModel::PackForKernels(Weight* w) {
  const kernels::WeightView v = w->view;  // the file's rows
  if (!kernels::UsePanel16(v.dtype) || v.rows % 16 != 0) return;
  const auto start = std::chrono::steady_clock::now();
  const int64_t bytes = v.rows * RowBytes(v.dtype, v.cols);
  packed_.emplace_back((size_t)bytes);
  w->view = kernels::PackPanel16(v, packed_.back().data());
  file_->ReleasePages(v.data, (uint64_t)bytes);
  packed_bytes_ += bytes;
  pack_seconds_ +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
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

// A view of rows [row0, row0 + rows) of w (a fused matrix's part).
LlamaModel::Weight LlamaModel::RowRange(const Weight& w, int64_t row0, int64_t rows) {
  LlamaModel::Weight part = w;
  // kPanel16 tiles keep their rows' bytes: a range on whole tiles (or
  // groups of tiles: Panel16RowGrain) is a view too.
  const int64_t g = kernels::Panel16RowGrain(w.view.dtype);
  CHECK(w.view.layout == kernels::WeightLayout::kRowMajor ||
        (row0 % g == 0 && (rows % g == 0 || row0 + rows == w.view.rows)));
  const int64_t offset = row0 * RowBytes(w.view.dtype, w.view.cols);
  part.view.data = static_cast<const uint8_t*>(w.view.data) + offset;
  part.view.rows = rows;
  return part;
}

Status LlamaModel::BindAttention(const std::string& p, Layer* L) {
  const ModelConfig& c = config_;
  const int64_t q_dim = (int64_t)c.n_head * c.head_dim;
  const int64_t kv_dim = (int64_t)c.n_head_kv * c.head_dim;
  if (file_->FindTensor(p + "attn_qkv.weight")) {
    // Fused: rows [Q | K | V], in the kernels' tiles where its parts start
    // on their grain (RowRange).
    Weight qkv;
    const int64_t g = kernels::Panel16RowGrain(file_->FindTensor(p + "attn_qkv.weight")->dtype);
    TERN_RETURN_IF_ERROR(BindMatrix(p + "attn_qkv.weight", q_dim + 2 * kv_dim, c.n_embd, &qkv,
                                    q_dim % g == 0 && kv_dim % g == 0));
    L->wq = RowRange(qkv, 0, q_dim);
    L->wk = RowRange(qkv, q_dim, kv_dim);
    L->wv = RowRange(qkv, q_dim + kv_dim, kv_dim);
    L->wk.name.clear();  // the observer sees the fused matrix once
    L->wv.name.clear();
  } else {
    TERN_RETURN_IF_ERROR(BindMatrix(p + "attn_q.weight", q_dim, c.n_embd, &L->wq));
    TERN_RETURN_IF_ERROR(BindMatrix(p + "attn_k.weight", kv_dim, c.n_embd, &L->wk));
    TERN_RETURN_IF_ERROR(BindMatrix(p + "attn_v.weight", kv_dim, c.n_embd, &L->wv));
  }
  if (c.arch == "qwen2") {
    TERN_RETURN_IF_ERROR(BindVector(p + "attn_q.bias", q_dim, false, &L->bq));
    TERN_RETURN_IF_ERROR(BindVector(p + "attn_k.bias", kv_dim, false, &L->bk));
    TERN_RETURN_IF_ERROR(BindVector(p + "attn_v.bias", kv_dim, false, &L->bv));
  }
  if (c.qk_norm) {
    TERN_RETURN_IF_ERROR(BindVector(p + "attn_q_norm.weight", c.head_dim, false, &L->q_norm));
    TERN_RETURN_IF_ERROR(BindVector(p + "attn_k_norm.weight", c.head_dim, false, &L->k_norm));
  }
  TERN_RETURN_IF_ERROR(BindMatrix(p + "attn_output.weight", c.n_embd, q_dim, &L->wo));
  if (c.post_norms) {
    TERN_RETURN_IF_ERROR(BindVector(p + "post_attention_norm.weight", c.n_embd, false,
                                    &L->attn_post_norm));
  }
  return Status::Ok();
}

Status LlamaModel::BindFeedForward(const std::string& p, Layer* L) {
  const ModelConfig& c = config_;
  TERN_RETURN_IF_ERROR(BindVector(p + "ffn_norm.weight", c.n_embd, false, &L->ffn_norm));
  if (!file_->FindTensor(p + "ffn_gate.weight") && file_->FindTensor(p + "ffn_up.weight") &&
      file_->FindTensor(p + "ffn_up.weight")->shape == std::vector<int64_t>{c.n_embd, 2 * (int64_t)c.n_ff}) {
    // Fused: rows [gate | up] (tiles as for the fused QKV).
    Weight gate_up;
    const int64_t g = kernels::Panel16RowGrain(file_->FindTensor(p + "ffn_up.weight")->dtype);
    TERN_RETURN_IF_ERROR(BindMatrix(p + "ffn_up.weight", 2 * (int64_t)c.n_ff, c.n_embd, &gate_up,
                                    c.n_ff % g == 0));
    L->w_gate = RowRange(gate_up, 0, c.n_ff);
    L->w_up = RowRange(gate_up, c.n_ff, c.n_ff);
    L->w_up.name.clear();
  } else {
    TERN_RETURN_IF_ERROR(BindMatrix(p + "ffn_gate.weight", c.n_ff, c.n_embd, &L->w_gate));
    TERN_RETURN_IF_ERROR(BindMatrix(p + "ffn_up.weight", c.n_ff, c.n_embd, &L->w_up));
  }
  TERN_RETURN_IF_ERROR(BindMatrix(p + "ffn_down.weight", c.n_embd, c.n_ff, &L->w_down));
  if (c.post_norms) {
    TERN_RETURN_IF_ERROR(BindVector(p + "post_ffw_norm.weight", c.n_embd, false,
                                    &L->ffn_post_norm));
  }
  return Status::Ok();
}

Status LlamaModel::BindWeights() {
  const ModelConfig& c = config_;
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
    TERN_RETURN_IF_ERROR(BindAttention(p, &L));
    TERN_RETURN_IF_ERROR(BindFeedForward(p, &L));
  }
  if (packed_bytes_ > 0) {
    // Said where the copy adds to the load time a user sees; a small
    // model's (a test's) stays out of the output.
    const LogLevel level = pack_seconds_ >= 0.1 ? LogLevel::kInfo : LogLevel::kDebug;
    Log(level, "weights: %.1f MiB copied into the %s kernels' 16-row tiles in %.2f s",
        packed_bytes_ / 1048576.0, kernels::ActiveIsa(), pack_seconds_);
  }
  return BindRope();
}

Status LlamaModel::BindRope() {
  const ModelConfig& c = config_;
  // RoPE frequencies: theta_i = pos * freq_scale * base^(-2i / rope_dim) / factor_i.
  if (!c.rope_scaling_type.empty() && c.rope_scaling_type != "linear") {
    return Unimplemented(file_->path() + ": rope scaling type '" + c.rope_scaling_type +
                         "' is not supported (supported: none, linear)");
  }
  if (file_->FindTensor("rope_factors_long.weight") || file_->FindTensor("blk.0.rope_factors_long.weight")) {
    return Unimplemented(file_->path() +
                         ": rope_factors_long.weight (LongRoPE, 128k-context phi3) is not supported");
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
  // Windowed layers with their own base (gemma3: 10000, without the
  // global layers' scaling; others: rope.freq_base_swa when the file has it).
  rope_inv_freq_swa_.clear();
  if (c.NumWindowedLayers() > 0 &&
      (c.arch == "gemma3" || c.rope_freq_base_swa != c.rope_freq_base)) {
    const double scale = c.arch == "gemma3" ? 1.0 : c.rope_freq_scale;
    rope_inv_freq_swa_.resize(half);
    for (int i = 0; i < half; ++i) {
      rope_inv_freq_swa_[i] =
          (float)(std::pow((double)c.rope_freq_base_swa, -2.0 * i / c.rope_dim) * scale);
    }
  }
  return Status::Ok();
}

void LlamaModel::MatMul(const Weight& w, const float* x, int64_t num_tokens, float* y,
                        ThreadPool* pool) {
  if (observer_ && !w.name.empty()) observer_->OnMatMul(w.name, x, num_tokens, w.view.cols);
  kernels::MatMul(w.view, x, num_tokens, y, pool, &workspace_);
}

void LlamaModel::MatMulMany(std::initializer_list<const Weight*> ws, const float* x,
                            int64_t num_tokens, float* const* ys, ThreadPool* pool) {
  kernels::WeightView views[4];
  size_t n = 0;
  CHECK(ws.size() <= 4);
  for (const Weight* w : ws) {
    if (observer_ && !w->name.empty()) observer_->OnMatMul(w->name, x, num_tokens, w->view.cols);
    views[n++] = w->view;
  }
  kernels::MatMulMany(std::span<const kernels::WeightView>(views, n), x, num_tokens, ys,
                      pool, &workspace_);
}

void LlamaModel::GrowScratch(const ForwardBatch& batch, int num_threads) {
  const ModelConfig& c = config_;
  const size_t T = batch.num_tokens();
  auto grow = [](auto& v, size_t n) {
    if (v.size() < n) v.resize(n);
  };
  grow(x_, T * c.n_embd);
  grow(xb_, T * c.n_embd);
  grow(q_, T * c.n_head * c.head_dim);
  grow(k_, T * c.n_head_kv * c.head_dim);
  grow(v_, T * c.n_head_kv * c.head_dim);
  grow(att_, T * c.n_head * c.head_dim);
  grow(hb_, std::min<size_t>(T, kFfnChunk) * c.n_ff);
  grow(hb2_, std::min<size_t>(T, kFfnChunk) * c.n_ff);
  grow(xl_, batch.logits_rows.size() * c.n_embd);
  grow(rope_cos_sin_, T * (c.rope_dim / 2) * 2);
  if (!rope_inv_freq_swa_.empty()) grow(rope_cos_sin_swa_, T * (c.rope_dim / 2) * 2);
}

// cos/sin of every (token, frequency) once per step, shared by all layers,
// interleaved as kernels::Rope wants them. The angle is formed in double so
// long positions keep their precision.
void LlamaModel::ComputeRope(const ForwardBatch& batch) {
  const int half = config_.rope_dim / 2;
  auto fill = [&](const std::vector<float>& inv_freq, std::vector<float>& cos_sin) {
    for (int t = 0; t < batch.num_tokens(); ++t) {
      float* cs = &cos_sin[(size_t)t * 2 * half];
      for (int i = 0; i < half; ++i) {
        const double theta = (double)batch.positions[t] * inv_freq[i];
        cs[2 * i] = (float)std::cos(theta);
        cs[2 * i + 1] = (float)std::sin(theta);
      }
    }
  };
  fill(rope_inv_freq_, rope_cos_sin_);
  if (!rope_inv_freq_swa_.empty()) fill(rope_inv_freq_swa_, rope_cos_sin_swa_);
}

// x: [num_tokens, num_heads, head_dim]; rotates the first rope_dim dims of
// every head by its token's angles.
void LlamaModel::ApplyRope(float* x, int num_heads, int64_t num_tokens, bool windowed,
                           ThreadPool* pool) const {
  const int64_t hd = config_.head_dim;
  const int64_t half = config_.rope_dim / 2;
  const std::vector<float>& cos_sin =
      windowed && !rope_inv_freq_swa_.empty() ? rope_cos_sin_swa_ : rope_cos_sin_;
  ForRows(pool, num_tokens, kParallelRowsMin, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      kernels::Rope(x + t * num_heads * hd, num_heads, hd, config_.rope_dim,
                    &cos_sin[t * 2 * half], config_.rope_neox);
    }
  });
}

void LlamaModel::SmoothKq(int layer, int64_t num_tokens) {
  const ModelConfig& c = config_;
  const int64_t kv_dim = (int64_t)c.n_head_kv * c.head_dim;
  if (k_smooth_.empty()) {
    k_smooth_.resize((size_t)c.n_layer * kv_dim);
    q_unsmooth_.resize(k_smooth_.size());
    // Channel r of K is W_k[r] . (attn_norm * normalized x): its size goes
    // with |W_k[r] * attn_norm|. RoPE mixes the rotated pairs, so one scale
    // per pair, (geometric mean of the pair sizes) / (the pair's size):
    // stories260K at ctx 512 on war-and-peace, q4_0 ppl 66.4 -> 60.7 (f16
    // 46.5), q8_0 46.31 -> 46.54; on the TinyStories sample at ctx 128,
    // q4_0 26.3 -> 18.6 (f16 6.846), q8_0 6.860 -> 6.856.
    std::vector<float> row(c.n_embd), norms(kv_dim);
    for (int l = 0; l < c.n_layer; ++l) {
      const Layer& L = layers_[l];
      for (int64_t r = 0; r < kv_dim; ++r) {
        kernels::GetRow(L.wk.view, r, row.data());
        double ss = 0;
        for (int64_t j = 0; j < c.n_embd; ++j) {
          const double w = (double)row[j] * (L.attn_norm ? L.attn_norm[j] : 1.0f);
          ss += w * w;
        }
        norms[r] = (float)std::sqrt(ss);
      }
      // RoPE mixes the rotated pairs: one scale per pair.
      std::vector<double> m(kv_dim);
      double log_sum = 0;
      for (int64_t r = 0; r < kv_dim; ++r) {
        const int64_t d = r % c.head_dim, h0 = r - d;
        int64_t partner = d;
        if (d < c.rope_dim) {
          partner = c.rope_neox ? (d < c.rope_dim / 2 ? d + c.rope_dim / 2 : d - c.rope_dim / 2)
                                : (d ^ 1);
        }
        const double a = norms[r], b = norms[h0 + partner];
        m[r] = std::max(1e-6, std::sqrt((a * a + b * b) / 2));
        log_sum += std::log(m[r]);
      }
      const double g = std::exp(log_sum / kv_dim);
      for (int64_t r = 0; r < kv_dim; ++r) {
        const float s = (float)(g / m[r]);
        k_smooth_[(size_t)l * kv_dim + r] = s;
        q_unsmooth_[(size_t)l * kv_dim + r] = 1.0f / s;
      }
    }
  }
  const float* ks = &k_smooth_[(size_t)layer * kv_dim];
  const float* qs = &q_unsmooth_[(size_t)layer * kv_dim];
  const int64_t group = c.n_head / c.n_head_kv, hd = c.head_dim;
  for (int64_t t = 0; t < num_tokens; ++t) {
    float* k = &k_[t * kv_dim];
    for (int64_t i = 0; i < kv_dim; ++i) k[i] *= ks[i];
    float* q = &q_[t * c.n_head * hd];
    for (int64_t h = 0; h < c.n_head; ++h) {
      const float* s = qs + (h / group) * hd;
      for (int64_t d = 0; d < hd; ++d) q[h * hd + d] *= s[d];
    }
  }
}

// Walsh-Hadamard chunk of a block-quantized K or V cache's rows (0: none):
// where head_dim is a multiple of 64, each head's q and k are rotated in the
// largest power-of-2 chunks that divide head_dim, v in chunks of 64, before
// the cache stores them; the attention output is rotated back. q . k and the
// weighted sum of v are unchanged; the values a 32-block scale must cover
// are spread evenly, so rounding costs less (tinyllama-shaped synth, V q4_0:
// ppl moved -1.6% from f16 unrotated, see docs/quantization.md). Smaller
// heads keep the K smoothing below instead, except below 32 (stories260K: 8),
// where the cache rotates each K block of 32 itself (kernels::KvKeyRotated).
int64_t LlamaModel::KvRotationChunk(DType t, bool keys) const {
  const int64_t hd = config_.head_dim;
  if (BlockSize(t) <= 1 || hd % 64 != 0) return 0;
  if (!keys) return 64;
  int64_t n = 64;
  while (hd % (2 * n) == 0) n *= 2;
  return n;
}

void LlamaModel::RotateKeys(int layer, float* k, int32_t delta, DType k_dtype) const {
  const ModelConfig& c = config_;
  const int64_t rot = KvRotationChunk(k_dtype, true);
  const int64_t kv_dim = (int64_t)c.n_head_kv * c.head_dim;
  if (rot > 0) kernels::WalshHadamard(k, kv_dim / rot, rot);  // back to RoPE space
  const std::vector<float>& inv_freq =
      c.LayerIsWindowed(layer) && !rope_inv_freq_swa_.empty() ? rope_inv_freq_swa_ : rope_inv_freq_;
  const int half = c.rope_dim / 2;
  std::vector<float> cos_sin(2 * half);
  for (int i = 0; i < half; ++i) {
    const double theta = (double)delta * inv_freq[i];
    cos_sin[2 * i] = (float)std::cos(theta);
    cos_sin[2 * i + 1] = (float)std::sin(theta);
  }
  kernels::Rope(k, c.n_head_kv, c.head_dim, c.rope_dim, cos_sin.data(), c.rope_neox);
  if (rot > 0) kernels::WalshHadamard(k, kv_dim / rot, rot);
}

void LlamaModel::WriteKv(const ForwardBatch& batch, int layer, KvStorage& kv) const {
  const int64_t kv_dim = kv.slot_elems();
  const std::vector<int64_t>& slots =
      UsesWindowGroup(batch, layer, kv) ? batch.window_slots : batch.slots;
  for (int t = 0; t < batch.num_tokens(); ++t) {
    kv.WriteSlot(layer, slots[t], &k_[t * kv_dim], &v_[t * kv_dim]);
  }
}

// att[t, h] = softmax(q[t,h] . K[:, h/group] / sqrt(hd)) V[:, h/group] over
// the positions the token may see ([0, p], or (p - window, p] with a sliding
// window), per sequence through its block table (kernels::Attention).
void LlamaModel::Attention(const ForwardBatch& batch, int layer, const KvStorage& kv,
                           ThreadPool* pool) {
  const ModelConfig& c = config_;
  const int64_t q_stride = (int64_t)c.n_head * c.head_dim;
  const float scale = c.attn_scale > 0 ? c.attn_scale : 1.0f / std::sqrt((float)c.head_dim);
  const kernels::KvPagesView view = kv.LayerView(layer);
  const bool window = UsesWindowGroup(batch, layer, kv);
  attn_seqs_.clear();
  for (const ForwardSequence& seq : batch.sequences) {
    if (seq.num_tokens == 0) continue;
    const int64_t t0 = seq.first_token;
    attn_seqs_.push_back({&q_[t0 * q_stride], &att_[t0 * q_stride], &batch.positions[t0],
                          seq.num_tokens,
                          window ? seq.window_block_table.data() : seq.block_table.data()});
  }
  kernels::AttentionBatch(attn_seqs_, c.n_head, c.n_head_kv, c.head_dim, scale,
                          c.LayerWindow(layer), view, pool, &workspace_, c.attn_softcap);
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
  CHECK(batch.window_slots.empty() || (int64_t)batch.window_slots.size() == T);
  GrowScratch(batch, pool ? pool->num_threads() : 1);
  ComputeRope(batch);
  const int64_t n_embd = c.n_embd;
  const int64_t q_dim = (int64_t)c.n_head * c.head_dim;
  const int64_t kv_dim = (int64_t)c.n_head_kv * c.head_dim;
  float* x = x_.data();
  float* xb = xb_.data();
  auto RmsNormRows = [&](const float* in, const float* w, int64_t rows, float* out) {
    ForRows(pool, rows, kParallelRowsMin, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        kernels::RmsNorm(in + t * n_embd, w, n_embd, c.rms_eps, out + t * n_embd);
      }
    });
  };
  // Per-head RMSNorm of x: [T, num_heads, hd] (qwen3/gemma3 QK-norm).
  auto HeadNorm = [&](float* xh, const float* w, int num_heads) {
    if (!w) return;
    ForRows(pool, T * num_heads, kParallelRowsMin * num_heads, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        kernels::RmsNorm(xh + r * c.head_dim, w, c.head_dim, c.rms_eps, xh + r * c.head_dim);
      }
    });
  };
  // x += y over T rows of n_embd (the residual adds).
  auto AddRows = [&](float* x_rows, const float* y_rows) {
    ForRows(pool, T, kParallelRowsMin, [&](int64_t t0, int64_t t1) {
      AddInPlace(x_rows + t0 * n_embd, y_rows + t0 * n_embd, (t1 - t0) * n_embd);
    });
  };

  // x = token_embd[token_ids]                          // [T, n_embd]
  for (int64_t t = 0; t < T; ++t) {
    const int32_t id = batch.token_ids[t];
    CHECK(id >= 0 && id < c.n_vocab);
    kernels::GetRow(token_embd_.view, id, x + t * n_embd);
  }
  if (c.embed_scale != 1.0f) kernels::Scale(c.embed_scale, T * n_embd, x);  // gemma

  const int64_t k_rot = KvRotationChunk(kv.shape().KDtype(), true);
  const int64_t v_rot = KvRotationChunk(kv.shape().VDtype(), false);
  for (int l = 0; l < c.n_layer; ++l) {
    const Layer& L = layers_[l];
    // Attention block.
    RmsNormRows(x, L.attn_norm, T, xb);                 // [T, n_embd]
    // q: [T, n_head * hd], k, v: [T, n_head_kv * hd]
    float* const qkv[3] = {q_.data(), k_.data(), v_.data()};
    MatMulMany({&L.wq, &L.wk, &L.wv}, xb, T, qkv, pool);
    AddBias(q_.data(), L.bq, T, q_dim);
    AddBias(k_.data(), L.bk, T, kv_dim);
    AddBias(v_.data(), L.bv, T, kv_dim);
    HeadNorm(q_.data(), L.q_norm, c.n_head);
    HeadNorm(k_.data(), L.k_norm, c.n_head_kv);
    ApplyRope(q_.data(), c.n_head, T, c.LayerIsWindowed(l), pool);
    ApplyRope(k_.data(), c.n_head_kv, T, c.LayerIsWindowed(l), pool);
    if (k_rot > 0) {
      kernels::WalshHadamard(q_.data(), T * q_dim / k_rot, k_rot);
      kernels::WalshHadamard(k_.data(), T * kv_dim / k_rot, k_rot);
    } else if (BlockSize(kv.shape().KDtype()) > 1 &&
               !kernels::KvKeyRotated(kv.shape().KDtype(), c.head_dim)) {
      SmoothKq(l, T);
    }
    if (v_rot > 0) kernels::WalshHadamard(v_.data(), T * kv_dim / v_rot, v_rot);
    WriteKv(batch, l, kv);                              // K, V -> batch.slots
    Attention(batch, l, kv, pool);                      // [T, n_head * hd]
    if (v_rot > 0) kernels::WalshHadamard(att_.data(), T * q_dim / v_rot, v_rot);
    MatMul(L.wo, att_.data(), T, xb, pool);    // [T, n_embd]
    if (L.attn_post_norm) RmsNormRows(xb, L.attn_post_norm, T, xb);
    AddRows(x, xb);

    // Feed-forward block: down(silu(gate(h)) * up(h)), kFfnChunk tokens at
    // a time so the two [tokens, n_ff] buffers stay small for long prompts
    // (each token's result is the same however the tokens are split).
    RmsNormRows(x, L.ffn_norm, T, xb);                  // [T, n_embd]
    for (int64_t t0 = 0; t0 < T; t0 += kFfnChunk) {
      const int64_t n = std::min<int64_t>(kFfnChunk, T - t0);
      float* const gate_up[2] = {hb_.data(), hb2_.data()};  // [n, n_ff] each
      MatMulMany({&L.w_gate, &L.w_up}, xb + t0 * n_embd, n, gate_up, pool);
      ForRows(pool, n, kParallelRowsMin, [&](int64_t r0, int64_t r1) {
        float* const g = hb_.data() + r0 * c.n_ff;
        const float* const u = hb2_.data() + r0 * c.n_ff;
        if (c.ffn_gelu) GeluMul(g, u, (r1 - r0) * c.n_ff, g);
        else kernels::SiluMul(g, u, (r1 - r0) * c.n_ff, g);
      });
      MatMul(L.w_down, hb_.data(), n, xb + t0 * n_embd, pool);  // [n, n_embd]
    }
    if (L.ffn_post_norm) RmsNormRows(xb, L.ffn_post_norm, T, xb);
    AddRows(x, xb);
  }

  // Logits only for the rows asked for.
  const int64_t R = (int64_t)batch.logits_rows.size();
  if (R == 0) return;
  for (int64_t r = 0; r < R; ++r) {
    const int32_t t = batch.logits_rows[r];
    CHECK(t >= 0 && t < T);
    kernels::RmsNorm(x + t * n_embd, output_norm_, n_embd, c.rms_eps,
                     xl_.data() + r * n_embd);
  }
  MatMul(output_, xl_.data(), R, logits, pool);  // [R, n_vocab]
  RefineTopLogits(output_.view, xl_.data(), R, logits, pool);
  if (c.final_softcap > 0) {  // gemma2: cap * tanh(logit / cap)
    for (int64_t i = 0; i < R * c.n_vocab; ++i) {
      logits[i] = c.final_softcap * std::tanh(logits[i] / c.final_softcap);
    }
  }
}

}  // namespace tern
