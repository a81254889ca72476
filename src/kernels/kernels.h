// kernels: the compute primitives of the forward pass, dispatched through a
// function table chosen once at start-up from CPU feature detection
// (kernel_table.h; the tables are registered in table_list.h). kernels/ref/
// holds the scalar spec of every kernel; kernels/x86/ the AVX2, AVX-512 and
// AMX versions; kernels/portable/ a table for any CPU. Every other table's kernels must match the reference within
// per-format bounds (kernels_test.cc, over every registered table). Env
// TERN_ISA=<table> caps the choice (TERN_ISA=scalar: the spec; avx2: no
// AVX-512): read by EnvSettings, applied by main (SelectKernelTable).
//
// MatMul for quantized weights quantizes the activations on the fly to 8-bit
// blocks (32 for the legacy formats, 256 with sums for the K-quants) and uses
// integer dot products; F32/F16/BF16 weights use f32 FMA. Rows are split
// across the pool's threads; each output is computed by the same sequence of
// operations whatever the split, so threaded == unthreaded bitwise.
//
// Scratch memory: MatMul/Attention take a Workspace (workspace.h), the
// buffers of their pool's slots, owned by the caller (the model); null
// gives the call a Workspace of its own, allocated and freed by it (tests,
// one-off calls). No kernel keeps memory between calls.
//
// Thread rules: all functions are reentrant; MatMul/Attention use the given
// pool and workspace (which must not be in use by another caller).
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "base/thread_pool.h"
#include "tensor/dtype.h"

