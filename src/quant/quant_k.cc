// K-quants: 256-element super-blocks split into sub-blocks whose scales (and
// mins) are themselves quantized against one or two half-precision
// super-block scales.
//
// Element i of a super-block lives at (dequantization is the spec):
//   Q2_K/Q3_K low bits : qs[32*(i/128) + i%32] >> 2*((i%128)/32), 2 bits
//   Q3_K high bit      : hmask[i%32] bit i/32 (set = value >= 0)
//   Q4_K/Q5_K low bits : qs[32*(i/64) + i%32], low nibble if i%64 < 32
//   Q5_K high bit      : qh[i%32] bit i/32
//   Q6_K low bits      : ql[64*(i/128) + i%64], low nibble if i%128 < 64
//   Q6_K high bits     : qh[32*(i/128) + i%32] >> 2*((i%128)/32), 2 bits
//   scale index        : i/16 (Q2_K, Q3_K, Q6_K), i/32 (Q4_K, Q5_K)
#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/fp16.h"
#include "quant/formats.h"
#include "quant/scale_search.h"

namespace tern::quant {
namespace {

// Rounds of "refit the super-block scale(s) by weighted least squares, then
// choose the sub-block levels again" after the first choice.
constexpr int kSuperRefits = 2;

inline int Nearest(float v) { return RoundToInt(v); }
inline float Weight(const float* w, int i) { return w ? w[i] : 1.0f; }

inline int Q2Bits(const uint8_t* qs, int i) {
  return (qs[32 * (i / 128) + i % 32] >> (2 * ((i % 128) / 32))) & 3;
}
inline int Q4Bits(const uint8_t* qs, int i) {
  const uint8_t byte = qs[32 * (i / 64) + i % 32];
  return (i % 64) < 32 ? (byte & 0xF) : (byte >> 4);
}
inline int HighBit(const uint8_t* hmask, int i) { return (hmask[i % 32] >> (i / 32)) & 1; }

// ---- Sub-block scale quantization shared by the K-quants -------------------

// Rounds the sub-block x (n values) for a fixed scale dl and subtracted min
// ml: q = clamp(round((x + ml) / dl), 0, nmax). Returns the weighted error.
float RoundAffine(int n, int nmax, const float* x, const float* w, float dl, float ml,
                  uint8_t* q) {
  float err = 0;
  const float inv = dl != 0 ? 1.0f / dl : 0.0f;
  for (int i = 0; i < n; ++i) {
    q[i] = (uint8_t)RoundClampToInt((x[i] + ml) * inv, 0.0f, (float)nmax);
    const float diff = dl * q[i] - ml - x[i];
    err += Weight(w, i) * diff * diff;
  }
  return err;
}

// x ~ dl * (q - nmax), q in [0, 2*nmax - 1].
float RoundSymmetric(int n, int nmax, const float* x, const float* w, float dl, uint8_t* q) {
  float err = 0;
  const float inv = dl != 0 ? 1.0f / dl : 0.0f;
  for (int i = 0; i < n; ++i) {
    q[i] = (uint8_t)(RoundClampToInt(x[i] * inv, (float)-nmax, (float)(nmax - 1)) + nmax);
    const float diff = dl * ((int)q[i] - nmax) - x[i];
    err += Weight(w, i) * diff * diff;
  }
  return err;
}

// Affine super-block (Q2_K, Q4_K, Q5_K): num_sub sub-blocks of sub_len values
// with quants in [0, nmax]; sub-block scales and mins quantized to
// [0, levels] against d and dmin. With search, each sub-block's scale/min is
// searched and then its quantized levels are tuned by +-1.
struct AffineSuper {
  uint16_t d = 0, dmin = 0;
  uint8_t scale_level[16] = {}, min_level[16] = {};
  uint8_t q[kQK_K] = {};
};

// Picks each sub-block's quantized scale/min levels against fixed d, dmin
// (nearest level, then +-1 tuned by weighted error when search) and rounds
// its quants; returns the total weighted error.
float ChooseAffineLevels(const float* x, const float* w, int num_sub, int sub_len, int nmax,
                         int levels, bool search, const float* scales, const float* min_negs,
                         float d, float dmin, AffineSuper* out) {
  uint8_t q[32];
  float total = 0;
  for (int s = 0; s < num_sub; ++s) {
    const float* xs = x + s * sub_len;
    const float* ws = w ? w + s * sub_len : nullptr;
    const int ls0 = d > 0 ? std::clamp(Nearest(scales[s] / d), 0, levels) : 0;
    const int lm0 = dmin > 0 ? std::clamp(Nearest(min_negs[s] / dmin), 0, levels) : 0;
    int best_ls = ls0, best_lm = lm0;
    float best = RoundAffine(sub_len, nmax, xs, ws, d * ls0, dmin * lm0, out->q + s * sub_len);
    const int radius = search ? 1 : 0;
    for (int dl = -radius; dl <= radius; ++dl) {
      for (int dm = -radius; dm <= radius; ++dm) {
        const int ls = ls0 + dl, lm = lm0 + dm;
        if ((dl == 0 && dm == 0) || ls < 0 || ls > levels || lm < 0 || lm > levels) continue;
        const float err = RoundAffine(sub_len, nmax, xs, ws, d * ls, dmin * lm, q);
        if (err < best) {
          best = err;
          best_ls = ls;
          best_lm = lm;
          std::copy(q, q + sub_len, out->q + s * sub_len);
        }
      }
    }
    out->scale_level[s] = (uint8_t)best_ls;
    out->min_level[s] = (uint8_t)best_lm;
    total += best;
  }
  return total;
}

// Weighted least squares of the super-block scales for fixed levels and
// quants: x ~ d * (ls * q) - dmin * lm. Returns false when degenerate.
bool FitSuperScales(const float* x, const float* w, int num_sub, int sub_len,
                    const AffineSuper& in, float* d, float* dmin) {
  double saa = 0, sab = 0, sbb = 0, sax = 0, sbx = 0;
  for (int s = 0; s < num_sub; ++s) {
    const double ls = in.scale_level[s], lm = in.min_level[s];
    for (int i = s * sub_len; i < (s + 1) * sub_len; ++i) {
      const double wi = Weight(w, i), a = ls * in.q[i], b = -lm;
      saa += wi * a * a;
      sab += wi * a * b;
      sbb += wi * b * b;
      sax += wi * a * x[i];
      sbx += wi * b * x[i];
    }
  }
  const double det = saa * sbb - sab * sab;
  double dd = 0, mm = 0;
  if (det > 1e-12 * saa * sbb && det > 0) {
    dd = (sax * sbb - sbx * sab) / det;
    mm = (saa * sbx - sab * sax) / det;
  }
  if (!(mm >= 0) || det <= 0) {
    mm = 0;
    dd = saa > 0 ? sax / saa : 0;
  }
  if (!(dd > 0)) return false;
  *d = (float)dd;
  *dmin = (float)mm;
  return true;
}

AffineSuper QuantizeAffineSuper(const float* x, const float* w, int num_sub, int sub_len,
                                int nmax, int levels, bool search) {
  AffineSuper out;
  float scales[16], min_negs[16];
  float max_scale = 0, max_min = 0;
  for (int s = 0; s < num_sub; ++s) {
    const float* ws = w ? w + s * sub_len : nullptr;
    scales[s] = SearchAffineScale(sub_len, nmax, x + s * sub_len, ws, out.q + s * sub_len,
                                  &min_negs[s], /*positive_min=*/false, search);
    max_scale = std::max(max_scale, scales[s]);
    max_min = std::max(max_min, min_negs[s]);
  }
  out.d = Fp32ToFp16(max_scale / levels);
  out.dmin = Fp32ToFp16(max_min / levels);
  float best = ChooseAffineLevels(x, w, num_sub, sub_len, nmax, levels, search, scales, min_negs,
                                  Fp16ToFp32(out.d), Fp16ToFp32(out.dmin), &out);
  // Refit d and dmin to the chosen levels and quants, then choose again;
  // kept only while the weighted error falls.
  for (int iter = 0; search && iter < kSuperRefits; ++iter) {
    float d, dmin;
    if (!FitSuperScales(x, w, num_sub, sub_len, out, &d, &dmin)) break;
    AffineSuper cand = out;
    cand.d = Fp32ToFp16(d);
    cand.dmin = Fp32ToFp16(dmin);
    const float err = ChooseAffineLevels(x, w, num_sub, sub_len, nmax, levels, search, scales,
                                         min_negs, Fp16ToFp32(cand.d), Fp16ToFp32(cand.dmin),
                                         &cand);
    if (!(err < best)) break;
    best = err;
    out = cand;
  }
  return out;
}

// Symmetric super-block (Q3_K, Q6_K): 16 sub-blocks of 16 with quants
// q - nmax in [-nmax, nmax-1]; signed sub-block scales in
// [-level_ref, level_ref-1] against d = max_scale / -level_ref.
struct SymmetricSuper {
  uint16_t d = 0;
  int8_t scale_level[16] = {};
  uint8_t q[kQK_K] = {};
};

constexpr int kSymSub = 16;

// Picks each sub-block's signed scale level against a fixed d (nearest, then
// +-1 tuned by weighted error when search) and rounds its quants; returns
// the total weighted error.
float ChooseSymmetricLevels(const float* x, const float* w, int nmax, int level_ref, bool search,
                            const float* scales, float d, SymmetricSuper* out) {
  uint8_t q[kSymSub];
  float total = 0;
  for (int s = 0; s < kSymSub; ++s) {
    const float* xs = x + s * kSymSub;
    const float* ws = w ? w + s * kSymSub : nullptr;
    const int l0 = d != 0 ? std::clamp(Nearest(scales[s] / d), -level_ref, level_ref - 1) : 0;
    int best_l = l0;
    float best = RoundSymmetric(kSymSub, nmax, xs, ws, d * l0, out->q + s * kSymSub);
    const int radius = search ? 1 : 0;
    for (int dl = -radius; dl <= radius; ++dl) {
      const int l = l0 + dl;
      if (dl == 0 || l < -level_ref || l > level_ref - 1) continue;
      const float err = RoundSymmetric(kSymSub, nmax, xs, ws, d * l, q);
      if (err < best) {
        best = err;
        best_l = l;
        std::copy(q, q + kSymSub, out->q + s * kSymSub);
      }
    }
    out->scale_level[s] = (int8_t)best_l;
    total += best;
  }
  return total;
}

// Weighted least squares of d for fixed levels and quants:
// x ~ d * (level * (q - nmax)). Returns 0 when degenerate.
float FitSymmetricSuperScale(const float* x, const float* w, int nmax, const SymmetricSuper& in) {
  double saa = 0, sax = 0;
  for (int i = 0; i < kQK_K; ++i) {
    const double a = (double)in.scale_level[i / kSymSub] * ((int)in.q[i] - nmax);
    saa += Weight(w, i) * a * a;
    sax += Weight(w, i) * a * x[i];
  }
  return saa > 0 ? (float)(sax / saa) : 0.0f;
}

SymmetricSuper QuantizeSymmetricSuper(const float* x, const float* w, int nmax, int level_ref,
                                      bool search) {
  SymmetricSuper out;
  float scales[kSymSub];
  float amax = 0, max_scale = 0;
  for (int s = 0; s < kSymSub; ++s) {
    const float* ws = w ? w + s * kSymSub : nullptr;
    scales[s] =
        SearchSymmetricScale(kSymSub, nmax, x + s * kSymSub, ws, out.q + s * kSymSub, search);
    if (std::fabs(scales[s]) > amax) {
      amax = std::fabs(scales[s]);
      max_scale = scales[s];
    }
  }
  if (amax == 0) {
    std::fill(out.q, out.q + kQK_K, (uint8_t)nmax);
    return out;
  }
  out.d = Fp32ToFp16(max_scale / -level_ref);
  float best = ChooseSymmetricLevels(x, w, nmax, level_ref, search, scales, Fp16ToFp32(out.d),
                                     &out);
  for (int iter = 0; search && iter < kSuperRefits; ++iter) {
    const float d = FitSymmetricSuperScale(x, w, nmax, out);
    if (!(std::fabs(d) > 0)) break;
    SymmetricSuper cand = out;
    cand.d = Fp32ToFp16(d);
    const float err = ChooseSymmetricLevels(x, w, nmax, level_ref, search, scales,
                                            Fp16ToFp32(cand.d), &cand);
    if (!(err < best)) break;
    best = err;
    out = cand;
  }
  return out;
}

// The importance the K-quants weight errors by: the given value plus a
// floor of the row's mean importance. An imatrix from a small calibration
// text is a noisy estimate; where columns matter about equally (importance
// within 2x) the raw values mostly add noise to the rounding choices, while
// a column 20x above the rest stays about 10x above it after the floor.
// Measured on a random-weight model over 8 rounding realizations (see
// docs/quantization.md), the floor turned the imatrix's effect on held-out
// KL negative for Q4_K_S in both directions.
constexpr float kImportanceFloor = 1.0f;  // times the row mean

float ImportanceFloor(const float* importance, int64_t num_blocks) {
  if (!importance || num_blocks <= 0) return 0.0f;
  double sum = 0;
  for (int64_t i = 0; i < num_blocks * kQK_K; ++i) sum += importance[i];
  return (float)(kImportanceFloor * sum / (double)(num_blocks * kQK_K));
}

const float* FloorImportance(const float* importance, float floor, float* out) {
  for (int i = 0; i < kQK_K; ++i) out[i] = importance[i] + floor;
  return out;
}

// Q4_K/Q5_K low 4 bits: 64 consecutive elements per 32 bytes, first 32 in
// the low nibbles.
void PackLowNibbles(const uint8_t* q, uint8_t* qs) {
  std::memset(qs, 0, kQK_K / 2);
  for (int i = 0; i < kQK_K; ++i) {
    const int shift = (i % 64) < 32 ? 0 : 4;
    qs[32 * (i / 64) + i % 32] |= (uint8_t)((q[i] & 0xF) << shift);
  }
}

// quantize(x_b, w_b, b) for each super-block b: x_b its 256 values, w_b its
// importance with the floor applied (nullptr without importance).
template <class Quantize>
void ForEachSuperBlock(const float* x, int64_t num_blocks, const float* importance,
                       Quantize quantize) {
  const float importance_floor = ImportanceFloor(importance, num_blocks);
  for (int64_t b = 0; b < num_blocks; ++b) {
    float w_buf[kQK_K];
    const float* w =
        importance ? FloorImportance(importance + b * kQK_K, importance_floor, w_buf) : nullptr;
    quantize(x + b * kQK_K, w, b);
  }
}

}  // namespace

// ---- Scale packing ----------------------------------------------------------

void UnpackScaleMinK4(const uint8_t* p, int j, uint8_t* scale, uint8_t* min) {
  if (j < 4) {
    *scale = p[j] & 63;
    *min = p[j + 4] & 63;
  } else {
    *scale = (uint8_t)((p[j + 4] & 0xF) | ((p[j - 4] >> 6) << 4));
    *min = (uint8_t)((p[j + 4] >> 4) | ((p[j] >> 6) << 4));
  }
}

void PackScaleMinK4(const uint8_t scales[8], const uint8_t mins[8], uint8_t* p) {
  for (int j = 0; j < 4; ++j) {
    p[j] = (uint8_t)((scales[j] & 63) | ((scales[j + 4] >> 4) << 6));
    p[j + 4] = (uint8_t)((mins[j] & 63) | ((mins[j + 4] >> 4) << 6));
    p[j + 8] = (uint8_t)((scales[j + 4] & 0xF) | ((mins[j + 4] & 0xF) << 4));
  }
}

int UnpackScaleQ3_K(const uint8_t* p, int j) {
  const int low = j < 8 ? (p[j] & 0xF) : (p[j - 8] >> 4);
  const int high = (p[8 + j % 4] >> (2 * (j / 4))) & 3;
  return (low | (high << 4)) - 32;
}

void PackScalesQ3_K(const int8_t scales[16], uint8_t* p) {
  std::memset(p, 0, 12);
  for (int j = 0; j < 16; ++j) {
    const int v = scales[j] + 32;  // 0..63
    if (j < 8) {
      p[j] |= (uint8_t)(v & 0xF);
    } else {
      p[j - 8] |= (uint8_t)((v & 0xF) << 4);
    }
    p[8 + j % 4] |= (uint8_t)((v >> 4) << (2 * (j / 4)));
  }
}

// ---- Dequantization -----------------------------------------------------------

void DequantizeQ2_K(const BlockQ2_K* x, float* y, int64_t num_blocks) {
  for (int64_t b = 0; b < num_blocks; ++b, y += kQK_K) {
    const float d = Fp16ToFp32(x[b].d), dmin = Fp16ToFp32(x[b].dmin);
    for (int s = 0; s < kQK_K / 16; ++s) {
      const float dl = d * (float)(x[b].scales[s] & 0xF);
      const float ml = dmin * (float)(x[b].scales[s] >> 4);
      for (int i = 16 * s; i < 16 * s + 16; ++i) y[i] = dl * (float)Q2Bits(x[b].qs, i) - ml;
    }
  }
}

void DequantizeQ3_K(const BlockQ3_K* x, float* y, int64_t num_blocks) {
  for (int64_t b = 0; b < num_blocks; ++b, y += kQK_K) {
    const float d = Fp16ToFp32(x[b].d);
    for (int s = 0; s < kQK_K / 16; ++s) {
      const float dl = d * (float)UnpackScaleQ3_K(x[b].scales, s);
      for (int i = 16 * s; i < 16 * s + 16; ++i) {
        const int q = Q2Bits(x[b].qs, i) - (HighBit(x[b].hmask, i) ? 0 : 4);
        y[i] = dl * (float)q;
      }
    }
  }
}

template <class Block>
void DequantizeQ45K(const Block* x, float* y, int64_t num_blocks) {
  for (int64_t b = 0; b < num_blocks; ++b, y += kQK_K) {
    const float d = Fp16ToFp32(x[b].d), dmin = Fp16ToFp32(x[b].dmin);
    for (int s = 0; s < 8; ++s) {
      uint8_t sc, m;
      UnpackScaleMinK4(x[b].scales, s, &sc, &m);
      const float dl = d * (float)sc, ml = dmin * (float)m;
      for (int i = 32 * s; i < 32 * s + 32; ++i) {
        int q = Q4Bits(x[b].qs, i);
        if constexpr (requires(const Block& blk) { blk.qh; }) q |= HighBit(x[b].qh, i) << 4;
        y[i] = dl * (float)q - ml;
      }
    }
  }
}
template void DequantizeQ45K(const BlockQ4_K*, float*, int64_t);
template void DequantizeQ45K(const BlockQ5_K*, float*, int64_t);

void DequantizeQ6_K(const BlockQ6_K* x, float* y, int64_t num_blocks) {
  for (int64_t b = 0; b < num_blocks; ++b, y += kQK_K) {
    const float d = Fp16ToFp32(x[b].d);
    for (int s = 0; s < kQK_K / 16; ++s) {
      const float dl = d * (float)x[b].scales[s];
      for (int i = 16 * s; i < 16 * s + 16; ++i) {
        const uint8_t low_byte = x[b].ql[64 * (i / 128) + i % 64];
        const int low = (i % 128) < 64 ? (low_byte & 0xF) : (low_byte >> 4);
        const int high = Q2Bits(x[b].qh, i);
        y[i] = dl * (float)((low | (high << 4)) - 32);
      }
    }
  }
}

void DequantizeQ8_K(const BlockQ8_K* x, float* y, int64_t num_blocks) {
  for (int64_t b = 0; b < num_blocks; ++b, y += kQK_K) {
    for (int i = 0; i < kQK_K; ++i) y[i] = x[b].d * (float)x[b].qs[i];
  }
}

// ---- Quantization -------------------------------------------------------------

void QuantizeQ2_K(const float* x, BlockQ2_K* y, int64_t num_blocks, const float* importance,
                  bool search) {
  ForEachSuperBlock(x, num_blocks, importance, [&](const float* xb, const float* w, int64_t b) {
    const AffineSuper s = QuantizeAffineSuper(xb, w, 16, 16, 3, 15, search);
    BlockQ2_K& out = y[b];
    out = {};  // the quants are OR-ed in below
    out.d = s.d;
    out.dmin = s.dmin;
    for (int j = 0; j < 16; ++j) out.scales[j] = (uint8_t)(s.scale_level[j] | (s.min_level[j] << 4));
    for (int i = 0; i < kQK_K; ++i) {
      out.qs[32 * (i / 128) + i % 32] |= (uint8_t)(s.q[i] << (2 * ((i % 128) / 32)));
    }
  });
}

void QuantizeQ3_K(const float* x, BlockQ3_K* y, int64_t num_blocks, const float* importance,
                  bool search) {
  ForEachSuperBlock(x, num_blocks, importance, [&](const float* xb, const float* w, int64_t b) {
    const SymmetricSuper s = QuantizeSymmetricSuper(xb, w, 4, 32, search);
    BlockQ3_K& out = y[b];
    out = {};  // the quants and high bits are OR-ed in below
    out.d = s.d;
    PackScalesQ3_K(s.scale_level, out.scales);
    for (int i = 0; i < kQK_K; ++i) {
      const int q = s.q[i];  // value + 4, in [0, 7]
      out.qs[32 * (i / 128) + i % 32] |= (uint8_t)((q & 3) << (2 * ((i % 128) / 32)));
      if (q & 4) out.hmask[i % 32] |= (uint8_t)(1 << (i / 32));
    }
  });
}

template <class Block>
void QuantizeQ45K(const float* x, Block* y, int64_t num_blocks, const float* importance,
                  bool search) {
  constexpr bool kFifthBit = requires(Block& blk) { blk.qh; };
  ForEachSuperBlock(x, num_blocks, importance, [&](const float* xb, const float* w, int64_t b) {
    const AffineSuper s = QuantizeAffineSuper(xb, w, 8, 32, kFifthBit ? 31 : 15, 63, search);
    y[b].d = s.d;
    y[b].dmin = s.dmin;
    PackScaleMinK4(s.scale_level, s.min_level, y[b].scales);
    PackLowNibbles(s.q, y[b].qs);
    if constexpr (kFifthBit) {
      std::memset(y[b].qh, 0, sizeof(y[b].qh));
      for (int i = 0; i < kQK_K; ++i) {
        if (s.q[i] & 16) y[b].qh[i % 32] |= (uint8_t)(1 << (i / 32));
      }
    }
  });
}
template void QuantizeQ45K(const float*, BlockQ4_K*, int64_t, const float*, bool);
template void QuantizeQ45K(const float*, BlockQ5_K*, int64_t, const float*, bool);

void QuantizeQ6_K(const float* x, BlockQ6_K* y, int64_t num_blocks, const float* importance,
                  bool search) {
  ForEachSuperBlock(x, num_blocks, importance, [&](const float* xb, const float* w, int64_t b) {
    const SymmetricSuper s = QuantizeSymmetricSuper(xb, w, 32, 128, search);
    BlockQ6_K& out = y[b];
    out = {};  // the quants are OR-ed in below
    out.d = s.d;
    for (int j = 0; j < 16; ++j) out.scales[j] = s.scale_level[j];
    for (int i = 0; i < kQK_K; ++i) {
      const int q = s.q[i];  // value + 32, in [0, 63]
      const int low_shift = (i % 128) < 64 ? 0 : 4;
      out.ql[64 * (i / 128) + i % 64] |= (uint8_t)((q & 0xF) << low_shift);
      out.qh[32 * (i / 128) + i % 32] |= (uint8_t)((q >> 4) << (2 * ((i % 128) / 32)));
    }
  });
}

void QuantizeQ8_K(const float* x, BlockQ8_K* y, int64_t num_blocks) {
  for (int64_t b = 0; b < num_blocks; ++b, x += kQK_K) {
    float amax = 0, max = 0;
    for (int i = 0; i < kQK_K; ++i) {
      if (std::fabs(x[i]) > amax) {
        amax = std::fabs(x[i]);
        max = x[i];
      }
    }
    BlockQ8_K& out = y[b];
    if (amax == 0) {
      std::memset(&out, 0, sizeof(out));
      continue;
    }
    const float iscale = -127.0f / max;
    for (int i = 0; i < kQK_K; ++i) {
      out.qs[i] = (int8_t)std::min(127, Nearest(iscale * x[i]));
    }
    for (int j = 0; j < kQK_K / 16; ++j) {
      int sum = 0;
      for (int i = 16 * j; i < 16 * j + 16; ++i) sum += out.qs[i];
      out.bsums[j] = (int16_t)sum;
    }
    out.d = 1.0f / iscale;
  }
}

}  // namespace tern::quant
