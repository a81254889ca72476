// AVX2 inner loops of MachineProbe (compiled with -mavx2 -mfma; call only
// when the CPU has them).
#pragma once

#include <cstdint>

namespace tern::kernels {

float Avx2ReadSum(const float* data, int64_t n);            // n multiple of 32
void Avx2Triad(float* a, const float* b, const float* c, float s, int64_t n);
// Independent FMA chains of the FMA-peak loops. Two FMA pipes of latency 4
// need 8 in flight, but 8 read 4-5% under the peak that 10-12 reach (AMD
// EPYC Zen 5, one thread, 20M iterations, 3 runs: AVX2 107-111 GFLOP/s
// with 8 chains, 110-116 with 12, 16 spill; AVX-512 214 with 8, 220-226
// with 10-16), so the kernels' fraction of "the peak" read high.
inline constexpr int kFmaProbeChains = 12;
float Avx2FmaLoop(int64_t iterations);  // kFmaProbeChains x 8 lanes per iteration
// kFmaProbeChains x 16 lanes per iteration (probe_avx512.cc; call only when
// CpuFeatures::HasAvx512Vnni()).
float Avx512FmaLoop(int64_t iterations);

}  // namespace tern::kernels