namespace tern::kernels {

class Workspace;

// A weight matrix as stored in GGUF: rows of `cols` elements of `dtype`,
// row-major, each row RowBytes(dtype, cols) bytes. In ggml terms a tensor
// with shape [cols, rows].
// How a weight matrix's bytes are laid out. kRowMajor: the rows one after
// another, as in GGUF. kPanel16: the rows in tiles of 16, each tile's bytes
// rearranged (PackPanel16) for the active table's kernel, which then reads a
// tile as one stream (MatMul, MatMulMany; GetRow undoes it per row). A tile
// keeps its rows' byte count, so rows [r0, r0 + 16n) with r0 a multiple of
// 16 start at r0 x RowBytes as in row-major.
enum class WeightLayout : uint8_t { kRowMajor, kPanel16 };

struct WeightView {
  DType dtype = DType::kF32;
  const void* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  WeightLayout layout = WeightLayout::kRowMajor;
};

// y[t, r] = sum_k W[r, k] * x[t, k] for t < num_tokens, r < rows.
// x: [num_tokens, cols] f32 row-major; y: [num_tokens, rows] f32 row-major.
// pool may be null (single-threaded); workspace may be null (see above).
void MatMul(const WeightView& w, const float* x, int64_t num_tokens, float* y,
            ThreadPool* pool, Workspace* workspace);

// Several matrices with the same cols applied to the same x in one parallel
// dispatch (Q/K/V, gate/up): ys[i] = x W_i^T, [num_tokens, ws[i].rows].
// Activations are quantized once; each output equals MatMul's bitwise.
void MatMulMany(std::span<const WeightView> ws, const float* x, int64_t num_tokens,
                float* const* ys, ThreadPool* pool, Workspace* workspace);

// True when MatMul has a fast kernel for dtype (others fall back to
// dequantize + f32 dot, which needs quant::CanDequantize).
bool HasMatMulKernel(DType dtype);

// True when the active table's kernel for dtype reads kPanel16 weights
// (today: F16 and BF16 on both x86 tables; Q4_0, Q8_0 and Q4_K on the
// AVX-512 VNNI table; Q4_0, Q8_0, Q4_K, Q5_K and Q6_K on the AVX2 table).
bool CanPackPanel16(DType dtype);
// How a model lays out the matrices the active table can read in kPanel16
// tiles. kTimed (the default): in tiles, except a type whose faster layout
// differs between CPUs (the table marks it: MatMulKernel::panel16_timed;
// today Q4_0, Q8_0, Q4_K, Q5_K and Q6_K on the AVX2 table: its K-quant
// tiles win on a Zen 4 and lose on a Zen 5), which is timed once per
// process (TimePanel16, about 0.1 s, logged) and keeps the faster. kTiles / kRows: every such type in
// tiles / the file's rows (TERN_WEIGHT_LAYOUT=tiles|rows, applied by main);
// the other types keep the table's layout. The choice never changes a
// result: a timed type's tiles and rows give the same bits.
enum class WeightLayoutChoice : uint8_t { kTimed, kTiles, kRows };
void SetWeightLayoutChoice(WeightLayoutChoice choice);
// Whether a model keeps its dtype matrices in kPanel16 tiles (PackPanel16):
// CanPackPanel16(dtype) and the choice above. Thread-safe.
bool UsePanel16(DType dtype);
// The rows a view of a kPanel16 matrix of dtype (a fused matrix's part) must
// start on, and end on unless it ends the matrix: 16 (a tile), or 64 where
// the active table lays its tiles out in groups of 4 (the AVX-512 table's
// Q4_0, Q8_0 and Q4_K: MatMulKernel::gemm16_row_grain).
int64_t Panel16RowGrain(DType dtype);

// Writes row-major w (rows a multiple of 16) to out (rows x
// RowBytes(dtype, cols) bytes) in the kPanel16 layout; returns the view of
// out. Only where CanPackPanel16(w.dtype).
WeightView PackPanel16(const WeightView& w, uint8_t* out);

// Copies row `row` of w, dequantized to f32, into out[cols] (embedding
// lookup).
void GetRow(const WeightView& w, int64_t row, float* out);

// Name of the implementation chosen at start-up ("avx2", "scalar").
const char* ActiveIsa();

// ---- element-wise ------------------------------------------------------------

// out[i] = x[i] / sqrt(mean(x^2) + eps) * weight[i]; weight may be null
// (= 1); out may alias x.
void RmsNorm(const float* x, const float* weight, int64_t n, float eps, float* out);
// out[i] = silu(gate[i]) * up[i], silu(g) = g / (1 + exp(-g)); out may alias
// gate or up.
void SiluMul(const float* gate, const float* up, int64_t n, float* out);
// In-place softmax of x[0, n).
void Softmax(float* x, int64_t n);

// ---- RoPE ---------------------------------------------------------------------

// cos_sin[2i], cos_sin[2i+1] = cos, sin of (position * inv_freq[i]) for
// i < rope_dim / 2. The caller folds any frequency scaling into inv_freq.
void RopeCosSin(float position, const float* inv_freq, int64_t rope_dim, float* cos_sin);
// Rotates the first rope_dim dims of each of num_heads vectors of head_dim
// (contiguous) in x. neox = false: pairs (2i, 2i+1) (llama); neox = true:
// pairs (i, i + rope_dim/2) (qwen2, NeoX).
void Rope(float* x, int64_t num_heads, int64_t head_dim, int64_t rope_dim,
          const float* cos_sin, bool neox);

// Orthonormal Walsh-Hadamard transform, in place, of each of num_chunks
// consecutive chunks of n floats (n a power of 2): x <- H x / sqrt(n). Its own
// inverse. Used to rotate K/V rows before a block-quantized KV cache stores
// them (outliers spread over the block, the dot products unchanged). Each
// chunk's result depends on that chunk alone.
void WalshHadamard(float* x, int64_t num_chunks, int64_t n);

// ---- vector helpers (attention) ---------------------------------------------------

float Dot(const float* a, const float* b, int64_t n);
float DotF16(const float* a, const uint16_t* b, int64_t n);   // b: IEEE half bits
void Axpy(float alpha, const float* x, int64_t n, float* y);  // y += alpha * x
void AxpyF16(float alpha, const uint16_t* x, int64_t n, float* y);
void Scale(float alpha, int64_t n, float* y);                 // y *= alpha

// ---- attention over paged KV -----------------------------------------------------

// The K and V of one layer in KvStorage's layout: a slot holds slot_elems =
// n_head_kv * head_dim elements, K's of dtype and V's of v_dtype (unset: the
// same as K's); block b's slots start at k + b * block_stride, block_size of
// them back to back; the K/V of position p is in block
// block_table[p / block_size] at offset p % block_size. block_stride 0 means
// block_size x slot bytes (blocks back to back, K's and V's own).
// A slot of a block format (Q8_0, Q4_0; IsKvDtype) is slot_elems / 32 blocks
// of 32 values along the row, so where head_dim is not a multiple of 32 a
// block spans adjacent KV heads of the same token; the kernels read a head's
// [h * head_dim, (h + 1) * head_dim) elements of the row (LoadKvElems).
struct KvPagesView {
  const uint8_t* k = nullptr;
  const uint8_t* v = nullptr;
  DType dtype = DType::kF16;  // K's (and V's unless v_dtype is set)
  int64_t slot_elems = 0;
  const int32_t* block_table = nullptr;
  int32_t block_size = 16;
  int64_t block_stride = 0;
  std::optional<DType> v_dtype;

