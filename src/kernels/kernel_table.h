// KernelTable: the function table behind kernels.h. One table per ISA,
// registered in table_list.h (best first): amx, avx512vnni, avx2 (x86/),
// portable (portable/: vector extensions, any CPU), scalar (ref/: the spec
// every other table is tested against). The table
// the process uses is chosen once at start-up by SelectKernelTable(cap): the
// first registered table the CPU runs, from the one cap names (main passes
// TERN_ISA, read by EnvSettings; ChooseKernelTable).
//
// Matrix multiplication is split in two steps so that the driver needs to
// know no ISA's layouts:
//   1. the driver (kernels.cc) prepares the activations of all tokens in the
//      format the weight kernel names (an ActFormat descriptor,
//      act_format.h): f32 as given, 8-bit blocks, or a layout private to
//      the ISA's folder;
//   2. a GemmFn computes a tile of rows x tokens from weight rows and
//      prepared activation rows.
// Activation quantization is bit-identical across ISAs (same float ops), so
// SIMD and scalar matmuls differ only by float summation order.
//
// Kernels keep no memory between calls: the buffers they need come from the
// caller's Workspace (workspace.h), a GemmFn's and an attend_group's as the
// WorkerScratch of the pool slot that runs them.
//
// Thread rules: tables are immutable after start-up; all functions are
// reentrant.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/act_format.h"
#include "kernels/attention.h"
#include "kernels/kernels.h"
#include "kernels/workspace.h"
#include "tensor/dtype.h"

namespace tern::kernels {

// y[t * ldy + r] = dot(weight row r, activation row t) for r < rows,
// t < num_tokens. w: rows of w_row_bytes; act: rows of act_row_bytes in the
// kernel's ActFormat. Each (r, t) result is computed by the same sequence of
// operations whatever rows/num_tokens are, so any split is bitwise stable.
// scratch: the calling pool slot's buffers (workspace.h), never null.
using GemmFn = void (*)(const uint8_t* w, int64_t w_row_bytes, int64_t rows,
                        const uint8_t* act, int64_t act_row_bytes,
                        int64_t num_tokens, int64_t cols, float* y, int64_t ldy,
                        WorkerScratch* scratch);

// Weights rearranged for the kernel (WeightLayout::kPanel16, kernels.h):
// rows [0, rows) of row-major weights (rows a multiple of 16) to out, the
// same number of bytes, each 16-row tile's bytes where the row-major rows'
// were (so tile r0 / 16 starts at out + r0 x w_row_bytes).
using PackFn = void (*)(const uint8_t* w, int64_t w_row_bytes, int64_t rows, int64_t cols,
                        uint8_t* out);

struct MatMulKernel {
  const ActFormat* act = nullptr;
  GemmFn gemm = nullptr;
  // Optional: the kPanel16 layout. gemm16 is gemm on pack16's output (w at
  // a tile's first row, w_row_bytes the row-major row bytes, rows a
  // multiple of 16), each result bitwise equal to gemm's; for 16-bit float
  // weights (rows in the lanes, x86 FloatLanes16) instead the scalar chain
  // acc = fma(w[r][k], x[t][k], acc) over k in order, on every table.
  PackFn pack16 = nullptr;
  GemmFn gemm16 = nullptr;
  // Row `row` of pack16's output at w (the whole matrix, `rows` rows) back
  // in row-major bytes (w_row_bytes of them) at out.
  void (*row16)(const uint8_t* w, int64_t w_row_bytes, int64_t rows, int64_t row, int64_t cols,
                uint8_t* out) = nullptr;
  // Whether gemm16 on tiles or gemm on the file's rows decodes faster
  // depends on the CPU: models time both (UsePanel16, kernels.h) instead of
  // always packing.
  bool panel16_timed = false;
  // The row ranges gemm16 is given start on multiples of this many rows
  // (the AVX-512 table's packed tiles lie in groups of 4: GroupedTiles).
  int64_t gemm16_row_grain = 16;
};

constexpr int kMaxDTypeId = 40;

struct KernelTable {
  const char* isa = "";
  MatMulKernel matmul[kMaxDTypeId] = {};

  // The shared formats' quantizers (kQ8Format, kQ8KFormat; bitwise the
  // same in every table); n multiple of 32 / 256.
  void (*quantize_q8)(const float* x, int64_t n, ActBlockQ8* out) = nullptr;
  void (*quantize_q8k)(const float* x, int64_t n, ActBlockQ8K* out) = nullptr;

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

// The scalar spec (always available).
const KernelTable& RefKernelTable();
// The AVX2 table, or nullptr when the CPU lacks AVX2/FMA/F16C.
const KernelTable* Avx2KernelTable();
// AVX2 + AVX-512 VNNI 8-bit dot products (outputs bitwise equal to the AVX2
// table's except Q4_1/Q4_K and the float formats, which it computes
// with its own 512-bit tiles), or nullptr when the CPU lacks AVX-512
// F/VL/BW/VNNI.
const KernelTable* Avx512VnniKernelTable();
// The AVX-512 VNNI table with Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K and
// Q6_K through AMX-INT8 tiles (every token count, decode included, so
// outputs do not depend on the batch; not bitwise equal to the other
// tables), or nullptr when the CPU or the OS lacks AMX.
const KernelTable* AmxKernelTable();

// A registered table (table_list.h).
struct KernelTableEntry {
  const char* name;              // TERN_ISA's value; the table's isa
  const KernelTable* (*get)();   // nullptr where this CPU cannot run it
};
// Every registered table, best first.
std::span<const KernelTableEntry> KernelTables();
// The tables this CPU runs, best first (the scalar spec last).
std::vector<const KernelTable*> AvailableKernelTables();
// The first table this CPU runs, walking KernelTables() from the entry
// named cap ("" or a name no entry has: from the first). Pure: reads no
// environment.
const KernelTable& ChooseKernelTable(std::string_view cap);
// Makes ChooseKernelTable(cap) the table the kernels.h entry points use,
// and logs it (a cap that names no table is reported and ignored). Called
// once at start-up, before any kernel runs, with the cap the user gave
// (tools/main.cc: EnvSettings::isa, i.e. TERN_ISA); reads no environment.
const KernelTable& SelectKernelTable(std::string_view cap);
// The table SelectKernelTable chose; where it was never called (tests,
// library users), the best table this CPU runs.
const KernelTable& ActiveKernelTable();

// MatMul through a given table (tests compare tables with it); workspace
// as MatMul's.
void MatMulWith(const KernelTable& table, const WeightView& w, const float* x,
                int64_t num_tokens, float* y, ThreadPool* pool, Workspace* workspace);
void MatMulManyWith(const KernelTable& table, std::span<const WeightView> ws, const float* x,
                    int64_t num_tokens, float* const* ys, ThreadPool* pool,
                    Workspace* workspace);

// Decode (one token, one thread, MatMulWith) through dtype matrices of
// 2048 x 2048 in buffer_bytes (0: 1.5 x the last-level cache, 24-96 MiB),
// the file's rows and table's kPanel16 tiles in alternated rounds; the best
// round of each, in GB/s of weights. Only where table has dtype's gemm16.
struct Panel16Timing {
  double rows_gbs = 0;
  double tiles_gbs = 0;
  double seconds = 0;  // the whole timing, set-up included
  bool TilesWin() const { return tiles_gbs >= rows_gbs; }
};
Panel16Timing TimePanel16(const KernelTable& table, DType dtype, int64_t buffer_bytes = 0);

}  // namespace tern::kernels
