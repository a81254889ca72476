// Scale searches shared by the block formats: given a small group of values
// and per-value error weights, find the scale (and, for asymmetric formats,
// the min) whose rounded quants minimise sum(w * (x - dequant)^2).
//
// Both searches start from the plain round-to-nearest choice (absmax scale,
// or min/max range) and only ever replace it by a candidate with a lower
// weighted error, so their result is never worse than round-to-nearest under
// the weights used. Pure and thread-safe.
#pragma once

#include <cstdint>

// n <= 256 for both searches.

namespace tern::quant {

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
