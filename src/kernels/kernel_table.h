// KernelTable: the function table behind kernels.h. One table per ISA
// (RefKernelTable: scalar spec; Avx2KernelTable: AVX2 + FMA + F16C;
// Avx512VnniKernelTable: the same with vpdpbusd), chosen once at start-up by
// ActiveKernelTable() from CPU feature detection (env TERN_ISA=scalar or
// TERN_ISA=avx2 caps the choice).
//
// Matrix multiplication is split in two steps so that every ISA agrees on
// the activation format:
//   1. the driver (kernels.cc) prepares the activations of all tokens in the
//      format the weight kernel wants (ActKind): f32 as given, or quantized on
//      the fly to ActBlockQ8 (legacy formats) / ActBlockQ8K (K-quants);
//   2. a GemmFn computes a tile of rows x tokens from weight rows and
//      prepared activation rows.
// Activation quantization is bit-identical across ISAs (same float ops), so
// SIMD and scalar matmuls differ only by float summation order.
//
// Thread rules: tables are immutable after start-up; all functions are
// reentrant.
#pragma once

#include <cstdint>
#include <span>

#include "base/thread_pool.h"
#include "kernels/kernels.h"
#include "tensor/dtype.h"

namespace tern::kernels {

// One activation block of 32 for the legacy formats:
// x[j] ~= d * qs[j], s = d * sum(qs).
struct ActBlockQ8 {
  float d;
  float s;
  int8_t qs[32];
};
static_assert(sizeof(ActBlockQ8) == 40);

// One activation super-block of 256 for the K-quants: x[j] ~= d * qs[j];
// sums32[i] = sum of qs in [32i, 32i+32), sums16[i] of [16i, 16i+16).
struct ActBlockQ8K {
  float d;
  int16_t sums32[8];
  int16_t sums16[16];
  int8_t qs[256];
};
static_assert(sizeof(ActBlockQ8K) == 308);

// Two ActBlockQ8 of 32 (blocks 2i and 2i+1) rearranged for the AVX2 nibble
// kernels (Q4_0/Q4_1/Q5_0/Q5_1), which unpack two weight blocks into one
// 256-bit register: lo = [x_2i[0..16) | x_2i+1[0..16)], hi = the same for
// [16..32); d and s (= d * sum(qs) / 4) broadcast over each 128-bit half;
// c[j] = 8 x (lo[2j] + lo[2j+1] + hi[2j] + hi[2j+1]), the int16 lanes of
// vpmaddubsw, so the offset of Q4_0 (q - 8) and Q5_0 (q - 16, 2c) is taken
// off in integers. Same d and qs as ActBlockQ8. An odd last block has a zero
// partner.
struct ActBlockQ8Pair {
  float d[8];
  float s[8];
  int8_t lo[32];
  int8_t hi[32];
  int16_t c[16];
};
static_assert(sizeof(ActBlockQ8Pair) == 160);

// One activation super-block of 256 for the 512-bit Q4_K kernel (AVX-512
// VNNI table): the same d and quants as ActBlockQ8K, the quants in the order
// in which a Q4_K super-block's nibbles come in two 64-byte registers
// (32-element sub-blocks 0, 2 | 1, 3 | 4, 6 | 5, 7: low nibbles of bytes
// 0..63, high nibbles, low of 64..127, high); sums32[i] = the sum of the
// quants of sub-block i (natural order), for the mins.
struct ActBlockQ8KImage {
  float d;
  int16_t sums32[8];
  int8_t qs[256];
};
static_assert(sizeof(ActBlockQ8KImage) == 276);
// The same super-block as an ActBlockQ8KImage (kernels.cc).
void Q8KToImage(const ActBlockQ8K& k, ActBlockQ8KImage* out);

// ActImage*: activations laid out in the byte image of a Q4_0 (18-byte blocks), Q4_1
// (20) or Q8_0 (34) weight row, 64 weight bytes per chunk (AVX-512 VNNI
// table). Blocks start at even offsets with their 2-byte scale (and min)
// first, so no 4-byte lane of a weight row holds quants of two blocks; the
// activation bytes sit where their weight quants sit (zero under scales,
// mins and past the row's end), so one vpdpbusd over 64 raw weight bytes
// gives each lane an integer sum within a single block.
// Q4_0/Q4_1: lo under the low nibbles (elements 0..15 of a block), hi under
// the high ones (16..31). Q8_0: lo alone.
// c: Q4_0, -8 x the sum of the lane's lo and hi bytes (its weights are
// q - 8, q unsigned); Q8_0, -128 x the sum of the lane's bytes (its weights
// enter vpdpbusd as w + 128); Q4_1, 0.
// d: the lane's block's activation scale; s (Q4_1): d x the block's sum of
// quants / 4 on each of its 4 lanes (the min's term). 0 past the row's end.
// A row of n elements has ceil(n / 32 x block bytes / 64) chunks.
struct ActImageQ4_0 {
  int8_t lo[64];
  int8_t hi[64];
  int32_t c[16];
  float d[16];
};
struct ActImageQ4_1 {
  int8_t lo[64];
  int8_t hi[64];
  int32_t c[16];
  float d[16];
  float s[16];
};
struct ActImageQ8_0 {
  int8_t lo[64];
  int32_t c[16];
  float d[16];
};
static_assert(sizeof(ActImageQ4_0) == 256 && sizeof(ActImageQ4_1) == 320 &&
              sizeof(ActImageQ8_0) == 192);

// Attention of num_queries query positions of one sequence, each for the
// `group` query heads that share KV head kv_head, and as many for each of
// the num_kv_heads - 1 KV heads after it (online softmax):
//   out[i][h] = softmax_p(scale * q[i][h] . K_h[p]) V_h[p], p in [lo_i, hi_i],
//   hi_i = positions[i], lo_i = max(0, hi_i - sliding_window + 1) when
//   sliding_window > 0, else 0; query head h (< group * num_kv_heads) reads
//   KV head kv_head + h / group.
// q[i][h] at q + i * row_stride + h * head_dim (out alike);
// num_queries * group * num_kv_heads <= kMaxAttnGroup rows. A row's result
// must not depend on the other rows it is computed with (engine steps bundle
// different queries and KV heads together), only on its own query and
// positions.
struct AttnGroupArgs {
  const float* q = nullptr;
  float* out = nullptr;
  int32_t group = 1;
  int32_t num_queries = 1;
  int64_t row_stride = 0;  // floats between queries (n_head * head_dim)
  const int32_t* positions = nullptr;
  int32_t sliding_window = 0;
  int32_t head_dim = 0;
  int32_t kv_head = 0;
  int32_t num_kv_heads = 1;
  float scale = 1.0f;
  float softcap = 0.0f;  // > 0: scores capped (only AttendGroupGeneric does it)
  const KvPagesView* kv = nullptr;
};
constexpr int kMaxAttnGroup = 16;

enum class ActKind : uint8_t {
  kNone = 0, kF32, kQ8, kQ8K, kQ8Pair, kImageQ4_0, kImageQ4_1, kImageQ8_0, kQ8KImage,
  kAmxQ8, kAmxQ8K, kAmxQ8KPlain
};
constexpr int kNumActKinds = 12;

// kAmxQ8 (AMX table): the ActBlockQ8 quants and scales of 16 tokens at a
// time (a group; the last one padded with zero tokens), laid out per block
// of 32 as an AMX B tile and the tokens' scales:
//   qs[k / 4][token][k % 4] (8 x 64 bytes), then d[token] and s[token]
// (16 floats each), 640 bytes per block. Per token cols / 32 x 40 bytes, so the group holding
// token t starts at act + (t / 16) x 16 x act_row_bytes, and a GemmFn for
// this kind is given act at the first token of a group.
// A last group of at most kAmxFewTokens tokens is followed by those tokens'
// blocks as AmxDecodeQ8 (d, the sum of the quants, the quants in order),
// token after token: the kernels take such tokens on the vector unit, up to
// 3 per load of the weights (the same bits as in a tile), cheaper than a
// tile of padding.
struct AmxBlockQ8 {
  int8_t qs[8][16][4];
  float d[16];
  float s[16];  // ActBlockQ8::s, for the mins of Q4_1 / Q5_1
};
static_assert(sizeof(AmxBlockQ8) == 640);
struct AmxDecodeQ8 {
  float d;
  int32_t qsum;
  int8_t qs[32];
};
static_assert(sizeof(AmxDecodeQ8) == 40);
constexpr int kAmxGroup = 16;

// kAmxQ8K (AMX table, Q4_K / Q5_K weights): the ActBlockQ8K quants of a group of 16
// tokens per super-block of 256 as four B tiles of 64 elements each
// (qs[s][k / 4][token][k % 4], element 64 s + k), then the tokens' d, then
// per token the sub-block sums of the quants in pairs for vpdpwssd against
// the mins (sums[2i] in the low 16 bits, sums[2i + 1] in the high): 16 x 276
// bytes, so per token cols / 256 x 276 bytes, as ActBlockQ8KImage. A last
// group of at most kAmxFewTokens tokens is followed by those tokens'
// ActBlockQ8KImage rows.
struct AmxBlockQ8K {
  int8_t qs[4][16][16][4];
  float d[16];
  int32_t sum_pairs[4][16];
};
static_assert(sizeof(AmxBlockQ8K) == 16 * 276);
// kAmxQ8KPlain (AMX table, Q6_K weights): the groups as kAmxQ8K, but a last
// group of few tokens is followed by those tokens' ActBlockQ8K rows (the
// quants in order, with the sums of 16 that Q6_K's offset of 32 needs).
// Up to this many tokens a group goes token by token on the vector unit
// (weights loaded once for 3 tokens): tinyllama Q4_0 `tern batch` at 8
// sequences 81 tok/s through a tile, 103-104 so (the VNNI table: 83).
constexpr int kAmxFewTokens = 10;

// y[t * ldy + r] = dot(weight row r, activation row t) for r < rows,
// t < num_tokens. w: rows of w_row_bytes; act: rows of act_row_bytes in the
// kernel's ActKind. Each (r, t) result is computed by the same sequence of
// operations whatever rows/num_tokens are, so any split is bitwise stable.
using GemmFn = void (*)(const uint8_t* w, int64_t w_row_bytes, int64_t rows,
                        const uint8_t* act, int64_t act_row_bytes,
                        int64_t num_tokens, int64_t cols, float* y, int64_t ldy);

struct MatMulKernel {
  ActKind act = ActKind::kNone;
  GemmFn gemm = nullptr;
};

constexpr int kMaxDTypeId = 40;

struct KernelTable {
  const char* isa = "";
  MatMulKernel matmul[kMaxDTypeId] = {};

