// Scalar reference kernels: the spec every SIMD kernel is tested against.
// Also used as the whole table when TERN_ISA=scalar or no other registered
// table runs on the CPU.
//
// Thread rules: pure functions, reentrant.
#pragma once

#include "kernels/kernel_table.h"

namespace tern::kernels {

// Fills every entry of table with the scalar kernels.
void FillRefKernels(KernelTable* table);

// Unpacks one weight block of a format the int8 path supports into signed
// integer quants q[block] with x[j] = d * q[j] + m (legacy formats) — shared
// by the reference GEMM and tests.
void RefUnpackLegacyBlock(DType t, const uint8_t* block, int* q, float* d, float* m);

}  // namespace tern::kernels
