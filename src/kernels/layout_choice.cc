// The weight layout a model uses per type (kernels.h: UsePanel16): the
// table's kPanel16 tiles, or the file's rows where the table leaves the
// choice to the machine (MatMulKernel::panel16_timed) and a short timing
// finds the rows faster (TimePanel16).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <random>
#include <vector>

#include "base/check.h"
#include "base/huge_pages.h"
#include "base/log.h"
#include "kernels/kernel_table.h"
#include "kernels/kernels.h"
#include "kernels/machine_probe.h"
#include "kernels/workspace.h"
#include "quant/quant.h"

namespace tern::kernels {
namespace {

std::atomic<WeightLayoutChoice> g_choice{WeightLayoutChoice::kTimed};

// Per dtype: 0 = not timed yet, 1 = tiles, 2 = rows (the active table's).
std::atomic<uint8_t> g_timed[kMaxDTypeId];
std::mutex g_timing_mu;  // one timing at a time (they share the machine)

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

void SetWeightLayoutChoice(WeightLayoutChoice choice) { g_choice.store(choice); }

bool UsePanel16(DType dtype) {
  if (!CanPackPanel16(dtype)) return false;
  const KernelTable& table = ActiveKernelTable();
  if (!table.matmul[(int)dtype].panel16_timed) return true;
  switch (g_choice.load()) {
    case WeightLayoutChoice::kTiles: return true;
    case WeightLayoutChoice::kRows: return false;
    case WeightLayoutChoice::kTimed: break;
  }
  std::atomic<uint8_t>& slot = g_timed[(int)dtype];
  if (uint8_t v = slot.load(std::memory_order_acquire); v != 0) return v == 1;
  std::lock_guard<std::mutex> lock(g_timing_mu);
  if (uint8_t v = slot.load(std::memory_order_acquire); v != 0) return v == 1;
  const Panel16Timing t = TimePanel16(table, dtype);
  const bool tiles = t.TilesWin();
  TERN_LOG_INFO("kernels: %s weights in %s on this machine (decode, 1 thread: file rows %.1f GB/s, "
                "%s tiles %.1f GB/s; timed in %.2f s; TERN_WEIGHT_LAYOUT=tiles|rows overrides)",
                DTypeName(dtype), tiles ? "16-row tiles" : "the file's rows", t.rows_gbs,
                table.isa, t.tiles_gbs, t.seconds);
  slot.store(tiles ? 1 : 2, std::memory_order_release);
  return tiles;
}

Panel16Timing TimePanel16(const KernelTable& table, DType dtype, int64_t buffer_bytes) {
  const MatMulKernel& k = table.matmul[(int)dtype];
  CHECK(k.gemm != nullptr && k.pack16 != nullptr && k.gemm16 != nullptr);
  const double start = Now();
  // Matrices of a small model's shape, enough copies to pass the last-level
  // cache (decode streams its weights from memory), cycled through.
  constexpr int64_t kRows = 2048, kCols = 2048, kDistinct = 16;
  const int64_t row_bytes = RowBytes(dtype, kCols);
  const int64_t matrix_bytes = kRows * row_bytes;
  if (buffer_bytes <= 0) {
    buffer_bytes = std::clamp<int64_t>(3 * LastLevelCacheBytes() / 2, 24ll << 20, 96ll << 20);
  }
  const int64_t copies = std::max<int64_t>(buffer_bytes / matrix_bytes, 1);
  std::vector<uint8_t> distinct((size_t)(kDistinct * row_bytes));
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 0.02f);
  std::vector<float> src(kCols);
  for (int64_t r = 0; r < kDistinct; ++r) {
    for (float& v : src) v = nd(rng);
    quant::QuantizeRowRoundToNearest(dtype, src.data(), distinct.data() + r * row_bytes, kCols);
  }
  HugePageBuffer rows((size_t)(copies * matrix_bytes));
  HugePageBuffer tiles((size_t)(copies * matrix_bytes));
  for (int64_t r = 0; r < copies * kRows; ++r) {
    std::memcpy(rows.data() + r * row_bytes, distinct.data() + (r % kDistinct) * row_bytes,
                (size_t)row_bytes);
  }
  for (int64_t c = 0; c < copies; ++c) {
    k.pack16(rows.data() + c * matrix_bytes, row_bytes, kRows, kCols, tiles.data() + c * matrix_bytes);
  }
  std::vector<float> x(kCols), y(kRows);
  for (float& v : x) v = nd(rng) * 50.0f;
  Workspace workspace;
  // One round: a token through every copy. Rounds alternate the layouts;
  // the best of each is its estimate (a slowed round reads low, never high).
  auto round = [&](bool packed) {
    const double t0 = Now();
    for (int64_t c = 0; c < copies; ++c) {
      const uint8_t* base = (packed ? tiles.data() : rows.data()) + c * matrix_bytes;
      const WeightView w{dtype, base, kRows, kCols,
                         packed ? WeightLayout::kPanel16 : WeightLayout::kRowMajor};
      MatMulWith(table, w, x.data(), 1, y.data(), nullptr, &workspace);
    }
    return (double)(copies * matrix_bytes) / std::max(Now() - t0, 1e-9) * 1e-9;
  };
  Panel16Timing t;
  round(false), round(true);  // warm-up: pages, caches, clocks
  for (int i = 0; i < 3; ++i) {
    t.rows_gbs = std::max(t.rows_gbs, round(false));
    t.tiles_gbs = std::max(t.tiles_gbs, round(true));
  }
  t.seconds = Now() - start;
  return t;
}

}  // namespace tern::kernels
