// The kernels' driver: MatMul's dispatch (activation preparation per
// format, row splitting over the pool) and the element-wise entry points of
// kernels.h through the active table. Attention is in attention.cc, the
// table registry and choice in tables.cc.
#include "kernels/kernels.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "base/aligned_vector.h"
#include "base/check.h"
#include "kernels/act_format.h"
#include "kernels/kernel_table.h"
#include "kernels/workspace.h"
#include "quant/quant.h"

namespace tern::kernels {
namespace {

// Row split granularity: a multiple of every kernel's row tile (16: the
// AMX tiles), and of gemm16_row_grain for the packed parts of a call.
constexpr int64_t kRowGrain = 16;

// The activations of all tokens in the format (its prepare, or its
// quantize_row per token); returns the first token's row.
const uint8_t* PrepareActivations(const KernelTable& table, const ActFormat& format,
                                  const float* x, int64_t num_tokens, int64_t cols,
                                  ThreadPool* pool, Workspace* workspace) {
  AlignedVector<uint8_t>& scratch = workspace->Activations(&format);
  if (format.prepare != nullptr) {
    return format.prepare(table, x, num_tokens, cols, &scratch, pool, workspace);
  }
  const int64_t row_bytes = format.row_bytes(cols);
  if ((int64_t)scratch.size() < row_bytes * num_tokens) scratch.resize(row_bytes * num_tokens);
  uint8_t* act = scratch.data();
  auto body = [&](int64_t t0, int64_t t1, int) {
    for (int64_t t = t0; t < t1; ++t) {
      format.quantize_row(table, x + t * cols, cols, act + t * row_bytes);
    }
  };
  if (num_tokens >= 4) ForRange(pool, num_tokens, 1, body);
  else body(0, num_tokens, 0);
  return act;
}

// Like ForRange, but in pieces, each half of what is left of a share
// (a multiple of grain; guided self-scheduling). Each thread owns a
// contiguous share of [0, n) and works through it front to back, so its
// row streams run on from piece to piece (a thread that jumped to an
// unrelated piece would start it cold). A thread done with its share takes
// pieces from the back of the share with the most rows left, so a thread
// slowed by the machine does not hold the others back at the end of the
// op; the halving pieces let the threads finish within about a grain of
// each other. Every piece costs decode bandwidth although the rows run on
// (one more call of the kernel's tile walk, its loops restarted): Zen 4,
// 2 threads, a tinyllama-shaped Q4_0 decode token (7 packed matrices x 22
// layers), each round timed against the read probe over the same bytes,
// 10 rounds a run alternated, the 14 runs with both cores free (probe
// medians 61-67 GB/s), run medians: halving pieces 54.5-60.5 GB/s
// (0.90-0.93 of the probe), faster in every run by 1-4% than the former
// fixed pieces of 1/16 of a share (54.0-58.3, 0.85-0.92); those 1/16 walked
// without atomics or stealing were as slow (51.5-58.8: the piece count
// costs, not the stealing), 1/64 slower still (48.9-56.0), one piece a
// share (no stealing) as fast as halving (53.6-60.6). Thieves take halves
// too: kept at 1/16 of a share, a thread that steals a starved thread's
// whole share (its core busy elsewhere) walks it in 16 pieces (tinyllama
// Q4_0 tg128 -t 2 on a loaded machine, alternated: halves 48.5-52.8 tok/s
// in 5 rounds, the former pieces 45.4-46.9, small thefts 47.2-48.0 in 3;
// -t 8, 2 rounds: 49.1-49.4, 45.6-47.3, 43.1-47.0). There is a share per
// thread that can run at once (pool->max_parallel()): with more threads
// than cores, the slots beyond it only steal, so the shares stay long and
// are walked front to back (tinyllama Q4_0 tg at -t 8 on 2 cores, 5
// alternating pairs on a loaded machine: 15-32 -> 25-40 tok/s; -t 2
// there: 20-34). Results do not depend on who takes which piece.
void ForRangeDynamic(ThreadPool* pool, int64_t n, int64_t grain,
                     const ThreadPool::RangeFn& fn) {
  if (pool == nullptr || pool->num_threads() <= 1 || n <= grain) {
    if (n > 0) fn(0, n, 0);
    return;
  }
  const int nt = pool->max_parallel();
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
      const int64_t left = end - next;
      const int64_t size = std::max(grain, (left / 2 + grain - 1) / grain * grain);
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

// Weights of a dtype without a kernel: dequantize each row, f32 dot.
void MatMulFallback(const KernelTable& table, const WeightView& w, const float* x,
                    int64_t num_tokens, float* y, ThreadPool* pool) {
  CHECK(quant::CanDequantize(w.dtype));
  CHECK(w.layout == WeightLayout::kRowMajor && "kPanel16 weights need the table's gemm16");
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

void MatMulWith(const KernelTable& table, const WeightView& w, const float* x,
                int64_t num_tokens, float* y, ThreadPool* pool, Workspace* workspace) {
  MatMulManyWith(table, std::span<const WeightView>(&w, 1), x, num_tokens, &y, pool, workspace);
}

void MatMulManyWith(const KernelTable& table, std::span<const WeightView> ws, const float* x,
                    int64_t num_tokens, float* const* ys, ThreadPool* pool,
                    Workspace* workspace) {
  if (ws.empty() || num_tokens <= 0) return;
  std::optional<Workspace> own;  // the call's own, where the caller has none
  if (workspace == nullptr) workspace = &own.emplace();
  workspace->Reserve(pool != nullptr ? pool->num_threads() : 1);
  const int64_t cols = ws[0].cols;
  // Matrices without a kernel go alone; the others share one dispatch.
  // Activations are prepared once per format (kernels of one format share
  // them).
  struct Part {
    const MatMulKernel* k;
    const WeightView* w;
    float* y;
    int64_t first_row;  // in the concatenation of all parts' rows
    const uint8_t* act;
    int64_t act_row_bytes;
    int64_t chunk_tokens;
  };
  Part parts[16];
  int num_parts = 0;
  int64_t total_rows = 0;
  // The split's grain: 16 rows, or the largest gemm16_row_grain of the
  // packed parts (a multiple of 16).
  int64_t grain = kRowGrain;
  for (const WeightView& w : ws) {
    const MatMulKernel* k = table.FindMatMul(w.dtype);
    if (k != nullptr && w.layout == WeightLayout::kPanel16) {
      grain = std::max(grain, k->gemm16_row_grain);  // 16 or 64: each divides the next
    }
  }
  for (size_t i = 0; i < ws.size(); ++i) {
    CHECK_EQ(ws[i].cols, cols);
    const MatMulKernel* k = table.FindMatMul(ws[i].dtype);
    if (ws[i].layout == WeightLayout::kPanel16) {
      CHECK(k != nullptr && k->gemm16 != nullptr && "kPanel16 weights need the table's gemm16");
      CHECK_EQ(ws[i].rows % kRowGrain, 0);
    }
    if (k == nullptr || num_parts == 16) {
      if (k == nullptr) MatMulFallback(table, ws[i], x, num_tokens, ys[i], pool);
      else MatMulManyWith(table, ws.subspan(i, 1), x, num_tokens, ys + i, pool, workspace);
      continue;
    }
    const ActFormat& format = *k->act;
    const uint8_t* act = nullptr;
    for (int p = 0; p < num_parts && act == nullptr; ++p) {
      if (parts[p].k->act == &format) act = parts[p].act;
    }
    if (act == nullptr) {
      act = PrepareActivations(table, format, x, num_tokens, cols, pool, workspace);
    }
    const int64_t act_row_bytes = format.row_bytes(cols);
    const int64_t chunk_tokens = format.chunk_tokens != nullptr
                                     ? format.chunk_tokens(act_row_bytes)
                                     : DefaultChunkTokens(act_row_bytes);
    // Each part starts on a grain, so the row ranges handed to a part start
    // on a 16-row tile of its own, or a group of them (kPanel16 weights need
    // it).
    total_rows = (total_rows + grain - 1) / grain * grain;
    parts[num_parts++] = {k, &ws[i], ys[i], total_rows, act, act_row_bytes, chunk_tokens};
    total_rows += ws[i].rows;
  }
  if (total_rows == 0) return;
  ForRangeDynamic(pool, total_rows, grain, [&](int64_t g0, int64_t g1, int slot) {
    WorkerScratch* scratch = &workspace->Slot(slot);
    for (int p = 0; p < num_parts; ++p) {
      const Part& part = parts[p];
      const int64_t r0 = std::max(g0, part.first_row) - part.first_row;
      const int64_t r1 = std::min(g1, part.first_row + part.w->rows) - part.first_row;
      if (r0 >= r1) continue;
      const int64_t w_row_bytes = RowBytes(part.w->dtype, cols);
      const uint8_t* wdata = (const uint8_t*)part.w->data;
      const GemmFn gemm =
          part.w->layout == WeightLayout::kPanel16 ? part.k->gemm16 : part.k->gemm;
      for (int64_t t0 = 0; t0 < num_tokens; t0 += part.chunk_tokens) {
        const int64_t nt = std::min(part.chunk_tokens, num_tokens - t0);
        gemm(wdata + r0 * w_row_bytes, w_row_bytes, r1 - r0,
                     part.act + t0 * part.act_row_bytes, part.act_row_bytes, nt, cols,
                     part.y + t0 * part.w->rows + r0, part.w->rows, scratch);
      }
    }
  });
}

void MatMul(const WeightView& w, const float* x, int64_t num_tokens, float* y,
            ThreadPool* pool, Workspace* workspace) {
  MatMulWith(ActiveKernelTable(), w, x, num_tokens, y, pool, workspace);
}

void MatMulMany(std::span<const WeightView> ws, const float* x, int64_t num_tokens,
                float* const* ys, ThreadPool* pool, Workspace* workspace) {
  MatMulManyWith(ActiveKernelTable(), ws, x, num_tokens, ys, pool, workspace);
}

bool HasMatMulKernel(DType dtype) {
  return ActiveKernelTable().FindMatMul(dtype) != nullptr;
}

int64_t Panel16RowGrain(DType dtype) {
  const MatMulKernel* k = ActiveKernelTable().FindMatMul(dtype);
  return k != nullptr && k->pack16 != nullptr ? k->gemm16_row_grain : kRowGrain;
}

bool CanPackPanel16(DType dtype) {
  const MatMulKernel* k = ActiveKernelTable().FindMatMul(dtype);
  return k != nullptr && k->pack16 != nullptr && k->gemm16 != nullptr && k->row16 != nullptr;
}

WeightView PackPanel16(const WeightView& w, uint8_t* out) {
  const MatMulKernel* k = ActiveKernelTable().FindMatMul(w.dtype);
  CHECK(k != nullptr && k->pack16 != nullptr && w.layout == WeightLayout::kRowMajor);
  CHECK_EQ(w.rows % kRowGrain, 0);
  k->pack16((const uint8_t*)w.data, RowBytes(w.dtype, w.cols), w.rows, w.cols, out);
  WeightView packed = w;
  packed.data = out;
  packed.layout = WeightLayout::kPanel16;
  return packed;
}

void GetRow(const WeightView& w, int64_t row, float* out) {
  const int64_t row_bytes = RowBytes(w.dtype, w.cols);
  if (w.layout == WeightLayout::kPanel16) {
    const MatMulKernel* k = ActiveKernelTable().FindMatMul(w.dtype);
    CHECK(k != nullptr && k->row16 != nullptr && "kPanel16 weights need the table's row16");
    // The row's bytes in the file's layout; one buffer a thread (GetRow runs
    // per token for the embedding).
    thread_local std::vector<uint8_t> bytes;
    if ((int64_t)bytes.size() < row_bytes) bytes.resize(row_bytes);
    k->row16((const uint8_t*)w.data, row_bytes, w.rows, row, w.cols, bytes.data());
    quant::DequantizeRow(w.dtype, bytes.data(), out, w.cols);
    return;
  }
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

void WalshHadamard(float* x, int64_t num_chunks, int64_t n) {
  CHECK(n > 0 && (n & (n - 1)) == 0);
  const float scale = 1.0f / std::sqrt((float)n);
  for (int64_t c = 0; c < num_chunks; ++c, x += n) {
    for (int64_t len = 1; len < n; len <<= 1) {
      for (int64_t i = 0; i < n; i += 2 * len) {
        for (int64_t j = i; j < i + len; ++j) {
          const float a = x[j], b = x[j + len];
          x[j] = a + b;
          x[j + len] = a - b;
        }
      }
    }
    for (int64_t j = 0; j < n; ++j) x[j] *= scale;
  }
}

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

void ConvertF32ToF16(const float* x, int64_t n, uint16_t* out) {
  ActiveKernelTable().f32_to_f16(x, n, out);
}

}  // namespace tern::kernels
