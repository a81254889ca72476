#include "kernels/ref/ref_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "base/fp16.h"
#include "quant/blocks.h"

namespace tern::kernels {
namespace {

using quant::BlockQ4_0;
using quant::BlockQ4_1;
using quant::BlockQ4_K;
using quant::BlockQ5_0;
using quant::BlockQ5_1;
using quant::BlockQ5_K;
using quant::BlockQ6_K;
using quant::BlockQ8_0;

// ---- activation quantization (bit-identical in every ISA) -----------------

inline int8_t QuantizeOne(float v, float id) {
  int q = (int)std::nearbyint(v * id);
  return (int8_t)std::clamp(q, -127, 127);
}

// n values into qs with d = max |x| / 127 (the block's scale, returned) and
// q = round(x / d).
float QuantizeBlock(const float* x, int n, int8_t* qs) {
  float amax = 0.0f;
  for (int j = 0; j < n; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int j = 0; j < n; ++j) qs[j] = QuantizeOne(x[j], id);
  return d;
}

void RefQuantizeQ8(const float* x, int64_t n, ActBlockQ8* out) {
  for (int64_t b = 0; b < n / 32; ++b) {
    const float d = QuantizeBlock(x + b * 32, 32, out[b].qs);
    int sum = 0;
    for (int j = 0; j < 32; ++j) sum += out[b].qs[j];
    out[b].d = d;
    out[b].s = d * (float)sum;
  }
}

void RefQuantizeQ8K(const float* x, int64_t n, ActBlockQ8K* out) {
  for (int64_t b = 0; b < n / 256; ++b) {
    const float d = QuantizeBlock(x + b * 256, 256, out[b].qs);
    for (int i = 0; i < 16; ++i) {
      int s = 0;
      for (int j = 0; j < 16; ++j) s += out[b].qs[16 * i + j];
      out[b].sums16[i] = (int16_t)s;
    }
    for (int i = 0; i < 8; ++i) {
      out[b].sums32[i] = (int16_t)(out[b].sums16[2 * i] + out[b].sums16[2 * i + 1]);
    }
    out[b].d = d;
  }
}

// ---- float weights ---------------------------------------------------------

template <DType kType>
inline float LoadWeight(const uint8_t* row, int64_t k) {
  if constexpr (kType == DType::kF32) {
    float v;
    std::memcpy(&v, row + 4 * k, 4);
    return v;
  } else {
    uint16_t h;
    std::memcpy(&h, row + 2 * k, 2);
    if constexpr (kType == DType::kF16) return Fp16ToFp32(h);
    return Bf16ToFp32(h);
  }
}

template <DType kType>
void RefGemmFloat(const uint8_t* w, int64_t w_row_bytes, int64_t rows,
                  const uint8_t* act, int64_t act_row_bytes, int64_t num_tokens,
                  int64_t cols, float* y, int64_t ldy, WorkerScratch*) {
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* row = w + r * w_row_bytes;
    for (int64_t t = 0; t < num_tokens; ++t) {
      const float* x = (const float*)(act + t * act_row_bytes);
      double acc = 0.0;
      for (int64_t k = 0; k < cols; ++k) acc += (double)LoadWeight<kType>(row, k) * x[k];
      y[t * ldy + r] = (float)acc;
    }
  }
}

// ---- legacy block formats x ActBlockQ8 --------------------------------------

inline uint32_t LoadU32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

template <DType kType>
void RefGemmLegacy(const uint8_t* w, int64_t w_row_bytes, int64_t rows,
                   const uint8_t* act, int64_t act_row_bytes, int64_t num_tokens,
                   int64_t cols, float* y, int64_t ldy, WorkerScratch*) {
  const int64_t nb = cols / 32;
  const int64_t block_bytes = BlockBytes(kType);
  std::vector<int> q(cols);
  std::vector<float> d(nb), m(nb);
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* row = w + r * w_row_bytes;
    for (int64_t b = 0; b < nb; ++b) {
      RefUnpackLegacyBlock(kType, row + b * block_bytes, &q[b * 32], &d[b], &m[b]);
    }
    for (int64_t t = 0; t < num_tokens; ++t) {
      const ActBlockQ8* a = (const ActBlockQ8*)(act + t * act_row_bytes);
      double acc = 0.0;
      for (int64_t b = 0; b < nb; ++b) {
        int isum = 0;
        for (int j = 0; j < 32; ++j) isum += q[b * 32 + j] * a[b].qs[j];
        acc += (double)(d[b] * a[b].d) * isum + (double)m[b] * a[b].s;
      }
      y[t * ldy + r] = (float)acc;
    }
  }
}

// ---- K-quants x ActBlockQ8K --------------------------------------------------

// x[j] = d * sc[j / sub] * q[j] - dmin * mn[j / sub], sub = 256 / num_sub.
struct KBlock {
  int q[256];
  int sc[16];
  int mn[16];
  int num_sub;
  float d;
  float dmin;
};

