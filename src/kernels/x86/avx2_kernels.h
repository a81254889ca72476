// AVX2 + FMA + F16C kernels. This file's .cc is compiled with -mavx2 -mfma
// -mf16c: never call into it unless CpuFeatures says the CPU has all three
// (Avx2KernelTable() checks).
//
// Thread rules: pure functions, reentrant.
#pragma once

#include "kernels/kernel_table.h"

namespace tern::kernels {

// Overwrites the entries of table that have an AVX2 version.
void FillAvx2Kernels(KernelTable* table);

// The same with AVX-512 VL/BW/VNNI 8-bit dot products (avx512_vnni_kernels.cc,
// compiled with those flags: call only when CpuFeatures::HasAvx512Vnni()).
void FillAvx512VnniKernels(KernelTable* table);

// The AVX-512 VNNI kernels plus Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K and
// Q6_K through AMX-INT8 tiles (amx_kernels.cc: call only when
// CpuFeatures::HasAmxInt8() and EnableAmx() said yes).
void FillAmxKernels(KernelTable* table);
// Asks Linux for the AMX tile state for this process (once); false when
// refused or not Linux.
bool EnableAmx();

}  // namespace tern::kernels
