#include "kernels/x86/probe_avx2.h"
#include "kernels/x86/row_prefetch.h"

#include <immintrin.h>

namespace tern::kernels {

// The span read as the decodes read their weights: 4 streams side by side
// (its quarters, as the F16, Q4_0 and Q8_0 decodes read a thread's range
// of tiles), each prefetched as they prefetch (PrefetchStreamAhead: 2 KiB
// ahead into L1, 4 KiB into L2). One plain stream read
// well under what the decodes got: AMD EPYC Zen 5, 2 threads, `tern bench
// kernels --type f16 --panel16 -p 4 --rows 32768`, 3 runs alternated, the
// probe one stream 39.3-42.0 GB/s, 4 streams 41.1-60.9 (erratic), 4
// prefetched streams 50.0-53.7; the F16 decode in the same runs 47.0-56.4,
// so decode "fractions of the roofline" above 1 (tinyllama F16 tg128
// paired 1.25-1.31).
float Avx2ReadSum(const float* data, int64_t n) {
  __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  const int64_t q = n / 128 * 32;  // floats a quarter, whole groups of 32
  const float* const d[4] = {data, data + q, data + 2 * q, data + 3 * q};
  __m256* const acc[4] = {&s0, &s1, &s2, &s3};
  for (int64_t i = 0; i < q; i += 32) {
    for (int j = 0; j < 4; ++j) {
      const float* p = d[j] + i;
      PrefetchStreamAhead<128>((const uint8_t*)p);  // the decodes' distance
      *acc[j] = _mm256_add_ps(*acc[j], _mm256_add_ps(_mm256_load_ps(p), _mm256_load_ps(p + 8)));
      *acc[j] =
          _mm256_add_ps(*acc[j], _mm256_add_ps(_mm256_load_ps(p + 16), _mm256_load_ps(p + 24)));
    }
  }
  for (int64_t i = 4 * q; i < n; i += 32) {
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