  // n multiple of 32 / 256.
  void (*quantize_q8)(const float* x, int64_t n, ActBlockQ8* out) = nullptr;
  void (*quantize_q8k)(const float* x, int64_t n, ActBlockQ8K* out) = nullptr;
  // n multiple of 32; (n / 32 + 1) / 2 pairs (only tables that use kQ8Pair).
  void (*quantize_q8pair)(const float* x, int64_t n, ActBlockQ8Pair* out) = nullptr;
  // n multiple of 256 (only tables that use kQ8KImage).
  void (*quantize_q8k_image)(const float* x, int64_t n, ActBlockQ8KImage* out) = nullptr;
  // n multiple of 32; the row's chunks (only tables that use kImage*).
  void (*quantize_image_q4_0)(const float* x, int64_t n, ActImageQ4_0* out) = nullptr;
  void (*quantize_image_q4_1)(const float* x, int64_t n, ActImageQ4_1* out) = nullptr;
  void (*quantize_image_q8_0)(const float* x, int64_t n, ActImageQ8_0* out) = nullptr;

  // Element-wise and attention helpers (see kernels.h for the contracts).
  void (*rms_norm)(const float* x, const float* weight, int64_t n, float eps,
                   float* out) = nullptr;
  void (*silu_mul)(const float* gate, const float* up, int64_t n,
                   float* out) = nullptr;
  void (*softmax)(float* x, int64_t n) = nullptr;
  void (*rope)(float* x, int64_t num_heads, int64_t head_dim, int64_t rope_dim,
               const float* cos_sin, bool neox) = nullptr;
  float (*dot_f32)(const float* a, const float* b, int64_t n) = nullptr;
  float (*dot_f16)(const float* a, const uint16_t* b, int64_t n) = nullptr;
  void (*axpy_f32)(float alpha, const float* x, int64_t n, float* y) = nullptr;
  void (*axpy_f16)(float alpha, const uint16_t* x, int64_t n, float* y) = nullptr;
  void (*scale_f32)(float alpha, int64_t n, float* y) = nullptr;
  // float -> IEEE half, round to nearest even (bitwise Fp32ToFp16).
  void (*f32_to_f16)(const float* x, int64_t n, uint16_t* out) = nullptr;
  // Returns false where the table has no kernel for the shape (head_dim,
  // KV dtype); the caller then uses AttendGroupGeneric.
  bool (*attend_group)(const AttnGroupArgs& args) = nullptr;

