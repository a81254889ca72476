// LlamaModel: the llama-family decoder (llama / mistral / qwen2 / qwen3 /
// gemma2 / gemma3 / phi3) as one linear forward pass over a flattened
// ForwardBatch.
//
//   embed (x sqrt(n_embd): gemma)
//   -> n_layer x [ RMSNorm -> Q,K,V (+bias: qwen2; one fused matrix: phi3)
//            -> per-head RMSNorm of q and k (qwen3, gemma3) -> RoPE -> KV write
//            -> paged causal GQA attention (sliding window on the layers the
//               config says; score soft-capping: gemma2) -> out proj
//            (-> RMSNorm: gemma) -> residual
//            -> RMSNorm -> SwiGLU FFN (GeGLU: gemma; gate and up fused: phi3)
//            (-> RMSNorm: gemma) -> residual ]
//   -> RMSNorm -> output (-> logit soft-capping: gemma2)
//
// Gemma's RMSNorm multiplies by (1 + w) in the original code; GGUF files
// store 1 + w already, so every family uses the plain x / rms * w here.
// gemma3's windowed layers use their own RoPE base (rope.freq_base_swa,
// 10000) without the file's frequency scaling.
//
// RoPE: llama rotates adjacent pairs (x[2i], x[2i+1]) ("normal" mode; GGUF
// llama files store Q/K rows permuted for it); qwen2 rotates halves
// (x[i], x[i + rope_dim/2]) ("NeoX" mode). Linear scaling divides positions by
// rope.scaling.factor; an optional rope_freqs.weight tensor (llama3-style
// long-context files) divides each frequency's angle by its factor.
//
// Weights are views into the mapped file, except the matrices the active
// kernel table reads in a layout of its own (Q4_0/Q8_0/Q4_K on the AVX-512 VNNI
// table: kernels::WeightLayout::kPanel16), which are copied into it once at
// load. Small 1-D vectors (norms, biases) that are not F32 are dequantized
// once into owned storage.
//
// Thread rules: see Model. Scratch buffers are members, grown on demand and
// reused across Forward calls; the kernels' own too (workspace_).
#pragma once

#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "base/aligned_vector.h"
#include "base/huge_pages.h"
#include "kernels/kernels.h"
#include "kernels/workspace.h"
#include "model/model.h"

namespace tern {

class LlamaModel : public Model {
 public:
  // Binds and validates every weight; file and config become the model's.
  static StatusOr<std::unique_ptr<Model>> Create(std::unique_ptr<gguf::GgufFile> file,
                                                 const ModelConfig& config);

  void Forward(const ForwardBatch& batch, KvStorage& kv, float* logits,
               ThreadPool* pool) override;
  void RotateKeys(int layer, float* k, int32_t delta, DType k_dtype) const override;
  int64_t PackedWeightBytes() const override { return packed_bytes_; }

 private:
  // A weight matrix and its tensor name (for the MatMulObserver): the
  // file's rows, or a copy in the kernels' own layout (kPanel16,
  // PackForKernels).
  struct Weight {
    kernels::WeightView view;
    std::string name;
  };
  struct Layer {
    const float* attn_norm = nullptr;  // [n_embd]
    Weight wq, wk, wv;                 // [n_head*hd | n_head_kv*hd, n_embd]
    const float* bq = nullptr;         // qwen2 biases, else null
    const float* bk = nullptr;
    const float* bv = nullptr;
    Weight wo;                         // [n_embd, n_head*hd]
    const float* ffn_norm = nullptr;   // [n_embd]
    Weight w_gate, w_up;               // [n_ff, n_embd]
    Weight w_down;                     // [n_embd, n_ff]
    const float* q_norm = nullptr;     // [head_dim] (qwen3, gemma3)
    const float* k_norm = nullptr;
    const float* attn_post_norm = nullptr;  // [n_embd] (gemma)
    const float* ffn_post_norm = nullptr;
  };

