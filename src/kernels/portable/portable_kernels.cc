// The portable table: plain C++ with GCC/Clang vector extensions (8 float
// lanes as two 4-lane vectors) and integer loops written so the compiler vectorizes them, no
// intrinsics and no ISA flags, so it builds and runs on any target the
// compiler knows (on x86-64 without flags: SSE2). It takes the scalar spec
// (ref/) and overrides:
//   * F32/F16/BF16 weights: each weight row converted to f32 once per call,
//     then dot products over 8 lanes, up to 4 tokens per pass over the row;
//   * Q4_0/Q4_1/Q5_0/Q5_1/Q8_0 weights (the shared q8 activation format):
//     each row unpacked once per call to 16-bit quants
//     (RefUnpackLegacyBlock), integer block sums in a loop the compiler
//     widens (pmaddwd on x86), the float terms as the spec forms them, so
//     the outputs equal the scalar table's bitwise;
//   * dot_f32 / dot_f16 / axpy_f32 / axpy_f16 / scale_f32 over 8 lanes, and
//     attention through them (AttendGroupGeneric).
// The K-quants, norms, softmax, RoPE and quantizers stay the spec's.
// Every output is formed by the same operations whatever the tile, so any
// split of rows or tokens gives the same bits.
//
// Thread rules: the table is immutable; all functions are reentrant.
#include <cstring>
#include <vector>

#include "base/fp16.h"
#include "kernels/attention.h"
#include "kernels/kernel_table.h"
#include "kernels/ref/ref_kernels.h"

namespace tern::kernels {
namespace {

// 8 float lanes as two 4-lane vectors (the width of SSE2 and NEON
// registers; the compiler fuses them where it has wider ones).
using V4 = float __attribute__((vector_size(16)));
struct V8 {
  V4 lo = {}, hi = {};
  V8& operator+=(const V8& o) {
    lo += o.lo;
    hi += o.hi;
    return *this;
  }
};
inline V8 operator*(const V8& a, const V8& b) { return {a.lo * b.lo, a.hi * b.hi}; }
inline V8 operator*(float a, const V8& b) { return {a * b.lo, a * b.hi}; }
inline V8 operator+(const V8& a, const V8& b) { return {a.lo + b.lo, a.hi + b.hi}; }

inline V8 Load8(const float* p) {
  V8 v;
  std::memcpy(&v.lo, p, sizeof(v.lo));
  std::memcpy(&v.hi, p + 4, sizeof(v.hi));
  return v;
}
inline void Store8(float* p, const V8& v) {
  std::memcpy(p, &v.lo, sizeof(v.lo));
  std::memcpy(p + 4, &v.hi, sizeof(v.hi));
}
inline float Sum8(const V8& v) {
  return ((v.lo[0] + v.hi[0]) + (v.lo[1] + v.hi[1])) + ((v.lo[2] + v.hi[2]) + (v.lo[3] + v.hi[3]));
}

// ---- float weights ---------------------------------------------------------------

// Weight row of kType as f32 into out[cols].
template <DType kType>
void RowToF32(const uint8_t* row, int64_t cols, float* out) {
  if constexpr (kType == DType::kF32) {
    std::memcpy(out, row, cols * sizeof(float));
  } else {
    for (int64_t k = 0; k < cols; ++k) {
      uint16_t h;
      std::memcpy(&h, row + 2 * k, 2);
      out[k] = kType == DType::kF16 ? Fp16ToFp32(h) : Bf16ToFp32(h);
    }
  }
}

// y[t * ldy] = w . x_t for T tokens of act (rows arb bytes apart): lane l
// sums the products of k = l mod 8 in order, then Sum8, then the tail.
template <int T>
void DotTokens(const float* w, const uint8_t* act, int64_t arb, int64_t cols, float* y,
               int64_t ldy) {
  V8 acc[T] = {};
  const float* x[T];
  for (int t = 0; t < T; ++t) x[t] = (const float*)(act + t * arb);
  int64_t k = 0;
  for (; k + 8 <= cols; k += 8) {
    const V8 wv = Load8(w + k);
    for (int t = 0; t < T; ++t) acc[t] += wv * Load8(x[t] + k);
  }
  for (int t = 0; t < T; ++t) {
    float s = Sum8(acc[t]);
    for (int64_t j = k; j < cols; ++j) s += w[j] * x[t][j];
    y[t * ldy] = s;
  }
}

template <DType kType>
void PortableGemmFloat(const uint8_t* w, int64_t wrb, int64_t rows, const uint8_t* act,
                       int64_t arb, int64_t num_tokens, int64_t cols, float* y, int64_t ldy,
                       WorkerScratch*) {
  std::vector<float> row(cols);
  for (int64_t r = 0; r < rows; ++r) {
    RowToF32<kType>(w + r * wrb, cols, row.data());
    int64_t t = 0;
    for (; t + 4 <= num_tokens; t += 4) {
      DotTokens<4>(row.data(), act + t * arb, arb, cols, y + t * ldy + r, ldy);
    }
    for (; t < num_tokens; ++t) DotTokens<1>(row.data(), act + t * arb, arb, cols, y + t * ldy + r, ldy);
  }
}

// ---- legacy block formats x ActBlockQ8 ------------------------------------------------

// The exact integer sum of a block: 16-bit weight quants (|q| <= 128) x
// 8-bit activation quants, 32 terms.
inline int32_t BlockSum(const int16_t* w, const int8_t* a) {
  int32_t s = 0;
  for (int j = 0; j < 32; ++j) s += (int32_t)w[j] * (int32_t)a[j];
  return s;
}

// A weight row's blocks as 16-bit quants q[nb * 32] and scales d[nb], m[nb].
template <DType kType>
void UnpackRow16(const uint8_t* row, int64_t nb, int16_t* q, float* d, float* m) {
  for (int64_t b = 0; b < nb; ++b) {
    int qb[32];
    RefUnpackLegacyBlock(kType, row + b * BlockBytes(kType), qb, d + b, m + b);
    for (int j = 0; j < 32; ++j) q[b * 32 + j] = (int16_t)qb[j];
  }
}

template <DType kType>
void PortableGemmLegacy(const uint8_t* w, int64_t wrb, int64_t rows, const uint8_t* act,
                        int64_t arb, int64_t num_tokens, int64_t cols, float* y, int64_t ldy,
                       WorkerScratch*) {
  const int64_t nb = cols / 32;
  std::vector<int16_t> q(cols);
  std::vector<float> scales(2 * nb);  // d, then m
  const float* d = scales.data();
  const float* m = scales.data() + nb;
  for (int64_t r = 0; r < rows; ++r) {
    UnpackRow16<kType>(w + r * wrb, nb, q.data(), scales.data(), scales.data() + nb);
    for (int64_t t = 0; t < num_tokens; ++t) {
      const ActBlockQ8* a = (const ActBlockQ8*)(act + t * arb);
      // The spec's float terms (ref_kernels.cc), so the same bits.
      double acc = 0.0;
      for (int64_t b = 0; b < nb; ++b) {
        const int32_t isum = BlockSum(q.data() + b * 32, a[b].qs);
        acc += (double)(d[b] * a[b].d) * isum + (double)m[b] * a[b].s;
      }
      y[t * ldy + r] = (float)acc;
    }
  }
}

// ---- vector helpers (attention) ---------------------------------------------------------

// 8 halves of b as f32.
inline V8 LoadHalf8(const uint16_t* b) {
  V8 v;
  for (int l = 0; l < 4; ++l) {
    v.lo[l] = Fp16ToFp32(b[l]);
    v.hi[l] = Fp16ToFp32(b[4 + l]);
  }
  return v;
}

// The same lanes as the float weights' dot products.
float PortableDotF32(const float* a, const float* b, int64_t n) {
  float y;
  DotTokens<1>(a, (const uint8_t*)b, 0, n, &y, 0);
  return y;
}

float PortableDotF16(const float* a, const uint16_t* b, int64_t n) {
  V8 acc = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) acc += Load8(a + i) * LoadHalf8(b + i);
  float s = Sum8(acc);
  for (; i < n; ++i) s += a[i] * Fp16ToFp32(b[i]);
  return s;
}

void PortableAxpyF32(float alpha, const float* x, int64_t n, float* y) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) Store8(y + i, Load8(y + i) + alpha * Load8(x + i));
  for (; i < n; ++i) y[i] += alpha * x[i];
}