  const MatMulKernel* FindMatMul(DType t) const {
    const uint32_t id = (uint32_t)t;
    if (id >= (uint32_t)kMaxDTypeId || matmul[id].gemm == nullptr) return nullptr;
    return &matmul[id];
  }
};

// Attention through the table's dot/axpy/scale entries (the spec of
// attend_group, and its fallback).
void AttendGroupGeneric(const KernelTable& table, const AttnGroupArgs& args);

// The scalar spec (always available).
const KernelTable& RefKernelTable();
// The AVX2 table, or nullptr when the CPU lacks AVX2/FMA/F16C.
const KernelTable* Avx2KernelTable();
// AVX2 + AVX-512 VNNI 8-bit dot products (outputs bitwise equal to the AVX2
// table's), or nullptr when the CPU lacks AVX-512 F/VL/BW/VNNI.
const KernelTable* Avx512VnniKernelTable();
// The AVX-512 VNNI table with Q8_0, Q4_0, Q5_0, Q4_K, Q5_K, Q6_K through
// AMX-INT8 tiles (every token count, decode included, so outputs do not depend on
// the batch; not bitwise equal to the other tables), or nullptr when the CPU
// or the OS lacks AMX.
const KernelTable* AmxKernelTable();
// The table chosen at start-up.
const KernelTable& ActiveKernelTable();

// MatMul through a given table (tests compare tables with it).
void MatMulWith(const KernelTable& table, const WeightView& w, const float* x,
                int64_t num_tokens, float* y, ThreadPool* pool);
void MatMulManyWith(const KernelTable& table, std::span<const WeightView> ws, const float* x,
                    int64_t num_tokens, float* const* ys, ThreadPool* pool);

}  // namespace tern::kernels
