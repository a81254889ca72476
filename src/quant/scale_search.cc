#include "quant/scale_search.h"

#include <algorithm>
#include <cmath>

#include "base/check.h"

namespace tern::quant {
namespace {

inline float Weight(const float* w, int i) { return w ? w[i] : 1.0f; }

inline int RoundClamp(float v, int lo, int hi) {
  const int q = (int)std::nearbyint(v);
  return std::clamp(q, lo, hi);
}

// q = clamp(round(x * iscale)) in [-nmax, nmax-1]; stored as q + nmax.
void QuantizeSymmetric(int n, int nmax, const float* x, float iscale, uint8_t* q) {
  for (int i = 0; i < n; ++i) q[i] = (uint8_t)(RoundClamp(iscale * x[i], -nmax, nmax - 1) + nmax);
}

// Least-squares scale for fixed quants: sum(w x q) / sum(w q^2).
float BestSymmetricScale(int n, int nmax, const float* x, const float* w, const uint8_t* q) {
  double sxq = 0, sqq = 0;
  for (int i = 0; i < n; ++i) {
    const double qi = (int)q[i] - nmax;
    sxq += Weight(w, i) * x[i] * qi;
    sqq += Weight(w, i) * qi * qi;
  }
  return sqq > 0 ? (float)(sxq / sqq) : 0.0f;
}

void QuantizeAffine(int n, int nmax, const float* x, float iscale, float min_neg, uint8_t* q) {
  for (int i = 0; i < n; ++i) q[i] = (uint8_t)RoundClamp(iscale * (x[i] + min_neg), 0, nmax);
}

// Weighted least squares of x ~ scale * q + m for fixed q, with m <= 0.
void BestAffine(int n, const float* x, const float* w, const uint8_t* q, bool positive_min,
                float* scale, float* min_neg) {
  double sw = 0, sq = 0, sqq = 0, sx = 0, sqx = 0;
  for (int i = 0; i < n; ++i) {
    const double wi = Weight(w, i);
    sw += wi;
    sq += wi * q[i];
    sqq += wi * q[i] * q[i];
    sx += wi * x[i];
    sqx += wi * q[i] * x[i];
  }
  const double det = sw * sqq - sq * sq;
  double s = 0, m = 0;
  if (det > 0) {
    s = (sw * sqx - sx * sq) / det;
    m = (sqq * sx - sq * sqx) / det;
  }
  if (det <= 0 || (m > 0 && !positive_min)) {  // offset must stay <= 0
    m = 0;
    s = sqq > 0 ? sqx / sqq : 0;
  }
  *scale = (float)s;
  *min_neg = (float)-m;
}

}  // namespace

float WeightedError(int n, const float* x, const float* w, const uint8_t* quants, float scale,
                    int offset, float min_neg) {
  float err = 0;
  for (int i = 0; i < n; ++i) {
    const float diff = scale * ((int)quants[i] - offset) - min_neg - x[i];
    err += Weight(w, i) * diff * diff;
  }
  return err;
}

float SearchSymmetricScale(int n, int nmax, const float* x, const float* w, uint8_t* quants,
                           bool refine) {
  CHECK_LE(n, 256);
  float amax = 0, max = 0;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) { amax = std::fabs(x[i]); max = x[i]; }
  }
  if (amax < 1e-30f) {
    std::fill(quants, quants + n, (uint8_t)nmax);
    return 0.0f;
  }
  // Round-to-nearest: the largest magnitude maps to -nmax exactly.
  float best_scale = max / -nmax;
  QuantizeSymmetric(n, nmax, x, 1.0f / best_scale, quants);
  if (!refine) return best_scale;
  float best_err = WeightedError(n, x, w, quants, best_scale, nmax, 0);

  uint8_t q[256];
  auto try_quants = [&](const uint8_t* cand) {
    const float scale = BestSymmetricScale(n, nmax, x, w, cand);
    if (scale == 0) return false;
    const float err = WeightedError(n, x, w, cand, scale, nmax, 0);
    if (err < best_err) {
      best_err = err;
      best_scale = scale;
      std::copy(cand, cand + n, quants);
      return true;
    }
    return false;
  };
  // The least-squares scale of the round-to-nearest quants, then a sweep of
  // candidate inverse scales around it.
  try_quants(quants);
  for (int step = -9; step <= 9; ++step) {
    QuantizeSymmetric(n, nmax, x, -(nmax + 0.1f * step) / max, q);
    try_quants(q);
  }
  // Alternate: requantize with the best scale, refit the scale.
  for (int iter = 0; iter < 5; ++iter) {
    QuantizeSymmetric(n, nmax, x, 1.0f / best_scale, q);
    if (!try_quants(q)) break;
  }
  return best_scale;
}

float SearchAffineScale(int n, int nmax, const float* x, const float* w, uint8_t* quants,
                        float* min_neg, bool positive_min, bool refine) {
  CHECK_LE(n, 256);
  float lo = x[0], hi = x[0];
  for (int i = 1; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  if (!positive_min) lo = std::min(lo, 0.0f);
  if (hi <= lo) {
    std::fill(quants, quants + n, (uint8_t)0);
    *min_neg = -lo;
    return 0.0f;
  }
  float best_scale = (hi - lo) / nmax;
  float best_min_neg = -lo;
  QuantizeAffine(n, nmax, x, nmax / (hi - lo), best_min_neg, quants);
  *min_neg = best_min_neg;
  if (!refine) return best_scale;
  float best_err = WeightedError(n, x, w, quants, best_scale, 0, best_min_neg);

  uint8_t q[256];
  auto try_quants = [&](const uint8_t* cand) {
    float scale, mn;
    BestAffine(n, x, w, cand, positive_min, &scale, &mn);
    if (scale <= 0) return false;
    const float err = WeightedError(n, x, w, cand, scale, 0, mn);
    if (err < best_err) {
      best_err = err;
      best_scale = scale;
      best_min_neg = mn;
      std::copy(cand, cand + n, quants);
      return true;
    }
    return false;
  };
  try_quants(quants);
  for (int step = 0; step <= 20; ++step) {
    QuantizeAffine(n, nmax, x, (nmax - 1.0f + 0.1f * step) / (hi - lo), -lo, q);
    try_quants(q);
  }
  for (int iter = 0; iter < 5; ++iter) {
    QuantizeAffine(n, nmax, x, 1.0f / best_scale, best_min_neg, q);
    if (!try_quants(q)) break;
  }
  *min_neg = best_min_neg;
  return best_scale;
}

}  // namespace tern::quant
