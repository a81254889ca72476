#include "kernels/kernels.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/aligned_vector.h"
#include "base/check.h"
#include "base/fp16.h"
#include "kernels/cpu_features.h"
#include "kernels/kernel_table.h"
#include "kernels/ref/ref_kernels.h"
#include "kernels/x86/avx2_kernels.h"
#include "quant/quant.h"

namespace tern::kernels {
namespace {

// Activation rows of a token chunk should stay in L2 while a tile of weight
// rows is reused across them.
constexpr int64_t kActChunkBytes = 192 * 1024;
// FloatKernel::kPackCols columns of f32: the columns of a token chunk that
// a packed 16-bit weight block is reused across.
constexpr int64_t kFloatKBlockBytes = 1024 * 4;
// Row split granularity: a multiple of every kernel's row tile (16: the
// AMX tiles).
constexpr int64_t kRowGrain = 16;

KernelTable MakeRefTable() {
  KernelTable t;
  FillRefKernels(&t);
  return t;
}

// The reference table overwritten by an ISA's Fill function; nullptr when
// the CPU lacks the ISA. One static table per Fill.
template <void (*Fill)(KernelTable*)>
const KernelTable* MakeSimdTable(bool available) {
  if (!available) return nullptr;
  static KernelTable t = [] {
    KernelTable table;
    FillRefKernels(&table);
    Fill(&table);
    return table;
  }();
  return &t;
}

// TERN_ISA: "scalar", "avx2" or "avx512vnni" caps the choice; default the
// best the CPU has.
const KernelTable& ChooseTable() {
  const char* isa = std::getenv("TERN_ISA");
  const std::string cap = isa != nullptr ? isa : "";
  if (cap == "scalar") return RefKernelTable();
  if (cap != "avx2" && cap != "avx512vnni") {
    if (const KernelTable* t = AmxKernelTable()) return *t;
  }
  if (cap != "avx2") {
    if (const KernelTable* t = Avx512VnniKernelTable()) return *t;
  }
  if (const KernelTable* t = Avx2KernelTable()) return *t;
  return RefKernelTable();
}

int64_t ActRowBytes(ActKind kind, int64_t cols) {
  switch (kind) {
    case ActKind::kF32: return cols * (int64_t)sizeof(float);
    case ActKind::kQ8: return cols / 32 * (int64_t)sizeof(ActBlockQ8);
    case ActKind::kQ8K: return cols / 256 * (int64_t)sizeof(ActBlockQ8K);
    case ActKind::kQ8Pair: return (cols / 32 + 1) / 2 * (int64_t)sizeof(ActBlockQ8Pair);
    // One chunk per 64 bytes of the weight row.
    case ActKind::kImageQ4_0:
      return (RowBytes(DType::kQ4_0, cols) + 63) / 64 * (int64_t)sizeof(ActImageQ4_0);
    case ActKind::kImageQ4_1:
      return (RowBytes(DType::kQ4_1, cols) + 63) / 64 * (int64_t)sizeof(ActImageQ4_1);
    case ActKind::kImageQ8_0:
      return (RowBytes(DType::kQ8_0, cols) + 63) / 64 * (int64_t)sizeof(ActImageQ8_0);
    case ActKind::kQ8KImage: return cols / 256 * (int64_t)sizeof(ActBlockQ8KImage);
    case ActKind::kAmxQ8: return cols / 32 * (int64_t)sizeof(AmxBlockQ8) / kAmxGroup;
    case ActKind::kAmxQ8K:
    case ActKind::kAmxQ8KPlain: return cols / 256 * (int64_t)sizeof(AmxBlockQ8K) / kAmxGroup;
    default: return 0;
  }
}

// Per-thread scratch for quantized activations, one per ActKind (grows,
// never shrinks).
AlignedVector<uint8_t>& ActScratch(ActKind kind) {
  thread_local AlignedVector<uint8_t> scratch[kNumActKinds];
  return scratch[(int)kind];
}

void ForRange(ThreadPool* pool, int64_t n, int64_t grain,
              const ThreadPool::RangeFn& fn) {
  if (pool != nullptr && pool->num_threads() > 1) {
    pool->ParallelFor(n, fn, grain);
  } else if (n > 0) {
    fn(0, n, 0);
  }
}

// Like ForRange, but in pieces of about n / (threads x kPiecesPerThread)
// rows (a multiple of grain). Each thread owns a contiguous share of [0, n)
// and works through it front to back, so its row streams run on from piece
// to piece (the kernels prefetch past a tile's end into the rows that
// follow; a thread that jumped to an unrelated piece would start it cold).
// A thread done with its share takes pieces from the back of the share with
// the most rows left, so a thread slowed by the machine does not hold the
// others back at the end of the op. There is a share per thread that can
// run at once (pool->max_parallel()): with more threads than cores, the
// slots beyond it only steal, so the shares stay long and are walked front
// to back (tinyllama Q4_0 tg at -t 8 on 2 cores, 5 alternating pairs on a
// loaded machine: 15-32 -> 25-40 tok/s; -t 2 there: 20-34).
// Results do not depend on who takes which piece.
constexpr int64_t kPiecesPerThread = 16;
void ForRangeDynamic(ThreadPool* pool, int64_t n, int64_t grain,
                     const ThreadPool::RangeFn& fn) {
  if (pool == nullptr || pool->num_threads() <= 1 || n <= grain) {
    if (n > 0) fn(0, n, 0);
    return;
  }
  const int nt = pool->max_parallel();
  const int64_t piece =
      std::max<int64_t>(grain, (n / (nt * kPiecesPerThread) + grain - 1) / grain * grain);
  // A share's rows left: [next, end), packed as next | end << 32.
  struct alignas(64) Share {
    std::atomic<uint64_t> range;
  };
  CHECK_LT(n, (int64_t)1 << 32);
  // On the stack for the usual thread counts: this runs for every matmul.
  constexpr int kStackShares = 8;
  Share stack_shares[kStackShares];
  std::unique_ptr<Share[]> heap_shares;
  if (nt > kStackShares) heap_shares.reset(new Share[nt]);
  Share* const shares = nt > kStackShares ? heap_shares.get() : stack_shares;
  const int64_t units = (n + grain - 1) / grain;
  for (int t = 0; t < nt; ++t) {
    const uint64_t begin = (uint64_t)std::min(n, units * t / nt * grain);
    const uint64_t end = (uint64_t)std::min(n, units * (t + 1) / nt * grain);
    shares[t].range.store(begin | end << 32, std::memory_order_relaxed);
  }
  // Takes a piece from the front (owner) or the back (another thread) of a
  // share; false when it is empty.
  auto take = [&](Share& share, bool front, int64_t* b, int64_t* e) {
    uint64_t r = share.range.load(std::memory_order_relaxed);
    for (;;) {
      const int64_t next = (int64_t)(r & 0xFFFFFFFFu), end = (int64_t)(r >> 32);
      if (next >= end) return false;
      // Pieces shrink to half of what is left near a share's end, so the
      // threads finish within about a grain of each other.
      const int64_t left = end - next;
      const int64_t size =
          left > 2 * piece ? piece : std::max(grain, (left / 2 + grain - 1) / grain * grain);
      uint64_t updated;
      if (front) {
        *b = next;
        *e = std::min(end, next + size);
        updated = (uint64_t)*e | (uint64_t)end << 32;
      } else {
        *e = end;
        *b = std::max(next, (end - size) / grain * grain);
        updated = (uint64_t)next | (uint64_t)*b << 32;
      }
      if (share.range.compare_exchange_weak(r, updated, std::memory_order_relaxed)) return true;
    }
  };
  pool->RunOnAll([&](int thread) {
    int64_t b, e;
    if (thread < nt) {
      while (take(shares[thread], true, &b, &e)) fn(b, e, thread);
    }
    for (;;) {
      int victim = -1;
      int64_t most = 0;
      for (int t = 0; t < nt; ++t) {
        const uint64_t r = shares[t].range.load(std::memory_order_relaxed);
        const int64_t left = (int64_t)(r >> 32) - (int64_t)(r & 0xFFFFFFFFu);
        if (left > most) most = left, victim = t;
      }
      if (victim < 0) return;
      if (take(shares[victim], false, &b, &e)) fn(b, e, thread);
    }
  });
}

// kAmxQ8 / kAmxQ8K / kAmxQ8KPlain: each group of 16 tokens quantized as Q
// rows (ActBlockQ8 / ActBlockQ8K: the same quants and scales as the other
// tables), then laid out per block as the group's tiles (fill_group(q,
// token, group block)) and, after a last group of few tokens, as those
// tokens' blocks for the vector unit (fill_decode(q, decode block)).
template <class Q, class Group, class Decode, int kBlockCols, class Quantize, class FillGroup,
          class FillDecode>
const uint8_t* PrepareAmx(ActKind kind, const float* x, int64_t num_tokens, int64_t cols,
                          ThreadPool* pool, Quantize quantize, FillGroup fill_group,
                          FillDecode fill_decode) {
  const int64_t nb = cols / kBlockCols;
  const int64_t groups = (num_tokens + kAmxGroup - 1) / kAmxGroup;
  const int64_t group_bytes = nb * (int64_t)sizeof(Group);
  const int64_t last_n = num_tokens - (groups - 1) * kAmxGroup;
  const bool few_last = last_n <= kAmxFewTokens;
  const int64_t decode_bytes = few_last ? last_n * nb * (int64_t)sizeof(Decode) : 0;
  AlignedVector<uint8_t>& scratch = ActScratch(kind);
  if ((int64_t)scratch.size() < group_bytes * groups + decode_bytes) {
    scratch.resize(group_bytes * groups + decode_bytes);
  }
  uint8_t* act = scratch.data();
  auto body = [&](int64_t g0, int64_t g1, int) {
    thread_local std::vector<Q> rows;
    rows.resize(kAmxGroup * nb);
    for (int64_t g = g0; g < g1; ++g) {
      const int64_t n = std::min<int64_t>(kAmxGroup, num_tokens - g * kAmxGroup);
      for (int64_t t = 0; t < n; ++t) {
        quantize(x + (g * kAmxGroup + t) * cols, cols, rows.data() + t * nb);
      }
      if (few_last && g == groups - 1) {
        // The kernels take these tokens on the vector unit: no tiles.
        Decode* dec = (Decode*)(act + groups * group_bytes);
        for (int64_t i = 0; i < n * nb; ++i) fill_decode(rows[i], dec[i]);
        continue;
      }
      Group* out = (Group*)(act + g * group_bytes);
      if (n < kAmxGroup) std::memset((void*)out, 0, group_bytes);  // the padding tokens
      for (int64_t b = 0; b < nb; ++b) {
        for (int64_t t = 0; t < n; ++t) fill_group(rows[t * nb + b], (int)t, out[b]);
      }
    }
  };
  if (groups >= 2) ForRange(pool, groups, 1, body);
  else body(0, groups, 0);
  return act;
}

const uint8_t* PrepareAmxActivations(const KernelTable& table, ActKind kind, const float* x,
                                     int64_t num_tokens, int64_t cols, ThreadPool* pool) {
  if (kind == ActKind::kAmxQ8) {
    return PrepareAmx<ActBlockQ8, AmxBlockQ8, AmxDecodeQ8, 32>(
        kind, x, num_tokens, cols, pool, table.quantize_q8,
        [](const ActBlockQ8& a, int t, AmxBlockQ8& o) {
          o.d[t] = a.d;
          o.s[t] = a.s;
          for (int k4 = 0; k4 < 8; ++k4) std::memcpy(o.qs[k4][t], a.qs + 4 * k4, 4);
        },
        [](const ActBlockQ8& a, AmxDecodeQ8& o) {
          int32_t sum = 0;
          for (int k = 0; k < 32; ++k) sum += a.qs[k];
          o.d = a.d;
          o.qsum = sum;
          std::memcpy(o.qs, a.qs, 32);
        });
  }
  const auto fill_group = [](const ActBlockQ8K& a, int t, AmxBlockQ8K& o) {
    o.d[t] = a.d;
    for (int s = 0; s < 4; ++s) {
      for (int k4 = 0; k4 < 16; ++k4) std::memcpy(o.qs[s][k4][t], a.qs + 64 * s + 4 * k4, 4);
    }
    for (int i = 0; i < 4; ++i) {
      o.sum_pairs[i][t] = (int32_t)(uint16_t)a.sums32[2 * i] |
                          (int32_t)((uint32_t)(uint16_t)a.sums32[2 * i + 1] << 16);
    }
  };
  if (kind == ActKind::kAmxQ8KPlain) {
    return PrepareAmx<ActBlockQ8K, AmxBlockQ8K, ActBlockQ8K, 256>(
        kind, x, num_tokens, cols, pool, table.quantize_q8k, fill_group,
        [](const ActBlockQ8K& a, ActBlockQ8K& o) { o = a; });
  }
  return PrepareAmx<ActBlockQ8K, AmxBlockQ8K, ActBlockQ8KImage, 256>(
      kind, x, num_tokens, cols, pool, table.quantize_q8k, fill_group,
      [](const ActBlockQ8K& a, ActBlockQ8KImage& o) { Q8KToImage(a, &o); });
}

bool IsAmxKind(ActKind kind) {
  return kind == ActKind::kAmxQ8 || kind == ActKind::kAmxQ8K || kind == ActKind::kAmxQ8KPlain;
}

// Quantizes (or passes through) the activations; returns the row pointer.
const uint8_t* PrepareActivations(const KernelTable& table, ActKind kind,
                                  const float* x, int64_t num_tokens, int64_t cols,
                                  ThreadPool* pool) {
  if (kind == ActKind::kF32) return (const uint8_t*)x;
  if (IsAmxKind(kind)) {
    return PrepareAmxActivations(table, kind, x, num_tokens, cols, pool);
  }
  const int64_t row_bytes = ActRowBytes(kind, cols);
  AlignedVector<uint8_t>& scratch = ActScratch(kind);
  if ((int64_t)scratch.size() < row_bytes * num_tokens) {
    scratch.resize(row_bytes * num_tokens);
  }
  uint8_t* act = scratch.data();
  auto body = [&](int64_t t0, int64_t t1, int) {
    for (int64_t t = t0; t < t1; ++t) {
      if (kind == ActKind::kQ8) {
        table.quantize_q8(x + t * cols, cols, (ActBlockQ8*)(act + t * row_bytes));
      } else if (kind == ActKind::kImageQ4_0) {
        table.quantize_image_q4_0(x + t * cols, cols, (ActImageQ4_0*)(act + t * row_bytes));
      } else if (kind == ActKind::kImageQ8_0) {
        table.quantize_image_q8_0(x + t * cols, cols, (ActImageQ8_0*)(act + t * row_bytes));
      } else if (kind == ActKind::kQ8KImage) {
        table.quantize_q8k_image(x + t * cols, cols, (ActBlockQ8KImage*)(act + t * row_bytes));
      } else if (kind == ActKind::kImageQ4_1) {
        table.quantize_image_q4_1(x + t * cols, cols, (ActImageQ4_1*)(act + t * row_bytes));
      } else if (kind == ActKind::kQ8Pair) {
        table.quantize_q8pair(x + t * cols, cols, (ActBlockQ8Pair*)(act + t * row_bytes));
      } else {
        table.quantize_q8k(x + t * cols, cols, (ActBlockQ8K*)(act + t * row_bytes));
      }
    }
  };
  if (num_tokens >= 4) ForRange(pool, num_tokens, 1, body);
  else body(0, num_tokens, 0);
  return act;
}

// Weights of a dtype without a kernel: dequantize each row, f32 dot.
void MatMulFallback(const KernelTable& table, const WeightView& w, const float* x,
                    int64_t num_tokens, float* y, ThreadPool* pool) {
  CHECK(quant::CanDequantize(w.dtype));
  const int64_t row_bytes = RowBytes(w.dtype, w.cols);
  ForRange(pool, w.rows, kRowGrain, [&](int64_t r0, int64_t r1, int) {
    std::vector<float> row(w.cols);
    for (int64_t r = r0; r < r1; ++r) {
      quant::DequantizeRow(w.dtype, (const uint8_t*)w.data + r * row_bytes, row.data(),
                           w.cols);
      for (int64_t t = 0; t < num_tokens; ++t) {
        y[t * w.rows + r] = table.dot_f32(row.data(), x + t * w.cols, w.cols);
      }
    }
  });
}

}  // namespace

void Q8KToImage(const ActBlockQ8K& k, ActBlockQ8KImage* out) {
  // Natural-order sub-block stored at register-order position i.
  constexpr int kOrder[8] = {0, 2, 1, 3, 4, 6, 5, 7};
  out->d = k.d;
  for (int i = 0; i < 8; ++i) {
    out->sums32[i] = k.sums32[i];
    std::memcpy(out->qs + 32 * i, k.qs + 32 * kOrder[i], 32);
  }
}

const KernelTable& RefKernelTable() {
  static const KernelTable t = MakeRefTable();
  return t;
}

const KernelTable* Avx2KernelTable() {
  static const KernelTable* t =
      MakeSimdTable<FillAvx2Kernels>(DetectCpuFeatures().HasAvx2Fma());
  return t;
}

const KernelTable* Avx512VnniKernelTable() {
  static const KernelTable* t =
      MakeSimdTable<FillAvx512VnniKernels>(DetectCpuFeatures().HasAvx512Vnni());
  return t;
}

const KernelTable* AmxKernelTable() {
  static const KernelTable* t =
      MakeSimdTable<FillAmxKernels>(DetectCpuFeatures().HasAmxInt8() && EnableAmx());
  return t;
}

const KernelTable& ActiveKernelTable() {
  static const KernelTable& t = ChooseTable();
  return t;
}

void MatMulWith(const KernelTable& table, const WeightView& w, const float* x,
                int64_t num_tokens, float* y, ThreadPool* pool) {
  MatMulManyWith(table, std::span<const WeightView>(&w, 1), x, num_tokens, &y, pool);
}

void MatMulManyWith(const KernelTable& table, std::span<const WeightView> ws, const float* x,
                    int64_t num_tokens, float* const* ys, ThreadPool* pool) {
  if (ws.empty() || num_tokens <= 0) return;
  const int64_t cols = ws[0].cols;
  // Matrices without a kernel go alone; the others share one dispatch.
  struct Part {
    const MatMulKernel* k;
    const WeightView* w;
    float* y;
    int64_t first_row;  // in the concatenation of all parts' rows
  };
  Part parts[16];
  int num_parts = 0;
  int64_t total_rows = 0;
  const uint8_t* act[kNumActKinds] = {};
  for (size_t i = 0; i < ws.size(); ++i) {
    CHECK_EQ(ws[i].cols, cols);
    const MatMulKernel* k = table.FindMatMul(ws[i].dtype);
    if (k == nullptr || num_parts == 16) {
      if (k == nullptr) MatMulFallback(table, ws[i], x, num_tokens, ys[i], pool);
      else MatMulManyWith(table, ws.subspan(i, 1), x, num_tokens, ys + i, pool);
      continue;
    }
    if (act[(int)k->act] == nullptr) {
      act[(int)k->act] = PrepareActivations(table, k->act, x, num_tokens, cols, pool);
    }
    parts[num_parts++] = {k, &ws[i], ys[i], total_rows};
    total_rows += ws[i].rows;
  }
  if (total_rows == 0) return;
  ForRangeDynamic(pool, total_rows, kRowGrain, [&](int64_t g0, int64_t g1, int) {
    for (int p = 0; p < num_parts; ++p) {
      const Part& part = parts[p];
      const int64_t r0 = std::max(g0, part.first_row) - part.first_row;
      const int64_t r1 = std::min(g1, part.first_row + part.w->rows) - part.first_row;
      if (r0 >= r1) continue;
      const int64_t act_row_bytes = ActRowBytes(part.k->act, cols);
      const int64_t w_row_bytes = RowBytes(part.w->dtype, cols);
      // The float kernels walk K in blocks (kFloatKBlockBytes of a token's
      // f32 row at a time), so only that much of each token needs to stay in
      // L2 while a piece's rows stream past.
      const int64_t chunk_row_bytes = part.k->act == ActKind::kF32
                                          ? std::min(act_row_bytes, kFloatKBlockBytes)
                                          : act_row_bytes;
      int64_t chunk_tokens =
          std::max<int64_t>(8, kActChunkBytes / std::max<int64_t>(1, chunk_row_bytes));
      // AMX activations come in groups of 16 tokens; a tile reads 512 bytes
      // of them per block, so they may come from anywhere in L2, and bigger
      // chunks spread the per-row-tile set-up (Q4_0 unpacking) wider.
      if (IsAmxKind(part.k->act)) {
        chunk_tokens = std::max<int64_t>(
            kAmxGroup, 4 * kActChunkBytes / chunk_row_bytes / kAmxGroup * kAmxGroup);
      }
      const uint8_t* wdata = (const uint8_t*)part.w->data;
      const uint8_t* a = act[(int)part.k->act];
      for (int64_t t0 = 0; t0 < num_tokens; t0 += chunk_tokens) {
        const int64_t nt = std::min(chunk_tokens, num_tokens - t0);
        part.k->gemm(wdata + r0 * w_row_bytes, w_row_bytes, r1 - r0, a + t0 * act_row_bytes,
                     act_row_bytes, nt, cols, part.y + t0 * part.w->rows + r0, part.w->rows);
      }
    }
  });
}

void MatMul(const WeightView& w, const float* x, int64_t num_tokens, float* y,
            ThreadPool* pool) {
  MatMulWith(ActiveKernelTable(), w, x, num_tokens, y, pool);
}

void MatMulMany(std::span<const WeightView> ws, const float* x, int64_t num_tokens,
                float* const* ys, ThreadPool* pool) {
  MatMulManyWith(ActiveKernelTable(), ws, x, num_tokens, ys, pool);
}

bool HasMatMulKernel(DType dtype) {
  return ActiveKernelTable().FindMatMul(dtype) != nullptr;
}

void GetRow(const WeightView& w, int64_t row, float* out) {
  const int64_t row_bytes = RowBytes(w.dtype, w.cols);
  quant::DequantizeRow(w.dtype, (const uint8_t*)w.data + row * row_bytes, out, w.cols);
}

const char* ActiveIsa() { return ActiveKernelTable().isa; }

void RmsNorm(const float* x, const float* weight, int64_t n, float eps, float* out) {
  ActiveKernelTable().rms_norm(x, weight, n, eps, out);
}
void SiluMul(const float* gate, const float* up, int64_t n, float* out) {
  ActiveKernelTable().silu_mul(gate, up, n, out);
}
void Softmax(float* x, int64_t n) { ActiveKernelTable().softmax(x, n); }

void RopeCosSin(float position, const float* inv_freq, int64_t rope_dim, float* cos_sin) {
  for (int64_t i = 0; i < rope_dim / 2; ++i) {
    const float theta = position * inv_freq[i];
    cos_sin[2 * i] = std::cos(theta);
    cos_sin[2 * i + 1] = std::sin(theta);
  }
}
void Rope(float* x, int64_t num_heads, int64_t head_dim, int64_t rope_dim,
          const float* cos_sin, bool neox) {
  ActiveKernelTable().rope(x, num_heads, head_dim, rope_dim, cos_sin, neox);
}

float Dot(const float* a, const float* b, int64_t n) {
  return ActiveKernelTable().dot_f32(a, b, n);
}
float DotF16(const float* a, const uint16_t* b, int64_t n) {
  return ActiveKernelTable().dot_f16(a, b, n);
}
void Axpy(float alpha, const float* x, int64_t n, float* y) {
  ActiveKernelTable().axpy_f32(alpha, x, n, y);
}
void AxpyF16(float alpha, const uint16_t* x, int64_t n, float* y) {
  ActiveKernelTable().axpy_f16(alpha, x, n, y);
}
void Scale(float alpha, int64_t n, float* y) { ActiveKernelTable().scale_f32(alpha, n, y); }

// ---- attention -------------------------------------------------------------------

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
  thread_local std::vector<float> decoded;
  if ((int64_t)decoded.size() < head_dim) decoded.resize(head_dim);
  float scores[kAttnChunk * kMaxAttnGroup];
  float running_max[kMaxAttnGroup], running_sum[kMaxAttnGroup];
  for (int g = 0; g < group; ++g) {
    running_max[g] = -INFINITY;
    running_sum[g] = 0.0f;
    std::memset(a.out + (int64_t)g * head_dim, 0, sizeof(float) * head_dim);
  }
  const int32_t hi = a.positions[0];
  const int32_t lo = a.sliding_window > 0 ? std::max(0, hi - a.sliding_window + 1) : 0;
  for (int32_t p0 = lo; p0 <= hi; p0 += kAttnChunk) {
    const int32_t n = std::min(kAttnChunk, hi - p0 + 1);
    for (int32_t i = 0; i < n; ++i) {
      const HeadRow krow =
          ReadHead(kt_k, kv.k + kv.KOffset(p0 + i), e0, head_dim, decoded.data());
      for (int g = 0; g < group; ++g) {
        const float* qg = a.q + (int64_t)g * head_dim;
        const float s = krow.f32 != nullptr ? kt.dot_f32(qg, krow.f32, head_dim)
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
          ReadHead(kt_v, kv.v + kv.VOffset(p0 + i), e0, head_dim, decoded.data());
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
                    const KvPagesView& kv, ThreadPool* pool, float softcap) {
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
  const int32_t sub = (group + kMaxAttnGroup - 1) / kMaxAttnGroup;
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
                                               std::min(n_head_kv, kMaxAttnGroup / sub_group));
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
  std::atomic<int64_t> next{0};
  auto run = [&](int) {
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
      AttnGroupArgs args;
      args.q = seq.q + q0 * row + (int64_t)first_head * head_dim;
      args.out = seq.out + q0 * row + (int64_t)first_head * head_dim;
      args.group = sub_group;
      args.num_queries = (int32_t)std::min(bundle, seq.num_queries - q0);
      args.row_stride = row;
      args.positions = seq.positions + q0;
      args.sliding_window = sliding_window;
      args.head_dim = head_dim;
      args.kv_head = kv_head;
      args.num_kv_heads = num_kv_heads;
      args.scale = scale;
      args.softcap = softcap;
      args.kv = &view;
      if (softcap > 0.0f || !kt.attend_group(args)) AttendGroupGeneric(kt, args);
    }
  };
  if (pool != nullptr && pool->num_threads() > 1 && items > 1) pool->RunOnAll(run);
  else run(0);
}

void Attention(const float* q, int64_t num_queries, const int32_t* positions,
               int32_t n_head, int32_t n_head_kv, int32_t head_dim, float scale,
               int32_t sliding_window, const KvPagesView& kv, float* out,
               ThreadPool* pool) {
  const AttentionSeq seq{q, out, positions, num_queries, kv.block_table};
  AttentionBatch(std::span<const AttentionSeq>(&seq, 1), n_head, n_head_kv, head_dim, scale,
                 sliding_window, kv, pool);
}

void ConvertF32ToF16(const float* x, int64_t n, uint16_t* out) {
  ActiveKernelTable().f32_to_f16(x, n, out);
}

}  // namespace tern::kernels
