// AVX2 inner loops of MachineProbe (compiled with -mavx2 -mfma; call only
// when the CPU has them).
#pragma once

#include <cstdint>

namespace tern::kernels {

float Avx2ReadSum(const float* data, int64_t n);            // n multiple of 32
void Avx2Triad(float* a, const float* b, const float* c, float s, int64_t n);
float Avx2FmaLoop(int64_t iterations);  // 8 accumulators x 8 lanes per iteration
// 8 accumulators x 16 lanes per iteration (probe_avx512.cc; call only when
// CpuFeatures::HasAvx512Vnni()).
float Avx512FmaLoop(int64_t iterations);

}  // namespace tern::kernels
