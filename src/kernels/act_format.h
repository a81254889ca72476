// Activation formats: how a matmul kernel wants the activations of a batch
// of tokens laid out. Each MatMulKernel names its format by a pointer to an
// ActFormat descriptor; the driver (kernels.cc) prepares the activations
// once per MatMul(Many) per format, in the caller's Workspace buffer for
// the descriptor (workspace.h), and hands the kernels token rows of
// row_bytes(cols) bytes.
//
// The formats every table may share live here (f32 as given, 8-bit blocks
// of 32, 8-bit super-blocks of 256 with sums): their layouts are part of
// the scalar spec. An ISA's private layouts (x86/act_formats.h, the AMX
// groups in x86/amx_kernels.cc) and their descriptors live in its folder;
// adding one needs no edit here.
//
// Thread rules: descriptors are immutable; prepare and quantize_row are
// reentrant.
#pragma once

#include <cstdint>

#include "base/aligned_vector.h"
#include "base/thread_pool.h"

namespace tern::kernels {

struct KernelTable;
class Workspace;

struct ActFormat {
  const char* name = "";
  // Bytes of one token's row of cols activations. Formats that lay out
  // tokens in groups (AMX) give the group's bytes / tokens per group, so
  // token t of the batch still starts at t x row_bytes where a kernel is
  // handed its rows.
  int64_t (*row_bytes)(int64_t cols) = nullptr;
  // One token's row of cols activations x into out (row_bytes(cols) bytes);
  // the driver runs it per token over the pool's threads. table: the table
  // whose kernels read the row (the shared formats quantize through its
  // quantize_q8 / quantize_q8k).
  void (*quantize_row)(const KernelTable& table, const float* x, int64_t cols,
                       uint8_t* out) = nullptr;
  // Instead of quantize_row, where the format is not prepared row by row:
  // the whole batch (num_tokens rows of cols floats at x), written into
  // *scratch (resized as needed) or anything else that outlives the call;
  // returns the first token's row. workspace: the caller's, whose slot
  // buffers the pool's threads may use while they prepare.
  const uint8_t* (*prepare)(const KernelTable& table, const float* x, int64_t num_tokens,
                            int64_t cols, AlignedVector<uint8_t>* scratch, ThreadPool* pool,
                            Workspace* workspace) = nullptr;
  // Tokens per GemmFn call: the activation rows of such a chunk stay in L2
  // while a tile of weight rows is reused across them. nullptr:
  // DefaultChunkTokens(row_bytes).
  int64_t (*chunk_tokens)(int64_t row_bytes) = nullptr;
};

// About this many bytes of a token chunk's activation rows stay in L2.
constexpr int64_t kActChunkBytes = 192 * 1024;
// max(8, kActChunkBytes / row_bytes).
int64_t DefaultChunkTokens(int64_t row_bytes);

// fn(begin, end, thread) over [0, n) on the pool's threads in pieces of at
// least grain, or inline where pool is null or has one thread.
void ForRange(ThreadPool* pool, int64_t n, int64_t grain, const ThreadPool::RangeFn& fn);

// ---- the shared formats ------------------------------------------------------------

// One activation block of 32 (kQ8Format):
// x[j] ~= d * qs[j], s = d * sum(qs).
struct ActBlockQ8 {
  float d;
  float s;
  int8_t qs[32];
};
static_assert(sizeof(ActBlockQ8) == 40);

// One activation super-block of 256 for the K-quants (kQ8KFormat):
// x[j] ~= d * qs[j]; sums32[i] = sum of qs in [32i, 32i+32), sums16[i] of
// [16i, 16i+16).
struct ActBlockQ8K {
  float d;
  int16_t sums32[8];
  int16_t sums16[16];
  int8_t qs[256];
};
static_assert(sizeof(ActBlockQ8K) == 308);

// f32 rows as given (no copy). The float kernels of the SIMD tables walk K
// in blocks of 4 KiB of a token's row, so only that much of each token of a
// chunk needs to stay in L2.
extern const ActFormat kF32Format;
// kF32Format's row_bytes and prepare (for formats of f32 rows that chunk
// the tokens otherwise).
int64_t F32RowBytes(int64_t cols);
const uint8_t* PassF32(const KernelTable& table, const float* x, int64_t num_tokens,
                       int64_t cols, AlignedVector<uint8_t>* scratch, ThreadPool* pool,
                       Workspace* workspace);
// cols / 32 ActBlockQ8 per token, through table.quantize_q8.
extern const ActFormat kQ8Format;
// cols / 256 ActBlockQ8K per token, through table.quantize_q8k.
extern const ActFormat kQ8KFormat;

}  // namespace tern::kernels