  LlamaModel() = default;
  Status BindWeights();
  // pack: the matrix may go to the kernels' own layout (not a fused matrix
  // whose parts do not start on 16-row tiles).
  Status BindMatrix(const std::string& name, int64_t rows, int64_t cols, Weight* out,
                    bool pack = true);
  // Copies w into the active kernel table's kPanel16 layout where a model
  // uses it for w's type (kernels::UsePanel16) and lets the file's pages of the
  // original go.
  void PackForKernels(Weight* w);
  // y = x W^T for num_tokens rows of x, reported to the observer first.
  void MatMul(const Weight& w, const float* x, int64_t num_tokens, float* y,
              ThreadPool* pool);
  // ys[i] = x ws[i]^T in one dispatch (same cols), each reported first.
  void MatMulMany(std::initializer_list<const Weight*> ws, const float* x,
                  int64_t num_tokens, float* const* ys, ThreadPool* pool);
  Status BindVector(const std::string& name, int64_t n, bool optional, const float** out);
  // Q, K, V from attn_q/k/v, or as row ranges of a fused attn_qkv (phi3).
  Status BindAttention(const std::string& p, Layer* L);
  // gate and up from ffn_gate/up, or the halves of a fused ffn_up (phi3).
  Status BindFeedForward(const std::string& p, Layer* L);
  Status BindRope();
  // A view of rows [row0, row0 + rows) of w (a fused matrix's part).
  static Weight RowRange(const Weight& w, int64_t row0, int64_t rows);

  void ComputeRope(const ForwardBatch& batch);
  // RoPE on num_tokens rows of num_heads heads (split among the pool's
  // threads for a prefill).
  void ApplyRope(float* x, int num_heads, int64_t num_tokens, bool windowed,
                 ThreadPool* pool) const;
  void WriteKv(const ForwardBatch& batch, int layer, KvStorage& kv) const;
  void Attention(const ForwardBatch& batch, int layer, const KvStorage& kv,
                 ThreadPool* pool);
  void GrowScratch(const ForwardBatch& batch, int num_threads);
  // K smoothing for block-format K caches (q8_0, q4_0): per layer the
  // [n_head_kv * head_dim] scales K is multiplied by before it is stored,
  // and their inverses, which q is multiplied by, so q . k is unchanged but
  // K's channels (one 32-value block may hold several heads) come to similar
  // sizes and share a block scale better. Built on first use from the
  // weights alone; empty for float K caches.
  void SmoothKq(int layer, int64_t num_tokens);
  int64_t KvRotationChunk(DType t, bool keys) const;
  std::vector<float> k_smooth_, q_unsmooth_;  // [n_layer][n_head_kv * head_dim]

  Weight token_embd_;                // [n_vocab, n_embd]
  const float* output_norm_ = nullptr;
  Weight output_;                    // [n_vocab, n_embd] (token_embd_ when tied)
  std::vector<Layer> layers_;
  std::vector<float> rope_inv_freq_;  // [rope_dim / 2], scaling folded in
  std::vector<float> rope_inv_freq_swa_;  // windowed layers' own (gemma3); empty = same
  std::vector<std::unique_ptr<std::vector<float>>> owned_vectors_;
  std::vector<HugePageBuffer> packed_;  // PackForKernels' copies
  int64_t packed_bytes_ = 0;
  double pack_seconds_ = 0;

  // Scratch, [num_tokens, width] row-major unless noted.
  // Activations, 64-byte aligned (see base/aligned_vector.h).
  AlignedVector<float> x_, xb_, q_, k_, v_, att_, hb_, hb2_, xl_;
  std::vector<float> rope_cos_sin_;  // [num_tokens, rope_dim / 2, {cos, sin}]
  std::vector<float> rope_cos_sin_swa_;  // the same from rope_inv_freq_swa_
  std::vector<kernels::AttentionSeq> attn_seqs_;  // one step's sequences (Attention)
  // The kernels' scratch (per pool slot, and the prepared activations),
  // passed to every MatMul and Attention of Forward.
  kernels::Workspace workspace_;
};

}  // namespace tern
