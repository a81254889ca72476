// Attention kernels' contract: the arguments a table's attend_group entry
// takes, and AttendGroupGeneric, its spec and fallback (attention.cc, which
// also holds Attention / AttentionBatch of kernels.h: the split of a batch
// into work items).
//
// Thread rules: reentrant.
#pragma once

#include <cstdint>

#include "kernels/kernels.h"

namespace tern::kernels {

struct KernelTable;
class WorkerScratch;

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
  // The buffers of the pool slot that runs the item (workspace.h); never
  // null.
  WorkerScratch* scratch = nullptr;
};
constexpr int kMaxAttnGroup = 32;
// Heads a work item takes at most where it is split by heads rather than
// bundled by queries (a group of more heads per KV head, a decode item of
// several KV heads; attention.cc).
constexpr int kMaxAttnItemHeads = 16;

// Attention through the table's dot/axpy/scale entries (the spec of
// attend_group, and its fallback).
void AttendGroupGeneric(const KernelTable& table, const AttnGroupArgs& args);

// K scores in 8-bit integers. Where K is Q8_0 or Q4_0 and a KV head's
// elements are whole blocks (e0 and head_dim multiples of 32), every table
// scores a position as llama.cpp's q8_0 dot does: the query head is
// quantized per block of 32 (QuantizeQueryQ8), each block's dot with K's
// quants is an exact int32 sum, and
//   s = 0; for each block b in order: s = fma((float)isum_b, dq_b * dk_b, s);
//   score = s * scale
// (dq_b * dk_b and s * scale rounded as floats), so the tables agree
// bitwise on every score. Elsewhere K is decoded exactly to f32 and dotted
// with the f32 query. A rotated K (KvKeyRotated: head_dim < 32) is always
// scored in 8 bits: the query is RotatedKeyQuery's blocks, quantized per
// block, against the whole blocks its head lies in (KeyScoreBlocks).
inline bool KScoresInt8(DType k, int64_t e0, int64_t head_dim) {
  return (k == DType::kQ8_0 || k == DType::kQ4_0) &&
         ((e0 % 32 == 0 && head_dim % 32 == 0) || KvKeyRotated(k, head_dim));
}
// The blocks of 32 a head's 8-bit scores read: [*b0, *b0 + *nb), the blocks
// of its elements [e0, e0 + head_dim).
inline void KeyScoreBlocks(int64_t e0, int64_t head_dim, int64_t* b0, int64_t* nb) {
  *b0 = e0 / 32;
  *nb = (e0 + head_dim + 31) / 32 - *b0;
}
// The most blocks a rotated head's scores read (head_dim < 32: 2).
constexpr int kMaxRotatedKeyBlocks = 2;
// The query a rotated K is scored with: q (head_dim values, the head at
// element e0 of the row) placed in zeros over KeyScoreBlocks's blocks,
// each block then H x / 8 (HadamardBlock32). out: nb * 32 floats.
void RotatedKeyQuery(const float* q, int64_t e0, int64_t head_dim, float* out);
// q[0, n) (n a multiple of 32) per block of 32: qq = round(q / d), d =
// max|q| / 127 (qq in [-127, 127]; an all-zero block: d = 0, qq = 0), and
// qsum = the block's sum of qq.
void QuantizeQueryQ8(const float* q, int64_t n, int8_t* qq, float* d, int32_t* qsum);
// Score of one position (the formula above, before the scale): the
// n-element query (qq, d per block) against a Q8_0 / Q4_0 row's blocks from
// `blocks` on.
float DotQueryQ8(DType k, const int8_t* qq, const float* d, const uint8_t* blocks, int64_t n);

}  // namespace tern::kernels