  DType KDtype() const { return dtype; }
  DType VDtype() const { return v_dtype.value_or(dtype); }
  int64_t KSlotBytes() const { return RowBytes(KDtype(), slot_elems); }
  int64_t VSlotBytes() const { return RowBytes(VDtype(), slot_elems); }
  // The K slot's (both where K and V share a dtype).
  int64_t SlotBytes() const { return KSlotBytes(); }
  int64_t KBlockStride() const {
    return block_stride != 0 ? block_stride : block_size * KSlotBytes();
  }
  int64_t VBlockStride() const {
    return block_stride != 0 ? block_stride : block_size * VSlotBytes();
  }
  int64_t BlockStride() const { return KBlockStride(); }
  // Byte offset of position p's K slot from k (V slot from v).
  int64_t KOffset(int32_t p) const {
    return (int64_t)block_table[p / block_size] * KBlockStride() +
           (int64_t)(p % block_size) * KSlotBytes();
  }
  int64_t VOffset(int32_t p) const {
    return (int64_t)block_table[p / block_size] * VBlockStride() +
           (int64_t)(p % block_size) * VSlotBytes();
  }
  int64_t PositionOffset(int32_t p) const { return KOffset(p); }
};

// ---- KV rows ----------------------------------------------------------------------

// The KV cache element types: F32, F16, BF16 (elements as they are), Q8_0
// and Q4_0 (blocks of 32 values with an f16 scale: x = d * q, q in
// [-127, 127], resp. d * (q - 8), q in [0, 15]).
bool IsKvDtype(DType t);
// Stores the f32 row x[0, n) as a KV row of dtype t (n a multiple of
// BlockSize(t)): F16 and BF16 round to nearest even; Q8_0 scales by the
// block's largest magnitude / 127, Q4_0 by its value of largest magnitude
// / -8, rounding to nearest (the quantizers of the weight formats).
void StoreKvRow(DType t, const float* x, int64_t n, uint8_t* out);
// Elements [e0, e0 + n) of a KV row of dtype t as f32 (exact: every format
// decodes to a float without rounding). Scalar; the SIMD tables have their
// own, bitwise equal.
void LoadKvElems(DType t, const uint8_t* row, int64_t e0, int64_t n, float* out);
// K rows whose blocks of 32 span several heads (a Q8_0 / Q4_0 K with
// head_dim < 32: stories260K's 4 KV heads of 8 share one block per token)
// are stored rotated: each block of 32 values x becomes H x / 4 (H the
// 32-point Sylvester Walsh-Hadamard matrix, H H = 32 I) before it is
// quantized, so that one scale no longer serves one large channel and many
// small ones but values of like size. Scores undo it in math: a head's
// q . k = (H q_ext / 8) . (H k_block / 4), q_ext the query placed in its
// head's slots of the block(s) and zeros elsewhere (RotatedKeyQuery, in
// attention.h); V is never rotated.
bool KvKeyRotated(DType k, int64_t head_dim);
// StoreKvRow / LoadKvElems (whole rows) of a K row of a model's head_dim:
// rotated where KvKeyRotated (Load undoes the rotation: k = H k' / 8),
// else exactly StoreKvRow / LoadKvElems.
void StoreKvKeyRow(DType t, const float* x, int64_t n, int64_t head_dim, uint8_t* out);
void LoadKvKeyRow(DType t, const uint8_t* row, int64_t n, int64_t head_dim, float* out);
// x[0, 32) = H x * scale (the unnormalized 32-point Walsh-Hadamard
// butterflies in a fixed order, then one multiplication: scalar, the same
// bits in every table).
void HadamardBlock32(float* x, float scale);

// Causal attention of num_queries query tokens of one sequence:
//   q, out: [num_queries, n_head, head_dim]; query i at positions[i] attends
//   to positions [lo, positions[i]], lo = max(0, positions[i] - window + 1)
//   when sliding_window > 0, else 0; head h reads KV head h / (n_head /
//   n_head_kv). out = softmax(scale * q.K^T) V, computed with an online
//   softmax; the heads sharing a KV head are processed together so each K/V
//   row is read once per query. pool and workspace may be null. softcap > 0
//   caps every score as softcap * tanh(score / softcap) (gemma2; through
//   the generic path of the table's dot/axpy entries).
void Attention(const float* q, int64_t num_queries, const int32_t* positions,
               int32_t n_head, int32_t n_head_kv, int32_t head_dim, float scale,
               int32_t sliding_window, const KvPagesView& kv, float* out,
               ThreadPool* pool, Workspace* workspace);

// The queries of one sequence for AttentionBatch (as Attention's arguments).
struct AttentionSeq {
  const float* q = nullptr;
  float* out = nullptr;
  const int32_t* positions = nullptr;
  int64_t num_queries = 0;
  const int32_t* block_table = nullptr;
};
// Attention of several sequences in one pool dispatch (kv.block_table is
// ignored; each sequence brings its own). Results equal Attention's per
// sequence, bitwise.
void AttentionBatch(std::span<const AttentionSeq> seqs, int32_t n_head, int32_t n_head_kv,
                    int32_t head_dim, float scale, int32_t sliding_window,
                    const KvPagesView& kv, ThreadPool* pool, Workspace* workspace,
                    float softcap = 0.0f);

// float -> IEEE half (round to nearest even), n elements.
void ConvertF32ToF16(const float* x, int64_t n, uint16_t* out);

}  // namespace tern::kernels