void PortableAxpyF16(float alpha, const uint16_t* x, int64_t n, float* y) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) Store8(y + i, Load8(y + i) + alpha * LoadHalf8(x + i));
  for (; i < n; ++i) y[i] += alpha * Fp16ToFp32(x[i]);
}

void PortableScaleF32(float alpha, int64_t n, float* y) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) Store8(y + i, alpha * Load8(y + i));
  for (; i < n; ++i) y[i] *= alpha;
}

const KernelTable& PortableTable();

bool PortableAttendGroup(const AttnGroupArgs& args) {
  AttendGroupGeneric(PortableTable(), args);
  return true;
}

KernelTable MakePortableTable() {
  KernelTable t;
  FillRefKernels(&t);
  t.isa = "portable";
  auto set = [&](DType d, const ActFormat& a, GemmFn f) { t.matmul[(int)d] = {&a, f}; };
  set(DType::kF32, kF32Format, PortableGemmFloat<DType::kF32>);
  set(DType::kF16, kF32Format, PortableGemmFloat<DType::kF16>);
  set(DType::kBF16, kF32Format, PortableGemmFloat<DType::kBF16>);
  set(DType::kQ4_0, kQ8Format, PortableGemmLegacy<DType::kQ4_0>);
  set(DType::kQ4_1, kQ8Format, PortableGemmLegacy<DType::kQ4_1>);
  set(DType::kQ5_0, kQ8Format, PortableGemmLegacy<DType::kQ5_0>);
  set(DType::kQ5_1, kQ8Format, PortableGemmLegacy<DType::kQ5_1>);
  set(DType::kQ8_0, kQ8Format, PortableGemmLegacy<DType::kQ8_0>);
  t.dot_f32 = PortableDotF32;
  t.dot_f16 = PortableDotF16;
  t.axpy_f32 = PortableAxpyF32;
  t.axpy_f16 = PortableAxpyF16;
  t.scale_f32 = PortableScaleF32;
  t.attend_group = PortableAttendGroup;
  return t;
}

const KernelTable& PortableTable() {
  static const KernelTable t = MakePortableTable();
  return t;
}

}  // namespace

// Registered in table_list.h; runs on every CPU.
const KernelTable* PortableKernelTable() { return &PortableTable(); }

}  // namespace tern::kernels