void ScaleMinK4(int j, const uint8_t* s, int* sc, int* mn) {
  if (j < 4) {
    *sc = s[j] & 63;
    *mn = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
    *mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// Q4_K and Q5_K (Block): 8 sub-blocks of 32, quants in nibbles (Q5_K: and a
// fifth bit in qh).
template <class Block>
void UnpackQ45K(const uint8_t* p, KBlock* k) {
  const Block* b = (const Block*)p;
  k->num_sub = 8;
  k->d = Fp16ToFp32(b->d);
  k->dmin = Fp16ToFp32(b->dmin);
  for (int j = 0; j < 8; ++j) ScaleMinK4(j, b->scales, &k->sc[j], &k->mn[j]);
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      int lo = b->qs[32 * c + l] & 0xF, hi = b->qs[32 * c + l] >> 4;
      if constexpr (requires(const Block& blk) { blk.qh; }) {
        lo |= ((b->qh[l] >> (2 * c)) & 1) << 4;
        hi |= ((b->qh[l] >> (2 * c + 1)) & 1) << 4;
      }
      k->q[64 * c + l] = lo;
      k->q[64 * c + 32 + l] = hi;
    }
  }
}

void UnpackQ6K(const uint8_t* p, KBlock* k) {
  const BlockQ6_K* b = (const BlockQ6_K*)p;
  k->num_sub = 16;
  k->d = Fp16ToFp32(b->d);
  k->dmin = 0.0f;
  for (int j = 0; j < 16; ++j) {
    k->sc[j] = b->scales[j];
    k->mn[j] = 0;
  }
  for (int half = 0; half < 2; ++half) {
    const uint8_t* ql = b->ql + 64 * half;
    const uint8_t* qh = b->qh + 32 * half;
    int* q = k->q + 128 * half;
    for (int l = 0; l < 32; ++l) {
      q[l] = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
      q[l + 32] = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
      q[l + 64] = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      q[l + 96] = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
    }
  }
}

template <DType kType>
void UnpackK(const uint8_t* p, KBlock* k) {
  if constexpr (kType == DType::kQ4_K) UnpackQ45K<BlockQ4_K>(p, k);
  else if constexpr (kType == DType::kQ5_K) UnpackQ45K<BlockQ5_K>(p, k);
  else UnpackQ6K(p, k);
}

template <DType kType>
void RefGemmK(const uint8_t* w, int64_t w_row_bytes, int64_t rows,
              const uint8_t* act, int64_t act_row_bytes, int64_t num_tokens,
              int64_t cols, float* y, int64_t ldy, WorkerScratch*) {
  const int64_t nb = cols / 256;
  const int64_t block_bytes = BlockBytes(kType);
  std::vector<KBlock> blocks(nb);
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* row = w + r * w_row_bytes;
    for (int64_t b = 0; b < nb; ++b) UnpackK<kType>(row + b * block_bytes, &blocks[b]);
    for (int64_t t = 0; t < num_tokens; ++t) {
      const ActBlockQ8K* a = (const ActBlockQ8K*)(act + t * act_row_bytes);
      double acc = 0.0;
      for (int64_t b = 0; b < nb; ++b) {
        const KBlock& k = blocks[b];
        const int sub = 256 / k.num_sub;
        int64_t isum = 0, msum = 0;
        for (int j = 0; j < k.num_sub; ++j) {
          int dot = 0, asum = 0;
          for (int i = j * sub; i < (j + 1) * sub; ++i) {
            dot += k.q[i] * a[b].qs[i];
            asum += a[b].qs[i];
          }
          isum += (int64_t)k.sc[j] * dot;
          msum += (int64_t)k.mn[j] * asum;
        }
        acc += (double)(k.d * a[b].d) * (double)isum -
               (double)(k.dmin * a[b].d) * (double)msum;
      }
      y[t * ldy + r] = (float)acc;
    }
  }
}

// ---- element-wise -------------------------------------------------------------

void RefRmsNorm(const float* x, const float* weight, int64_t n, float eps, float* out) {
  double ss = 0.0;
  for (int64_t i = 0; i < n; ++i) ss += (double)x[i] * x[i];
  const float scale = (float)(1.0 / std::sqrt(ss / (double)n + (double)eps));
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale * (weight ? weight[i] : 1.0f);
}

void RefSiluMul(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void RefSoftmax(float* x, int64_t n) {
  if (n <= 0) return;
  float mx = x[0];
  for (int64_t i = 1; i < n; ++i) mx = std::max(mx, x[i]);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - mx);
    sum += x[i];
  }
  const float inv = (float)(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void RefRope(float* x, int64_t num_heads, int64_t head_dim, int64_t rope_dim,
             const float* cos_sin, bool neox) {
  const int64_t half = rope_dim / 2;
  for (int64_t h = 0; h < num_heads; ++h) {
    float* v = x + h * head_dim;
    for (int64_t i = 0; i < half; ++i) {
      const float c = cos_sin[2 * i], s = cos_sin[2 * i + 1];
      float* a = neox ? v + i : v + 2 * i;
      float* b = neox ? v + i + half : v + 2 * i + 1;
      const float x0 = *a, x1 = *b;
      *a = x0 * c - x1 * s;
      *b = x0 * s + x1 * c;
    }
  }
}

float RefDotF32(const float* a, const float* b, int64_t n) {
  double acc = 0.0;
  for (int64_t i = 0; i < n; ++i) acc += (double)a[i] * b[i];
  return (float)acc;
}

float RefDotF16(const float* a, const uint16_t* b, int64_t n) {
  double acc = 0.0;
  for (int64_t i = 0; i < n; ++i) acc += (double)a[i] * Fp16ToFp32(b[i]);
  return (float)acc;
}

void RefAxpyF32(float alpha, const float* x, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

void RefAxpyF16(float alpha, const uint16_t* x, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] += alpha * Fp16ToFp32(x[i]);
}

void RefScaleF32(float alpha, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] *= alpha;
}

