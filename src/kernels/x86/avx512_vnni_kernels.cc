// AVX2 + AVX-512 VL/BW/VNNI build of the x86 kernels (simd_kernels_impl.h):
// the same tiles, with the 8-bit dot products through vpdpbusd on 256-bit
// registers. This file is compiled with the AVX2 flags only; the AVX-512
// target is switched on by pragma *after* every library header, so that no
// inline or template function shared with other files (std::vector, fp16
// helpers) is ever emitted with AVX-512 instructions.
#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <numeric>
#include <type_traits>
#include <vector>

#include "base/fp16.h"
#include "kernels/kernel_table.h"
#include "kernels/x86/avx2_kernels.h"
#include "quant/blocks.h"

#pragma GCC push_options
// GCC 12's AVX-512 intrinsics fill their "undefined" operands from
// themselves, which -Wuninitialized reports at every use; and -Wpsabi notes
// that these functions pass 512-bit vectors, which only this file's own
// internal functions do.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wpsabi"
#pragma GCC target("avx512f,avx512vl,avx512bw,avx512vnni,avx512vbmi")
#define TERN_AVX512_VNNI 1
#include "kernels/x86/simd_kernels_impl.h"

namespace tern::kernels {

void FillAvx512VnniKernels(KernelTable* t) { FillSimdTable(t, "avx512vnni"); }

}  // namespace tern::kernels
#pragma GCC pop_options
