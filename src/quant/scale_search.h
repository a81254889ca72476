// Scale searches shared by the block formats: given a small group of values
// and per-value error weights, find the scale (and, for asymmetric formats,
// the min) whose rounded quants minimise sum(w * (x - dequant)^2).
//
// Both searches start from the plain round-to-nearest choice (absmax scale,
// or min/max range) and only ever replace it by a candidate with a lower
// weighted error, so their result is never worse than round-to-nearest under
// the weights used. Pure and thread-safe.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

// n <= 256 for both searches.

namespace tern::quant {

// float -> int conversions defined for every input (NaN -> 0, huge values
// saturate), so corrupt weights never reach undefined behaviour.
inline int SaturateToInt(float v) {
  if (!(v == v)) return 0;
  if (v > 1e9f) return 1000000000;
  if (v < -1e9f) return -1000000000;
  return (int)v;
}
// round(v) clamped to [lo, hi] (|lo|, |hi| < 2^22), NaN -> lo. Branch-free
// so that loops over it vectorize.
inline int RoundClampToInt(float v, float lo, float hi) {
  v = v > lo ? v : lo;
  v = v < hi ? v : hi;
  const float t = v + 12582912.0f;
  int32_t bits;
  std::memcpy(&bits, &t, 4);
  return (bits & 0x007FFFFF) - 0x00400000;
}

// Round half to even, as nearbyint in the default rounding mode, without a
// library call: adding 1.5 * 2^23 leaves the rounded integer in the low
// mantissa bits. |v| saturates at 2^22 first; NaN -> 0.
inline int RoundToInt(float v) {
  if (!(v > -4194304.0f)) {
    v = v != v ? 0.0f : -4194304.0f;
  } else if (v > 4194304.0f) {
    v = 4194304.0f;
  }
  const float t = v + 12582912.0f;
  int32_t bits;
  std::memcpy(&bits, &t, 4);
  return (bits & 0x007FFFFF) - 0x00400000;
}

// Symmetric: x ~ scale * q, q in [-nmax, nmax - 1] (nmax = 8 for 4 bits).
// Writes q + nmax (in [0, 2*nmax-1]) to quants and returns the scale (0 when
// all x are 0). w may be nullptr (uniform). With refine false, returns
// exactly the round-to-nearest answer (scale = max / -nmax).
float SearchSymmetricScale(int n, int nmax, const float* x, const float* w,
                           uint8_t* quants, bool refine = true);

// Asymmetric: x ~ scale * q - min_neg, with q in [0, nmax]. When
// positive_min is false the offset -min_neg is kept <= 0 (the K-quants store
// mins as non-negative values that are subtracted); Q4_1/Q5_1 store any min.
// Writes q to quants, returns the scale and stores the offset in *min_neg.
float SearchAffineScale(int n, int nmax, const float* x, const float* w,
                        uint8_t* quants, float* min_neg, bool positive_min,
                        bool refine = true);

// Weighted squared error of x against scale * (quants[i] - offset) - min_neg.
float WeightedError(int n, const float* x, const float* w, const uint8_t* quants,
                    float scale, int offset, float min_neg);

}  // namespace tern::quant
