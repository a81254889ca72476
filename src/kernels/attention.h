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
constexpr int kMaxAttnGroup = 16;

// Attention through the table's dot/axpy/scale entries (the spec of
// attend_group, and its fallback).
void AttendGroupGeneric(const KernelTable& table, const AttnGroupArgs& args);

}  // namespace tern::kernels
