// AVX-512 FMA-peak loop of MachineProbe. Compiled with the AVX2 flags; the
// AVX-512 target is switched on by pragma after the headers (see
// avx512_vnni_kernels.cc).
#include <immintrin.h>

#include <cstdint>

#include "kernels/x86/probe_avx2.h"

#pragma GCC push_options
// GCC 12's AVX-512 intrinsics fill their "undefined" operands from
// themselves, which -Wuninitialized reports at every use; and -Wpsabi notes
// that these functions pass 512-bit vectors, which only this file's own
// internal functions do.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wpsabi"
#pragma GCC target("avx512f")

namespace tern::kernels {

float Avx512FmaLoop(int64_t iterations) {
  __m512 acc[kFmaProbeChains];
  for (int i = 0; i < kFmaProbeChains; ++i) acc[i] = _mm512_set1_ps(0.001f * i);
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (int64_t it = 0; it < iterations; ++it) {
    for (int i = 0; i < kFmaProbeChains; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  }
  __m512 s = acc[0];
  for (int i = 1; i < kFmaProbeChains; ++i) s = _mm512_add_ps(s, acc[i]);
  return _mm512_reduce_add_ps(s);
}

}  // namespace tern::kernels

#pragma GCC pop_options
