#include "kernels/x86/probe_avx2.h"

#include <immintrin.h>

namespace tern::kernels {

float Avx2ReadSum(const float* data, int64_t n) {
  __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  for (int64_t i = 0; i < n; i += 32) {
    s0 = _mm256_add_ps(s0, _mm256_load_ps(data + i));
    s1 = _mm256_add_ps(s1, _mm256_load_ps(data + i + 8));
    s2 = _mm256_add_ps(s2, _mm256_load_ps(data + i + 16));
    s3 = _mm256_add_ps(s3, _mm256_load_ps(data + i + 24));
  }
  const __m256 s = _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3));
  alignas(32) float tmp[8];
  _mm256_store_ps(tmp, s);
  return tmp[0] + tmp[1] + tmp[2] + tmp[3] + tmp[4] + tmp[5] + tmp[6] + tmp[7];
}

void Avx2Triad(float* a, const float* b, const float* c, float s, int64_t n) {
  const __m256 sv = _mm256_set1_ps(s);
  for (int64_t i = 0; i < n; i += 8) {
    _mm256_store_ps(a + i, _mm256_fmadd_ps(sv, _mm256_load_ps(c + i), _mm256_load_ps(b + i)));
  }
}

float Avx2FmaLoop(int64_t iterations) {
  __m256 acc[kFmaProbeChains];
  for (int i = 0; i < kFmaProbeChains; ++i) acc[i] = _mm256_set1_ps(0.001f * i);
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (int64_t it = 0; it < iterations; ++it) {
    for (int i = 0; i < kFmaProbeChains; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  }
  __m256 s = acc[0];
  for (int i = 1; i < kFmaProbeChains; ++i) s = _mm256_add_ps(s, acc[i]);
  alignas(32) float tmp[8];
  _mm256_store_ps(tmp, s);
  return tmp[0] + tmp[7];
}

}  // namespace tern::kernels
