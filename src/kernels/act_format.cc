// The shared activation formats (act_format.h).
#include "kernels/act_format.h"

#include <algorithm>

#include "kernels/kernel_table.h"

namespace tern::kernels {
namespace {

// The float kernels walk K in blocks (FloatKernel::kPackCols columns of a
// token's f32 row at a time).
constexpr int64_t kFloatKBlockBytes = 1024 * 4;

int64_t F32ChunkTokens(int64_t row_bytes) {
  return DefaultChunkTokens(std::min(row_bytes, kFloatKBlockBytes));
}

int64_t Q8RowBytes(int64_t cols) { return cols / 32 * (int64_t)sizeof(ActBlockQ8); }
void Q8Row(const KernelTable& table, const float* x, int64_t cols, uint8_t* out) {
  table.quantize_q8(x, cols, (ActBlockQ8*)out);
}

int64_t Q8KRowBytes(int64_t cols) { return cols / 256 * (int64_t)sizeof(ActBlockQ8K); }
void Q8KRow(const KernelTable& table, const float* x, int64_t cols, uint8_t* out) {
  table.quantize_q8k(x, cols, (ActBlockQ8K*)out);
}

}  // namespace

int64_t F32RowBytes(int64_t cols) { return cols * (int64_t)sizeof(float); }
const uint8_t* PassF32(const KernelTable&, const float* x, int64_t, int64_t,
                       AlignedVector<uint8_t>*, ThreadPool*, Workspace*) {
  return (const uint8_t*)x;
}

const ActFormat kF32Format{.name = "f32",
                           .row_bytes = F32RowBytes,
                           .prepare = PassF32,
                           .chunk_tokens = F32ChunkTokens};
const ActFormat kQ8Format{.name = "q8", .row_bytes = Q8RowBytes, .quantize_row = Q8Row};
const ActFormat kQ8KFormat{.name = "q8k", .row_bytes = Q8KRowBytes, .quantize_row = Q8KRow};

int64_t DefaultChunkTokens(int64_t row_bytes) {
  return std::max<int64_t>(8, kActChunkBytes / std::max<int64_t>(1, row_bytes));
}

void ForRange(ThreadPool* pool, int64_t n, int64_t grain, const ThreadPool::RangeFn& fn) {
  if (pool != nullptr && pool->num_threads() > 1) {
    pool->ParallelFor(n, fn, grain);
  } else if (n > 0) {
    fn(0, n, 0);
  }
}

}  // namespace tern::kernels
