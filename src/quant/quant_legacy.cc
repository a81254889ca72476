// Legacy 32-element block formats. Without importance (or with search off)
// quantization is the plain reference rounding: Q4_0/Q5_0/Q8_0 scale by the
// value of largest magnitude, Q4_1/Q5_1 span [min, max]. That rounding is
// deterministic, so requantizing dequantized blocks gives the same bytes.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/fp16.h"
#include "quant/formats.h"
#include "quant/scale_search.h"

namespace tern::quant {
namespace {

// Largest |x| and the signed value that has it.
void SignedAbsMax(const float* x, int n, float* amax, float* max) {
  *amax = 0;
  *max = 0;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > *amax) {
      *amax = std::fabs(x[i]);
      *max = x[i];
    }
  }
}

void MinMax(const float* x, int n, float* lo, float* hi) {
  *lo = x[0];
  *hi = x[0];
  for (int i = 1; i < n; ++i) {
    *lo = std::min(*lo, x[i]);
    *hi = std::max(*hi, x[i]);
  }
}

// Packs 32 quants of up to 5 bits: low nibbles of elements j and j+16 share
// qs[j] (j low, j+16 high); bit 4 of element j goes to bit j of qh.
void PackNibbles(const uint8_t* q, uint8_t* qs, uint8_t* qh) {
  uint32_t high = 0;
  for (int j = 0; j < kQK / 2; ++j) {
    qs[j] = (uint8_t)((q[j] & 0xF) | ((q[j + kQK / 2] & 0xF) << 4));
    high |= (uint32_t)((q[j] >> 4) & 1) << j;
    high |= (uint32_t)((q[j + kQK / 2] >> 4) & 1) << (j + kQK / 2);
  }
  if (qh) std::memcpy(qh, &high, 4);
}

// Quant j of a block (0..31) with an optional fifth bit.
inline int Nibble(const uint8_t* qs, uint32_t qh, int j) {
  const int low = j < kQK / 2 ? (qs[j] & 0xF) : (qs[j - kQK / 2] >> 4);
  return low | (int)(((qh >> j) & 1) << 4);
}

// Q8 rounding: half away from zero, clamped to the int8 range used.
inline int8_t RoundHalfAway127(float v) {
  return (int8_t)std::clamp(SaturateToInt(std::round(v)), -127, 127);
}

inline uint32_t LoadQh(const uint8_t* qh) {
  uint32_t v;
  std::memcpy(&v, qh, 4);
  return v;
}

// Symmetric block with importance: searched scale, then quants re-rounded
// against the stored half-precision scale.
uint16_t SearchSymmetricBlock(const float* x, const float* w, int nmax, uint8_t* q) {
  const float scale = SearchSymmetricScale(kQK, nmax, x, w, q);
  const uint16_t d = Fp32ToFp16(scale);
  const float stored = Fp16ToFp32(d);
  if (stored != 0) {
    for (int j = 0; j < kQK; ++j) {
      const int v = RoundToInt(x[j] / stored);
      q[j] = (uint8_t)(std::clamp(v, -nmax, nmax - 1) + nmax);
    }
  }
  return d;
}

void SearchAffineBlock(const float* x, const float* w, int nmax, uint8_t* q, uint16_t* d,
                       uint16_t* m) {
  float min_neg = 0;
  const float scale = SearchAffineScale(kQK, nmax, x, w, q, &min_neg, /*positive_min=*/true);
  *d = Fp32ToFp16(scale);
  *m = Fp32ToFp16(-min_neg);
  const float ds = Fp16ToFp32(*d), ms = Fp16ToFp32(*m);
  if (ds != 0) {
    for (int j = 0; j < kQK; ++j) {
      const int v = RoundToInt((x[j] - ms) / ds);
      q[j] = (uint8_t)std::clamp(v, 0, nmax);
    }
  }
}

void RoundSymmetricBlock(const float* x, int nmax, uint8_t* q, uint16_t* d_out) {
  float amax, max;
  SignedAbsMax(x, kQK, &amax, &max);
  const float d = max / -nmax;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  *d_out = Fp32ToFp16(d);
  for (int j = 0; j < kQK; ++j) {
    // x * id is in [-nmax, nmax]; adding nmax + 0.5 and truncating rounds
    // half up, and the top value nmax clamps to 2*nmax-1.
    const int v = SaturateToInt(x[j] * id + (float)nmax + 0.5f);
    q[j] = (uint8_t)std::clamp(v, 0, 2 * nmax - 1);
  }
}

void RoundAffineBlock(const float* x, int nmax, uint8_t* q, uint16_t* d_out, uint16_t* m_out) {
  float lo, hi;
  MinMax(x, kQK, &lo, &hi);
  const float d = (hi - lo) / nmax;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  *d_out = Fp32ToFp16(d);
  *m_out = Fp32ToFp16(lo);
  for (int j = 0; j < kQK; ++j) {
    const int v = SaturateToInt((x[j] - lo) * id + 0.5f);
    q[j] = (uint8_t)std::clamp(v, 0, nmax);
  }
}

}  // namespace