void RefF32ToF16(const float* x, int64_t n, uint16_t* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = Fp32ToFp16(x[i]);
}

bool RefAttendGroup(const AttnGroupArgs& args) {
  AttendGroupGeneric(RefKernelTable(), args);
  return true;
}

}  // namespace

void RefUnpackLegacyBlock(DType t, const uint8_t* p, int* q, float* d, float* m) {
  *m = 0.0f;
  switch (t) {
    case DType::kQ4_0: {
      const BlockQ4_0* b = (const BlockQ4_0*)p;
      *d = Fp16ToFp32(b->d);
      for (int j = 0; j < 16; ++j) {
        q[j] = (b->qs[j] & 0xF) - 8;
        q[j + 16] = (b->qs[j] >> 4) - 8;
      }
      return;
    }
    case DType::kQ4_1: {
      const BlockQ4_1* b = (const BlockQ4_1*)p;
      *d = Fp16ToFp32(b->d);
      *m = Fp16ToFp32(b->m);
      for (int j = 0; j < 16; ++j) {
        q[j] = b->qs[j] & 0xF;
        q[j + 16] = b->qs[j] >> 4;
      }
      return;
    }
    case DType::kQ5_0: {
      const BlockQ5_0* b = (const BlockQ5_0*)p;
      *d = Fp16ToFp32(b->d);
      const uint32_t qh = LoadU32(b->qh);
      for (int j = 0; j < 16; ++j) {
        q[j] = ((b->qs[j] & 0xF) | (((qh >> j) & 1) << 4)) - 16;
        q[j + 16] = ((b->qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - 16;
      }
      return;
    }
    case DType::kQ5_1: {
      const BlockQ5_1* b = (const BlockQ5_1*)p;
      *d = Fp16ToFp32(b->d);
      *m = Fp16ToFp32(b->m);
      const uint32_t qh = LoadU32(b->qh);
      for (int j = 0; j < 16; ++j) {
        q[j] = (b->qs[j] & 0xF) | (((qh >> j) & 1) << 4);
        q[j + 16] = (b->qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
      }
      return;
    }
    case DType::kQ8_0: {
      const BlockQ8_0* b = (const BlockQ8_0*)p;
      *d = Fp16ToFp32(b->d);
      for (int j = 0; j < 32; ++j) q[j] = b->qs[j];
      return;
    }
    default:
      *d = 0.0f;
      for (int j = 0; j < 32; ++j) q[j] = 0;
  }
}

void FillRefKernels(KernelTable* t) {
  t->isa = "scalar";
  auto set = [&](DType d, const ActFormat& a, GemmFn f) { t->matmul[(int)d] = {&a, f}; };
  set(DType::kF32, kF32Format, RefGemmFloat<DType::kF32>);
  set(DType::kF16, kF32Format, RefGemmFloat<DType::kF16>);
  set(DType::kBF16, kF32Format, RefGemmFloat<DType::kBF16>);
  set(DType::kQ4_0, kQ8Format, RefGemmLegacy<DType::kQ4_0>);
  set(DType::kQ4_1, kQ8Format, RefGemmLegacy<DType::kQ4_1>);
  set(DType::kQ5_0, kQ8Format, RefGemmLegacy<DType::kQ5_0>);
  set(DType::kQ5_1, kQ8Format, RefGemmLegacy<DType::kQ5_1>);
  set(DType::kQ8_0, kQ8Format, RefGemmLegacy<DType::kQ8_0>);
  set(DType::kQ4_K, kQ8KFormat, RefGemmK<DType::kQ4_K>);
  set(DType::kQ5_K, kQ8KFormat, RefGemmK<DType::kQ5_K>);
  set(DType::kQ6_K, kQ8KFormat, RefGemmK<DType::kQ6_K>);
  t->quantize_q8 = RefQuantizeQ8;
  t->quantize_q8k = RefQuantizeQ8K;
  t->rms_norm = RefRmsNorm;
  t->silu_mul = RefSiluMul;
  t->softmax = RefSoftmax;
  t->rope = RefRope;
  t->dot_f32 = RefDotF32;
  t->dot_f16 = RefDotF16;
  t->axpy_f32 = RefAxpyF32;
  t->axpy_f16 = RefAxpyF16;
  t->scale_f32 = RefScaleF32;
  t->f32_to_f16 = RefF32ToF16;
  t->attend_group = RefAttendGroup;
}

}  // namespace tern::kernels
