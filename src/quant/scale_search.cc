#include "quant/scale_search.h"

#include <algorithm>
#include <cmath>

#include "base/check.h"

namespace tern::quant {
namespace {

inline float Weight(const float* w, int i) { return w ? w[i] : 1.0f; }

// Weighted sums of one candidate's quants; the least-squares fit and its
// error follow from them without another pass over the data:
//   err(s, m) = Sxx - 2 s Sqx - 2 m Sx + s^2 Sqq + 2 s m Sq + m^2 Sw.
struct Sums {
  double w = 0, q = 0, qq = 0, x = 0, qx = 0, xx = 0;
  double Error(double s, double m) const {
    return xx - 2 * s * qx - 2 * m * x + s * s * qq + 2 * s * m * q + m * m * w;
  }
};

// Symmetric candidate: q = clamp(round(x * iscale), -nmax, nmax-1), stored
// as q + nmax; returns the sums of the signed quants.
// Float accumulation is exact enough for n <= 256 and lets the loop vectorize.
Sums QuantizeSymmetric(int n, int nmax, const float* x, const float* w, float iscale,
                       uint8_t* out) {
  float qq = 0, qx = 0;
  const float lo = (float)-nmax, hi = (float)(nmax - 1);
  for (int i = 0; i < n; ++i) {
    const int q = RoundClampToInt(iscale * x[i], lo, hi);
    out[i] = (uint8_t)(q + nmax);
    const float wq = Weight(w, i) * (float)q;
    qq += wq * (float)q;
    qx += wq * x[i];
  }
  return {.qq = qq, .qx = qx};
}

// Affine candidate: q = clamp(round((x + min_neg) * iscale), 0, nmax).
Sums QuantizeAffine(int n, int nmax, const float* x, const float* w, float iscale, float min_neg,
                    uint8_t* out) {
  float sw = 0, sq = 0, sqq = 0, sx = 0, sqx = 0;
  const float hi = (float)nmax;
  for (int i = 0; i < n; ++i) {
    const int q = RoundClampToInt(iscale * (x[i] + min_neg), 0.0f, hi);
    out[i] = (uint8_t)q;
    const float wi = Weight(w, i), wq = wi * (float)q;
    sw += wi;
    sq += wq;
    sqq += wq * (float)q;
    sx += wi * x[i];
    sqx += wq * x[i];
  }
  return {.w = sw, .q = sq, .qq = sqq, .x = sx, .qx = sqx};
}

// Weighted least squares of x ~ scale * q + m for fixed quants; m <= 0
// unless positive_min.
void FitAffine(const Sums& s, bool positive_min, double* scale, double* m) {
  const double det = s.w * s.qq - s.q * s.q;
  double sc = 0, mm = 0;
  if (det > 0) {
    sc = (s.w * s.qx - s.x * s.q) / det;
    mm = (s.qq * s.x - s.q * s.qx) / det;
  }
  if (det <= 0 || (mm > 0 && !positive_min)) {
    mm = 0;
    sc = s.qq > 0 ? s.qx / s.qq : 0;
  }
  *scale = sc;
  *m = mm;
}

double SumXX(int n, const float* x, const float* w) {
  double xx = 0;
  for (int i = 0; i < n; ++i) xx += (double)Weight(w, i) * x[i] * x[i];
  return xx;
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
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  if (!(amax >= 1e-30f)) {  // all zero (or NaN)
    std::fill(quants, quants + n, (uint8_t)nmax);
    return 0.0f;
  }
  // Round-to-nearest: the largest magnitude maps to -nmax exactly.
  float best_scale = max / -nmax;
  const Sums rtn = QuantizeSymmetric(n, nmax, x, w, 1.0f / best_scale, quants);
  if (!refine) return best_scale;
  const double xx = SumXX(n, x, w);
  auto error = [&](const Sums& s, double scale) {
    return xx - 2 * scale * s.qx + scale * scale * s.qq;
  };
  double best_err = error(rtn, best_scale);

  uint8_t q[256];
  // Fits the least-squares scale of a candidate; keeps it when better.
  auto consider = [&](const Sums& s, const uint8_t* cand) {
    if (s.qq <= 0) return false;
    const double scale = s.qx / s.qq;
    const double err = error(s, scale);
    if (!(err < best_err) || scale == 0) return false;
    best_err = err;
    best_scale = (float)scale;
    if (cand != quants) std::copy(cand, cand + n, quants);
    return true;
  };
  consider(rtn, quants);
  for (int step = -9; step <= 9; ++step) {
    if (step == 0) continue;
    consider(QuantizeSymmetric(n, nmax, x, w, -(nmax + 0.1f * step) / max, q), q);
  }
  // Alternate: requantize with the best scale, refit.
  for (int iter = 0; iter < 5; ++iter) {
    if (!consider(QuantizeSymmetric(n, nmax, x, w, 1.0f / best_scale, q), q)) break;
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
  if (!(hi > lo)) {  // constant block (or NaN)
    std::fill(quants, quants + n, (uint8_t)0);
    *min_neg = lo == lo ? -lo : 0.0f;
    return 0.0f;
  }
  float best_scale = (hi - lo) / nmax;
  float best_min_neg = -lo;
  Sums rtn = QuantizeAffine(n, nmax, x, w, nmax / (hi - lo), best_min_neg, quants);
  *min_neg = best_min_neg;
  if (!refine) return best_scale;
  rtn.xx = SumXX(n, x, w);
  const double xx = rtn.xx;
  double best_err = rtn.Error(best_scale, -best_min_neg);

  uint8_t q[256];
  auto consider = [&](Sums s, const uint8_t* cand) {
    s.xx = xx;
    double scale, m;
    FitAffine(s, positive_min, &scale, &m);
    if (!(scale > 0)) return false;
    const double err = s.Error(scale, m);
    if (!(err < best_err)) return false;
    best_err = err;
    best_scale = (float)scale;
    best_min_neg = (float)-m;
    if (cand != quants) std::copy(cand, cand + n, quants);
    return true;
  };
  consider(rtn, quants);
  // Sweep: scales of (nmax - 2) .. (nmax + 2) steps across the range, in
  // tenths of a step, each anchored once at the low and once at the high end
  // (so clipping either end may win), refit by least squares.
  for (int step = -20; step <= 20; ++step) {
    const float iscale = (nmax + 0.1f * step) / (hi - lo);
    if (!(iscale > 0)) continue;
    consider(QuantizeAffine(n, nmax, x, w, iscale, -lo, q), q);
    consider(QuantizeAffine(n, nmax, x, w, iscale, nmax / iscale - hi, q), q);
  }
  for (int iter = 0; iter < 5; ++iter) {
    if (!consider(QuantizeAffine(n, nmax, x, w, 1.0f / best_scale, best_min_neg, q), q)) break;
  }
  *min_neg = best_min_neg;
  return best_scale;
}

}  // namespace tern::quant