void DequantizeQ4_0(const BlockQ4_0* x, float* y, int64_t num_blocks) {
  for (int64_t b = 0; b < num_blocks; ++b, y += kQK) {
    const float d = Fp16ToFp32(x[b].d);
    for (int j = 0; j < kQK; ++j) y[j] = (float)(Nibble(x[b].qs, 0, j) - 8) * d;
  }
}

void DequantizeQ4_1(const BlockQ4_1* x, float* y, int64_t num_blocks) {
  for (int64_t b = 0; b < num_blocks; ++b, y += kQK) {
    const float d = Fp16ToFp32(x[b].d), m = Fp16ToFp32(x[b].m);
    for (int j = 0; j < kQK; ++j) y[j] = (float)Nibble(x[b].qs, 0, j) * d + m;
  }
}

void DequantizeQ5_0(const BlockQ5_0* x, float* y, int64_t num_blocks) {
  for (int64_t b = 0; b < num_blocks; ++b, y += kQK) {
    const float d = Fp16ToFp32(x[b].d);
    const uint32_t qh = LoadQh(x[b].qh);
    for (int j = 0; j < kQK; ++j) y[j] = (float)(Nibble(x[b].qs, qh, j) - 16) * d;
  }
}

void DequantizeQ5_1(const BlockQ5_1* x, float* y, int64_t num_blocks) {
  for (int64_t b = 0; b < num_blocks; ++b, y += kQK) {
    const float d = Fp16ToFp32(x[b].d), m = Fp16ToFp32(x[b].m);
    const uint32_t qh = LoadQh(x[b].qh);
    for (int j = 0; j < kQK; ++j) y[j] = (float)Nibble(x[b].qs, qh, j) * d + m;
  }
}

void DequantizeQ8_0(const BlockQ8_0* x, float* y, int64_t num_blocks) {
  for (int64_t b = 0; b < num_blocks; ++b, y += kQK) {
    const float d = Fp16ToFp32(x[b].d);
    for (int j = 0; j < kQK; ++j) y[j] = (float)x[b].qs[j] * d;
  }
}

void DequantizeQ8_1(const BlockQ8_1* x, float* y, int64_t num_blocks) {
  for (int64_t b = 0; b < num_blocks; ++b, y += kQK) {
    const float d = Fp16ToFp32(x[b].d);
    for (int j = 0; j < kQK; ++j) y[j] = (float)x[b].qs[j] * d;
  }
}

template <class Block>
void QuantizeLegacy(const float* x, Block* y, int64_t num_blocks, const float* importance,
                    bool search) {
  constexpr bool kAffine = requires(Block& blk) { blk.m; };
  constexpr bool kFifthBit = requires(Block& blk) { blk.qh; };
  // Symmetric: q - nmax; affine: q in [0, nmax].
  constexpr int nmax = kAffine ? (kFifthBit ? 31 : 15) : (kFifthBit ? 16 : 8);
  uint8_t q[kQK];
  for (int64_t b = 0; b < num_blocks; ++b, x += kQK) {
    const float* w = importance ? importance + b * kQK : nullptr;
    if constexpr (kAffine) {
      if (search && w) {
        SearchAffineBlock(x, w, nmax, q, &y[b].d, &y[b].m);
      } else {
        RoundAffineBlock(x, nmax, q, &y[b].d, &y[b].m);
      }
    } else if (search && w) {
      y[b].d = SearchSymmetricBlock(x, w, nmax, q);
    } else {
      RoundSymmetricBlock(x, nmax, q, &y[b].d);
    }
    if constexpr (kFifthBit) {
      PackNibbles(q, y[b].qs, y[b].qh);
    } else {
      PackNibbles(q, y[b].qs, nullptr);
    }
  }
}
template void QuantizeLegacy(const float*, BlockQ4_0*, int64_t, const float*, bool);
template void QuantizeLegacy(const float*, BlockQ4_1*, int64_t, const float*, bool);
template void QuantizeLegacy(const float*, BlockQ5_0*, int64_t, const float*, bool);
template void QuantizeLegacy(const float*, BlockQ5_1*, int64_t, const float*, bool);

namespace {

// One block of kQK values to int8 at scale amax / 127; returns the scale.
float QuantizeQ8Block(const float* x, int8_t* qs) {
  float amax, max;
  SignedAbsMax(x, kQK, &amax, &max);
  const float d = amax / 127.0f;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  for (int j = 0; j < kQK; ++j) qs[j] = RoundHalfAway127(x[j] * id);
  return d;
}

}  // namespace

void QuantizeQ8_0(const float* x, BlockQ8_0* y, int64_t num_blocks) {
  for (int64_t b = 0; b < num_blocks; ++b, x += kQK) {
    y[b].d = Fp32ToFp16(QuantizeQ8Block(x, y[b].qs));
  }
}

void QuantizeQ8_1(const float* x, BlockQ8_1* y, int64_t num_blocks) {
  for (int64_t b = 0; b < num_blocks; ++b, x += kQK) {
    const float d = QuantizeQ8Block(x, y[b].qs);
    int sum = 0;
    for (int j = 0; j < kQK; ++j) sum += y[b].qs[j];
    y[b].d = Fp32ToFp16(d);
    y[b].s = Fp32ToFp16(d * (float)sum);
  }
}

}  // namespace tern::quant
