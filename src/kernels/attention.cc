// Attention over paged KV: AttendGroupGeneric (the spec of a table's
// attend_group, and its fallback) and Attention / AttentionBatch of
// kernels.h, which split a batch into work items for the pool and hand each
// to the active table's attend_group.
#include "kernels/attention.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <optional>
#include <vector>

#include "base/check.h"
#include "base/fp16.h"
#include "kernels/kernel_table.h"
#include "kernels/workspace.h"

namespace tern::kernels {

// Positions are processed in chunks: scores of a chunk for all heads of a
// KV group, one rescale of the running output per chunk (online softmax).
constexpr int kAttnChunk = 64;

namespace {

// Head kv_head's K (V) row of a position: raw f32/f16 elements where the
// table's dot/axpy take them, else decoded into buf (a block format, BF16).
struct HeadRow {
  const float* f32 = nullptr;
  const uint16_t* f16 = nullptr;
};
inline HeadRow ReadHead(DType t, const uint8_t* slot, int64_t e0, int64_t n, float* buf) {
  if (t == DType::kF32) return {(const float*)slot + e0, nullptr};
  if (t == DType::kF16) return {nullptr, (const uint16_t*)slot + e0};
  LoadKvElems(t, slot, e0, n, buf);
  return {buf, nullptr};
}

// One query position (positions[0]) of a.
void AttendOneQuery(const KernelTable& kt, const AttnGroupArgs& a) {
  CHECK(a.group >= 1 && a.group <= kMaxAttnGroup);
  const KvPagesView& kv = *a.kv;
  const int32_t group = a.group, head_dim = a.head_dim;
  const DType kt_k = kv.KDtype(), kt_v = kv.VDtype();
  const int64_t e0 = (int64_t)a.kv_head * head_dim;  // the head's first element in a slot
  DCHECK(a.scratch != nullptr);
  float* const decoded = a.scratch->Get<float>(ScratchBuf::kAttnDecoded, head_dim);
  float scores[kAttnChunk * kMaxAttnGroup];
  float running_max[kMaxAttnGroup], running_sum[kMaxAttnGroup];
  for (int g = 0; g < group; ++g) {
    running_max[g] = -INFINITY;
    running_sum[g] = 0.0f;
    std::memset(a.out + (int64_t)g * head_dim, 0, sizeof(float) * head_dim);
  }
  const int32_t hi = a.positions[0];
  const int32_t lo = a.sliding_window > 0 ? std::max(0, hi - a.sliding_window + 1) : 0;
  // Q8_0 / Q4_0 K of whole blocks, or rotated: scores in 8-bit integers
  // (KScoresInt8) of the query (rotated: RotatedKeyQuery's) over qn
  // elements, the blocks from b0 on.
  const bool k_int8 = KScoresInt8(kt_k, e0, head_dim);
  const bool k_rot = KvKeyRotated(kt_k, head_dim);
  int64_t b0 = 0, nb = 0;
  if (k_int8) KeyScoreBlocks(e0, head_dim, &b0, &nb);
  const int64_t qn = nb * 32;
  int8_t* const qq =
      k_int8 ? a.scratch->Get<int8_t>(ScratchBuf::kAttnQueryQ8, (int64_t)group * (qn + 8 * nb))
             : nullptr;
  float* const qd = k_int8 ? (float*)(qq + (int64_t)group * qn) : nullptr;
  int32_t* const qsum = k_int8 ? (int32_t*)(qd + group * nb) : nullptr;
  for (int g = 0; k_int8 && g < group; ++g) {
    const float* qg = a.q + (int64_t)g * head_dim;
    float rotated[kMaxRotatedKeyBlocks * 32];
    if (k_rot) {
      RotatedKeyQuery(qg, e0, head_dim, rotated);
      qg = rotated;
    }
    QuantizeQueryQ8(qg, qn, qq + (int64_t)g * qn, qd + g * nb, qsum + g * nb);
  }
  const int64_t k_block_off = b0 * (k_int8 ? BlockBytes(kt_k) : 0);
  for (int32_t p0 = lo; p0 <= hi; p0 += kAttnChunk) {
    const int32_t n = std::min(kAttnChunk, hi - p0 + 1);
    for (int32_t i = 0; i < n; ++i) {
      const uint8_t* const kslot = kv.k + kv.KOffset(p0 + i);
      const HeadRow krow =
          k_int8 ? HeadRow{} : ReadHead(kt_k, kslot, e0, head_dim, decoded);
      for (int g = 0; g < group; ++g) {
        const float* qg = a.q + (int64_t)g * head_dim;
        const float s =
            k_int8 ? DotQueryQ8(kt_k, qq + (int64_t)g * qn, qd + g * nb, kslot + k_block_off, qn)
            : krow.f32 != nullptr ? kt.dot_f32(qg, krow.f32, head_dim)
                                  : kt.dot_f16(qg, krow.f16, head_dim);
        scores[g * kAttnChunk + i] =
            a.softcap > 0.0f ? a.softcap * std::tanh(s * a.scale / a.softcap) : s * a.scale;
      }
    }
    for (int g = 0; g < group; ++g) {
      float* sg = scores + g * kAttnChunk;
      float mx = running_max[g];
      for (int32_t i = 0; i < n; ++i) mx = std::max(mx, sg[i]);
      const float correction = std::exp(running_max[g] - mx);
      if (correction != 1.0f) {
        kt.scale_f32(correction, head_dim, a.out + (int64_t)g * head_dim);
        running_sum[g] *= correction;
      }
      running_max[g] = mx;
      for (int32_t i = 0; i < n; ++i) {
        sg[i] = std::exp(sg[i] - mx);
        running_sum[g] += sg[i];
      }
    }
    for (int32_t i = 0; i < n; ++i) {
      const HeadRow vrow =
          ReadHead(kt_v, kv.v + kv.VOffset(p0 + i), e0, head_dim, decoded);
      for (int g = 0; g < group; ++g) {
        float* og = a.out + (int64_t)g * head_dim;
        const float w = scores[g * kAttnChunk + i];
        if (vrow.f32 != nullptr) kt.axpy_f32(w, vrow.f32, head_dim, og);
        else kt.axpy_f16(w, vrow.f16, head_dim, og);
      }
    }
  }
  for (int g = 0; g < group; ++g) {
    const float inv = running_sum[g] > 0.0f ? 1.0f / running_sum[g] : 0.0f;
    kt.scale_f32(inv, head_dim, a.out + (int64_t)g * head_dim);
  }
}

}  // namespace

void RotatedKeyQuery(const float* q, int64_t e0, int64_t head_dim, float* out) {
  int64_t b0, nb;
  KeyScoreBlocks(e0, head_dim, &b0, &nb);
  std::memset(out, 0, sizeof(float) * nb * 32);
  std::memcpy(out + (e0 - b0 * 32), q, sizeof(float) * head_dim);
  for (int64_t b = 0; b < nb; ++b) HadamardBlock32(out + b * 32, 0.125f);
}

void QuantizeQueryQ8(const float* q, int64_t n, int8_t* qq, float* d, int32_t* qsum) {
  CHECK(n % 32 == 0);
  for (int64_t b = 0; b < n / 32; ++b) {
    const float* x = q + b * 32;
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    d[b] = amax / 127.0f;
    int32_t sum = 0;
    for (int j = 0; j < 32; ++j) {
      // Clamped as a float first: a NaN (a non-finite query) becomes -127,
      // never an out-of-range conversion.
      const int v = (int)std::min(127.0f, std::max(-127.0f, std::nearbyint(x[j] * inv)));
      qq[b * 32 + j] = (int8_t)v;
      sum += v;
    }
    qsum[b] = sum;
  }
}

float DotQueryQ8(DType k, const int8_t* qq, const float* d, const uint8_t* blocks, int64_t n) {
  float s = 0.0f;
  for (int64_t b = 0; b < n / 32; ++b) {
    const int8_t* x = qq + b * 32;
    int32_t isum = 0;
    uint16_t dh;
    if (k == DType::kQ8_0) {
      const uint8_t* blk = blocks + b * 34;
      std::memcpy(&dh, blk, 2);
      for (int j = 0; j < 32; ++j) isum += x[j] * (int8_t)blk[2 + j];
    } else {
      DCHECK(k == DType::kQ4_0);
      const uint8_t* blk = blocks + b * 18;
      std::memcpy(&dh, blk, 2);
      for (int j = 0; j < 16; ++j) {
        isum += x[j] * ((blk[2 + j] & 0xF) - 8) + x[j + 16] * ((blk[2 + j] >> 4) - 8);
      }
    }
    s = std::fma((float)isum, d[b] * Fp16ToFp32(dh), s);
  }
  return s;
}

void AttendGroupGeneric(const KernelTable& kt, const AttnGroupArgs& a) {
  for (int32_t i = 0; i < a.num_queries; ++i) {
    for (int32_t j = 0; j < a.num_kv_heads; ++j) {
      AttnGroupArgs one = a;
      const int64_t head0 = (int64_t)j * a.group * a.head_dim;
      one.q = a.q + i * a.row_stride + head0;
      one.out = a.out + i * a.row_stride + head0;
      one.positions = a.positions + i;
      one.num_queries = 1;
      one.kv_head = a.kv_head + j;
      one.num_kv_heads = 1;
      AttendOneQuery(kt, one);
    }
  }
}

void AttentionBatch(std::span<const AttentionSeq> seqs, int32_t n_head, int32_t n_head_kv,
                    int32_t head_dim, float scale, int32_t sliding_window,
                    const KvPagesView& kv, ThreadPool* pool, Workspace* workspace,
                    float softcap) {
  CHECK(n_head_kv > 0 && n_head % n_head_kv == 0);
  CHECK(IsKvDtype(kv.KDtype()) && IsKvDtype(kv.VDtype()));
  const int32_t group = n_head / n_head_kv;
  const KernelTable& kt = ActiveKernelTable();
  const int64_t row = (int64_t)n_head * head_dim;
  // Work items: (sequence, bundle of queries, kv head). A bundle is up to
  // kMaxAttnGroup / group consecutive queries of a sequence (a prompt
  // chunk's tokens), so each K/V row read serves all of them; groups of
  // more than 16 heads are split (one query per item). Threads take items
  // one by one (their costs differ with the context length); an item's
  // rows come out the same whoever takes it and whatever it is bundled with.
  const int32_t sub = (group + kMaxAttnItemHeads - 1) / kMaxAttnItemHeads;
  const int32_t sub_group = group / sub;
  CHECK(sub_group * sub == group);
  // Bundles pay off where a query has few heads per KV head (MHA: the
  // per-chunk set-up is shared by 16 queries instead of paid per query;
  // stories110m 2048-token prompt TTFT 3.6-3.8 -> 2.7-2.9 s), and, since
  // each KV head's K rows are converted once for all its rows and the
  // AVX-512 scores take two rows at a time, also at 8 heads per KV head:
  // 2 queries of tinyllama a bundle, pp512 at depth 2048 165-173 -> 181-187
  // tok/s, at depth 4096 100-101 -> 121 (it had measured 7% slower when
  // every row converted its own K).
  const int64_t bundle = std::max<int32_t>(1, kMaxAttnGroup / sub_group);
  const int64_t per_bundle = (int64_t)n_head_kv * sub;
  // A sequence with one query (decode) and few heads per KV head takes
  // several consecutive KV heads per item instead: their K/V rows of a
  // position lie side by side in its slot, so an item walks whole slots
  // rather than one strided head (MHA, 12 heads of 64, 16 sequences x 144
  // positions, 2 threads: KV read at 21.5 -> 31 GB/s, 3.9 -> 2.7 ms a step;
  // at 1024 positions 22 -> 32 GB/s). Items stay at least 4 per thread;
  // at 8 heads per KV head (2 KV heads fill an item) at least 1: tinyllama
  // Q4_0 tg at depth 4096 32.5-32.9 -> 34.2-35.1 tok/s, depth 1024 and
  // `tern batch` at 1-64 sequences level.
  const int threads = pool != nullptr ? pool->num_threads() : 1;
  int64_t decode_seqs = 0;
  for (const AttentionSeq& seq : seqs) decode_seqs += seq.num_queries == 1;
  int32_t kv_per_item = 1;
  if (sub == 1 && sub_group <= 8 && decode_seqs > 0) {
    const int64_t per_thread = sub_group == 8 ? 1 : 4;
    const int64_t items_per_seq =
        std::max<int64_t>(1, (per_thread * threads + decode_seqs - 1) / decode_seqs);
    kv_per_item = (int32_t)std::clamp<int64_t>((n_head_kv + items_per_seq - 1) / items_per_seq, 1,
                                               std::min(n_head_kv, kMaxAttnItemHeads / sub_group));
  }
  const auto multi_kv = [&](const AttentionSeq& seq) {
    return kv_per_item > 1 && seq.num_queries == 1;
  };
  std::vector<int64_t> first_item(seqs.size() + 1, 0);
  for (size_t s = 0; s < seqs.size(); ++s) {
    const int64_t bundles = (seqs[s].num_queries + bundle - 1) / bundle;
    first_item[s + 1] = first_item[s] + (multi_kv(seqs[s])
                                             ? (n_head_kv + kv_per_item - 1) / kv_per_item
                                             : bundles * per_bundle);
  }
  const int64_t items = first_item.back();
  if (items == 0) return;
  std::optional<Workspace> own;  // the call's own, where the caller has none
  if (workspace == nullptr) workspace = &own.emplace();
  workspace->Reserve(threads);
  std::atomic<int64_t> next{0};
  auto run = [&](int slot) {
    WorkerScratch* const scratch = &workspace->Slot(slot);
    size_t s = 0;
    for (int64_t it = next.fetch_add(1, std::memory_order_relaxed); it < items;
         it = next.fetch_add(1, std::memory_order_relaxed)) {
      while (first_item[s + 1] <= it) ++s;  // items are taken in increasing order
      const AttentionSeq& seq = seqs[s];
      const int64_t local = it - first_item[s];
      int64_t q0 = 0;
      int32_t kv_head, first_head, num_kv_heads = 1;
      if (multi_kv(seq)) {
        kv_head = (int32_t)local * kv_per_item;
        num_kv_heads = std::min(kv_per_item, n_head_kv - kv_head);
        first_head = kv_head * group;
      } else {
        q0 = local / per_bundle * bundle;
        const int32_t rest = (int32_t)(local % per_bundle);
        kv_head = rest / sub;
        first_head = kv_head * group + (rest % sub) * sub_group;
      }
      KvPagesView view = kv;
      view.block_table = seq.block_table;
      const AttnGroupArgs args{
          .q = seq.q + q0 * row + (int64_t)first_head * head_dim,
          .out = seq.out + q0 * row + (int64_t)first_head * head_dim,
          .group = sub_group,
          .num_queries = (int32_t)std::min(bundle, seq.num_queries - q0),
          .row_stride = row,
          .positions = seq.positions + q0,
          .sliding_window = sliding_window,
          .head_dim = head_dim,
          .kv_head = kv_head,
          .num_kv_heads = num_kv_heads,
          .scale = scale,
          .softcap = softcap,
          .kv = &view,
          .scratch = scratch};
      if (softcap > 0.0f || !kt.attend_group(args)) AttendGroupGeneric(kt, args);
    }
  };
  if (pool != nullptr && pool->num_threads() > 1 && items > 1) pool->RunOnAll(run);
  else run(0);
}

void Attention(const float* q, int64_t num_queries, const int32_t* positions,
               int32_t n_head, int32_t n_head_kv, int32_t head_dim, float scale,
               int32_t sliding_window, const KvPagesView& kv, float* out,
               ThreadPool* pool, Workspace* workspace) {
  const AttentionSeq seq{q, out, positions, num_queries, kv.block_table};
  AttentionBatch(std::span<const AttentionSeq>(&seq, 1), n_head, n_head_kv, head_dim, scale,
                 sliding_window, kv, pool, workspace);
}

}  // namespace tern::kernels
