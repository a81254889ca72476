// The x86 SIMD kernels, included by one translation unit per ISA level:
// avx2_kernels.cc (-mavx2 -mfma -mf16c) and avx512_vnni_kernels.cc (the same
// plus AVX-512 VL/BW/VNNI, with TERN_AVX512_VNNI defined: the 8-bit dot
// products use vpdpbusd on 256-bit registers; the integer results, and so the
// outputs, are bitwise the same as the AVX2 build's). Everything here has
// internal linkage (anonymous namespace), so the two builds never mix.
// Include from nowhere else.
//
// Register tiles:
//
//            tokens t .. t+T-1
//          +-----------------+
//  rows r  | acc[r][t] 8-lane |   each weight block is unpacked once per
//  ..r+R-1 |  partial sums    |   tile and serves T tokens; each activation
//          +-----------------+   block is loaded once and serves R rows.
//
// Every (r, t) accumulator sees the same operations in the same order in
// every tile shape, so results do not depend on how rows/tokens are split.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <type_traits>
#include <utility>
#include <vector>

#include "base/aligned_vector.h"
#include "base/fp16.h"
#include "kernels/kernel_table.h"
#include "kernels/x86/act_formats.h"
#include "kernels/x86/row_prefetch.h"
#include "quant/blocks.h"
#ifdef TERN_AVX512_VNNI
#include "kernels/x86/q4k_avx512.h"
#endif

namespace tern::kernels {
namespace {

// ---- 8-bit dot products ---------------------------------------------------------------

// Lane k: sum over bytes 4k..4k+3 of u * s (u unsigned, s signed), for inputs
// whose pairwise int16 sums cannot saturate (|u| <= 127 or u <= 31 here).
inline __m256i DotU8S8(__m256i u, __m256i s) {
#ifdef TERN_AVX512_VNNI
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
#else
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}

// acc + madd(x, s): pairs of int16 products summed into int32 lanes. One
// vpdpwssd with VNNI; exact integer arithmetic either way, so both builds
// give the same sums bitwise.
inline __m256i MaddAcc(__m256i acc, __m256i x, __m256i s) {
#ifdef TERN_AVX512_VNNI
  return _mm256_dpwssd_epi32(acc, x, s);
#else
  return _mm256_add_epi32(acc, _mm256_madd_epi16(x, s));
#endif
}

using quant::BlockQ4_0;
using quant::BlockQ4_1;
using quant::BlockQ4_K;
using quant::BlockQ5_0;
using quant::BlockQ5_1;
using quant::BlockQ5_K;
using quant::BlockQ6_K;
using quant::BlockQ8_0;

// Lane 0 of acc + float(the sum of v's 8 int32 lanes, exact, added in the
// vector unit) x (dw x da) (lane 0 of dw): the one-row K-quant decodes'
// step per super-block.
inline __m128 FmaLaneSum(__m256i v, __m128 dw, float da, __m128 acc) {
  __m128i v4 = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  v4 = _mm_add_epi32(v4, _mm_unpackhi_epi64(v4, v4));
  v4 = _mm_add_epi32(v4, _mm_shuffle_epi32(v4, 1));
  return _mm_fmadd_ss(_mm_cvtepi32_ps(v4), _mm_mul_ss(dw, _mm_set_ss(da)), acc);
}

// Lane g of the result: the sum of v[g]'s 8 int32 lanes (exact, as
// FmaLaneSum's: integer adds in another order). hadd(hadd(v0, v1),
// hadd(v2, v3)) holds v[g]'s lanes 0-3 summed in element g of the low half
// and its lanes 4-7 in the high half.
inline __m128i LaneSums4(const __m256i (&v)[4]) {
  const __m256i h =
      _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
  return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

#ifdef TERN_AVX512_VNNI
// Lane g of the result: the sum of v[g]'s 16 int32 lanes (exact, as the
// one-row sums: integer adds in another order).
inline __m128i LaneSums4(const __m512i (&v)[4]) {
  // Per 128-bit lane: a = [v0 0+2, v1 0+2, v0 1+3, v1 1+3], b the same of v2, v3.
  const __m512i a = _mm512_add_epi32(_mm512_unpacklo_epi32(v[0], v[1]),
                                     _mm512_unpackhi_epi32(v[0], v[1]));
  const __m512i b = _mm512_add_epi32(_mm512_unpacklo_epi32(v[2], v[3]),
                                     _mm512_unpackhi_epi32(v[2], v[3]));
  // [v0, v1, v2, v3] summed within each 128-bit lane, then the 4 lanes.
  const __m512i c = _mm512_add_epi32(_mm512_unpacklo_epi64(a, b), _mm512_unpackhi_epi64(a, b));
  const __m256i d = _mm256_add_epi32(_mm512_castsi512_si256(c), _mm512_extracti64x4_epi64(c, 1));
  return _mm_add_epi32(_mm256_castsi256_si128(d), _mm256_extracti128_si256(d, 1));
}
#endif

// The one-row Q4_K/Q5_K decodes' step per super-block: S = the sum of
// isum's 8 int32 lanes and M = the sum of msum's 4 (exact, in the vector
// unit), then lane 0 of acc + S x d_w d_a - M x dmin_w d_a (dd = [d_w,
// dmin_w, ..]).
inline __m128 FmaSumsMins(__m256i isum, __m128i msum, __m128 dd, float da, __m128 acc) {
  const __m128i s4 =
      _mm_add_epi32(_mm256_castsi256_si128(isum), _mm256_extracti128_si256(isum, 1));
  __m128i sm = _mm_hadd_epi32(s4, msum);  // [S01, S23, M01, M23]
  sm = _mm_hadd_epi32(sm, sm);            // [S, M, S, M]
  const __m128 f = _mm_cvtepi32_ps(sm);
  const __m128 p = _mm_mul_ps(dd, _mm_set1_ps(da));  // [d_w d_a, dmin_w d_a, ..]
  acc = _mm_fmadd_ss(f, p, acc);
  return _mm_fnmadd_ss(_mm_movehdup_ps(f), _mm_movehdup_ps(p), acc);
}

inline float Hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float HalfToFloat(uint16_t h) { return _cvtsh_ss(h); }

inline uint32_t LoadU32(const void* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline uint16_t LoadU16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// ---- tiling driver -------------------------------------------------------------

// K::Tile<R, T>(w, w_row_bytes, act, act_row_bytes, cols, y, ldy) computes an
// R x T tile.
template <class K, int R, int T>
inline void RunTokens(const uint8_t* w, int64_t wrb, const uint8_t* act, int64_t arb,
                      int64_t num_tokens, int64_t cols, float* y, int64_t ldy) {
  int64_t t = 0;
  for (; t + T <= num_tokens; t += T) {
    K::template Tile<R, T>(w, wrb, act + t * arb, arb, cols, y + t * ldy, ldy);
  }
  for (; t < num_tokens; ++t) {
    K::template Tile<R, 1>(w, wrb, act + t * arb, arb, cols, y + t * ldy, ldy);
  }
}

template <class K>
void TiledGemm(const uint8_t* w, int64_t wrb, int64_t rows, const uint8_t* act,
               int64_t arb, int64_t num_tokens, int64_t cols, float* y, int64_t ldy,
               WorkerScratch* = nullptr) {
  constexpr int R = K::kRows;
  constexpr int T = K::kTokens;
  int64_t r = 0;
  if (num_tokens == 1) {
    // Decode: a taller tile of rows, one token.
    constexpr int RD = K::kDecodeRows;
    for (; r + RD <= rows; r += RD) {
      K::template Tile<RD, 1>(w + r * wrb, wrb, act, arb, cols, y + r, ldy);
    }
    for (; r < rows; ++r) K::template Tile<1, 1>(w + r * wrb, wrb, act, arb, cols, y + r, ldy);
    return;
  }
  for (; r + R <= rows; r += R) {
    RunTokens<K, R, T>(w + r * wrb, wrb, act, arb, num_tokens, cols, y + r, ldy);
  }
  for (; r < rows; ++r) {
    RunTokens<K, 1, T>(w + r * wrb, wrb, act, arb, num_tokens, cols, y + r, ldy);
  }
}

// ---- float weights x f32 activations ------------------------------------------------

template <DType kType>
inline float LoadW1(const uint8_t* row, int64_t k) {
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

// 8 float lanes (AVX2): the halves of Vec256x2 (float weights), and the
// attention kernels' rows.
struct Vec256 {
  using Reg = __m256;
  static constexpr int kLanes = 8;
  static Reg Zero() { return _mm256_setzero_ps(); }
  static Reg LoadX(const float* p) { return _mm256_loadu_ps(p); }
  static void Store(float* p, Reg v) { _mm256_storeu_ps(p, v); }
  static Reg Set1(float v) { return _mm256_set1_ps(v); }
  static Reg Fma(Reg a, Reg b, Reg c) { return _mm256_fmadd_ps(a, b, c); }
  static float Sum(Reg v) { return Hsum(v); }
  // For ExpV: c - a x b, min, max, a x b, rounding to the nearest integer,
  // and v x 2^n for the integers n (|n| < 127) in float lanes.
  static Reg Fnma(Reg a, Reg b, Reg c) { return _mm256_fnmadd_ps(a, b, c); }
  static Reg Min(Reg a, Reg b) { return _mm256_min_ps(a, b); }
  static Reg Max(Reg a, Reg b) { return _mm256_max_ps(a, b); }
  static Reg Mul(Reg a, Reg b) { return _mm256_mul_ps(a, b); }
  static Reg RoundNearest(Reg v) {
    return _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  static Reg TimesPow2(Reg v, Reg n) {
    const __m256i e =
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(v, _mm256_castsi256_ps(e));
  }
  template <DType kType>
  static Reg LoadW(const uint8_t* row, int64_t k) {
    if constexpr (kType == DType::kF32) {
      return _mm256_loadu_ps((const float*)row + k);
    } else if constexpr (kType == DType::kF16) {
      return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(row + 2 * k)));
    } else {
      const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i*)(row + 2 * k)));
      return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
    }
  }
};

// 16 lanes as two 256-bit halves (the AVX2 float-weight kernels): lane i of
// a 16-lane accumulator is lane i of lo (i < 8) or of hi (i - 8), and Sum
// adds lo + hi first, then Hsum: the additions of Hsum512 (lane i + i+8,
// i + i+4, i + i+2, i + i+1). So each output sees the operations of the
// AVX-512 kernels, and a row's two chains of FMAs let decode walk the rows
// one by one (one chain of 8-lane FMAs per row was latency-bound).
struct Vec256x2 {
  struct Reg {
    __m256 lo, hi;
  };
  static constexpr int kLanes = 16;
  static Reg Zero() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
  static Reg LoadX(const float* p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
  static void Store(float* p, Reg v) {
    _mm256_storeu_ps(p, v.lo);
    _mm256_storeu_ps(p + 8, v.hi);
  }
  static Reg Fma(Reg a, Reg b, Reg c) {
    return {_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)};
  }
  static float Sum(Reg v) { return Hsum(_mm256_add_ps(v.lo, v.hi)); }
  template <DType kType>
  static Reg LoadW(const uint8_t* row, int64_t k) {
    return {Vec256::LoadW<kType>(row, k), Vec256::LoadW<kType>(row, k + 8)};
  }
};

#ifdef TERN_AVX512_VNNI
inline float Hsum512(__m512 v) {
  return Hsum(_mm256_add_ps(_mm512_castps512_ps256(v),
                            _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
}

// Lane r of the result = Hsum512(a[r]) bitwise: the same additions (lane i
// + lane i+8, then i + i+4, i + i+2, i + i+1) done for 8 vectors at once:
// about 25 instructions instead of 8 x 9.
inline __m256 Hsum512x8(const __m512 (&a)[8]) {
  __m512 b[4];  // b[i]: lanes 0-7 level 1 of a[2i], 8-15 of a[2i + 1]
  for (int i = 0; i < 4; ++i) {
    b[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0x44),
                         _mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0xEE));
  }
  __m512 c[2];  // c[i]: 128-bit lane j level 2 of a[4i + j]
  for (int i = 0; i < 2; ++i) {
    c[i] = _mm512_add_ps(_mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], 0x88),
                         _mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], 0xDD));
  }
  // Per 128-bit lane j: level 3 of a[j] (elements 0, 1) and a[4 + j] (2, 3),
  // then level 4 (element 0: a[j], 1: a[4 + j]).
  const __m512 f = _mm512_add_ps(_mm512_shuffle_ps(c[0], c[1], 0x44),
                                 _mm512_shuffle_ps(c[0], c[1], 0xEE));
  const __m512 h = _mm512_add_ps(_mm512_shuffle_ps(f, f, 0x88), _mm512_shuffle_ps(f, f, 0xDD));
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 0, 0, 0, 0, 0, 0, 0, 0);
  return _mm512_castps512_ps256(_mm512_permutexvar_ps(order, h));
}

// The low and the high nibble of each byte, each as a byte 0..15.
inline void SplitNibbles(__m512i v, __m512i* lo, __m512i* hi) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  *lo = _mm512_and_si512(v, m4);
  *hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
}

// y[t * ldy + r] = the horizontal sum of acc[r][t].
template <int R, int T>
inline void StoreSums(const __m512 (&acc)[R][T], float* y, int64_t ldy) {
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) y[t * ldy + r] = Hsum512(acc[r][t]);
}

struct Vec512 {
  using Reg = __m512;
  static constexpr int kLanes = 16;
  static Reg Zero() { return _mm512_setzero_ps(); }
  static Reg LoadX(const float* p) { return _mm512_loadu_ps(p); }
  static void Store(float* p, Reg v) { _mm512_storeu_ps(p, v); }
  static Reg Set1(float v) { return _mm512_set1_ps(v); }
  static Reg Fma(Reg a, Reg b, Reg c) { return _mm512_fmadd_ps(a, b, c); }
  static float Sum(Reg v) { return Hsum512(v); }
  static Reg Fnma(Reg a, Reg b, Reg c) { return _mm512_fnmadd_ps(a, b, c); }
  static Reg Min(Reg a, Reg b) { return _mm512_min_ps(a, b); }
  static Reg Max(Reg a, Reg b) { return _mm512_max_ps(a, b); }
  static Reg Mul(Reg a, Reg b) { return _mm512_mul_ps(a, b); }
  static Reg RoundNearest(Reg v) {
    return _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  static Reg TimesPow2(Reg v, Reg n) {
    const __m512i e =
        _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    return _mm512_mul_ps(v, _mm512_castsi512_ps(e));
  }
  template <DType kType>
  static Reg LoadW(const uint8_t* row, int64_t k) {
    if constexpr (kType == DType::kF32) {
      return _mm512_loadu_ps((const float*)row + k);
    } else if constexpr (kType == DType::kF16) {
      return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)(row + 2 * k)));
    } else {
      const __m512i v = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i*)(row + 2 * k)));
      return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
    }
  }
};
using FloatVec = Vec512;
#else
using FloatVec = Vec256x2;
#endif

template <DType kType, class V>
struct FloatKernel {
  using Reg = typename V::Reg;
  static constexpr int64_t kLanes = V::kLanes;
  // AVX-512, 16-bit weights: 8 rows x 3 tokens (a token's x vector, read
  // from L2, serves 8 rows; F16 prefill 5632 x 2048 x 128, 2 threads:
  // 182 -> 198-201 GFLOP/s against 4 x 6, tinyllama pp512 84-87 -> 92).
  // f32 weights stay 4 x 6: 8 rows of a 2048-column block overflow L1.
  // AVX2 (Vec256x2: 16 lanes in two registers): 4 rows x 3 tokens, and
  // prefill runs each K block twice, once for the low 8 lanes of every
  // accumulator and once for the high 8 (Step), so that 12 accumulators fill
  // the 16 registers; a 2 x 3 tile of both halves read each activation line
  // from L2 for 2 rows only (F16 prefill, 2 threads: 165 -> 97 GFLOP/s).
  static constexpr bool kPair = std::is_same_v<V, Vec256x2>;
  static constexpr bool kWide = !kPair && V::kLanes == 16 && kType != DType::kF32;
  static constexpr int kRows = kWide ? 8 : 4;
  static constexpr int kTokens = V::kLanes == 16 && !kPair ? (kWide ? 3 : 6) : 3;
  // Prefill walks K in blocks of kKBlock columns so that the weight rows of
  // a tile stay in L1 and the activation block of a token chunk in L2; the 16-lane
  // accumulators are parked in memory between blocks, which leaves the
  // operation sequence of each (r, t) unchanged (bitwise equal to Tile).
  // 2048: tinyllama's 2048-column matrices in one block; against 1024,
  // F16 prefill 2048 x 5632 (with kernels.cc's token chunks sized to the
  // block) 97-109 -> 124-140 GFLOP/s on Zen 3, 2 threads.
  static constexpr int64_t kKBlock = 2048;
  // 16-bit weights: prefill converts R rows x kPackCols columns to f32 once
  // and every token tile of the chunk reads them as they are (the same
  // values, so the same bits as decode). The conversions (two operations
  // each on the FMA ports of Intel cores) no longer repeat per token tile.
  // With kernels.cc's token chunks of 48 (1024 columns x 4 bytes a token),
  // tinyllama F16 pp512, 2 threads: AVX-512 91-92 -> 95.6-95.8 tok/s, AVX2
  // 68.7-69.4 -> 73.0-74.0.
  // The copy is 16 KiB (8 rows x 512 columns; AVX2 4 x 512, whose two
  // passes per block read the block's activations twice and want them still
  // in L1: 4 x 1024 read 141 against 158 GFLOP/s), so that it stays in the
  // 32 KiB L1 next to the activation rows streaming from L2 (8 x 1024
  // filled L1), and its rows are a cache line more than a power of
  // two apart (kPackStride), so that the rows' lines at one k fall into
  // different L1 sets: 4096 bytes apart, the 8 rows and the token rows
  // (also 4 KiB multiples apart) competed for the 8 ways of one set. AMD
  // EPYC Zen 4, one thread, F16 5632 x 2048 x 128 tokens in 48-token chunks
  // (best of 7, thread CPU time, a loaded machine): 72-76 -> 79-83 GFLOP/s
  // (FMA peak 114).
  static constexpr bool kPack = kType != DType::kF32;
  static constexpr int64_t kPackCols = kWide || kPair ? 512 : 1024;
  static constexpr int64_t kPackStride = kPackCols + 64 / 4;

  static constexpr int64_t WBytes() { return kType == DType::kF32 ? 4 : 2; }

  // Where the weights of row r, column k are: the file's rows.
  struct PlainRows {
    const uint8_t* w;
    int64_t wrb;
    const uint8_t* At(int64_t r, int64_t k) const { return w + r * wrb + k * WBytes(); }
    // Line i of the nrows rows' columns [c0, c1) (c1 - c0 a multiple of 16).
    const uint8_t* Line(int64_t i, int64_t nrows, int64_t c0, int64_t c1) const {
      const int64_t per_row = ((c1 - c0) * WBytes() + 63) / 64;
      return At(i / per_row, c0) + (i % per_row) * 64;
    }
  };
  // acc[r][t] += w[r, k0:k1) * x[t, k0:k1) (16-lane partial sums), k1 - k0 a
  // multiple of 16.
  template <int R, int T, bool kPrefetch = true>
  static inline void Accumulate(const uint8_t* w, int64_t wrb, const float* const* x,
                                int64_t k0, int64_t k1, Reg (&acc)[R][T]) {
    for (int64_t k = k0; k < k1; k += kLanes) {
      // Prefetch ahead on every row (the first token tile of a batch streams
      // the weights from memory too). Decode also wraps past the row's end
      // into the row this slot takes in the next tile (r + R), so each of the
      // R streams stays warm across tiles; prefill blocks K, so it does not.
      if (kPrefetch && (k & 31) < kLanes) {
        const int64_t kp = k + kPrefetchElems;
        for (int r = 0; r < R; ++r) {
          const uint8_t* p = (T > 1 || kp < k1) ? w + r * wrb + kp * WBytes()
                                                : w + (r + R) * wrb + (kp - k1) * WBytes();
          _mm_prefetch((const char*)p, _MM_HINT_T0);
        }
      }
      if constexpr (kPair) {
        // One half of the 16 columns at a time (the halves' accumulators
        // are independent, so the order of each lane's chain is the same).
        for (int h = 0; h < 2; ++h) {
          __m256 xv[T];
          for (int t = 0; t < T; ++t) xv[t] = _mm256_loadu_ps(x[t] + k + 8 * h);
          for (int r = 0; r < R; ++r) {
            __m256 wv = Vec256::LoadW<kType>(w + r * wrb, k + 8 * h);
            if constexpr (kType == DType::kF32 && T > 1) __asm__("" : "+v"(wv));
            for (int t = 0; t < T; ++t) {
              __m256& a = h == 0 ? acc[r][t].lo : acc[r][t].hi;
              a = _mm256_fmadd_ps(wv, xv[t], a);
            }
          }
        }
        continue;
      }
      Reg xv[T];
      for (int t = 0; t < T; ++t) xv[t] = V::LoadX(x[t] + k);
      for (int r = 0; r < R; ++r) {
        Reg wv = V::template LoadW<kType>(w + r * wrb, k);
        // f32 weights: one load into a register for the T tokens (GCC
        // would fold a load into each FMA, T loads a row).
        if constexpr (kType == DType::kF32 && T > 1) __asm__("" : "+v"(wv));
        for (int t = 0; t < T; ++t) acc[r][t] = V::Fma(wv, xv[t], acc[r][t]);
      }
    }
  }

  static constexpr int64_t kPrefetchElems = 512;

  // BlockedRows' parked accumulators for num_tokens tokens (64-byte
  // aligned: WorkerScratch's buffers are).
  static Reg* Park(int64_t num_tokens, WorkerScratch* scratch) {
    const int64_t need = (num_tokens + kTokens - 1) / kTokens * kTokens * kRows;
    return (Reg*)scratch->Get<float>(ScratchBuf::kFloatPark, kLanes * need);
  }

  template <int R, int T, class Rows = PlainRows>
  static inline void Finish(const Rows& rows, const float* const* x, int64_t cols,
                            const Reg (&acc)[R][T], float* y, int64_t ldy) {
    const int64_t cols8 = cols / kLanes * kLanes;
#ifdef TERN_AVX512_VNNI
    if constexpr (kLanes == 16 && R == 8) {
      // The 8 rows of a token at once (the same sums as V::Sum).
      for (int t = 0; t < T; ++t) {
        __m512 a[8];
        for (int r = 0; r < 8; ++r) a[r] = acc[r][t];
        const __m256 sums = Hsum512x8(a);
        if (cols8 == cols) {
          _mm256_storeu_ps(y + t * ldy, sums);
          continue;
        }
        alignas(32) float s[8];
        _mm256_store_ps(s, sums);
        for (int r = 0; r < 8; ++r) {
          for (int64_t k = cols8; k < cols; ++k) s[r] += LoadW1<kType>(rows.At(r, k), 0) * x[t][k];
          y[t * ldy + r] = s[r];
        }
      }
      return;
    }
#endif
    for (int r = 0; r < R; ++r) {
      for (int t = 0; t < T; ++t) {
        float s = V::Sum(acc[r][t]);
        for (int64_t k = cols8; k < cols; ++k) s += LoadW1<kType>(rows.At(r, k), 0) * x[t][k];
        y[t * ldy + r] = s;
      }
    }
  }

  // Decode (one token), AVX-512: the rows one after another, each a single
  // chain of FMAs over k (the order of Tile and of prefill), so the weights
  // are read as one sequential stream. The 8-row tile reads 8 streams of
  // 4 KiB rows at once, which the hardware prefetchers follow poorly: AMD
  // EPYC Zen 4, F16 5632 x 2048 from memory, 2 threads (a standalone loop,
  // best of 15-20 alternated rounds): 8-row tile 28-31 GB/s, rows one by
  // one 44-45, a plain read 46-49; software prefetch along the rows did not
  // help either shape. From L2 (one thread) the chain of 16-lane FMAs still
  // keeps up (33-37 GB/s against the tile's 20-35). AVX2 runs the same
  // 16 lanes as two 8-lane chains (Vec256x2): one 8-lane chain per row was
  // latency-bound (L2, one thread: 17 GB/s against 8 rows' 28 and two
  // chains' 34; from memory, 2 threads, two chains 29 where 8 rows read 17
  // and a plain read 30).
  static void DecodeRows(const uint8_t* w, int64_t wrb, int64_t rows, const float* x,
                         int64_t cols, float* y) {
    const int64_t cols8 = cols / kLanes * kLanes;
    for (int64_t r = 0; r < rows; ++r) {
      Reg acc[1][1] = {{V::Zero()}};
      Accumulate<1, 1, false>(w + r * wrb, wrb, &x, 0, cols8, acc);
      Finish<1, 1>(PlainRows{w + r * wrb, wrb}, &x, cols, acc, y + r, 1);
    }
  }

  template <int R, int T>
  static void Tile(const uint8_t* w, int64_t wrb, const uint8_t* act, int64_t arb,
                   int64_t cols, float* y, int64_t ldy) {
    Reg acc[R][T];
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) acc[r][t] = V::Zero();
    const float* x[T];
    for (int t = 0; t < T; ++t) x[t] = (const float*)(act + t * arb);
    Accumulate<R, T>(w, wrb, x, 0, cols / kLanes * kLanes, acc);
    Finish<R, T>(PlainRows{w, wrb}, x, cols, acc, y, ldy);
  }

  // R rows x num_tokens tokens, K-blocked; tokens in tiles of T.
  // next, next_rows: the rows the caller takes next (16-bit weights: their
  // first kPackCols columns are fetched into L2 while this tile's last block
  // is in use; none if next_rows is 0).
  template <int R, class Rows = PlainRows>
  static void BlockedRows(const Rows& rows, const uint8_t* act, int64_t arb,
                          int64_t num_tokens, int64_t cols, float* y, int64_t ldy,
                          Reg* park, const Rows& next, int64_t next_rows = 0) {
    constexpr int T = kTokens;
    const int64_t cols8 = cols / kLanes * kLanes;
    const int64_t tiles = (num_tokens + T - 1) / T;
    for (int64_t i = 0; i < tiles * R * T; ++i) park[i] = V::Zero();
    // step(tokens, act, park) on every token tile of the chunk (a last
    // partial tile token by token).
    // before(tile) runs ahead of each token tile.
    const auto for_tiles = [&](auto step, auto before) {
      int64_t t = 0;
      for (int64_t tile = 0; tile < tiles; ++tile, t += T) {
        before(tile);
        Reg* p = park + tile * R * T;
        if (t + T <= num_tokens) {
          step(std::integral_constant<int, T>(), act + t * arb, p);
        } else {
          for (int64_t u = t; u < num_tokens; ++u) {
            step(std::integral_constant<int, 1>(), act + u * arb, p + (u - t) * R);
          }
        }
      }
    };
    if constexpr (kPack) {
      alignas(64) float packed[R * kPackStride];  // 16 KiB + a line per row
      for (int64_t s0 = 0; s0 < cols8; s0 += kPackCols) {
        const int64_t s1 = std::min(cols8, s0 + kPackCols);
        for (int r = 0; r < R; ++r) {
          for (int64_t k = s0; k < s1; k += kLanes) {
            V::Store(packed + r * kPackStride + (k - s0), V::template LoadW<kType>(rows.At(r, k), 0));
          }
        }
        // The next block to convert (this tile's next columns, else the
        // caller's next rows) is fetched into L2 a slice per token tile:
        // without it each conversion waited on memory or L3 (a tile's rows
        // are read again for each token chunk and need not stay in L2).
        const bool more = s1 < cols8;
        const Rows& nw = more ? rows : next;
        const int64_t nrows = more ? R : next_rows;
        const int64_t c0 = more ? s1 : 0;
        const int64_t c1 = more ? std::min(cols8, s1 + kPackCols) : std::min(cols8, kPackCols);
        const int64_t nlines = ((c1 - c0) * WBytes() + 63) / 64;
        const int64_t per_tile = (nrows * nlines + tiles - 1) / tiles;
        const auto prefetch_slice = [&](int64_t tile) {
          const int64_t i1 = std::min(nrows * nlines, (tile + 1) * per_tile);
          for (int64_t i = tile * per_tile; i < i1; ++i) {
            // An asm prefetch: with _mm_prefetch GCC 12 judged this
            // prefetch-only lambda free of side effects and deleted its
            // calls (as it did an earlier row prefetch's and PrefetchKvHead's):
            // no prefetch instruction in any 16-bit BlockedRows of either
            // table, and each block's conversion waited on memory (AVX2,
            // one thread: 22% of the kernel's cycles, 6-10% with it).
            asm volatile("prefetcht1 %0" : : "m"(*(const char*)nw.Line(i, nrows, c0, c1)));
          }
        };
        // The copy as f32 weights (rows kPackStride apart, column s0 first),
        // the activations from column s0; no prefetch (it is in L1).
        for_tiles(
            [&](auto tokens, const uint8_t* a, Reg* p) {
              FloatKernel<DType::kF32, V>::template Step<R, decltype(tokens)::value, false>(
                  (const uint8_t*)packed, kPackStride * 4, a + s0 * 4, arb, 0, s1 - s0, p);
            },
            prefetch_slice);
      }
    } else {
      for (int64_t k0 = 0; k0 < cols8; k0 += kKBlock) {
        const int64_t k1 = std::min(cols8, k0 + kKBlock);
        for_tiles(
            [&](auto tokens, const uint8_t* a, Reg* p) {
              Step<R, decltype(tokens)::value>(rows.w, rows.wrb, a, arb, k0, k1, p);
            },
            [](int64_t) {});
      }
    }
    int64_t t = 0;
    for (int64_t tile = 0; tile < tiles; ++tile, t += T) {
      const Reg* p = park + tile * R * T;
      if (t + T <= num_tokens) {
        Done<R, T>(rows, act + t * arb, arb, cols, p, y + t * ldy, ldy);
      } else {
        for (int64_t u = t; u < num_tokens; ++u) {
          Done<R, 1>(rows, act + u * arb, arb, cols, p + (u - t) * R, y + u * ldy, ldy);
        }
      }
    }
  }

  template <int R, int T, bool kPrefetch = true>
  static inline void Step(const uint8_t* w, int64_t wrb, const uint8_t* act, int64_t arb,
                          int64_t k0, int64_t k1, Reg* park) {
    const float* x[T];
    for (int t = 0; t < T; ++t) x[t] = (const float*)(act + t * arb);
    if constexpr (kPair) {
      // The low 8 lanes of every accumulator over the block, then the high
      // 8: each lane's chain over k is the one Accumulate gives it.
      for (int h = 0; h < 2; ++h) {
        __m256 acc[R][T];
        for (int r = 0; r < R; ++r)
          for (int t = 0; t < T; ++t) acc[r][t] = h == 0 ? park[t * R + r].lo : park[t * R + r].hi;
        // Unrolled twice: one thread, the tinyllama layer's F16 matmuls
        // (16-row tiles, 512 tokens, best of 4): 2048-column matrices
        // 85.6-88.0 -> 88.5-89.8 GFLOP/s in 5 of 5 alternated rounds
        // (x4: 87.9-88.9); 2 threads +1-2% in 2 of 3 rounds, noise in one.
#pragma GCC unroll 2
        for (int64_t k = k0 + 8 * h; k < k1; k += kLanes) {
          if (kPrefetch && h == 0 && (k & 31) < kLanes) {
            for (int r = 0; r < R; ++r) {
              _mm_prefetch((const char*)(w + r * wrb + (k + kPrefetchElems) * WBytes()),
                           _MM_HINT_T0);
            }
          }
          __m256 xv[T];
          for (int t = 0; t < T; ++t) xv[t] = _mm256_loadu_ps(x[t] + k);
          for (int r = 0; r < R; ++r) {
            __m256 wv = Vec256::LoadW<kType>(w + r * wrb, k);
            if constexpr (kType == DType::kF32 && T > 1) __asm__("" : "+v"(wv));
            for (int t = 0; t < T; ++t) acc[r][t] = _mm256_fmadd_ps(wv, xv[t], acc[r][t]);
          }
        }
        for (int r = 0; r < R; ++r)
          for (int t = 0; t < T; ++t) (h == 0 ? park[t * R + r].lo : park[t * R + r].hi) = acc[r][t];
      }
      return;
    }
    Reg acc[R][T];
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) acc[r][t] = park[t * R + r];
    Accumulate<R, T, kPrefetch>(w, wrb, x, k0, k1, acc);
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) park[t * R + r] = acc[r][t];
  }

  template <int R, int T, class Rows>
  static inline void Done(const Rows& rows, const uint8_t* act, int64_t arb, int64_t cols,
                          const Reg* park, float* y, int64_t ldy) {
    Reg acc[R][T];
    const float* x[T];
    for (int t = 0; t < T; ++t) x[t] = (const float*)(act + t * arb);
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) acc[r][t] = park[t * R + r];
    Finish<R, T>(rows, x, cols, acc, y, ldy);
  }
};

// Float weights: decode row by row (DecodeRows); prefill K-blocked (FloatKernel).
template <DType kType>
void FloatGemm(const uint8_t* w, int64_t wrb, int64_t rows, const uint8_t* act,
               int64_t arb, int64_t num_tokens, int64_t cols, float* y, int64_t ldy,
               WorkerScratch* scratch) {
  using K = FloatKernel<kType, FloatVec>;
  using Reg = typename K::Reg;
  using Rows = typename K::PlainRows;
  if (num_tokens == 1) {
    K::DecodeRows(w, wrb, rows, (const float*)act, cols, y);
    return;
  }
  // 16-bit weights come with kF32TilesFormat's long chunks (for the tiles,
  // FloatLanes16): this K-lane loop keeps kF32Format's, whose activations
  // stay in L2.
  if (const int64_t chunk = kF32Format.chunk_tokens(cols * 4); num_tokens > chunk) {
    for (int64_t t0 = 0; t0 < num_tokens; t0 += chunk) {
      FloatGemm<kType>(w, wrb, rows, act + t0 * arb, arb, std::min(chunk, num_tokens - t0), cols,
                       y + t0 * ldy, ldy, scratch);
    }
    return;
  }
  constexpr int R = K::kRows;
  Reg* park = K::Park(num_tokens, scratch);
  int64_t r = 0;
  for (; r + R <= rows; r += R) {
    // Next: the following rows, or after the last tile the first ones (the
    // next token chunk starts there).
    const int64_t next = r + R < rows ? r + R : 0;
    K::template BlockedRows<R>(Rows{w + r * wrb, wrb}, act, arb, num_tokens, cols, y + r, ldy,
                               park, Rows{w + next * wrb, wrb}, std::min<int64_t>(R, rows - next));
  }
  for (; r < rows; ++r) {
    K::template BlockedRows<1>(Rows{w + r * wrb, wrb}, act, arb, num_tokens, cols, y + r, ldy,
                               park, Rows{w, wrb});
  }
}

// The activations of the 16-bit float tiles (FloatLanes16): f32 rows as
// given, in chunks of 512 tokens. Each chunk converts every weight block
// to f32 once, and a tile reads the activations one broadcast column at a
// time, so long chunks cost no L2 misses worth having: F16 5632 x 2048 x
// 512 tokens (AMD EPYC Zen 4, 2 threads, thread CPU time) 196 GFLOP/s in
// kF32Format's 48-token chunks, 213 in 192, 225 in 512 (FMA peak 234).
int64_t F32TilesChunkTokens(int64_t) { return 512; }
constexpr ActFormat kF32TilesFormat{.name = "f32_tiles",
                                    .row_bytes = F32RowBytes,
                                    .prepare = PassF32,
                                    .chunk_tokens = F32TilesChunkTokens};

// 16-bit weights in the kPanel16 layout with the rows in the lanes: each
// 16-row tile (at w + r0 x wrb, where its rows' bytes were) holds its rows'
// values column after column, column k's 16 values (32 bytes) at tile +
// 32 k. Every output is one chain of FMAs over the columns in order, acc =
// fma(w[r][k], x[t][k], acc) for k = 0, 1, ... from acc = 0, in lane r % 16
// of a 16-row accumulator (AVX2: an 8-row half): decode, small batches and
// prefill, and both tables, give each output the same bits, those of the
// scalar chain (kernels_test: Panel16EqualsRowMajorOrFmaChainBitwise). The
// file's rows (FloatGemm) sum 16-lane partial sums instead; a matrix is
// read in one layout, so a model stays batch-invariant.
//
// Why: in the rows-in-lanes tile a register of weights (16 rows at one
// column) serves T tokens through one broadcast each, so per column the
// 4 x 6 tile loads 4 weight registers and 6 scalars for 24 FMAs, and no
// horizontal sums are left at the end (the outputs of 16 rows are one
// store). The K-lane tile it replaces (8 rows x 3 tokens, 16 columns a
// register) loaded 8 + 3 registers per 24 FMAs, so its weights had to sit
// in L1 (512-column blocks, the accumulators parked between them) and each
// output ended in a 16-lane shuffle tree.
template <DType kType>
struct FloatLanes16 {
  static constexpr DType kDType = kType;
  using V = FloatVec;
  using Reg = typename V::Reg;
  // Prefill tile: kGroup 16-row tiles x kTokens tokens (AVX-512 4 x 6: 24
  // accumulators, 4 weight registers and a broadcast in 32 registers;
  // AVX2 1 x 6: 12 of 16 256-bit registers, 2 weight halves, a broadcast).
#ifdef TERN_AVX512_VNNI
  static constexpr int kWidth = 4;
#else
  static constexpr int kWidth = 1;
#endif
  // Tiles converted together: the register tile walks them one after
  // another for each token tile, so a token tile's activations come from
  // L1/L2 after the first.
  static constexpr int kGroup = 4;
  static constexpr int kTokens = 6;  // Group's last-tile switch covers 1-5
  // Decode: 4 tiles side by side (4 chains of 16 lanes, AVX2 8 of 8), each
  // tile a sequential stream of 32 bytes a column.
  static constexpr int kDecodeTiles = 4;
  // Prefill converts a group's kKBlock columns to f32 once per token chunk
  // (kGroup x 1024 x 64 bytes: 256 KiB, in L2), column after column with a
  // register tile's tiles side by side, so a token tile reads it as one
  // stream; the accumulators are parked between blocks.
  static constexpr int64_t kKBlock = 1024;
  // The next block is fetched into L2 during the last 8 token tiles: a
  // chunk's 512 tokens stream 4 MiB of activations through the 1-2 MiB L2
  // after a slice fetched early, so spread over every token tile the early
  // slices were gone again by the conversion (AVX2, AMD EPYC Zen 5, F16
  // 16384 x 2048 x 512 tokens, 2 threads, 4 rounds alternated: 178-214
  // GFLOP/s spread over all 86 token tiles, 206-219 over the last 9;
  // vcvtph2ps 1.06% -> 0.65% of the kernel's samples).
  static constexpr int64_t kPrefetchTokenTiles = 8;

  static void Pack(const uint8_t* w, int64_t wrb, int64_t rows, int64_t cols, uint8_t* out) {
    for (int64_t r0 = 0; r0 < rows; r0 += 16) {
      uint8_t* tile = out + r0 * wrb;
      for (int64_t k0 = 0; k0 < cols; k0 += 64) {
        const int64_t k1 = std::min(cols, k0 + 64);
        for (int r = 0; r < 16; ++r) {
          const uint8_t* row = w + (r0 + r) * wrb;
          for (int64_t k = k0; k < k1; ++k) std::memcpy(tile + 32 * k + 2 * r, row + 2 * k, 2);
        }
      }
    }
  }

  static void Row(const uint8_t* w, int64_t wrb, int64_t /*rows*/, int64_t row, int64_t cols,
                  uint8_t* out) {
    const uint8_t* tile = w + row / 16 * 16 * wrb;
    for (int64_t k = 0; k < cols; ++k) std::memcpy(out + 2 * k, tile + 32 * k + 2 * (row % 16), 2);
  }

  static Reg Broadcast(float v) {
#ifdef TERN_AVX512_VNNI
    return _mm512_set1_ps(v);
#else
    const __m256 b = _mm256_set1_ps(v);
    return {b, b};
#endif
  }

  // acc[j][t] = fma(w_j(k), x[t][k], acc[j][t]) for k in [0, n): the chains
  // of every path; load(k, j) gives tile j's 16 weights of column k. Before
  // each even column, prefetch(k) (Direct's streams; nothing for the
  // converted blocks).
  template <int NT, int T, class Load, class Prefetch>
  static inline void Chains(Load load, Prefetch prefetch, const float* const* x, int64_t n,
                            Reg (&acc)[NT][T]) {
    for (int64_t k = 0; k < n; ++k) {
      if ((k & 1) == 0) prefetch(k);
      Reg wv[NT];
      for (int j = 0; j < NT; ++j) wv[j] = load(k, j);
      for (int t = 0; t < T; ++t) {
        const Reg b = Broadcast(x[t][k]);
        for (int j = 0; j < NT; ++j) acc[j][t] = V::Fma(wv[j], b, acc[j][t]);
      }
    }
  }

  // NT tiles (16 rows each from tile0, `stride` tiles apart) x T tokens
  // straight from the 16-bit weights: decode and batches of a few tokens.
  template <int NT, int T>
  static void Direct(const uint8_t* tile0, int64_t wrb, int64_t stride, const float* const* x,
                     int64_t cols, float* y, int64_t ldy) {
    Reg acc[NT][T];
    for (int j = 0; j < NT; ++j)
      for (int t = 0; t < T; ++t) acc[j][t] = V::Zero();
    const int64_t tile_bytes = 16 * wrb * stride;
    // Each tile's stream, a line (2 columns) at a time kStreamAhead bytes
    // ahead into L1 (past a tile's end: the next tile's first bytes, or past
    // the matrix, harmless). The hardware prefetchers left the 4 streams
    // short: AMD EPYC Zen 5, 2 threads, `tern bench kernels --type f16
    // --panel16 -p 4 --rows 16384` (67 MB, out of L3), 3 runs each:
    // AVX-512 39.1-44.9 -> 49.5-58.8 GB/s (1 KiB ahead 51-54, 4 KiB 50),
    // AVX2 47.5-51.1 -> 61.0-66.0; tinyllama F16 tg64 19.0/19.6 -> 22.2/23.4
    // tok/s (alternated). And kStreamFar ahead into L2 (as
    // PrefetchStreamAhead): Intel Xeon (family 6 model 207), 2 threads,
    // tinyllama F16 tg128, alternated, AVX-512 13.8/14.2/13.9 ->
    // 15.3/15.7/15.1 tok/s (paired with the read probe 91% -> 99-103%),
    // AVX2 14.4/14.1 -> 15.4/15.2.
    Chains<NT, T>(
        [&](int64_t k, int j) { return V::template LoadW<kType>(tile0 + j * tile_bytes, 16 * k); },
        [&](int64_t k) {
          for (int j = 0; j < NT; ++j) {
            asm volatile("prefetcht0 %0"
                         :
                         : "m"(*(tile0 + j * tile_bytes + 32 * k + kStreamAhead)));
            asm volatile("prefetcht2 %0"
                         :
                         : "m"(*(tile0 + j * tile_bytes + 32 * k + kStreamFar)));
          }
        },
        x, cols, acc);
    for (int j = 0; j < NT; ++j)
      for (int t = 0; t < T; ++t) V::Store(y + t * ldy + 16 * stride * j, acc[j][t]);
  }

  // Tiles side by side for T tokens in Direct: kDecodeTiles for one token;
  // AVX2 fewer for more (16 256-bit registers: 2 x 2 x 2 accumulators for 2
  // tokens, 1 x 3 x 2 for 3). The range's tiles in NT parts, tile k of each
  // side by side, so each stream reads a part from start to end (as the
  // Q4_0/Q8_0 decodes); the tiles left over NT - 1 at a time. Adjacent
  // tiles side by side restarted the streams every NT tiles: AMD EPYC Zen
  // 5, 2 threads, `tern bench kernels --type f16 --panel16 -p 4 --rows
  // 16384`, 3 runs alternated, adjacent -> parts: AVX-512 54.7-61.0 ->
  // 61.3-71.5 GB/s, AVX2 48.6-59.2 -> 59.6-68.8; tinyllama F16 tg128 (3
  // rounds) 26.2/20.8/25.5 -> 28.1/21.8/28.2 tok/s.
  template <int T, int NT = (T == 1 || kWidth > 1) ? kDecodeTiles : T == 2 ? 2 : 1>
  static void DirectRows(const uint8_t* w, int64_t wrb, int64_t tiles, const float* const* x,
                         int64_t cols, float* y, int64_t ldy) {
    const int64_t q = tiles / NT;
    for (int64_t k = 0; k < q; ++k) {
      Direct<NT, T>(w + 16 * k * wrb, wrb, q, x, cols, y + 16 * k, ldy);
    }
    const int64_t i = q * NT;
    if constexpr (NT > 1) {
      if (i < tiles) DirectRows<T, NT - 1>(w + 16 * i * wrb, wrb, tiles - i, x, cols, y + 16 * i, ldy);
    }
  }

  // T tokens (rows arb bytes apart from act, columns from k0) over a block
  // of n converted columns (column k of tile j at conv + (k NG + j) 16):
  // from zero (first), parked before; stored to y (last), else parked.
  template <int NG, int T>
  static inline void TokenTile(const float* conv, const uint8_t* act, int64_t arb, int64_t k0,
                               int64_t n, bool first, bool last, Reg* park, float* y,
                               int64_t ldy) {
    Reg acc[NG][T];
    const float* x[T];
    for (int t = 0; t < T; ++t) x[t] = (const float*)(act + t * arb) + k0;
    for (int j = 0; j < NG; ++j)
      for (int t = 0; t < T; ++t) acc[j][t] = first ? V::Zero() : park[t * NG + j];
    Chains<NG, T>([&](int64_t k, int j) { return V::LoadX(conv + (k * NG + j) * 16); },
                  [](int64_t) {}, x, n, acc);
    for (int j = 0; j < NG; ++j) {
      for (int t = 0; t < T; ++t) {
        if (last) V::Store(y + t * ldy + 16 * j, acc[j][t]);
        else park[t * NG + j] = acc[j][t];
      }
    }
  }

  // Token tile tt of num_tokens (there are ceil(num_tokens / kTokens)):
  // tokens [*t, *t + *size). Whole tiles of kTokens, but a last 1-3 tokens
  // share the tile before them as two tiles of 3-5: a tile of 1-3 tokens
  // keeps too few FMAs in flight (AVX2, F16 16384 x 2048, one thread:
  // 105.3 GFLOP/s at 128 tokens = 21 x 6 + 2, 107.3 at 126).
  static inline void TokenSpan(int64_t num_tokens, int64_t tt, int64_t* t, int64_t* size) {
    constexpr int T = kTokens;
    const int64_t full = num_tokens / T, rem = num_tokens % T;
    if (rem > 0 && rem <= 3 && full > 0 && tt >= full - 1) {
      const int64_t a = (T + rem + 1) / 2;
      *t = (full - 1) * T + (tt == full - 1 ? 0 : a);
      *size = tt == full - 1 ? a : T + rem - a;
      return;
    }
    *t = tt * T;
    *size = std::min<int64_t>(T, num_tokens - *t);
  }

  // NG tiles from tile0 x num_tokens tokens, K-blocked, in register tiles
  // of W tiles (NG / W of them: column k of tile s W + i at conv + ((s n +
  // k) W + i) 16 for a block of n columns). next, next_tiles:
  // the tiles the caller takes next; their first block is fetched into L2
  // while this group's last block is in use (as each next block is).
  template <int NG, int W>
  static void Group(const uint8_t* tile0, int64_t wrb, const uint8_t* act, int64_t arb,
                    int64_t num_tokens, int64_t cols, float* y, int64_t ldy, float* conv,
                    Reg* park, const uint8_t* next, int next_tiles) {
    constexpr int T = kTokens;
    constexpr int NS = NG / W;
    static_assert(NS * W == NG);
    const int64_t tile_bytes = 16 * wrb;
    const int64_t token_tiles = (num_tokens + T - 1) / T;
    for (int64_t k0 = 0; k0 < cols; k0 += kKBlock) {
      const int64_t n = std::min(kKBlock, cols - k0);
      for (int s = 0; s < NS; ++s) {
        for (int64_t k = 0; k < n; ++k) {
          for (int i = 0; i < W; ++i) {
            V::Store(conv + ((s * n + k) * W + i) * 16,
                     V::template LoadW<kType>(tile0 + (s * W + i) * tile_bytes, 16 * (k0 + k)));
          }
        }
      }
      // The next block (this group's next columns, else the next tiles'
      // first ones), a slice of its lines per token tile over the last
      // kPrefetchTokenTiles token tiles. An asm prefetch: GCC 12 deletes
      // _mm_prefetch in a prefetch-only lambda.
      const bool more = k0 + n < cols;
      const uint8_t* nw = more ? tile0 : next;
      const int ntiles = more ? NG : next_tiles;
      const int64_t c0 = more ? k0 + n : 0;
      const int64_t lines_per_tile = (std::min(kKBlock, cols - c0) * 32 + 63) / 64;
      const int64_t lines = ntiles * lines_per_tile;
      const int64_t span = std::min<int64_t>(token_tiles, kPrefetchTokenTiles);
      const int64_t per_tile = (lines + span - 1) / span;
      const auto prefetch_slice = [&](int64_t tt) {
        tt -= token_tiles - span;
        if (tt < 0) return;
        int64_t i = tt * per_tile;
        const int64_t i1 = std::min(lines, i + per_tile);
        if (i >= i1) return;
        int64_t j = i / lines_per_tile, l = i % lines_per_tile;
        const uint8_t* p = nw + j * tile_bytes + 32 * c0 + l * 64;
        for (; i < i1; ++i) {
          asm volatile("prefetcht1 %0" : : "m"(*(const char*)p));
          p += 64;
          if (++l == lines_per_tile) l = 0, p += tile_bytes - lines_per_tile * 64;
        }
      };
      const bool first = k0 == 0, last = !more;
      for (int64_t tt = 0; tt < token_tiles; ++tt) {
        int64_t t, size;
        TokenSpan(num_tokens, tt, &t, &size);
        prefetch_slice(tt);
        // The sub-tiles one after another for tokens' tile; the last few
        // tokens as one narrower tile.
        const auto tiles = [&](auto tokens) {
          for (int s = 0; s < NS; ++s) {
            TokenTile<W, decltype(tokens)::value>(conv + s * n * W * 16, act + t * arb, arb, k0,
                                                  n, first, last, park + (tt * NS + s) * T * W,
                                                  y + t * ldy + 16 * W * s, ldy);
          }
        };
        switch (size) {
          case 1: tiles(std::integral_constant<int, 1>()); break;
          case 2: tiles(std::integral_constant<int, 2>()); break;
          case 3: tiles(std::integral_constant<int, 3>()); break;
          case 4: tiles(std::integral_constant<int, 4>()); break;
          case 5: tiles(std::integral_constant<int, 5>()); break;
          default: tiles(std::integral_constant<int, T>()); break;
        }
      }
    }
  }

  static void Gemm(const uint8_t* w, int64_t wrb, int64_t rows, const uint8_t* act, int64_t arb,
                   int64_t num_tokens, int64_t cols, float* y, int64_t ldy,
                   WorkerScratch* scratch) {
    // A few tokens: straight from the weights (the conversion would cost
    // about what the FMAs do).
    if (num_tokens < 4) {
      const float* x[3];
      for (int64_t t = 0; t < num_tokens; ++t) x[t] = (const float*)(act + t * arb);
      if (num_tokens == 1) DirectRows<1>(w, wrb, rows / 16, x, cols, y, ldy);
      else if (num_tokens == 2) DirectRows<2>(w, wrb, rows / 16, x, cols, y, ldy);
      else DirectRows<3>(w, wrb, rows / 16, x, cols, y, ldy);
      return;
    }
    constexpr int T = kTokens;
    const int64_t tiles = rows / 16;
    float* conv = scratch->Get<float>(ScratchBuf::kFloatTile, kGroup * kKBlock * 16);
    const int64_t token_tiles = (num_tokens + T - 1) / T;
    Reg* park = (Reg*)scratch->Get<float>(ScratchBuf::kFloatPark, token_tiles * T * kGroup * 16);
    for (int64_t i = 0; i < tiles; i += kGroup) {
      const int ng = (int)std::min<int64_t>(kGroup, tiles - i);
      // Next: the following tiles, or after the last group the first ones
      // (the next token chunk starts there).
      const int64_t ni = i + ng < tiles ? i + ng : 0;
      const int nng = (int)std::min<int64_t>(kGroup, tiles - ni);
      const uint8_t* g = w + 16 * i * wrb;
      const uint8_t* nx = w + 16 * ni * wrb;
      float* yg = y + 16 * i;
      const auto group = [&](auto tiles, auto width) {
        Group<decltype(tiles)::value, decltype(width)::value>(g, wrb, act, arb, num_tokens, cols,
                                                              yg, ldy, conv, park, nx, nng);
      };
      using I1 = std::integral_constant<int, 1>;
      using I2 = std::integral_constant<int, 2>;
      using I3 = std::integral_constant<int, 3>;
      using I4 = std::integral_constant<int, 4>;
      static_assert(kGroup == 4 && (kWidth == 4 || kWidth == 1));
      switch (ng) {
        case 4: group(I4(), std::integral_constant<int, kWidth>()); break;
        case 3: group(I3(), std::integral_constant<int, kWidth == 1 ? 1 : 3>()); break;
        case 2: group(I2(), std::integral_constant<int, kWidth == 1 ? 1 : 2>()); break;
        default: group(I1(), I1()); break;
      }
    }
  }
};

// ---- legacy formats x ActBlockQ8 ----------------------------------------------------

// byte i of the result is 0xFF when bit i of bits is set.
inline __m256i BytesFromBits(uint32_t bits) {
  const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                         0x0101010101010101, 0x0000000000000000);
  __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), shuf);
  v = _mm256_or_si256(v, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));
  return _mm256_cmpeq_epi8(v, _mm256_set1_epi64x(-1));
}

// The f16 at addr(i) for i < N <= 4, packed into one uint64 (element i in
// bits 16i..16i+15), for one vcvtph2ps of several blocks' scales.
template <int N, class Addr>
inline uint64_t PackHalves(Addr addr) {
  static_assert(N <= 4);
  uint64_t v = 0;
  for (int i = 0; i < N; ++i) {
    uint16_t h;
    std::memcpy(&h, addr(i), 2);
    uint64_t x = (uint64_t)h << (16 * i);
    asm("" : "+r"(x));  // keeps GCC from vectorizing this into slower shuffles
    v |= x;
  }
  return v;
}

// Element r (< 4) of each 128-bit lane of v, broadcast over that lane (one
// vpermilps once r is a constant): row r's scale from
// NibblePairKernel::RowHalves' layout.
inline __m256 LaneElement(__m256 v, int r) {
  switch (r) {
    case 0: return _mm256_permute_ps(v, 0x00);
    case 1: return _mm256_permute_ps(v, 0x55);
    case 2: return _mm256_permute_ps(v, 0xAA);
    default: return _mm256_permute_ps(v, 0xFF);
  }
}

// ---- nibble formats x ActBlockQ8Pair ---------------------------------------------------

// Q4_0/Q4_1/Q5_0/Q5_1 two blocks at a time: one 256-bit register holds the low
// halves (elements 0..15) of blocks b and b+1, another the high halves, so a
// pair costs about what one block did. Per (row, token) and pair:
//   Q4_0, Q5_0:  acc += cvt(sum (q - o) * a) * (d_w * d_a)  (o = 8 or 16, taken
//                off in integers through ActBlockQ8Pair::c)
//   Q4_1, Q5_1:  acc += cvt(sum q * a) * (d_w * d_a) + m_w * s_a / 4
// (4 lanes per block). The main loop reads whole pairs; an odd last block is
// unpacked with a zero partner after it.
template <DType kType>
struct NibblePairKernel {
  static constexpr int kRows = 4;
  static constexpr int kTokens = 2;
  static constexpr int kDecodeRows = 1;  // DecodeRow
  static constexpr bool kHasMin = kType == DType::kQ4_1 || kType == DType::kQ5_1;
  static constexpr bool kFive = kType == DType::kQ5_0 || kType == DType::kQ5_1;
  static constexpr int64_t kBlockBytes = kType == DType::kQ4_0   ? sizeof(BlockQ4_0)
                                         : kType == DType::kQ4_1 ? sizeof(BlockQ4_1)
                                         : kType == DType::kQ5_0 ? sizeof(BlockQ5_0)
                                                                 : sizeof(BlockQ5_1);
  // Byte offsets inside a block.
  static constexpr int kQhOffset = kHasMin ? 4 : 2;
  static constexpr int kQsOffset = (kHasMin ? 4 : 2) + (kFive ? 4 : 0);

  struct Unpacked {
    __m256i lo, hi;  // quants 0..15 (or 0..31) of both blocks
  };

  // Unpacks the quants of blocks b (at p) and b + 1 (zero when kSingle).
  template <bool kSingle>
  static inline Unpacked Unpack(const uint8_t* p) {
    Unpacked u;
    const __m128i q0 = _mm_loadu_si128((const __m128i*)(p + kQsOffset));
    const __m128i q1 = kSingle ? _mm_setzero_si128()
                               : _mm_loadu_si128((const __m128i*)(p + kBlockBytes + kQsOffset));
    const __m256i raw = _mm256_set_m128i(q1, q0);
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    u.lo = _mm256_and_si256(raw, m4);
    u.hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
    if constexpr (kFive) {
      const uint32_t h0 = LoadU32(p + kQhOffset);
      const uint32_t h1 = kSingle ? 0u : LoadU32(p + kBlockBytes + kQhOffset);
      const __m256i b5 = _mm256_set1_epi8(0x10);
      u.lo = _mm256_or_si256(
          u.lo, _mm256_and_si256(BytesFromBits((h0 & 0xFFFFu) | (h1 << 16)), b5));
      u.hi = _mm256_or_si256(
          u.hi, _mm256_and_si256(BytesFromBits((h0 >> 16) | (h1 & 0xFFFF0000u)), b5));
    }
    return u;
  }

  // The half at byte `off` of blocks b (at rows[r] + o) and b + 1 of rows
  // r < R <= 4, converted once for all rows: [rows 0..3 of b | rows 0..3 of
  // b + 1] (0 for b + 1 when kSingle, and for rows >= R).
  template <int R, bool kSingle>
  static inline __m256 RowHalves(const uint8_t* const* rows, int64_t o, int off) {
    const uint64_t lo = PackHalves<R>([&](int r) { return rows[r] + o + off; });
    const uint64_t hi =
        kSingle ? 0 : PackHalves<R>([&](int r) { return rows[r] + o + kBlockBytes + off; });
    return _mm256_cvtph_ps(_mm_set_epi64x((long long)hi, (long long)lo));
  }

  // Integer sums of q * a (minus the format's offset x c) per 4-byte lane.
  static inline __m256i Dot(const Unpacked& u, const ActBlockQ8Pair* a) {
    const __m256i alo = _mm256_loadu_si256((const __m256i*)a->lo);
    const __m256i ahi = _mm256_loadu_si256((const __m256i*)a->hi);
#ifdef TERN_AVX512_VNNI
    __m256i p = _mm256_dpbusd_epi32(_mm256_setzero_si256(), u.lo, alo);
    p = _mm256_dpbusd_epi32(p, u.hi, ahi);
    if constexpr (!kHasMin) {
      const __m256i c = _mm256_loadu_si256((const __m256i*)a->c);
      p = _mm256_dpwssd_epi32(p, c, _mm256_set1_epi16(kFive ? -2 : -1));
    }
    return p;
#else
    // |sum| <= 2 x 2 x 31 x 127 + 2 x 4064 < 2^15: no int16 saturation.
    __m256i s = _mm256_add_epi16(_mm256_maddubs_epi16(u.lo, alo),
                                 _mm256_maddubs_epi16(u.hi, ahi));
    if constexpr (!kHasMin) {
      const __m256i c = _mm256_loadu_si256((const __m256i*)a->c);
      s = _mm256_sub_epi16(s, c);
      if constexpr (kFive) s = _mm256_sub_epi16(s, c);
    }
    return _mm256_madd_epi16(s, _mm256_set1_epi16(1));
#endif
  }

  // Blocks b, b + 1 (byte offset o in each row) of R rows x T tokens.
  template <int R, int T, bool kSingle>
  static inline void Step(const uint8_t* const* rows, int64_t o, int64_t b,
                          const ActBlockQ8Pair* const* a, __m256 (&acc)[R][T]) {
    // d_w x d_a of every (row, token), one multiply per token.
    const __m256 dw = RowHalves<R, kSingle>(rows, o, 0);
    __m256 scale[T];
    for (int t = 0; t < T; ++t) scale[t] = _mm256_mul_ps(dw, _mm256_loadu_ps(a[t][b / 2].d));
    __m256 mw = _mm256_setzero_ps();
    if constexpr (kHasMin) mw = RowHalves<R, kSingle>(rows, o, 2);
    StepRows<R, T, kSingle>(rows, o, b, a, scale, mw, acc, std::make_integer_sequence<int, R>());
  }

  template <int R, int T, bool kSingle, int... rs>
  static inline void StepRows(const uint8_t* const* rows, int64_t o, int64_t b,
                              const ActBlockQ8Pair* const* a, const __m256 (&scale)[T],
                              __m256 mw, __m256 (&acc)[R][T], std::integer_sequence<int, rs...>) {
    (StepRow<rs, T, kSingle>(rows[rs] + o, b, a, scale, mw, acc[rs]), ...);
  }

  // Row r of the tile; acc is that row's accumulators.
  template <int r, int T, bool kSingle>
  static inline void StepRow(const uint8_t* p, int64_t b, const ActBlockQ8Pair* const* a,
                             const __m256 (&scale)[T], __m256 mw, __m256 (&acc)[T]) {
    const Unpacked u = Unpack<kSingle>(p);
    for (int t = 0; t < T; ++t) {
      const ActBlockQ8Pair* ap = a[t] + b / 2;
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(Dot(u, ap)), LaneElement(scale[t], r), acc[t]);
      if constexpr (kHasMin) {
        acc[t] = _mm256_fmadd_ps(LaneElement(mw, r), _mm256_loadu_ps(ap->s), acc[t]);
      }
    }
  }

  // Blocks b .. b + 7 of one row (at p + o) for one token, the scales of all
  // 8 converted at once: [b, b+2, b+4, b+6 | b+1, b+3, b+5, b+7].
  static inline __m256 Halves8(const uint8_t* p, int off) {
    const uint64_t lo = PackHalves<4>([&](int j) { return p + 2 * j * kBlockBytes + off; });
    const uint64_t hi =
        PackHalves<4>([&](int j) { return p + (2 * j + 1) * kBlockBytes + off; });
    return _mm256_cvtph_ps(_mm_set_epi64x((long long)hi, (long long)lo));
  }

  template <int j>
  static inline void RowPair(const uint8_t* p, const ActBlockQ8Pair* ap, __m256 dw8, __m256 mw8,
                             __m256* acc) {
    const Unpacked u = Unpack<false>(p + 2 * j * kBlockBytes);
    const __m256 scale = _mm256_mul_ps(LaneElement(dw8, j), _mm256_loadu_ps(ap[j].d));
    *acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(Dot(u, ap + j)), scale, *acc);
    if constexpr (kHasMin) {
      *acc = _mm256_fmadd_ps(LaneElement(mw8, j), _mm256_loadu_ps(ap[j].s), *acc);
    }
  }

  // Decode, one row: the row is one sequential stream (which the memory
  // system serves better than 4 interleaved ones), 4 pairs per step. The
  // same operations per output as Step, so equal bitwise to any tile.
  static void DecodeRow(const uint8_t* w, int64_t wrb, const ActBlockQ8Pair* a, int64_t nb,
                        float* y) {
    __m256 acc = _mm256_setzero_ps();
    const int64_t rb = nb * kBlockBytes;
    int64_t b = 0;
    for (; b + 8 <= nb; b += 8) {
      const uint8_t* p = w + b * kBlockBytes;
      // 8 blocks ahead per step, 128 blocks ahead (PrefetchAddress runs on
      // into the next row, the next one decoded).
      for (int k = 0; k < 8 * kBlockBytes; k += 48) {
        _mm_prefetch(PrefetchAddress(w, wrb, 0, 1, (b + 128) * kBlockBytes + k, rb), _MM_HINT_T0);
      }
      const __m256 dw8 = Halves8(p, 0);
      const __m256 mw8 = kHasMin ? Halves8(p, 2) : _mm256_setzero_ps();
      const ActBlockQ8Pair* ap = a + b / 2;
      RowPair<0>(p, ap, dw8, mw8, &acc);
      RowPair<1>(p, ap, dw8, mw8, &acc);
      RowPair<2>(p, ap, dw8, mw8, &acc);
      RowPair<3>(p, ap, dw8, mw8, &acc);
    }
    __m256 acc1[1][1] = {{acc}};
    const uint8_t* rows[1] = {w};
    for (; b + 1 < nb; b += 2) Step<1, 1, false>(rows, b * kBlockBytes, b, &a, acc1);
    if (b < nb) Step<1, 1, true>(rows, b * kBlockBytes, b, &a, acc1);
    *y = Hsum(acc1[0][0]);
  }

  template <int R, int T>
  static void Tile(const uint8_t* w, int64_t wrb, const uint8_t* act, int64_t arb,
                   int64_t cols, float* y, int64_t ldy) {
    const int64_t nb = cols / 32;
    if constexpr (R == 1 && T == 1) {
      DecodeRow(w, wrb, (const ActBlockQ8Pair*)act, nb, y);
      return;
    }
    __m256 acc[R][T];
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
    const ActBlockQ8Pair* a[T];
    for (int t = 0; t < T; ++t) a[t] = (const ActBlockQ8Pair*)(act + t * arb);
    const uint8_t* rows[R];
    for (int r = 0; r < R; ++r) rows[r] = w + r * wrb;
    int64_t b = 0;
    for (; b + 1 < nb; b += 2) {
      if ((b & 3) == 0) {  // prefetch (decode and the first token tile of a batch)
        for (int r = 0; r < R; ++r) {
          _mm_prefetch(PrefetchAddress(w, wrb, r, R, (b + 24) * kBlockBytes, nb * kBlockBytes),
                       _MM_HINT_T0);
        }
      }
      Step<R, T, false>(rows, b * kBlockBytes, b, a, acc);
    }
    if (b < nb) Step<R, T, true>(rows, b * kBlockBytes, b, a, acc);
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) y[t * ldy + r] = Hsum(acc[r][t]);
  }
};

// ---- the tile walk of the rows-in-the-lanes kernels (RowLanes, RowLanes8) ---------

// The panel's token tiles (kPanelTokens, then 8, 4, 2, 1) of RowLanesGemm:
// nr rows of the tile unpacked at panel (nb blocks) against num_tokens
// tokens at act.
template <class K>
void RunPanelTokens(const uint8_t* panel, int64_t nb, const uint8_t* act, int64_t arb,
                    int64_t num_tokens, int nr, float* yt, int64_t ldy) {
  int64_t t = 0;
  for (; t + K::kPanelTokens <= num_tokens; t += K::kPanelTokens) {
    K::template RunPanel<K::kPanelTokens>(panel, nb, act + t * arb, arb, nr, yt + t * ldy, ldy);
  }
  const auto tail = [&](auto n) {
    constexpr int kN = decltype(n)::value;
    if constexpr (kN < K::kPanelTokens) {
      if ((num_tokens - t) & kN) {
        K::template RunPanel<kN>(panel, nb, act + t * arb, arb, nr, yt + t * ldy, ldy);
        t += kN;
      }
    }
  };
  tail(std::integral_constant<int, 8>());
  tail(std::integral_constant<int, 4>());
  tail(std::integral_constant<int, 2>());
  tail(std::integral_constant<int, 1>());
}

// The few-token path's token tiles: decode(integral_constant<int, n>, t)
// for tokens [t, t + n), 3 at a time, then the last 2 or 1.
template <class Decode>
inline void DecodeTokenTiles(int64_t num_tokens, const Decode& decode) {
  int64_t t = 0;
  for (; t + 3 <= num_tokens; t += 3) decode(std::integral_constant<int, 3>(), t);
  if (num_tokens - t == 2) decode(std::integral_constant<int, 2>(), t);
  if (num_tokens - t == 1) decode(std::integral_constant<int, 1>(), t);
}

// The K-quant row decodes' walk: T tokens against the G rows at r[0..G-1]
// side by side, super-block b of each in turn, row g's accumulators
// acc[g] (so each row the operations of that row alone: body(row, b, acc)
// adds super-block b of the row at `row`), each row's stream prefetched
// ahead (PrefetchStreamAhead; past a row's end the next row's bytes: the
// next row of a tile's walk, or of QuarterRowsDecode's stream). Against
// the former t0 16 super-blocks ahead alone, Intel Xeon (family 6 model
// 207), 2 threads, TERN_ISA=avx2, tinyllama tg128, 2 rounds alternated:
// Q6_K 31.8/31.0 -> 31.6/31.1 tok/s, Q4_K_M 42.8/43.2 -> 44.5/44.4.
template <int T, int G, int64_t kBlockBytes, class Body>
__attribute__((always_inline)) inline void SideRows(const uint8_t* const (&r)[G], int64_t nsb,
                                                    const Body& body, __m128 (&out)[G][T]) {
  __m128 accs[G][T];
  for (int g = 0; g < G; ++g)
    for (int t = 0; t < T; ++t) accs[g][t] = _mm_setzero_ps();
  for (int64_t b = 0; b < nsb; ++b) {
    for (int g = 0; g < G; ++g) {
      PrefetchStreamAhead<kBlockBytes>(r[g] + b * kBlockBytes);
      body(r[g], b, accs[g]);
    }
  }
  for (int g = 0; g < G; ++g)
    for (int t = 0; t < T; ++t) out[g][t] = accs[g][t];
}

// RowLanesGemm's few-token path for K (K::DecodeRows<T, G>, SideRows on
// its super-block): rows r < nr of the tile at w, one at a time; one token
// 4 rows side by side where K has K::DecodeRows4 (a short tile is padded to
// K::kRows rows, a multiple of 4, so reading 4 is safe).
template <class K, int T>
inline void DecodeTileRows(const uint8_t* w, int64_t wrb, int64_t nb, const uint8_t* act,
                           int64_t arb, int nr, float* y, int64_t ldy) {
  if constexpr (T == 1 && requires { K::DecodeRows4; }) {
    static_assert(K::kRows % 4 == 0);
    for (int r0 = 0; r0 < nr; r0 += 4) {
      alignas(16) float out[4];
      _mm_store_ps(out, K::DecodeRows4(w + r0 * wrb, wrb, nb / 8, (const ActBlockQ8K*)act));
      for (int g = 0; g < 4 && r0 + g < nr; ++g) y[r0 + g] = out[g];
    }
    return;
  }
  for (int r = 0; r < nr; ++r) {
    const uint8_t* const row[1] = {w + r * wrb};
    __m128 acc[1][T];
    K::template DecodeRows<T, 1>(row, wrb, nb / 8, act, arb, acc);
    for (int t = 0; t < T; ++t) y[t * ldy + r] = _mm_cvtss_f32(acc[0][t]);
  }
}

// Decode (fewer than K::kPanelMinTokens tokens) of the rows at w as they
// lie (wrb bytes apart), 4 rows side by side (K::DecodeRows<T, 4>): the
// range's rows in 4 quarters, row k of each side by side, so each of the 4
// streams reads its quarter from start to end (as the read probe reads),
// where the tile after tile, row after row walk (RowLanesGemm) read one;
// the last 1-3 rows together, the last one repeated in the spare slots.
// Tokens 3 at a time, then the last 2 or 1 (DecodeTokenTiles).
template <class K>
inline void QuarterRowsDecode(const uint8_t* w, int64_t wrb, int64_t rows, const uint8_t* act,
                              int64_t arb, int64_t num_tokens, int64_t cols, float* y,
                              int64_t ldy) {
  const int64_t q = rows / 4;
  // Tokens [t0, t0 + n) of the rows row[0..3], results for the first nr.
  const auto run = [&](const int64_t (&row)[4], int nr, auto n, int64_t t0) {
    constexpr int kN = decltype(n)::value;
    const uint8_t* const r[4] = {w + row[0] * wrb, w + row[1] * wrb, w + row[2] * wrb,
                                 w + row[3] * wrb};
    __m128 acc[4][kN];
    K::template DecodeRows<kN, 4>(r, wrb, cols / 256, act + t0 * arb, arb, acc);
    for (int g = 0; g < nr; ++g)
      for (int t = 0; t < kN; ++t) y[(t0 + t) * ldy + row[g]] = _mm_cvtss_f32(acc[g][t]);
  };
  DecodeTokenTiles(num_tokens, [&](auto n, int64_t t) {
    for (int64_t k = 0; k < q; ++k) run({k, q + k, 2 * q + k, 3 * q + k}, 4, n, t);
    if (rows > 4 * q) {
      const int64_t a = 4 * q, last = rows - 1;
      run({a, std::min(a + 1, last), std::min(a + 2, last), last}, (int)(rows - a), n, t);
    }
  });
}

// K::kRows weight rows a tile (a short last tile padded with zero rows).
// Fewer than K::kPanelMinTokens tokens take the rows as they lie
// (K::RunDecode, 3 tokens at a time); more unpack the tile once into a
// panel (K::UnpackPanel) and run it in token tiles of K::kPanelTokens, then
// 8, 4, 2, 1 (K::RunPanel). A token's result is the same in any tile.
template <class K, bool kPacked = false>
void RowLanesGemm(const uint8_t* w, int64_t wrb, int64_t rows, const uint8_t* act, int64_t arb,
                  int64_t num_tokens, int64_t cols, float* y, int64_t ldy,
                  WorkerScratch* scratch) {
  constexpr int kRows = K::kRows;
  const int64_t nb = cols / 32;
  const bool use_panel = num_tokens >= K::kPanelMinTokens;
  uint8_t* panel = use_panel
                       ? scratch->Get<uint8_t>(ScratchBuf::kQ4Panel, nb * K::kPanelBlockBytes)
                       : nullptr;
  if constexpr (kPacked) CHECK_EQ(rows % kRows, 0);
  int64_t first = 0;  // the first row the tile loop below decodes
  // Decode where the kernel walks whole tiles side by side: the range's
  // tiles in kSideTiles quarters, tile k of each quarter side by side, so
  // each stream reads its quarter's bytes in order (as GroupedPackedGemm).
  if constexpr (kPacked && requires { K::kSideTiles; }) {
    if (!use_panel) {
      const int64_t tile_bytes = kRows * wrb, q = rows / kRows / K::kSideTiles;
      const auto decode = [&](auto n, int64_t t) {
        constexpr int kN = decltype(n)::value;
        for (int64_t k = 0; k < q; ++k) {
          K::template RunPackedDecodeSide<kN>(w + k * tile_bytes, q, nb, act + t * arb, arb,
                                              y + k * kRows + t * ldy, ldy);
        }
      };
      DecodeTokenTiles(num_tokens, decode);
      first = q * K::kSideTiles * kRows;
    }
  }
  for (int64_t r0 = first; r0 < rows; r0 += kRows) {
    const int nr = (int)std::min<int64_t>(kRows, rows - r0);
    const uint8_t* wt = w + r0 * wrb;
    if (!kPacked && nr < kRows) {  // a short last tile: its rows padded with zeros
      uint8_t* pad = scratch->Get<uint8_t>(ScratchBuf::kQ4Pad, kRows * wrb);
      std::memcpy(pad, wt, nr * wrb);
      std::memset(pad + nr * wrb, 0, (kRows - nr) * wrb);
      wt = pad;
    }
    float* yt = y + r0;
    if (!use_panel) {
      const auto decode = [&](auto n, int64_t t) {
        constexpr int kN = decltype(n)::value;
        if constexpr (kPacked) {
          K::template RunPackedDecode<kN>(wt, nb, act + t * arb, arb, nr, yt + t * ldy, ldy);
        } else {
          K::template RunDecode<kN>(wt, wrb, nb, act + t * arb, arb, nr, yt + t * ldy, ldy);
        }
      };
      DecodeTokenTiles(num_tokens, decode);
      continue;
    }
    if constexpr (kPacked) {
      K::UnpackPacked(wt, nb, panel);
    } else {
      K::UnpackPanel(wt, wrb, nb, panel);
    }
    RunPanelTokens<K>(panel, nb, act, arb, num_tokens, nr, yt, ldy);
  }
}

#ifdef TERN_AVX512_VNNI
// The packed tiles of the AVX-512 RowLanes kernels (Q4_0, Q8_0, Q4_K) in
// groups of kGroupTiles 16-row tiles (the last group of a matrix may hold
// fewer). A tile's bytes per row of units (a unit: K::kUnitBlocks blocks of
// 32 columns, K::kPackedBlockBytes bytes of a tile) of at most
// kLongTileBytes lie tile after tile, as they always did; longer tiles are
// cut in chunks of kChunkUnits units (at most kChunkBytes a tile; the last
// chunk may be shorter): a group's chunks one after another, and inside a
// chunk the group's tiles one after another, each its units in order.
// Decode walks a group in this order, one stream as before. Why: tile
// after tile, long tiles read slower per byte than short ones. Zen 5, 2
// threads, PackedGemm on 512 MiB of copies from memory, one process, the
// layouts alternated for 10-20 rounds, median GB/s (tile after tile ->
// chunks): Q4_0 2048 x 5632 (tinyllama's ffn_down) 29.9 -> 35.5 and 26.9 ->
// 30.1 (chunks of 64 units 31.8), 2048 x 4096 31.3 -> 37.8, 2048 x 8192
// 36.2 -> 35.9, 2048 x 3072 33.7 -> 34.0; Q8_0 2048 x 5632 36.3 -> 43.1
// (chunks of 32: 44.7), 5632 x 2048 37.6 -> 44.6 (32: 40.7); Q4_K 2048 x
// 5632 32.3 -> 35.3, 2048 x 4096 32.4 -> 35.0. Cut shorter, 18 KiB tiles
// read slower (Q4_0 5632 x 2048: 35.6 whole, 33.1 in chunks of 32 units).
// Groups of 1 or 2 tiles gained nothing in a standalone loop of the same
// instructions (the chunk's activations serve the group's tiles from L1).
// The kernels that decode several tiles side by side (K::kSideTiles: Q4_0,
// Q8_0) keep every tile whole, tile after tile: their decode reads a
// range's tiles as kSideTiles long streams (GroupedPackedGemm), where the
// chunks would break each stream every chunk.
template <class K>
struct GroupedTiles {
  static constexpr int64_t kGroupTiles = 4;
  static constexpr int64_t kUnitBytes = K::kPackedBlockBytes;
  static constexpr int64_t kLongTileBytes = 18 << 10;
  static constexpr int64_t kChunkBytes = 9 << 10;
  static constexpr int64_t kChunkUnits =
      (int64_t)std::bit_floor((uint64_t)std::max<int64_t>(1, kChunkBytes / kUnitBytes));
  // Units a chunk for rows of `units` units: kernels that decode in
  // quarter streams (K::kSideTiles) keep their tiles whole.
  static int64_t Chunk(int64_t units) {
    if constexpr (requires { K::kSideTiles; }) return units;
    return units * kUnitBytes <= kLongTileBytes ? units : kChunkUnits;
  }
  // Bytes from a group's start (gn tiles, `units` units a row) to unit u of
  // its tile i.
  static int64_t Offset(int64_t gn, int64_t units, int64_t i, int64_t u) {
    const int64_t chunk = Chunk(units);
    const int64_t c0 = u / chunk * chunk;
    return (c0 * gn + i * std::min(chunk, units - c0) + (u - c0)) * kUnitBytes;
  }
  // Unit u of tile `tile` of the matrix at w (`tiles` tiles).
  template <class P>
  static P* At(P* w, int64_t tiles, int64_t units, int64_t tile, int64_t u) {
    const int64_t g0 = tile / kGroupTiles * kGroupTiles;
    return w + g0 * units * kUnitBytes +
           Offset(std::min(kGroupTiles, tiles - g0), units, tile - g0, u);
  }
};

// RowLanesGemm on GroupedTiles: w at the first row of a group, rows whole
// groups or the matrix's last rows (kernels.cc splits rows in groups).
// Decode: per group and tokens' tile, the chunks one after another, each
// chunk's tiles continuing their accumulators (PackedTile takes them in and
// out: each output's chain of block FMAs in block order, so the bits of
// the tile-after-tile walk). More tokens: each tile's chunks unpacked into
// one panel, then RowLanesGemm's panel tiles.
template <class K>
void GroupedPackedGemm(const uint8_t* w, int64_t wrb, int64_t rows, const uint8_t* act,
                       int64_t arb, int64_t num_tokens, int64_t cols, float* y, int64_t ldy,
                       WorkerScratch* scratch) {
  using L = GroupedTiles<K>;
  constexpr int64_t G = L::kGroupTiles, UB = K::kUnitBlocks;
  CHECK_EQ(rows % K::kRows, 0);
  const int64_t nb = cols / 32, units = nb / UB, tiles = rows / K::kRows;
  const int64_t C = L::Chunk(units);
  const bool use_panel = num_tokens >= K::kPanelMinTokens;
  uint8_t* panel = use_panel
                       ? scratch->Get<uint8_t>(ScratchBuf::kQ4Panel, nb * K::kPanelBlockBytes)
                       : nullptr;
  // Decode on the kernels that walk kSideTiles tiles side by side: the
  // range's tiles in kSideTiles quarters, tile k of each quarter side by
  // side, so each stream reads its quarter's bytes in order from start to
  // end (tiles whole, GroupedTiles), the pattern the read probe reads; the
  // last tiles (fewer than kSideTiles) one by one. Four adjacent tiles side
  // by side (a group, as before) restarted the four streams every 72 KiB,
  // and read slower: a standalone loop of loads and vpdpbusd on 1 GiB, AMD
  // EPYC Zen 5, 2 threads, 4 long streams 67-77 GB/s, 4 streams in groups
  // of 18 KiB tiles 50-56; `tern bench kernels --panel16 -p 4 --rows 65536`
  // (out of L3), 3 runs alternated, groups -> quarters: Q4_0 50.7-51.7 ->
  // 54.6-56.5 GB/s, Q8_0 48.4-51.6 -> 57.2-62.9.
  if constexpr (requires { K::kSideTiles; }) {
    if (!use_panel) {
      static_assert(K::kSideTiles == G);
      const int64_t tile_bytes = K::kRows * wrb, q = tiles / G;
      const auto decode = [&](auto n, int64_t t) {
        constexpr int kN = decltype(n)::value;
        const uint8_t* a = act + t * arb;
        float* yt = y + t * ldy;
        for (int64_t k = 0; k < q; ++k) {
          __m512 acc[G][kN];
          const uint8_t* ws[G];
          for (int64_t i = 0; i < G; ++i) {
            ws[i] = w + (i * q + k) * tile_bytes;
            for (int u = 0; u < kN; ++u) acc[i][u] = _mm512_setzero_ps();
          }
          K::template PackedTiles<kN>(ws, nb, a, arb, acc);
          for (int64_t i = 0; i < G; ++i) {
            K::Lanes::template Store<kN>(acc[i], K::kRows, yt + (i * q + k) * K::kRows, ldy);
          }
        }
        for (int64_t i = G * q; i < tiles; ++i) {
          __m512 acc[kN];
          for (int u = 0; u < kN; ++u) acc[u] = _mm512_setzero_ps();
          K::template PackedTile<kN>(w + i * tile_bytes, nb, a, arb, acc);
          K::Lanes::template Store<kN>(acc, K::kRows, yt + i * K::kRows, ldy);
        }
      };
      DecodeTokenTiles(num_tokens, decode);
      return;
    }
  }
  for (int64_t g0 = 0; g0 < tiles; g0 += G) {
    const int64_t gn = std::min(G, tiles - g0);
    const uint8_t* gw = w + g0 * K::kRows * wrb;
    float* yg = y + g0 * K::kRows;
    if (use_panel) {
      for (int64_t i = 0; i < gn; ++i) {
        for (int64_t c0 = 0; c0 < units; c0 += C) {
          K::UnpackPacked(gw + L::Offset(gn, units, i, c0), std::min(C, units - c0) * UB,
                          panel + c0 * UB * K::kPanelBlockBytes);
        }
        RunPanelTokens<K>(panel, nb, act, arb, num_tokens, K::kRows, yg + i * K::kRows, ldy);
      }
      continue;
    }
    const auto decode = [&](auto n, int64_t t) {
      constexpr int kN = decltype(n)::value;
      __m512 acc[G][kN];
      for (int64_t i = 0; i < gn; ++i)
        for (int u = 0; u < kN; ++u) acc[i][u] = _mm512_setzero_ps();
      for (int64_t c0 = 0; c0 < units; c0 += C) {
        const uint8_t* a = act + t * arb + c0 * K::kActUnitBytes;
        if constexpr (requires { K::kSideTiles; }) {
          static_assert(K::kSideTiles == G);
          if (gn == G) {  // a whole group: its tiles side by side
            const uint8_t* ws[G];
            for (int64_t i = 0; i < G; ++i) ws[i] = gw + L::Offset(gn, units, i, c0);
            K::template PackedTiles<kN>(ws, std::min(C, units - c0) * UB, a, arb, acc);
            continue;
          }
        }
        for (int64_t i = 0; i < gn; ++i) {
          K::template PackedTile<kN>(gw + L::Offset(gn, units, i, c0),
                                     std::min(C, units - c0) * UB, a, arb, acc[i]);
        }
      }
      for (int64_t i = 0; i < gn; ++i) {
        K::Lanes::template Store<kN>(acc[i], K::kRows, yg + i * K::kRows + t * ldy, ldy);
      }
    };
    DecodeTokenTiles(num_tokens, decode);
  }
}

// ---- Q4_1 x activations in the weight row's image (AVX-512 VNNI) -------------------

// The weights are read as they lie, 64 bytes at a time (see ActImageQ4_1): two
// vpdpbusd (low and high nibbles) against the activation image give each lane
// an integer sum within one block, and one vpermt2w gathers each lane's block
// scale and min from this chunk or the one before. Per (row, token), chunk:
//   acc += (cvt(sum) * d_a) * d_w + m_w * s_a.
// No byte gather, and every lane is useful. (Q4_0 and Q8_0 went this way
// until RowLanes, below, which spends its float operations per block rather
// than per 4-byte lane.)
template <DType kType>
struct ImageKernel {
  static_assert(kType == DType::kQ4_1);
  static constexpr bool kNibbles = true;
  static constexpr bool kMins = true;
  using Chunk = ActImageQ4_1;
  static constexpr int kRows = 4;
  static constexpr int kTokens = 2;
  static constexpr int kDecodeRows = 4;
  static constexpr int kBlockBytes = (int)sizeof(BlockQ4_1);
  static constexpr int kQsOffset = 4;
  // Chunks before the lane pattern repeats (5).
  static constexpr int kPeriod = std::lcm(kBlockBytes, 64) / 64;
  // Decode prefetch distance in bytes along each row stream (swept with the
  // weights in 2 MiB pages: Q8_0 tg 47 / 52 / 53 / 51 tok/s at 1, 2, 3, 4 KiB;
  // Q4_0 87-92 / 95-97 / 97-99 at 1, 2, 3 KiB).
  static constexpr int64_t kPrefetchBytes = 3072;

  // Block (in the row) of 4-byte lane `lane`, which holds no quant byte of
  // any other block; for a lane of scale bytes only (Q4_1's d and m), the
  // block of its first byte.
  static constexpr int64_t LaneBlock(int64_t lane) {
    for (int64_t q = 4 * lane; q < 4 * lane + 4; ++q) {
      if (q % kBlockBytes >= kQsOffset) return q / kBlockBytes;
    }
    return 4 * lane / kBlockBytes;
  }

  // Per phase (chunk index mod kPeriod): for lane k (< 16), the word of its
  // block's scale in [this chunk | the chunk before] (vpermt2w with this
  // chunk as the first table); at 16 + k the word of its min (Q4_1).
  struct alignas(64) PhaseIndex {
    int16_t v[kPeriod][32];
  };
  static constexpr PhaseIndex MakePhaseIndex() {
    PhaseIndex idx{};
    for (int p = 0; p < kPeriod; ++p) {
      for (int k = 0; k < 16; ++k) {
        for (int m = 0; m < (kMins ? 2 : 1); ++m) {
          const int64_t word = LaneBlock(16 * p + k) * kBlockBytes / 2 + m - 32 * p;
          idx.v[p][16 * m + k] = (int16_t)(word >= 0 ? word : 64 + word);
        }
      }
    }
    return idx;
  }
  static constexpr PhaseIndex kIndex = MakePhaseIndex();

  // One chunk of R rows x T tokens. kFirst: chunk 0 (its lanes take their
  // scales from itself); kTail: the row's last, partial chunk.
  template <int R, int T, bool kFirst, bool kTail>
  __attribute__((always_inline)) static inline void Step(
      const uint8_t* w, int64_t wrb, const uint8_t* act, int64_t arb, int64_t ch,
      int64_t rb, __mmask64 tail, __m512i idx, __m512i (&prev)[R], __m512 (&acc)[R][T]) {
    for (int r = 0; r < R; ++r) {
      _mm_prefetch(PrefetchAddress(w, wrb, r, R, ch * 64 + kPrefetchBytes, rb), _MM_HINT_T0);
    }
    __m512i u0[R], u1[R];
    __m512 dw[R], mw[R];
    for (int r = 0; r < R; ++r) {
      const uint8_t* p = w + r * wrb + ch * 64;
      const __m512i cur = kTail ? _mm512_maskz_loadu_epi8(tail, p)
                                : _mm512_loadu_si512((const void*)p);
      // The chunk before stays in a register, but for Q4_0's wider tiles,
      // which are short of registers and read it again (from L1).
      constexpr bool kCarry = T == 1 || !kNibbles;
      __m512i before = cur;
      if constexpr (!kFirst) {
        before = kCarry ? prev[r] : _mm512_loadu_si512((const void*)(p - 64));
      }
      const __m512i scales = _mm512_permutex2var_epi16(cur, idx, before);
      dw[r] = _mm512_cvtph_ps(_mm512_castsi512_si256(scales));
      if constexpr (kMins) mw[r] = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(scales, 1));
      if constexpr (kCarry) prev[r] = cur;
      if constexpr (kNibbles) {
        SplitNibbles(cur, &u0[r], &u1[r]);
      } else {
        u0[r] = _mm512_xor_si512(cur, _mm512_set1_epi8((char)0x80));
      }
    }
    for (int t = 0; t < T; ++t) {
      const Chunk* a = (const Chunk*)(act + t * arb) + ch;
      const __m512i c = _mm512_loadu_si512((const void*)a->c);
      const __m512 da = _mm512_loadu_ps(a->d);
      for (int r = 0; r < R; ++r) {
        __m512i s = _mm512_dpbusd_epi32(c, u0[r], _mm512_loadu_si512((const void*)a->lo));
        if constexpr (kNibbles) {
          s = _mm512_dpbusd_epi32(s, u1[r], _mm512_loadu_si512((const void*)a->hi));
        }
        acc[r][t] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(s), da), dw[r], acc[r][t]);
        if constexpr (kMins) {
          acc[r][t] = _mm512_fmadd_ps(mw[r], _mm512_loadu_ps(a->s), acc[r][t]);
        }
      }
    }
  }

  template <int R, int T>
  static void Tile(const uint8_t* w, int64_t wrb, const uint8_t* act, int64_t arb,
                   int64_t cols, float* y, int64_t ldy) {
    const int64_t rb = cols / 32 * kBlockBytes;
    const int64_t full = rb / 64;
    const __mmask64 tail = ((__mmask64)1 << (rb % 64)) - 1;
    __m512 acc[R][T];
    __m512i prev[R];
    for (int r = 0; r < R; ++r) {
      prev[r] = _mm512_setzero_si512();
      for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
    }
    const auto index = [](int64_t ch) {
      return _mm512_load_si512((const void*)kIndex.v[ch % kPeriod]);
    };
    if (full == 0) {
      Step<R, T, true, true>(w, wrb, act, arb, 0, rb, tail, index(0), prev, acc);
    } else {
      Step<R, T, true, false>(w, wrb, act, arb, 0, rb, tail, index(0), prev, acc);
      int phase = 1 % kPeriod;
      for (int64_t ch = 1; ch < full; ++ch) {
        const __m512i idx = _mm512_load_si512((const void*)kIndex.v[phase]);
        if (++phase == kPeriod) phase = 0;
        Step<R, T, false, false>(w, wrb, act, arb, ch, rb, tail, idx, prev, acc);
      }
      if (rb % 64 != 0) {
        Step<R, T, false, true>(w, wrb, act, arb, full, rb, tail, index(full), prev, acc);
      }
    }
    StoreSums<R, T>(acc, y, ldy);
  }
};

// acc + w x the 4 activation bytes at a broadcast to the 16 lanes, the
// broadcast folded into vpdpbusd's memory operand ({1to16}): GCC 12 emits a
// separate vpbroadcastd for _mm512_set1_epi32 of a load. (Accumulators
// passed in by reference alias the asm's memory operand for GCC: keep them
// in locals, or GCC stores them after every call.)
typedef int32_t __attribute__((may_alias, aligned(1))) UnalignedWord;
inline __m512i DpbusdBroadcast(__m512i acc, __m512i w, const int8_t* a) {
  __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*(const UnalignedWord*)a));
  return acc;
}

// ---- Q4_0 / Q8_0 x ActBlockQ8C, 16 weight rows in the lanes (AVX-512 VNNI) ----------

// Per (row, token) and block b of 32, in block order, with isum the exact
// int32 sum of q_w x q_a (Q4_0: q_w - 8):
//   acc = fma(float(isum), d_w x d_a, acc)
// (the AMX table's operations). A register holds 16 rows, lane 4i + k row
// 4k + i (LaneRows: the order the loads of 4 rows a register and their
// 4 x 4 transposes give; one vpermps puts the rows back in order at the
// store). The weights enter vpdpbusd unsigned (Q4_0: the nibbles q; Q8_0:
// q_w + 128), and the token's c (ActBlockQ8C: -8 or -128 x the sum of its
// quants) takes the offset off in integers.
//
// A few tokens (decode) take the rows as they lie: 4 rows a register (a
// 128-bit lane a row), one vpdpbusd per half of the block (Q4_0: the low
// and the high nibbles; Q8_0: bytes 0..15 and 16..31) against the token's
// 16 quants of that half repeated in each 128-bit lane, then the 4 lanes
// of a row into one. More tokens first unpack the 16 rows once per token
// chunk into a panel, per block
//   8 registers: register j, lane l = the 4 unsigned weights of row(l) for
//                elements 4j .. 4j + 3
//   1 register:  d_w of the 16 rows as floats
// and then each token takes 8 vpdpbusd against its quants broadcast 4 at a
// time from memory (c starts the sum): one float conversion, multiply and
// FMA per 16 rows x 32 elements, where the image kernel above spends them
// per 16 lanes of 64 weight bytes (~4.5 lanes a Q4_0 block, ~8.5 a Q8_0).
template <DType kType>
struct RowLanes {
  static_assert(kType == DType::kQ4_0 || kType == DType::kQ8_0);
  static constexpr bool kNibbles = kType == DType::kQ4_0;
  static constexpr int64_t kBlockBytes =
      kNibbles ? (int64_t)sizeof(BlockQ4_0) : (int64_t)sizeof(BlockQ8_0);
  // Halves of 16 quant bytes a block holds.
  static constexpr int kHalves = kNibbles ? 1 : 2;
  // Panel bytes per block: 8 quant registers and the scales.
  static constexpr int64_t kPanelBlockBytes = 9 * 64;
  // Fewer tokens than this take the rows as they lie.
  static constexpr int64_t kPanelMinTokens = 4;
  // Tokens per panel tile (accumulators in registers).
  static constexpr int kPanelTokens = 16;
  static constexpr int kRows = 16;  // weight rows a tile
  using Lanes = RowLanes<DType::kQ4_0>;  // Store (the same for both types)

  static inline __m512i LaneRows() {
    return _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);
  }

  // The strides of 16 rows (see the AMX table's RowStrides): rows 4g + i lie
  // at base + g x w4 + i x wrb, an addressing mode for i < 4.
  struct Strides {
    int64_t wrb, w3, w4;
    explicit Strides(int64_t row_bytes)
        : wrb(row_bytes), w3(3 * row_bytes), w4(4 * row_bytes) {}
  };
  template <typename T>
  static inline T Opaque(T v) {
    __asm__("" : "+r"(v));
    return v;
  }

  // raw[h][g], 128-bit lane L: quant bytes 16h .. 16h + 15 of the block at
  // p (its start in row 0) of row 4g + L.
  static inline void LoadRaw(const uint8_t* p, const Strides& s, __m512i (&raw)[kHalves][4]) {
    for (int h = 0; h < kHalves; ++h) {
      for (int g = 0; g < 4; ++g) {
        const uint8_t* b4 = Opaque(p + 2 + 16 * h + g * s.w4);
        __m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i*)b4));
        v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i*)(b4 + s.wrb)), 1);
        v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i*)(b4 + 2 * s.wrb)), 2);
        raw[h][g] = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i*)(b4 + s.w3)), 3);
      }
    }
  }

  // The unsigned weights of elements 0..15 (lo) and 16..31 (hi) of
  // LoadRaw's registers (or of their transposes: the same bytes moved).
  static inline void Split(const __m512i (&raw)[kHalves][4], __m512i (&lo)[4], __m512i (&hi)[4]) {
    for (int g = 0; g < 4; ++g) {
      if constexpr (kNibbles) {
        const __m512i m4 = _mm512_set1_epi8(0x0F);
        lo[g] = _mm512_and_si512(raw[0][g], m4);
        hi[g] = _mm512_and_si512(_mm512_srli_epi16(raw[0][g], 4), m4);
      } else {
        const __m512i flip = _mm512_set1_epi8((char)0x80);
        lo[g] = _mm512_xor_si512(raw[0][g], flip);
        hi[g] = _mm512_xor_si512(raw[kHalves - 1][g], flip);
      }
    }
  }

  // The first byte of each of the 16 rows at w in lane order (LaneRows:
  // lane l is row 4 (l % 4) + l / 4).
  static inline void LaneRowStarts(const uint8_t* w, int64_t wrb, const uint8_t* (&rows)[16]) {
    for (int l = 0; l < 16; ++l) rows[l] = w + (int64_t)(4 * (l % 4) + l / 4) * wrb;
  }

  // d_w of the block at byte off of the 16 rows, lane l from rows[l]
  // (LaneRowStarts), by 16 scalar loads: one vpgatherdd cost more (Zen 4,
  // single thread, Q4_0, interleaved rounds, best of 40: with the gather a
  // 2048 x 768 or 5632 x 2048 matmul of 1 token took 1.18-1.23x as long,
  // of 3 tokens 1.05-1.07x, of 4 (the panel) 1.10x, of 16 1.04x, of 128
  // 1.00-1.01x).
  static inline __m512 Scales(const uint8_t* const (&rows)[16], int64_t off) {
    alignas(32) uint16_t d[16];
    for (int l = 0; l < 16; ++l) std::memcpy(&d[l], rows[l] + off, 2);
    return _mm512_cvtph_ps(_mm256_load_si256((const __m256i*)d));
  }

  static inline __m512 Scale(__m512 dw, float da) { return _mm512_mul_ps(dw, _mm512_set1_ps(da)); }

  // Lane 4L + m of the result: the sum of the 4 words of v[m]'s 128-bit
  // lane L (row 4m + L: a row a lane in LaneRows order).
  static inline __m512i LaneSums(const __m512i (&v)[4]) {
    if constexpr (kNibbles) {
      // A word is at most 8 x 15 x 127 and a pair of them within int16:
      // vpackssdw is exact, then vpmaddwd by ones, twice.
      const __m512i ones = _mm512_set1_epi16(1);
      const __m512i s01 = _mm512_madd_epi16(_mm512_packs_epi32(v[0], v[1]), ones);
      const __m512i s23 = _mm512_madd_epi16(_mm512_packs_epi32(v[2], v[3]), ones);
      return _mm512_madd_epi16(_mm512_packs_epi32(s01, s23), ones);
    } else {
      // Words up to 8 x 255 x 127: pairs added in int32.
      const auto pairs = [](__m512i a, __m512i b) {
        const __m512 fa = _mm512_castsi512_ps(a), fb = _mm512_castsi512_ps(b);
        return _mm512_add_epi32(
            _mm512_castps_si512(_mm512_shuffle_ps(fa, fb, _MM_SHUFFLE(2, 0, 2, 0))),
            _mm512_castps_si512(_mm512_shuffle_ps(fa, fb, _MM_SHUFFLE(3, 1, 3, 1))));
      };
      return pairs(pairs(v[0], v[1]), pairs(v[2], v[3]));
    }
  }

  // One token's exact block sums from Split's registers, a row a lane
  // (LaneRows).
  static inline __m512i DecodeSums(const __m512i (&lo)[4], const __m512i (&hi)[4],
                                   const ActBlockQ8C& a) {
    const __m512i zero = _mm512_setzero_si512();
    const __m512i alo = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i*)a.qs));
    const __m512i ahi = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i*)(a.qs + 16)));
    __m512i v[4];
    for (int g = 0; g < 4; ++g) {
      v[g] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, lo[g], alo), hi[g], ahi);
    }
    return _mm512_add_epi32(LaneSums(v), _mm512_set1_epi32(a.c));
  }

  // T tokens (rows arb apart at act) against the 16 rows at w, the weights
  // loaded once for all. Out of line, as the AMX decode tiles (inlined into
  // the row walk, GCC scheduled them worse).
  template <int T>
  __attribute__((noinline)) static void DecodeTile(const uint8_t* w, int64_t wrb, int64_t nb,
                                                   const uint8_t* act, int64_t arb,
                                                   __m512 (&acc)[T]) {
    for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
    const uint8_t* rows[16];
    LaneRowStarts(w, wrb, rows);
    const Strides strides(wrb);
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* p = w + b * kBlockBytes;
      PrefetchNextTile<16, kBlockBytes>(w + 16 * wrb, b);
      __m512i raw[kHalves][4], lo[4], hi[4];
      LoadRaw(p, strides, raw);
      Split(raw, lo, hi);
      const __m512 dw = Scales(rows, b * kBlockBytes);
      for (int t = 0; t < T; ++t) {
        const ActBlockQ8C& a = ((const ActBlockQ8C*)(act + t * arb))[b];
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(DecodeSums(lo, hi, a)), Scale(dw, a.d),
                                 acc[t]);
      }
    }
  }

  // Blocks [0, nb) of the 16 rows at w into the panel (layout above).
  static void UnpackPanel(const uint8_t* w, int64_t wrb, int64_t nb, uint8_t* panel) {
    const Strides strides(wrb);
    const uint8_t* rows[16];
    LaneRowStarts(w, wrb, rows);
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* p = w + b * kBlockBytes;
      PrefetchNextTile<16, kBlockBytes>(w + 16 * wrb, b);
      __m512i raw[kHalves][4];
      LoadRaw(p, strides, raw);
      // 4 x 4 transposes of 32-bit words within each 128-bit lane: word j
      // of raw[h][m]'s lane L (bytes 16h + 4j .. of row 4m + L) to lane
      // 4L + m of x[h][j]; then register j holds elements 4j .. 4j + 3 (Q4_0:
      // the low nibbles of x[0][j], register 4 + j the high ones; Q8_0:
      // x[0][j], register 4 + j x[1][j]).
      __m512i x[kHalves][4];
      for (int h = 0; h < kHalves; ++h) {
        const __m512i(&v)[4] = raw[h];
        const __m512i t0 = _mm512_unpacklo_epi32(v[0], v[1]);
        const __m512i t1 = _mm512_unpackhi_epi32(v[0], v[1]);
        const __m512i t2 = _mm512_unpacklo_epi32(v[2], v[3]);
        const __m512i t3 = _mm512_unpackhi_epi32(v[2], v[3]);
        x[h][0] = _mm512_unpacklo_epi64(t0, t2);
        x[h][1] = _mm512_unpackhi_epi64(t0, t2);
        x[h][2] = _mm512_unpacklo_epi64(t1, t3);
        x[h][3] = _mm512_unpackhi_epi64(t1, t3);
      }
      __m512i lo[4], hi[4];
      Split(x, lo, hi);
      uint8_t* out = panel + b * kPanelBlockBytes;
      for (int j = 0; j < 4; ++j) {
        _mm512_store_si512((void*)(out + 64 * j), lo[j]);
        _mm512_store_si512((void*)(out + 64 * (4 + j)), hi[j]);
      }
      _mm512_store_ps((float*)(out + 512), Scales(rows, b * kBlockBytes));
    }
  }

  // acc + one block of the 16 rows against token a: wq[j] (j < 4) the
  // unsigned weights of elements 4j .. 4j + 3 of each lane's row, wq[4 + j]
  // of elements 16 + 4j ..; dw their scales. The integer sum is exact, so
  // it is the one DecodeSums gives, and the float operations are DecodeTile's.
  __attribute__((always_inline)) static inline __m512 BlockFma(const __m512i (&wq)[8], __m512 dw,
                                                              const ActBlockQ8C& a, __m512 acc) {
    __m512i s = _mm512_set1_epi32(a.c);
    for (int j = 0; j < 8; ++j) {
      s = _mm512_dpbusd_epi32(s, wq[j], _mm512_set1_epi32((int)LoadU32(a.qs + 4 * j)));
    }
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), Scale(dw, a.d), acc);
  }

  // T tokens (rows arb apart at act) against a panel of nb blocks.
  template <int T>
  __attribute__((always_inline)) static inline void PanelTile(const uint8_t* panel, int64_t nb,
                                                              const uint8_t* act, int64_t arb,
                                                              __m512 (&acc)[T]) {
    for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* pb = panel + b * kPanelBlockBytes;
      __m512i wq[8];
      for (int j = 0; j < 8; ++j) wq[j] = _mm512_load_si512((const void*)(pb + 64 * j));
      const __m512 dw = _mm512_load_ps((const float*)(pb + 512));
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) {
        acc[t] = BlockFma(wq, dw, ((const ActBlockQ8C*)(act + t * arb))[b], acc[t]);
      }
    }
  }

  // ---- the packed layout (WeightLayout::kPanel16) ----
  // The 16 rows of a tile stored block by block, as decode reads them: one
  // stream instead of 16 row streams, no transposes and no scalar scale
  // loads. Per block of 32 columns (16 x kBlockBytes, the rows' own bytes
  // rearranged): the 16 f16 scales in lane order (LaneRows), then for each
  // half h < kHalves and j < 4 a 64-byte register whose lane l holds quant
  // bytes 16h + 4j .. 16h + 4j + 3 of lane l's row: UnpackPanel's
  // transposed registers, stored. (Zen 4, a standalone loop over 560 MiB of
  // Q4_0, 2 threads, alternated rounds: the 16-row tile read 14-19 GB/s,
  // this layout 25-33, a plain read 27-31.)
  // The tiles in GroupedTiles' groups (a unit is a block).
  static constexpr int64_t kPackedBlockBytes = 16 * kBlockBytes;
  static constexpr int64_t kUnitBlocks = 1;
  static constexpr int64_t kActUnitBytes = sizeof(ActBlockQ8C);
  using Layout = GroupedTiles<RowLanes>;

  // Rows [0, rows) of row-major weights (rows a multiple of 16) to out in
  // the packed layout (the same bytes).
  static void Pack(const uint8_t* w, int64_t wrb, int64_t rows, int64_t cols, uint8_t* out) {
    CHECK_EQ(rows % kRows, 0);
    const int64_t nb = cols / 32;
    for (int64_t r0 = 0; r0 < rows; r0 += kRows) {
      const uint8_t* rs[16];
      LaneRowStarts(w + r0 * wrb, wrb, rs);
      for (int64_t b = 0; b < nb; ++b) {
        uint8_t* o = Layout::At(out, rows / kRows, nb, r0 / kRows, b);
        for (int l = 0; l < 16; ++l) {
          const uint8_t* blk = rs[l] + b * kBlockBytes;
          std::memcpy(o + 2 * l, blk, 2);
          for (int h = 0; h < kHalves; ++h) {
            for (int j = 0; j < 4; ++j) {
              std::memcpy(o + 32 + 64 * (4 * h + j) + 4 * l, blk + 2 + 16 * h + 4 * j, 4);
            }
          }
        }
      }
    }
  }

  // Row `row` of the packed matrix at w (rows rows) back in its own bytes
  // (Pack undone).
  static void Row(const uint8_t* w, int64_t /*wrb*/, int64_t rows, int64_t row, int64_t cols,
                  uint8_t* out) {
    const int r = (int)(row % kRows);
    const int l = 4 * (r % 4) + r / 4;  // the lane LaneRows gives row r
    for (int64_t b = 0; b < cols / 32; ++b) {
      const uint8_t* o = Layout::At(w, rows / kRows, cols / 32, row / kRows, b);
      uint8_t* blk = out + b * kBlockBytes;
      std::memcpy(blk, o + 2 * l, 2);
      for (int h = 0; h < kHalves; ++h) {
        for (int j = 0; j < 4; ++j) {
          std::memcpy(blk + 2 + 16 * h + 4 * j, o + 32 + 64 * (4 * h + j) + 4 * l, 4);
        }
      }
    }
  }

  // Block b of the packed tile at w: its weights as PanelTile's wq and its
  // scales.
  static inline void LoadPacked(const uint8_t* w, int64_t b, __m512i (&wq)[8], __m512* dw) {
    const uint8_t* p = w + b * kPackedBlockBytes;
    __m512i raw[kHalves][4], lo[4], hi[4];
    for (int h = 0; h < kHalves; ++h) {
      for (int j = 0; j < 4; ++j) {
        raw[h][j] = _mm512_loadu_si512((const void*)(p + 32 + 64 * (4 * h + j)));
      }
    }
    Split(raw, lo, hi);
    for (int j = 0; j < 4; ++j) {
      wq[j] = lo[j];
      wq[4 + j] = hi[j];
    }
    *dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)p));
  }

  // The packed tile's nb blocks into the panel (UnpackPanel's output).
  static void UnpackPacked(const uint8_t* w, int64_t nb, uint8_t* panel) {
    for (int64_t b = 0; b < nb; ++b) {
      __m512i wq[8];
      __m512 dw;
      LoadPacked(w, b, wq, &dw);
      uint8_t* out = panel + b * kPanelBlockBytes;
      for (int j = 0; j < 8; ++j) _mm512_store_si512((void*)(out + 64 * j), wq[j]);
      _mm512_store_ps((float*)(out + 512), dw);
    }
  }

  // T tokens against the packed tile at w: DecodeTile's block sums (exact
  // integers, so bitwise), in fewer instructions per byte than LoadPacked +
  // BlockFma, since decode streams the tile once and has nothing else to
  // overlap the weight bytes' arrival with: each quant register is loaded
  // and masked straight into vpdpbusd with its broadcast activation word
  // folded in (Q4_0: the high nibbles masked in place, 16 x q, into a
  // second chain that is shifted back once a block; Q8_0: both halves
  // flipped by one xor), 26 instructions a Q4_0 block instead of 40. Zen 4,
  // 2 threads, a tinyllama-shaped decode token (7 matrices x 22 layers,
  // packed), each round timed against the read probe over the same bytes,
  // 40 alternated rounds: Q8_0's best round 57.9 -> 61.9 and 56.2 -> 60.5
  // GB/s (probe best 68-70); Q4_0 unchanged (58.2 / 57.8). tinyllama Q8_0
  // tg128 -t 2, 4 alternated pairs in a slow-memory stretch: 21.4-22.8 ->
  // 23.4-24.4 tok/s.
  // acc: in and out (GroupedPackedGemm continues a tile's sums chunk after
  // chunk).
  template <int T>
  __attribute__((noinline)) static void PackedTile(const uint8_t* w, int64_t nb,
                                                   const uint8_t* act, int64_t arb,
                                                   __m512 (&out)[T]) {
    const uint8_t* ws[1] = {w};
    PackedTilesImpl<T, 1>(ws, nb, act, arb, &out);
  }
  // kSideTiles tiles side by side (one of each quarter of a range,
  // GroupedPackedGemm): block b of each in turn, each tile with its own
  // accumulators and PackedTile's operations (so the same bits), each
  // tile's stream prefetched kStreamAhead bytes ahead into L1
  // (row_prefetch.h). Prefetching into L2 as well (32 KiB ahead) helped the
  // side-by-side walk of a group's adjacent tiles (below) and slowed the
  // quarters' long streams: Zen 5, tinyllama Q4_0 tg128, 3 rounds
  // alternated, paired fraction 0.68-0.88 with it, 0.85-0.94 without.
  // Before the quarters, in groups: one tile after another, the group's
  // one stream read short of the bandwidth that several prefetched streams
  // get (the F16 decode's 4 tiles); AMD EPYC Zen 5, 2 threads, `tern bench
  // kernels --panel16 -p 4 --rows 65536` (out of L3), 3 runs alternated:
  // Q8_0 43.6-48.3 -> 51.4-52.3 GB/s, Q4_0 39.8-43.4 -> 40.9-43.2; side by
  // side without the prefetch: Q4_0 27-32. tinyllama
  // Q4_0 tg128 (5 alternated pairs): 44.0-53.3 -> 57.6-59.3 tok/s; Q8_0
  // (5 pairs) paired fraction 0.93-1.02 -> 0.96-1.12.
  static constexpr int kSideTiles = 4;
  template <int T>
  __attribute__((noinline)) static void PackedTiles(const uint8_t* const (&w)[kSideTiles],
                                                    int64_t nb, const uint8_t* act, int64_t arb,
                                                    __m512 (*out)[T]) {
    PackedTilesImpl<T, kSideTiles>(w, nb, act, arb, out);
  }
  template <int T, int NT>
  __attribute__((always_inline)) static inline void PackedTilesImpl(
      const uint8_t* const* w, int64_t nb, const uint8_t* act, int64_t arb, __m512 (*out)[T]) {
    // Local accumulators: out could alias the asm's memory operands, and
    // GCC would store it every block.
    __m512 accs[NT][T];
    for (int i = 0; i < NT; ++i)
      for (int t = 0; t < T; ++t) accs[i][t] = out[i][t];
    const __m512i m4 = _mm512_set1_epi8(0x0F), m4hi = _mm512_set1_epi8((char)0xF0);
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    for (int64_t b = 0; b < nb; ++b) {
      for (int i = 0; i < NT; ++i) {
        __m512 (&acc)[T] = accs[i];
        const uint8_t* p = w[i] + b * kPackedBlockBytes;
        if constexpr (NT > 1) {
          PrefetchStreamAhead<kPackedBlockBytes>(p);
        }
        const ActBlockQ8C* a[T];
        __m512i s0[T], s1[T];
        for (int t = 0; t < T; ++t) {
          a[t] = (const ActBlockQ8C*)(act + t * arb) + b;
          s0[t] = _mm512_set1_epi32(a[t]->c);
          s1[t] = _mm512_setzero_si512();
        }
        for (int j = 0; j < 4; ++j) {
          const __m512i x0 = _mm512_loadu_si512((const void*)(p + 32 + 64 * j));
          __m512i lo, hi;
          if constexpr (kNibbles) {
            lo = _mm512_and_si512(x0, m4);
            hi = _mm512_and_si512(x0, m4hi);  // 16 x the high nibble
          } else {
            lo = _mm512_xor_si512(x0, flip);
            hi = _mm512_xor_si512(_mm512_loadu_si512((const void*)(p + 32 + 256 + 64 * j)), flip);
          }
          for (int t = 0; t < T; ++t) {
            s0[t] = DpbusdBroadcast(s0[t], lo, a[t]->qs + 4 * j);
            s1[t] = DpbusdBroadcast(s1[t], hi, a[t]->qs + 16 + 4 * j);
          }
        }
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)p));
        for (int t = 0; t < T; ++t) {
          // Q4_0: s1 is exactly 16 x the high nibbles' sum (|s1| < 2^20).
          const __m512i s =
              _mm512_add_epi32(s0[t], kNibbles ? _mm512_srai_epi32(s1[t], 4) : s1[t]);
          acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), Scale(dw, a[t]->d), acc[t]);
        }
      }
    }
    for (int i = 0; i < NT; ++i)
      for (int t = 0; t < T; ++t) out[i][t] = accs[i][t];
  }

  // Rows r < nr of acc[t] (lane order LaneRows) to y + t x ldy.
  template <int T>
  static inline void Store(const __m512 (&acc)[T], int nr, float* y, int64_t ldy) {
    const __mmask16 keep = (__mmask16)((1u << nr) - 1);
    for (int t = 0; t < T; ++t) {
      _mm512_mask_storeu_ps(y + t * ldy, keep, _mm512_permutexvar_ps(LaneRows(), acc[t]));
    }
  }

  template <int T>
  static void RunPanel(const uint8_t* panel, int64_t nb, const uint8_t* act, int64_t arb,
                       int nr, float* y, int64_t ldy) {
    __m512 acc[T];
    PanelTile<T>(panel, nb, act, arb, acc);
    Store<T>(acc, nr, y, ldy);
  }
  template <int T>
  static void RunDecode(const uint8_t* w, int64_t wrb, int64_t nb, const uint8_t* act,
                        int64_t arb, int nr, float* y, int64_t ldy) {
    __m512 acc[T];
    DecodeTile<T>(w, wrb, nb, act, arb, acc);
    Store<T>(acc, nr, y, ldy);
  }

  static void Gemm(const uint8_t* w, int64_t wrb, int64_t rows, const uint8_t* act,
                   int64_t arb, int64_t num_tokens, int64_t cols, float* y, int64_t ldy,
                   WorkerScratch* scratch) {
    RowLanesGemm<RowLanes>(w, wrb, rows, act, arb, num_tokens, cols, y, ldy, scratch);
  }
  static void PackedGemm(const uint8_t* w, int64_t wrb, int64_t rows, const uint8_t* act,
                         int64_t arb, int64_t num_tokens, int64_t cols, float* y, int64_t ldy,
                         WorkerScratch* scratch) {
    GroupedPackedGemm<RowLanes>(w, wrb, rows, act, arb, num_tokens, cols, y, ldy, scratch);
  }
};
#endif  // TERN_AVX512_VNNI

#ifndef TERN_AVX512_VNNI
// ---- Q4_0 / Q8_0 x ActBlockQ8C, 8 weight rows in the lanes (AVX2) -------------------

// RowLanes (above) on 256 bits: per (row, token) and block b of 32, in block
// order, with isum the exact int32 sum of q_w x q_a (Q4_0: q_w - 8):
//   acc = fma(float(isum), d_w x d_a, acc)
// the AVX-512 table's operations, so the outputs are bitwise its own. A
// register holds 8 rows, lane 4L + m row 2m + L (the order that loads of 2
// rows a register and their 4 x 4 word transposes within each 128-bit lane
// give; one vpermps puts the rows back in order at the store). No VNNI:
// vpmaddubsw gives words of 2 products, and the words of one row and token
// are added as words while their sum cannot leave int16, then vpmaddwd to
// int32.
//
// Fewer than kPanelMinTokens tokens (decode) take the rows as they lie: 2
// rows a register (a 128-bit lane a row), per half of the block (Q4_0: the
// low and the high nibbles; Q8_0: bytes 0..15 and 16..31) one vpmaddubsw
// against the token's 16 quants of that half repeated in both lanes (Q8_0:
// |q_w| against q_a with q_w's sign, words <= 2 x 128 x 127), then the words
// of a row into one int32. More tokens first unpack the 8 rows once per
// token chunk into a panel, per block
//   Q4_0: 8 registers: register j, lane l = the 4 nibbles of row(l) for
//         elements 4j .. 4j + 3
//   Q8_0: 16 registers: j and 8 + j, lane l = the low and the high nibbles
//         of q_w + 128 of row(l), elements 4j .. 4j + 3
//   1 register: d_w of the 8 rows as floats
// and then each token takes 8 (Q8_0: 16) vpmaddubsw against its quants
// broadcast 4 at a time (words of 16 products of a nibble, |.| <= 30480; Q8_0
// sums high x 16 + low), and the token's c (-8 or -128 x the sum of its
// quants) takes the offset off: one float conversion, multiply and FMA per
// 8 rows x 32 elements.
// x[j], lane 4L + m = word j of v[m]'s 128-bit lane L: the 4 x 4 transposes
// of 32-bit words within each 128-bit lane that put 2 rows a register (a row
// a lane) into RowLanes8's lane order.
inline void TransposeWords4(const __m256i (&v)[4], __m256i (&x)[4]) {
  const __m256i t0 = _mm256_unpacklo_epi32(v[0], v[1]);
  const __m256i t1 = _mm256_unpackhi_epi32(v[0], v[1]);
  const __m256i t2 = _mm256_unpacklo_epi32(v[2], v[3]);
  const __m256i t3 = _mm256_unpackhi_epi32(v[2], v[3]);
  x[0] = _mm256_unpacklo_epi64(t0, t2);
  x[1] = _mm256_unpackhi_epi64(t0, t2);
  x[2] = _mm256_unpacklo_epi64(t1, t3);
  x[3] = _mm256_unpackhi_epi64(t1, t3);
}

// The panel tiles of the AVX2 rows-in-the-lanes kernels: T tokens (rows arb
// apart at act) against a panel of nb blocks of 32, K's steps of
// K::kStepBlocks blocks (one block, or a super-block) in order, and within a
// step kGroup tokens at a time, K::PanelGroup<G>(the step's panel, step,
// the group's act, arb, its acc) loading each panel register once for the
// group's G chains. One token at a time, the panel register and the
// broadcast activation quants made two loads per vpmaddubsw, and the loads,
// not the multiplies, set the pace. The order of every (row, token)'s
// operations stays the same.
//
// kPrefetchStepBytes > 0: where prefetch is not null, each step also
// prefetches kPrefetchStepBytes bytes from prefetch + step x that into L2
// (a 16-row tile's next tile, spread over the panel's work:
// RowLanes8Packed16::PackedGemm).
template <class K, int T, int kPrefetchStepBytes = 0>
__attribute__((always_inline)) inline void GroupedPanelTile(const uint8_t* panel, int64_t nb,
                                                            const uint8_t* act, int64_t arb,
                                                            __m256 (&acc)[T],
                                                            const uint8_t* prefetch = nullptr) {
  constexpr int kGroup = T < K::kGroup ? T : K::kGroup;
  static_assert(T % kGroup == 0);
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t step = 0; step < nb / K::kStepBlocks; ++step) {
    if constexpr (kPrefetchStepBytes > 0) {
      if (prefetch != nullptr) {
        for (int j = 0; j < (kPrefetchStepBytes + 63) / 64; ++j) {
          _mm_prefetch((const char*)(prefetch + step * kPrefetchStepBytes + 64 * j), _MM_HINT_T1);
        }
      }
    }
    for (int t = 0; t < T; t += kGroup) {
      const uint8_t* ps = panel + step * K::kStepBlocks * K::kPanelBlockBytes;
      // Opaque: seeing the same addresses, GCC otherwise kept the registers
      // one group loaded on the stack for the next.
      __asm__("" : "+r"(ps));
      K::template PanelGroup<kGroup>(ps, step, act + t * arb, arb, acc + t);
    }
  }
}

template <DType kType>
struct RowLanes8 {
  static_assert(kType == DType::kQ4_0 || kType == DType::kQ8_0);
  static constexpr bool kNibbles = kType == DType::kQ4_0;
  static constexpr int64_t kBlockBytes =
      kNibbles ? (int64_t)sizeof(BlockQ4_0) : (int64_t)sizeof(BlockQ8_0);
  // Halves of 16 quant bytes a block holds.
  static constexpr int kHalves = kNibbles ? 1 : 2;
  // Panel quant registers a block.
  static constexpr int kPanelRegs = kNibbles ? 8 : 16;
  static constexpr int64_t kPanelBlockBytes = (kPanelRegs + 1) * 32;
  static constexpr int64_t kPanelMinTokens = 4;
  static constexpr int kPanelTokens = 8;
  static constexpr int kRows = 8;  // weight rows a tile

  // Row r's lane (lane i holds row 0, 2, 4, 6, 1, 3, 5, 7: LaneRows).
  static inline __m256i RowLanesOrder() { return _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7); }
  // The row in lane l, and the lane of row r (the order above), for the
  // 16-row tiles' 8-row halves (RowLanes8Packed16, Q45KPacked16, Q6KPacked16).
  static constexpr int LaneRow(int l) { return 2 * (l % 4) + l / 4; }
  static constexpr int RowLane(int r) { return 4 * (r % 2) + r / 2; }

  // v[h][m], 128-bit lane L: quant bytes 16h .. 16h + 15 of the block at p
  // (its start in row 0) of row 2m + L.
  static inline void LoadRaw(const uint8_t* p, int64_t wrb, __m256i (&v)[kHalves][4]) {
    for (int h = 0; h < kHalves; ++h) {
      for (int m = 0; m < 4; ++m) {
        const uint8_t* q = p + 2 + 16 * h + 2 * m * wrb;
        v[h][m] = _mm256_inserti128_si256(
            _mm256_castsi128_si256(_mm_loadu_si128((const __m128i*)q)),
            _mm_loadu_si128((const __m128i*)(q + wrb)), 1);
      }
    }
  }

  // d_w of the block at p of the 8 rows (wrb apart), lane l row(l): scalar
  // loads into two words (a vpgatherdd was slower on Zen 4).
  static inline __m256 Scales(const uint8_t* p, int64_t wrb) {
    const uint64_t even = PackHalves<4>([&](int i) { return p + 2 * i * wrb; });
    const uint64_t odd = PackHalves<4>([&](int i) { return p + (2 * i + 1) * wrb; });
    return _mm256_cvtph_ps(_mm_set_epi64x((long long)odd, (long long)even));
  }

  static inline __m256 Scale(__m256 dw, float da) { return _mm256_mul_ps(dw, _mm256_set1_ps(da)); }

  // One token's exact block sums, a row a lane (LaneRows), from LoadRaw's
  // registers: Q4_0 their low (elements 0..15) and high (16..31) nibbles
  // (v[0], v[1]), Q8_0 the bytes as they are (v[h]: half h) and their
  // magnitudes (mag[h]).
  static inline __m256i DecodeSums(const __m256i (&v)[2][4], const __m256i (&mag)[2][4],
                                   const ActBlockQ8C& a) {
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i a0 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i*)a.qs));
    const __m256i a1 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i*)(a.qs + 16)));
    __m256i m[4];
    if constexpr (kNibbles) {
      for (int g = 0; g < 4; ++g) {
        // Words of 4 products (|.| <= 7620), then int32 of 8 (<= 15240).
        const __m256i s = _mm256_add_epi16(_mm256_maddubs_epi16(v[0][g], a0),
                                           _mm256_maddubs_epi16(v[1][g], a1));
        m[g] = _mm256_madd_epi16(s, ones);
      }
      // vpackssdw is exact here (16 products at most before the last step).
      const __m256i s01 = _mm256_madd_epi16(_mm256_packs_epi32(m[0], m[1]), ones);
      const __m256i s23 = _mm256_madd_epi16(_mm256_packs_epi32(m[2], m[3]), ones);
      const __m256i s = _mm256_madd_epi16(_mm256_packs_epi32(s01, s23), ones);
      return _mm256_add_epi32(s, _mm256_set1_epi32(a.c));
    } else {
      for (int g = 0; g < 4; ++g) {
        const __m256i p0 = _mm256_maddubs_epi16(mag[0][g], _mm256_sign_epi8(a0, v[0][g]));
        const __m256i p1 = _mm256_maddubs_epi16(mag[1][g], _mm256_sign_epi8(a1, v[1][g]));
        m[g] = _mm256_add_epi32(_mm256_madd_epi16(p0, ones), _mm256_madd_epi16(p1, ones));
      }
      // The signed weights as they are: no offset to take off (c unused).
      return _mm256_hadd_epi32(_mm256_hadd_epi32(m[0], m[1]), _mm256_hadd_epi32(m[2], m[3]));
    }
  }

  // T tokens (rows arb apart at act) against the 8 rows at w, the weights
  // loaded once for all.
  template <int T>
  __attribute__((noinline)) static void DecodeTile(const uint8_t* w, int64_t wrb, int64_t nb,
                                                   const uint8_t* act, int64_t arb,
                                                   __m256 (&acc)[T]) {
    for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* p = w + b * kBlockBytes;
      PrefetchNextTile<8, kBlockBytes>(w + 8 * wrb, b);
      __m256i raw[kHalves][4], v[2][4], mag[2][4];
      LoadRaw(p, wrb, raw);
      for (int g = 0; g < 4; ++g) {
        if constexpr (kNibbles) {
          v[0][g] = _mm256_and_si256(raw[0][g], m4);
          v[1][g] = _mm256_and_si256(_mm256_srli_epi16(raw[0][g], 4), m4);
        } else {
          for (int h = 0; h < 2; ++h) {
            v[h][g] = raw[h][g];
            mag[h][g] = _mm256_sign_epi8(raw[h][g], raw[h][g]);
          }
        }
      }
      const __m256 dw = Scales(p, wrb);
      for (int t = 0; t < T; ++t) {
        const ActBlockQ8C& a = ((const ActBlockQ8C*)(act + t * arb))[b];
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(DecodeSums(v, mag, a)), Scale(dw, a.d),
                                 acc[t]);
      }
    }
  }

  // Blocks [0, nb) of the 8 rows at w into the panel (layout above).
  static void UnpackPanel(const uint8_t* w, int64_t wrb, int64_t nb, uint8_t* panel) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i flip = _mm256_set1_epi8((char)0x80);
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* p = w + b * kBlockBytes;
      PrefetchNextTile<8, kBlockBytes>(w + 8 * wrb, b);
      __m256i raw[kHalves][4];
      LoadRaw(p, wrb, raw);
      uint8_t* out = panel + b * kPanelBlockBytes;
      for (int h = 0; h < kHalves; ++h) {
        // 4 x 4 transposes of 32-bit words within each 128-bit lane: word j
        // of v[m]'s lane L (bytes 16h + 4j .. 16h + 4j + 3 of row 2m + L) to
        // lane 4L + m of x[j].
        __m256i x[4];
        TransposeWords4(raw[h], x);
        for (int j = 0; j < 4; ++j) {
          // Q4_0: the low nibbles are elements 4j .. 4j + 3, the high ones
          // 16 + 4j ..; Q8_0: elements 16h + 4j .., unsigned, low nibbles
          // to register 4h + j, high ones to 8 + 4h + j.
          if constexpr (!kNibbles) x[j] = _mm256_xor_si256(x[j], flip);
          const int lo = kNibbles ? j : 4 * h + j;
          const int hi = kNibbles ? 4 + j : 8 + 4 * h + j;
          _mm256_store_si256((__m256i*)(out + 32 * lo), _mm256_and_si256(x[j], m4));
          _mm256_store_si256((__m256i*)(out + 32 * hi),
                             _mm256_and_si256(_mm256_srli_epi16(x[j], 4), m4));
        }
      }
      _mm256_store_ps((float*)(out + 32 * kPanelRegs), Scales(p, wrb));
    }
  }

  // Block b of the panel (at pb) against G tokens (GroupedPanelTile).
  static constexpr int kStepBlocks = 1;
  static constexpr int kGroup = kNibbles ? 8 : 4;
  template <int G>
  __attribute__((always_inline)) static inline void PanelGroup(const uint8_t* pb, int64_t b,
                                                               const uint8_t* act, int64_t arb,
                                                               __m256* acc) {
    const auto reg = [&](int j) { return _mm256_load_si256((const __m256i*)(pb + 32 * j)); };
    const ActBlockQ8C* a[G];
    for (int t = 0; t < G; ++t) a[t] = (const ActBlockQ8C*)(act + t * arb) + b;
    // Words of 16 products of a nibble at most: |.| <= 30480.
    __m256i s[G], sh[G];
    for (int j = 0; j < 8; ++j) {
      const __m256i w = reg(j);
      const __m256i wh = kNibbles ? w : reg(8 + j);
      for (int t = 0; t < G; ++t) {
        const __m256i aq = _mm256_set1_epi32((int)LoadU32(a[t]->qs + 4 * j));
        const __m256i p = _mm256_maddubs_epi16(w, aq);
        s[t] = j == 0 ? p : _mm256_add_epi16(s[t], p);
        if constexpr (!kNibbles) {
          const __m256i ph = _mm256_maddubs_epi16(wh, aq);
          sh[t] = j == 0 ? ph : _mm256_add_epi16(sh[t], ph);
        }
      }
    }
    const __m256 dw = _mm256_load_ps((const float*)(pb + 32 * kPanelRegs));
    for (int t = 0; t < G; ++t) {
      __m256i isum = _mm256_add_epi32(_mm256_madd_epi16(s[t], _mm256_set1_epi16(1)),
                                      _mm256_set1_epi32(a[t]->c));
      if constexpr (!kNibbles) {
        isum = _mm256_add_epi32(isum, _mm256_madd_epi16(sh[t], _mm256_set1_epi16(16)));
      }
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), Scale(dw, a[t]->d), acc[t]);
    }
  }

  // Rows r < nr of acc[t] (lane order LaneRows) to y + t x ldy.
  template <int T>
  static inline void Store(const __m256 (&acc)[T], int nr, float* y, int64_t ldy) {
    const __m256i keep =
        _mm256_cmpgt_epi32(_mm256_set1_epi32(nr), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    for (int t = 0; t < T; ++t) {
      const __m256 v = _mm256_permutevar8x32_ps(acc[t], RowLanesOrder());
      if (nr == 8) {
        _mm256_storeu_ps(y + t * ldy, v);
      } else {
        _mm256_maskstore_ps(y + t * ldy, keep, v);
      }
    }
  }

  template <int T>
  static void RunPanel(const uint8_t* panel, int64_t nb, const uint8_t* act, int64_t arb,
                       int nr, float* y, int64_t ldy) {
    __m256 acc[T];
    GroupedPanelTile<RowLanes8, T>(panel, nb, act, arb, acc);
    Store<T>(acc, nr, y, ldy);
  }
  template <int T>
  static void RunDecode(const uint8_t* w, int64_t wrb, int64_t nb, const uint8_t* act,
                        int64_t arb, int nr, float* y, int64_t ldy) {
    __m256 acc[T];
    DecodeTile<T>(w, wrb, nb, act, arb, acc);
    Store<T>(acc, nr, y, ldy);
  }

  static void Gemm(const uint8_t* w, int64_t wrb, int64_t rows, const uint8_t* act,
                   int64_t arb, int64_t num_tokens, int64_t cols, float* y, int64_t ldy,
                   WorkerScratch* scratch) {
    RowLanesGemm<RowLanes8>(w, wrb, rows, act, arb, num_tokens, cols, y, ldy, scratch);
  }
};

// ---- Q4_0 / Q8_0 in 16-row tiles (WeightLayout::kPanel16), AVX2 ---------------------

// RowLanes8 reading the model's Q4_0 / Q8_0 matrices packed at load: per
// 16-row tile and block of 32 columns (16 x kBlockBytes bytes, the rows'
// own), the 16 f16 scales (8-row half h's at 16h, lane l's row: RowLanes8's
// order, lane 4L + m row 2m + L), then each half's quant registers, register
// j's lane l = quant bytes 4j .. 4j + 3 of lane l's row (Q4_0: 4 registers,
// Q8_0: 8): the transposed registers UnpackPanel makes from the rows,
// stored. Decode (PackedTile) reads one stream with no transposes and no
// scalar scale loads: per 8 rows a block one vcvtph2ps, per quant register
// (Q4_0) a mask and a shift-and-mask, or (Q8_0) one vpabsb, then per token
// vpmaddubsw against the token's 4 quants broadcast from memory; the exact
// block sums and float operations of RowLanes8's decode, so the outputs are
// bitwise its own. 4 or more tokens unpack the tile into RowLanes8's panels
// of its two halves (UnpackPacked: its registers without the transposes)
// and run its panel tiles on each (PackedGemm).
template <DType kType>
struct RowLanes8Packed16 {
  using K8 = RowLanes8<kType>;
  using Lanes = K8;  // its row order
  static constexpr bool kNibbles = K8::kNibbles;
  static constexpr int64_t kBlockBytes = K8::kBlockBytes;
  // Quant registers of an 8-row half a block.
  static constexpr int kRegs = 4 * K8::kHalves;
  static constexpr int64_t kHalfBytes = 32 * kRegs;
  static constexpr int64_t kPackedBlockBytes = 16 * kBlockBytes;
  static_assert(kPackedBlockBytes == 32 + 2 * kHalfBytes);
  static constexpr int kRows = 16;
  static constexpr int64_t kPanelMinTokens = K8::kPanelMinTokens;
  static constexpr int kPanelTokens = K8::kPanelTokens;
  // Both halves' panels (UnpackPacked).
  static constexpr int64_t kPanelBlockBytes = 2 * K8::kPanelBlockBytes;


  static void Pack(const uint8_t* w, int64_t wrb, int64_t rows, int64_t cols, uint8_t* out) {
    CHECK_EQ(rows % kRows, 0);
    for (int64_t r0 = 0; r0 < rows; r0 += kRows) {
      for (int64_t b = 0; b < cols / 32; ++b) {
        uint8_t* o = out + r0 * wrb + b * kPackedBlockBytes;
        for (int half = 0; half < 2; ++half) {
          for (int l = 0; l < 8; ++l) {
            const uint8_t* blk =
                w + (r0 + 8 * half + Lanes::LaneRow(l)) * wrb + b * kBlockBytes;
            std::memcpy(o + 2 * (8 * half + l), blk, 2);
            for (int j = 0; j < kRegs; ++j) {
              std::memcpy(o + 32 + half * kHalfBytes + 32 * j + 4 * l, blk + 2 + 4 * j, 4);
            }
          }
        }
      }
    }
  }

  static void Row(const uint8_t* w, int64_t wrb, int64_t /*rows*/, int64_t row, int64_t cols,
                  uint8_t* out) {
    const uint8_t* tile = w + row / kRows * kRows * wrb;
    const int r = (int)(row % kRows);
    const int half = r / 8, l = Lanes::RowLane(r % 8);
    for (int64_t b = 0; b < cols / 32; ++b) {
      const uint8_t* o = tile + b * kPackedBlockBytes;
      uint8_t* blk = out + b * kBlockBytes;
      std::memcpy(blk, o + 2 * (8 * half + l), 2);
      for (int j = 0; j < kRegs; ++j) {
        std::memcpy(blk + 2 + 4 * j, o + 32 + half * kHalfBytes + 32 * j + 4 * l, 4);
      }
    }
  }

  // Quant register j of half `half` of the packed block at p.
  static inline __m256i Reg(const uint8_t* p, int half, int j) {
    return _mm256_loadu_si256((const __m256i*)(p + 32 + half * kHalfBytes + 32 * j));
  }
  // d_w of half `half`'s 8 rows of the packed block at p (lane order).
  static inline __m256 HalfScales(const uint8_t* p, int half) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(p + 16 * half)));
  }

  // The packed tile's nb blocks into RowLanes8's panels of its two halves,
  // half h's at h x nb x K8::kPanelBlockBytes (UnpackPanel's output,
  // without its transposes and scalar scale loads).
  static void UnpackPacked(const uint8_t* w, int64_t nb, uint8_t* panel) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i flip = _mm256_set1_epi8((char)0x80);
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* p = w + b * kPackedBlockBytes;
      for (int half = 0; half < 2; ++half) {
        uint8_t* out = panel + (half * nb + b) * K8::kPanelBlockBytes;
        for (int i = 0; i < kRegs; ++i) {
          __m256i x = Reg(p, half, i);
          // UnpackPanel's registers: Q4_0 low nibbles to i, high to 4 + i;
          // Q8_0 (i = 4h + j) unsigned, low nibbles to i, high to 8 + i.
          if constexpr (!kNibbles) x = _mm256_xor_si256(x, flip);
          _mm256_store_si256((__m256i*)(out + 32 * i), _mm256_and_si256(x, m4));
          _mm256_store_si256((__m256i*)(out + 32 * (kRegs + i)),
                             _mm256_and_si256(_mm256_srli_epi16(x, 4), m4));
        }
        _mm256_store_ps((float*)(out + 32 * K8::kPanelRegs), HalfScales(p, half));
      }
    }
  }

  // T tokens against the packed tile at w, acc[h][t] half h's 8 rows (lane
  // order) for token t: per block and row the exact integer sum RowLanes8's
  // DecodeSums gives (Q4_0: the nibbles' words, at most 8 x 2 x 15 x 128,
  // added in int16, then to int32 and c; Q8_0: |q_w| against q_a with q_w's
  // sign, words of 2 products to int32 each), then its float operations.
  // Block b of the next tile (nb packed blocks on) is prefetched into L2,
  // as RowLanes8's decode does the next rows (unlike the AVX2 Q4_K tiles,
  // which streamed faster without): llama-3.2-1b tg64 -t 2, avx2 table,
  // Zen 5 shared, alternated, without -> with: Q4_0 38.4 / 35.0 / 35.1 /
  // 33.5 -> 40.1 / 35.7 / 37.0 / 38.3 tok/s, Q8_0 23.2 / 23.8 -> 30.4 /
  // 30.1 (1 KiB ahead in L1 instead: Q4_0 31.5 / 33.3).
  template <int T>
  __attribute__((noinline)) static void PackedTile(const uint8_t* w, int64_t nb,
                                                   const uint8_t* act, int64_t arb,
                                                   __m256 (&out)[2][T]) {
    PackedTilesImpl<T, 1>(w, nb * kPackedBlockBytes, nb, act, arb, &out);
  }
  // Decode of one to three tokens (RowLanesGemm): kSideTiles whole tiles
  // side by side (one of each quarter of the range, `stride` bytes apart),
  // block b of each in turn, each tile PackedTile's operations (so its
  // bits), each stream prefetched kStreamAhead bytes ahead into L1
  // (row_prefetch.h), as the AVX-512 table's RowLanes::PackedTiles; the
  // last tiles of a range one by one. The tiles' loop unrolled keeps the
  // accumulators in registers (rolled, GCC kept them on the stack, and the
  // quarters read slower than adjacent tiles). AMD EPYC Zen 5, 2 threads,
  // `TERN_ISA=avx2 tern bench kernels --panel16 -p 4 --rows 65536`, 4 runs
  // alternated, adjacent tiles with an L2 prefetch 32 KiB ahead ->
  // quarters without: Q4_0 55.4-59.0 -> 57.3-63.2 GB/s, Q8_0 58.8-62.0 ->
  // 55.4-63.2. Before the quarters, adjacent tiles:
  // AMD EPYC Zen 5, 2 threads, `TERN_ISA=avx2`, tg128 alternated, tok/s
  // (paired fraction): tinyllama Q8_0 28.3-30.8 (0.63-0.68) -> 41.7-43.4
  // (0.84-0.91) in 3 rounds, Q4_0 62.9/65.1 -> 64.2/67.5 in 2;
  // llama-3.2-1b Q4_0 45.5/42.1/44.4 -> 56.4/40.5/50.6. 2 tiles side by
  // side read slower than 4 (`tern bench kernels`).
  static constexpr int kSideTiles = 4;
  template <int T>
  __attribute__((noinline)) static void PackedTiles(const uint8_t* w, int64_t stride,
                                                    int64_t nb, const uint8_t* act, int64_t arb,
                                                    __m256 (*out)[2][T]) {
    PackedTilesImpl<T, kSideTiles>(w, stride, nb, act, arb, out);
  }
  template <int T, int NT>
  __attribute__((always_inline)) static inline void PackedTilesImpl(
      const uint8_t* w0, int64_t stride, int64_t nb, const uint8_t* act, int64_t arb,
      __m256 (*out)[2][T]) {
    __m256 accs[NT][2][T];
    for (int i = 0; i < NT; ++i)
      for (int half = 0; half < 2; ++half)
        for (int t = 0; t < T; ++t) accs[i][half][t] = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i ones = _mm256_set1_epi16(1);
    for (int64_t b = 0; b < nb; ++b) {
#pragma GCC unroll 4
      for (int i = 0; i < NT; ++i) {
        const uint8_t* const w = w0 + i * stride;  // tile i's stream
        __m256 (&acc)[2][T] = accs[i];
        const uint8_t* p = w + b * kPackedBlockBytes;
        if constexpr (NT == 1) {
          PrefetchNextTile<kRows, kBlockBytes>(w + nb * kPackedBlockBytes, b);
        } else {
          PrefetchStreamAhead<kPackedBlockBytes>(p);
        }
        const ActBlockQ8C* a[T];
        for (int t = 0; t < T; ++t) a[t] = (const ActBlockQ8C*)(act + t * arb) + b;
#pragma GCC unroll 2
        for (int half = 0; half < 2; ++half) {
          // The token's quants 4k .. 4k + 3, broadcast from memory where they
          // are used (qs opaque: GCC otherwise kept both halves' broadcasts
          // in registers and spilled the sums).
          const int8_t* qs[T];
          for (int t = 0; t < T; ++t) {
            qs[t] = a[t]->qs;
            __asm__ volatile("" : "+r"(qs[t]));
          }
          const auto quads = [&](int t, int k) {
            return _mm256_set1_epi32((int)LoadU32(qs[t] + 4 * k));
          };
          __m256i s[T];
          if constexpr (kNibbles) {
#pragma GCC unroll 4
            for (int j = 0; j < 4; ++j) {
              const __m256i x = Reg(p, half, j);
              const __m256i lo = _mm256_and_si256(x, m4);
              const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(x, 4), m4);
              for (int t = 0; t < T; ++t) {
                const __m256i v = _mm256_add_epi16(_mm256_maddubs_epi16(lo, quads(t, j)),
                                                   _mm256_maddubs_epi16(hi, quads(t, 4 + j)));
                s[t] = j == 0 ? v : _mm256_add_epi16(s[t], v);
                __asm__("" : "+x"(s[t]));  // one chain a token, in j order
              }
            }
            for (int t = 0; t < T; ++t) {
              s[t] = _mm256_add_epi32(_mm256_madd_epi16(s[t], ones), _mm256_set1_epi32(a[t]->c));
            }
          } else {
#pragma GCC unroll 8
            for (int j = 0; j < 8; ++j) {
              const __m256i x = Reg(p, half, j);
              const __m256i mag = _mm256_abs_epi8(x);
              for (int t = 0; t < T; ++t) {
                const __m256i v = _mm256_madd_epi16(
                    _mm256_maddubs_epi16(mag, _mm256_sign_epi8(quads(t, j), x)), ones);
                s[t] = j == 0 ? v : _mm256_add_epi32(s[t], v);
                __asm__("" : "+x"(s[t]));
              }
            }
          }
          const __m256 dw = HalfScales(p, half);
          for (int t = 0; t < T; ++t) {
            acc[half][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[t]), K8::Scale(dw, a[t]->d),
                                           acc[half][t]);
          }
        }
      }
    }
    for (int i = 0; i < NT; ++i)
      for (int half = 0; half < 2; ++half)
        for (int t = 0; t < T; ++t) out[i][half][t] = accs[i][half][t];
  }

  template <int T>
  static void RunPackedDecodeSide(const uint8_t* w, int64_t stride_tiles, int64_t nb,
                                  const uint8_t* act, int64_t arb, float* y, int64_t ldy) {
    __m256 acc[kSideTiles][2][T];
    PackedTiles<T>(w, stride_tiles * nb * kPackedBlockBytes, nb, act, arb, acc);
    for (int i = 0; i < kSideTiles; ++i)
      for (int half = 0; half < 2; ++half)
        K8::template Store<T>(acc[i][half], 8, y + 16 * stride_tiles * i + 8 * half, ldy);
  }
  template <int T>
  static void RunPackedDecode(const uint8_t* w, int64_t nb, const uint8_t* act, int64_t arb,
                              int nr, float* y, int64_t ldy) {
    __m256 acc[2][T];
    PackedTile<T>(w, nb, act, arb, acc);
    for (int half = 0; half < 2; ++half) K8::template Store<T>(acc[half], 8, y + 8 * half, ldy);
  }
  // RowLanesGemm's panel path on whole tiles (PackedGemm walks its own).
  template <int T>
  static void RunPanel(const uint8_t* panel, int64_t nb, const uint8_t* act, int64_t arb,
                       int nr, float* y, int64_t ldy) {
    for (int half = 0; half < 2; ++half) {
      RunHalf<T>(panel + half * nb * K8::kPanelBlockBytes, nb, act, arb, y + 8 * half, ldy,
                 nullptr);
    }
  }
  static void Gemm(const uint8_t* w, int64_t wrb, int64_t rows, const uint8_t* act,
                   int64_t arb, int64_t num_tokens, int64_t cols, float* y, int64_t ldy,
                   WorkerScratch* scratch) {
    K8::Gemm(w, wrb, rows, act, arb, num_tokens, cols, y, ldy, scratch);
  }
  // 4 or more tokens: per tile, UnpackPacked into both halves' panels, then
  // each half's panel tiles on its own panel (RowLanes8's token tiles and
  // operations; the panel they run over is one half's, as RowLanes8's: Q8_0,
  // 2048 columns, 35 KiB, within L1), the first token tile of half 0
  // prefetching the next tile into L2 a block at a time along its work.
  // (Both halves' panels in each token tile, past L1, made a 128-token
  // matmul 5-35% slower; the next tile prefetched in a burst in the unpack,
  // as UnpackPanel does the next rows, left a 4-token matmul from memory
  // 1.1-1.3x as slow as RowLanes8's.)
  template <int T>
  static void RunHalf(const uint8_t* panel, int64_t nb, const uint8_t* act, int64_t arb,
                      float* y, int64_t ldy, const uint8_t* prefetch) {
    __m256 acc[T];
    GroupedPanelTile<K8, T, (int)kPackedBlockBytes>(panel, nb, act, arb, acc, prefetch);
    K8::template Store<T>(acc, 8, y, ldy);
  }
  static void PackedGemm(const uint8_t* w, int64_t wrb, int64_t rows, const uint8_t* act,
                         int64_t arb, int64_t num_tokens, int64_t cols, float* y, int64_t ldy,
                         WorkerScratch* scratch) {
    if (num_tokens < kPanelMinTokens) {
      RowLanesGemm<RowLanes8Packed16, true>(w, wrb, rows, act, arb, num_tokens, cols, y, ldy,
                                            scratch);
      return;
    }
    CHECK_EQ(rows % kRows, 0);
    const int64_t nb = cols / 32;
    uint8_t* panel = scratch->Get<uint8_t>(ScratchBuf::kQ4Panel, nb * kPanelBlockBytes);
    for (int64_t r0 = 0; r0 < rows; r0 += kRows) {
      const uint8_t* wt = w + r0 * wrb;
      UnpackPacked(wt, nb, panel);
      const uint8_t* next = wt + nb * kPackedBlockBytes;
      for (int half = 0; half < 2; ++half) {
        const uint8_t* ph = panel + half * nb * K8::kPanelBlockBytes;
        float* yh = y + r0 + 8 * half;
        const uint8_t* pf = half == 0 ? next : nullptr;
        int64_t t = 0;
        for (; t + kPanelTokens <= num_tokens; t += kPanelTokens) {
          RunHalf<kPanelTokens>(ph, nb, act + t * arb, arb, yh + t * ldy, ldy, pf);
          pf = nullptr;
        }
        const auto tail = [&](auto n) {
          constexpr int kN = decltype(n)::value;
          if constexpr (kN < kPanelTokens) {
            if ((num_tokens - t) & kN) {
              RunHalf<kN>(ph, nb, act + t * arb, arb, yh + t * ldy, ldy, pf);
              pf = nullptr;
              t += kN;
            }
          }
        };
        tail(std::integral_constant<int, 8>());
        tail(std::integral_constant<int, 4>());
        tail(std::integral_constant<int, 2>());
        tail(std::integral_constant<int, 1>());
      }
    }
  }
};
#endif  // !TERN_AVX512_VNNI

// ---- K-quants x ActBlockQ8K --------------------------------------------------------

// A vpshufb control: bytes {b0, b1, b2, b3} of each 32-bit lane (-1:
// zero) to that lane's 4 bytes (the K-quant panels' scale and min registers).
inline __m128i DwordBytes128(int b0, int b1, int b2, int b3) {
  const auto at = [](int b, int lane) { return (char)(b < 0 ? -1 : 4 * lane + b); };
  return _mm_setr_epi8(at(b0, 0), at(b1, 0), at(b2, 0), at(b3, 0), at(b0, 1), at(b1, 1),
                       at(b2, 1), at(b3, 1), at(b0, 2), at(b1, 2), at(b2, 2), at(b3, 2),
                       at(b0, 3), at(b1, 3), at(b2, 3), at(b3, 3));
}

#ifndef TERN_AVX512_VNNI
// The AVX2 table's packed Q6_K tiles (Q6KPacked16) hold the quants of a
// group (h, c', n < 16) re-encoded: its four quants q_jj (element 128h +
// 32jj + 16c' + n, jj = 0..3, sub-block 8h + 2jj + c'; from the low
// nibbles of ql[64h + 16c' + n] and ql[64h + 32 + 16c' + n], then their
// high nibbles, with bits 2jj, 2jj + 1 of qh[32h + 16c' + n] on top) in
// three bytes e[k] = q_k | (bits 2k, 2k + 1 of q_3) << 6, the same 24 bits.
// Then q_0..q_2 are one AND with 0x3F each and q_3 five operations on the
// three top bit pairs (Q6KPacked16::Quads: 11 operations a group), where
// ql and qh took 17: a mask, a shift of qh and a merge each, the high
// nibbles one more shift.
inline void Q6KEncodeGroup(const uint8_t* blk, int h, int cp, int n, uint8_t* e) {
  const uint8_t b0 = blk[64 * h + 16 * cp + n], b1 = blk[64 * h + 32 + 16 * cp + n];
  const uint8_t qh = blk[128 + 32 * h + 16 * cp + n];
  uint8_t q[4];
  q[0] = (uint8_t)((b0 & 0x0F) | (qh & 0x03) << 4);
  q[1] = (uint8_t)((b1 & 0x0F) | (qh >> 2 & 0x03) << 4);
  q[2] = (uint8_t)((b0 >> 4) | (qh >> 4 & 0x03) << 4);
  q[3] = (uint8_t)((b1 >> 4) | (qh >> 6) << 4);
  for (int k = 0; k < 3; ++k) e[k] = (uint8_t)(q[k] | (q[3] >> (2 * k) & 0x03) << 6);
}
// Its inverse: the group's ql and qh bytes back into blk.
inline void Q6KDecodeGroup(const uint8_t* e, int h, int cp, int n, uint8_t* blk) {
  uint8_t q[4];
  for (int k = 0; k < 3; ++k) q[k] = e[k] & 0x3F;
  q[3] = (uint8_t)((e[0] >> 6) | (e[1] >> 6) << 2 | (e[2] >> 6) << 4);
  blk[64 * h + 16 * cp + n] = (uint8_t)((q[0] & 0x0F) | (q[2] & 0x0F) << 4);
  blk[64 * h + 32 + 16 * cp + n] = (uint8_t)((q[1] & 0x0F) | (q[3] & 0x0F) << 4);
  blk[128 + 32 * h + 16 * cp + n] =
      (uint8_t)((q[0] >> 4) | (q[1] >> 4) << 2 | (q[2] >> 4) << 4 | (q[3] >> 4) << 6);
}

// The 6-bit scales and mins of Q4_K/Q5_K as 16 bytes: 0..7 the scales, 8..15
// the mins. `s` points at the block's 12 scale bytes; 16 bytes are read (the
// last 4 are the block's next field). Scales and mins 0..3 are the low 6 bits
// of bytes 0..3 and 4..7; scales 4..7 take the low nibbles of bytes 8..11 and
// mins 4..7 the high nibbles, each with bits 6..7 of bytes 0..3 / 4..7 as
// bits 4..5.
inline __m128i KScalesMins(const uint8_t* s) {
  const __m128i v = _mm_loadu_si128((const __m128i*)s);
  const __m128i low = _mm_shuffle_epi8(v, _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7,
                                                         8, 9, 10, 11));
  const __m128i keep = _mm_setr_epi8(0x3f, 0x3f, 0x3f, 0x3f, 0x0f, 0x0f, 0x0f, 0x0f, 0x3f, 0x3f,
                                     0x3f, 0x3f, 0, 0, 0, 0);
  const __m128i keep_hi = _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x0f, 0x0f, 0x0f,
                                        0x0f);
  const __m128i top = _mm_shuffle_epi8(v, _mm_setr_epi8(-1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1,
                                                         -1, 4, 5, 6, 7));
  return _mm_or_si128(
      _mm_or_si128(_mm_and_si128(low, keep), _mm_and_si128(_mm_srli_epi16(low, 4), keep_hi)),
      _mm_and_si128(_mm_srli_epi16(top, 2), _mm_set1_epi8(0x30)));
}

// Shuffle of KScalesMins' bytes (broadcast to both 128-bit lanes) giving scale
// j zero-extended into every int16 lane.
inline __m256i ScaleShuffle(int j) {
  return _mm256_set1_epi16((short)(0x8000 | j));
}

// ---- Q4_K / Q5_K x ActBlockQ8K, 8 weight rows in the lanes (AVX2) -----------------

// Per (row, token) and super-block, in super-block order, with the exact
// integers S = sum_j sc_j x C_j (C_j: sub-block j's sum of unsigned quant x
// activation quant) and M = sum_j m_j x asum_j (the mins against the token's
// sub-block sums):
//   acc = fma(float(S), d_w x d_a, acc);  acc = fnmadd(float(M), dmin_w x d_a, acc)
// the AVX-512 table's operations on 8 rows (lanes in RowLanes8's order).
//
// From kPanelMinTokens tokens on (RowLanesGemm), each 8-row tile is unpacked
// once per token chunk into a panel, per super-block 78 registers:
//   64 quant registers: register 8j + k, lane l = the 4 unsigned quants of
//                       elements 32j + 4k .. 32j + 4k + 3 of row(l)
//                       (sub-block j; Q5_K with the fifth bit)
//   8 registers:        sc_j of the 8 rows in both int16 halves of a lane
//   4 registers:        the int16 pairs (m_2i, m_2i+1) of the 8 rows
//   2 registers:        d_w and dmin_w of the 8 rows as floats
// and each token takes per sub-block 8 vpmaddubsw against its quants
// broadcast 4 at a time, their words added while they fit int16 (Q4_K all 8:
// 8 x 2 x 15 x 128 = 30720; Q5_K 4 at a time: 4 x 2 x 31 x 128 = 31744), then
// vpmaddwd by sc_j into int32; 4 vpmaddwd for M. Fewer tokens (decode) take
// the rows as they lie: per pair of sub-blocks a vpmaddubsw each against
// the token's quants, vpmaddwd by the scales, the lanes added up to S and
// M, and the same float operations on a lane; one token 4 rows side by
// side (DecodeRows4, the 4 rows' float step in one register), 2-3 tokens
// one row at a time (DecodeRows).
template <DType kType>
struct Q45KRowLanes8 {
  static_assert(kType == DType::kQ4_K || kType == DType::kQ5_K);
  static constexpr bool kFifthBits = kType == DType::kQ5_K;
  static constexpr int64_t kBlockBytes = kFifthBits ? sizeof(BlockQ5_K) : sizeof(BlockQ4_K);
  static constexpr int64_t kQsOffset = kBlockBytes - 128;  // the quants end the block
  // Panel registers of a super-block (layout above).
  static constexpr int kScaleReg = 64, kMinReg = 72, kDReg = 76, kDminReg = 77;
  static constexpr int64_t kSuperBytes = 78 * 32;
  // RowLanesGemm walks blocks of 32: a super-block is 8 of them.
  static constexpr int64_t kPanelBlockBytes = kSuperBytes / 8;
  static constexpr int64_t kPanelMinTokens = 4;
  static constexpr int kPanelTokens = 8;
  static constexpr int kRows = 8;

  using Lanes = RowLanes8<DType::kQ4_0>;  // its row order and store

  // x[j], lane 4L + m: bytes off + 4j .. off + 4j + 3 of the super-block at
  // p (its start in row 0) of row 2m + L.
  static inline void Load8(const uint8_t* p, int64_t off, int64_t wrb, __m256i (&x)[4]) {
    __m256i v[4];
    for (int m = 0; m < 4; ++m) {
      const uint8_t* q = p + off + 2 * m * wrb;
      v[m] = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i*)q)),
                                     _mm_loadu_si128((const __m128i*)(q + wrb)), 1);
    }
    TransposeWords4(v, x);
  }

  // DwordBytes128 in both 128-bit lanes.
  static inline __m256i DwordBytes(int b0, int b1, int b2, int b3) {
    return _mm256_broadcastsi128_si256(DwordBytes128(b0, b1, b2, b3));
  }

  // From a super-block's heads (h: Load8 at offset 0; h[0] = d | dmin << 16,
  // h[1..3] = the 12 bytes of 6-bit fields: scales 0-3 and mins 0-3 in their
  // low 6 bits, 4-7 split over the nibbles of bytes 8-11 and the top bits of
  // bytes 0-7): the 6-bit scales (sc03, sc47: byte j of a lane scale j /
  // 4 + j) and mins (mn03, mn47) of the 8 rows.
  struct HeadFields {
    __m256i sc03, sc47, mn03, mn47;
  };
  static inline HeadFields Fields(const __m256i (&h)[4]) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i m3f = _mm256_set1_epi8(0x3F);
    const __m256i m30 = _mm256_set1_epi8(0x30);
    HeadFields f;
    f.sc03 = _mm256_and_si256(h[1], m3f);
    f.mn03 = _mm256_and_si256(h[2], m3f);
    f.sc47 = _mm256_or_si256(_mm256_and_si256(h[3], m4),
                             _mm256_and_si256(_mm256_srli_epi32(h[1], 2), m30));
    f.mn47 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(h[3], 4), m4),
                             _mm256_and_si256(_mm256_srli_epi32(h[2], 2), m30));
    return f;
  }
  // The panel's register kScaleReg + j: sc_j of the 8 rows in both int16
  // halves of a lane.
  static inline __m256i ScaleReg(const HeadFields& f, int j) {
    return _mm256_shuffle_epi8(j < 4 ? f.sc03 : f.sc47, DwordBytes(j % 4, -1, j % 4, -1));
  }
  // The panel's register kMinReg + i: the int16 pairs (m_2i, m_2i+1).
  static inline __m256i MinReg(const HeadFields& f, int i) {
    return _mm256_shuffle_epi8(i < 2 ? f.mn03 : f.mn47,
                               DwordBytes(2 * (i % 2), -1, 2 * (i % 2) + 1, -1));
  }
  // d_w and dmin_w of the 8 rows as floats from h[0].
  static inline void Deltas(__m256i h0, __m256* d, __m256* dmin) {
    // [d of lanes 0-3, dmin 0-3 | d 4-7, dmin 4-7] as halves, then d, dmin.
    const __m256i halves = _mm256_permute4x64_epi64(
        _mm256_packus_epi32(_mm256_and_si256(h0, _mm256_set1_epi32(0xFFFF)),
                            _mm256_srli_epi32(h0, 16)),
        0xD8);
    *d = _mm256_cvtph_ps(_mm256_castsi256_si128(halves));
    *dmin = _mm256_cvtph_ps(_mm256_extracti128_si256(halves, 1));
  }

  // Quant bytes 16c .. 16c + 15 (c = 0..7; x: Load8 at kQsOffset + 16c): the
  // low nibbles (lo) are elements 16 (c % 2) .. of sub-block 2 (c / 2), the
  // high nibbles (hi) of 2 (c / 2) + 1. Q5_K takes the fifth bits from
  // qh[c % 2] (Load8 at 16 and 32: qh bytes 16c' + 4i .. of the row; element
  // l of sub-block j has its fifth bit at bit j of qh[l]).
  static inline void Quads(const __m256i (&x)[4], const __m256i (&qh)[2][4], int c,
                           __m256i (&lo)[4], __m256i (&hi)[4]) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const int j = 2 * (c / 2);
    for (int i = 0; i < 4; ++i) {
      lo[i] = _mm256_and_si256(x[i], m4);
      hi[i] = _mm256_and_si256(_mm256_srli_epi16(x[i], 4), m4);
      if constexpr (kFifthBits) {
        const __m256i bits = qh[c % 2][i];
        const __m256i bit4 = _mm256_set1_epi8(0x10);
        // Bit j (j + 1) of each byte to bit 4 of the same byte.
        const auto to4 = [&](int bit) {
          return _mm256_and_si256(bit <= 4 ? _mm256_slli_epi32(bits, 4 - bit)
                                           : _mm256_srli_epi32(bits, bit - 4),
                                  bit4);
        };
        lo[i] = _mm256_or_si256(lo[i], to4(j));
        hi[i] = _mm256_or_si256(hi[i], to4(j + 1));
      }
    }
  }

  // The panel of nb / 8 super-blocks from load(b, off, x) (x[i], lane l:
  // bytes off + 4i .. off + 4i + 3 of super-block b of lane l's row).
  template <class Load>
  static inline void Unpack(Load load, int64_t nb, uint8_t* panel) {
    for (int64_t b = 0; b < nb / 8; ++b) {
      uint8_t* out = panel + b * kSuperBytes;
      const auto put = [&](int reg, __m256i v) {
        _mm256_store_si256((__m256i*)(out + 32 * reg), v);
      };
      __m256i h[4];
      load(b, 0, h);
      const HeadFields f = Fields(h);
      for (int j = 0; j < 8; ++j) put(kScaleReg + j, ScaleReg(f, j));
      for (int i = 0; i < 4; ++i) put(kMinReg + i, MinReg(f, i));
      __m256 d, dmin;
      Deltas(h[0], &d, &dmin);
      _mm256_store_ps((float*)(out + 32 * kDReg), d);
      _mm256_store_ps((float*)(out + 32 * kDminReg), dmin);
      __m256i qh[2][4];
      if constexpr (kFifthBits) {
        load(b, 16, qh[0]);
        load(b, 32, qh[1]);
      }
      for (int c = 0; c < 8; ++c) {
        __m256i x[4], lo[4], hi[4];
        load(b, kQsOffset + 16 * c, x);
        Quads(x, qh, c, lo, hi);
        const int j = 2 * (c / 2), k0 = 4 * (c % 2);
        for (int i = 0; i < 4; ++i) {
          put(8 * j + k0 + i, lo[i]);
          put(8 * (j + 1) + k0 + i, hi[i]);
        }
      }
    }
  }

  // Super-blocks [0, nb / 8) of the 8 rows at w into the panel.
  static void UnpackPanel(const uint8_t* w, int64_t wrb, int64_t nb, uint8_t* panel) {
    Unpack(
        [&](int64_t b, int64_t off, __m256i(&x)[4]) {
          if (off == 0) PrefetchNextTile<8, kBlockBytes>(w + 8 * wrb, b);
          Load8(w + b * kBlockBytes, off, wrb, x);
        },
        nb, panel);
  }
  // Super-block b of the panel (at pb) against G tokens (GroupedPanelTile).
  static constexpr int kStepBlocks = 8;
  static constexpr int kGroup = 4;
  template <int G>
  __attribute__((always_inline)) static inline void PanelGroup(const uint8_t* pb, int64_t b,
                                                               const uint8_t* act, int64_t arb,
                                                               __m256* acc) {
    constexpr int kRun = kFifthBits ? 4 : 8;  // words added in int16 (above)
    const auto reg = [&](int i) { return _mm256_load_si256((const __m256i*)(pb + 32 * i)); };
    const ActBlockQ8K* a[G];
    __m256i s[G];
    for (int t = 0; t < G; ++t) {
      a[t] = (const ActBlockQ8K*)(act + t * arb) + b;
      s[t] = _mm256_setzero_si256();
    }
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      for (int k0 = 0; k0 < 8; k0 += kRun) {
        __m256i c[G];
        for (int k = k0; k < k0 + kRun; ++k) {
          const __m256i w = reg(8 * j + k);
          for (int t = 0; t < G; ++t) {
            const __m256i p = _mm256_maddubs_epi16(
                w, _mm256_set1_epi32((int)LoadU32(a[t]->qs + 32 * j + 4 * k)));
            c[t] = k == k0 ? p : _mm256_add_epi16(c[t], p);
          }
        }
        const __m256i sc = reg(kScaleReg + j);
        for (int t = 0; t < G; ++t) {
          s[t] = MaddAcc(s[t], c[t], sc);
          // One chain a token: GCC otherwise reassociated the adds into a
          // tree and kept its leaves on the stack.
          __asm__("" : "+x"(s[t]));
        }
      }
    }
    const __m256 dw = _mm256_load_ps((const float*)(pb + 32 * kDReg));
    const __m256 dmin = _mm256_load_ps((const float*)(pb + 32 * kDminReg));
    for (int t = 0; t < G; ++t) {
      __m256i m = _mm256_setzero_si256();
      for (int i = 0; i < 4; ++i) {
        m = MaddAcc(m, reg(kMinReg + i), _mm256_set1_epi32((int)LoadU32(a[t]->sums32 + 2 * i)));
      }
      const __m256 da = _mm256_set1_ps(a[t]->d);
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[t]), _mm256_mul_ps(dw, da), acc[t]);
      acc[t] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(m), _mm256_mul_ps(dmin, da), acc[t]);
    }
  }

  template <int T>
  static void RunPanel(const uint8_t* panel, int64_t nb, const uint8_t* act, int64_t arb,
                       int nr, float* y, int64_t ldy) {
    __m256 acc[T];
    GroupedPanelTile<Q45KRowLanes8, T>(panel, nb, act, arb, acc);
    Lanes::Store<T>(acc, nr, y, ldy);
  }

  // Rows r < nr of the 8 at w against T tokens: one token 4 rows side by
  // side (DecodeRows4; a short tile is padded to 8 rows, so reading 4 is
  // safe), more one row at a time (DecodeRows).
  template <int T>
  static void RunDecode(const uint8_t* w, int64_t wrb, int64_t nb, const uint8_t* act,
                        int64_t arb, int nr, float* y, int64_t ldy) {
    DecodeTileRows<Q45KRowLanes8, T>(w, wrb, nb, act, arb, nr, y, ldy);
  }

  // One token (its nsb super-blocks at a) against the 4 rows at w (row g at
  // w + g wrb), lane g of the result row g's. Per super-block each row's
  // integer sums as DecodeRows takes them (S in 8 int32 lanes, M from the
  // mins against the token's sub-block sums), then the 4 rows' S and M
  // gathered into one register each (hadd: exact integer adds, in another
  // order) and lane g takes row g's float operations, fma(S, d_w d_a) then
  // fnmadd(M, dmin_w d_a): those of DecodeRows and of the panel, so the bits
  // are theirs. Against one row at a time, the float step, d and dmin once
  // for 4 rows instead of once a row. The rows' streams prefetched a group
  // (4 rows) ahead into L1 and two groups ahead into L2: the group after
  // this one is the next 4 rows of the tile walk.
  __attribute__((noinline)) static __m128 DecodeRows4(const uint8_t* w, int64_t wrb, int64_t nsb,
                                                      const ActBlockQ8K* a) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    // [d0 dmin0 d1 dmin1 ..] (the rows' first words) to [d0 d1 d2 d3 dmin0 ..].
    const __m128i dd_order = _mm_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
    __m128 acc = _mm_setzero_ps();
    for (int64_t b = 0; b < nsb; ++b) {
      const int64_t off = b * kBlockBytes;
      const ActBlockQ8K& ab = a[b];
      __m256i isum[4];
      __m128i sm[4];
      for (int g = 0; g < 4; ++g) {
        const uint8_t* blk = w + g * wrb + off;
        PrefetchNearFar<kBlockBytes>(blk + 4 * wrb, blk + 8 * wrb);
        sm[g] = KScalesMins(blk + 4);
        const __m256i sc = _mm256_broadcastsi128_si256(sm[g]);
        __m256i qh = _mm256_setzero_si256();
        if constexpr (kFifthBits) qh = _mm256_loadu_si256((const __m256i*)(blk + 16));
        __m256i s = _mm256_setzero_si256();
        for (int c = 0; c < 4; ++c) {
          // Sub-blocks 2c (low nibbles) and 2c + 1 (high nibbles).
          __m256i lo, hi;
          RowQuants(blk, qh, c, m4, &lo, &hi);
          const __m256i* q = (const __m256i*)(ab.qs + 64 * c);
          s = MaddAcc(s, _mm256_maddubs_epi16(lo, _mm256_loadu_si256(q)),
                      _mm256_shuffle_epi8(sc, ScaleShuffle(2 * c)));
          s = MaddAcc(s, _mm256_maddubs_epi16(hi, _mm256_loadu_si256(q + 1)),
                      _mm256_shuffle_epi8(sc, ScaleShuffle(2 * c + 1)));
        }
        isum[g] = s;
      }
      const __m128i s4 = LaneSums4(isum);
      // M: the mins (bytes 8-15 of sm) of rows g, g + 1 as int16 in the two
      // halves, against the token's 8 sub-block sums: 4 int32 a row.
      const __m256i sums =
          _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i*)ab.sums32));
      const auto mins2 = [&](int g) {
        return _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm_unpackhi_epi64(sm[g], sm[g + 1])), sums);
      };
      const __m256i m01 = mins2(0), m23 = mins2(2);
      // Halves [r0, r2] and [r1, r3] pairwise, twice: element 0 and 1 of the
      // low half rows 0, 2, of the high half rows 1, 3.
      __m256i mh = _mm256_hadd_epi32(m01, m23);
      mh = _mm256_hadd_epi32(mh, mh);
      const __m128i m4s =
          _mm_unpacklo_epi32(_mm256_castsi256_si128(mh), _mm256_extracti128_si256(mh, 1));
      const __m128i heads = _mm_setr_epi32((int)LoadU32(w + off), (int)LoadU32(w + wrb + off),
                                           (int)LoadU32(w + 2 * wrb + off),
                                           (int)LoadU32(w + 3 * wrb + off));
      const __m256 dd = _mm256_cvtph_ps(_mm_shuffle_epi8(heads, dd_order));
      const __m128 da = _mm_set1_ps(ab.d);
      const __m128 dw = _mm256_castps256_ps128(dd), dmin = _mm256_extractf128_ps(dd, 1);
      acc = _mm_fmadd_ps(_mm_cvtepi32_ps(s4), _mm_mul_ps(dw, da), acc);
      acc = _mm_fnmadd_ps(_mm_cvtepi32_ps(m4s), _mm_mul_ps(dmin, da), acc);
    }
    return acc;
  }

  // The one-row decodes' quants of sub-blocks 2c (lo: the low nibbles of
  // the block's quant bytes 32c ..) and 2c + 1 (hi: the high nibbles);
  // Q5_K with the fifth bits from qh (the block's 32 qh bytes).
  static inline void RowQuants(const uint8_t* blk, __m256i qh, int c, __m256i m4, __m256i* lo,
                               __m256i* hi) {
    const __m256i raw = _mm256_loadu_si256((const __m256i*)(blk + kQsOffset + 32 * c));
    *lo = _mm256_and_si256(raw, m4);
    *hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
    if constexpr (kFifthBits) {
      const __m256i bit4 = _mm256_set1_epi8(0x10);
      const auto to4 = [&](int bit) {
        return _mm256_and_si256(
            bit <= 4 ? _mm256_slli_epi16(qh, 4 - bit) : _mm256_srli_epi16(qh, bit - 4), bit4);
      };
      *lo = _mm256_or_si256(*lo, to4(2 * c));
      *hi = _mm256_or_si256(*hi, to4(2 * c + 1));
    }
  }

  // T tokens against the G rows at r[0..G-1] (SideRows).
  template <int T, int G>
  __attribute__((noinline)) static void DecodeRows(const uint8_t* const (&r)[G], int64_t /*wrb*/,
                                                   int64_t nsb, const uint8_t* act, int64_t arb,
                                                   __m128 (&out)[G][T]) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    SideRows<T, G, kBlockBytes>(r, nsb, [&](const uint8_t* row, int64_t b, __m128 (&acc)[T]) {
        const uint8_t* blk = row + b * kBlockBytes;
        const __m128i sm = KScalesMins(blk + 4);
        const __m256i sc = _mm256_broadcastsi128_si256(sm);
        const __m128i mins = _mm_cvtepu8_epi16(_mm_unpackhi_epi64(sm, sm));
        const __m128 dd = _mm_cvtph_ps(_mm_cvtsi32_si128((int)LoadU32(blk)));  // [d_w, dmin_w, ..]
        __m256i qh = _mm256_setzero_si256();
        if constexpr (kFifthBits) qh = _mm256_loadu_si256((const __m256i*)(blk + 16));
        __m256i isum[T];
        for (int t = 0; t < T; ++t) isum[t] = _mm256_setzero_si256();
        for (int c = 0; c < 4; ++c) {
          // Sub-blocks 2c (low nibbles) and 2c + 1 (high nibbles).
          __m256i lo, hi;
          RowQuants(blk, qh, c, m4, &lo, &hi);
          const __m256i s_lo = _mm256_shuffle_epi8(sc, ScaleShuffle(2 * c));
          const __m256i s_hi = _mm256_shuffle_epi8(sc, ScaleShuffle(2 * c + 1));
          for (int t = 0; t < T; ++t) {
            const ActBlockQ8K& a = ((const ActBlockQ8K*)(act + t * arb))[b];
            const __m256i* q = (const __m256i*)(a.qs + 64 * c);
            isum[t] = MaddAcc(isum[t], _mm256_maddubs_epi16(lo, _mm256_loadu_si256(q)), s_lo);
            isum[t] = MaddAcc(isum[t], _mm256_maddubs_epi16(hi, _mm256_loadu_si256(q + 1)), s_hi);
          }
        }
        for (int t = 0; t < T; ++t) {
          const ActBlockQ8K& a = ((const ActBlockQ8K*)(act + t * arb))[b];
          const __m128i msum = _mm_madd_epi16(mins, _mm_loadu_si128((const __m128i*)a.sums32));
          acc[t] = FmaSumsMins(isum[t], msum, dd, a.d, acc[t]);
        }
    }, out);
  }

  static void Gemm(const uint8_t* w, int64_t wrb, int64_t rows, const uint8_t* act,
                   int64_t arb, int64_t num_tokens, int64_t cols, float* y, int64_t ldy,
                   WorkerScratch* scratch) {
    // RowLanesGemm's tile after tile, row after row: QuarterRowsDecode
    // (4 rows side by side) read slower on this table (AMD EPYC Zen 5, 2
    // threads, `TERN_ISA=avx2 tern bench kernels --type q4_k,q5_k,q6_k -p 4
    // --rows 65536`, 3 runs alternated: Q4_K 28.9-32.8 -> 21.2-24.8 GB/s,
    // Q6_K 33.7-36.8 -> 25.3-29.9), 4 rows' work too much for 16 registers.
    RowLanesGemm<Q45KRowLanes8>(w, wrb, rows, act, arb, num_tokens, cols, y, ldy, scratch);
  }
};

// ---- Q4_K in 16-row tiles (WeightLayout::kPanel16), AVX2 ---------------------------

// What the AVX2 16-row tiles (Q45KPacked16, Q6KPacked16; Tile: the one
// derived) share: a tile is two 8-row halves, its panel their K8 panels one
// after the other, its decode's sums two registers of 8 rows per token.
template <class Tile, class K8>
struct Packed16Halves {
  template <int T>
  static void RunPackedDecode(const uint8_t* w, int64_t nb, const uint8_t* act, int64_t arb,
                              int nr, float* y, int64_t ldy) {
    __m256 acc[2][T];
    Tile::template PackedTile<T>(w, nb, act, arb, acc);
    for (int half = 0; half < 2; ++half) {
      RowLanes8<DType::kQ4_0>::Store<T>(acc[half], 8, y + 8 * half, ldy);
    }
  }
  static void Gemm(const uint8_t* w, int64_t wrb, int64_t rows, const uint8_t* act,
                   int64_t arb, int64_t num_tokens, int64_t cols, float* y, int64_t ldy,
                   WorkerScratch* scratch) {
    K8::Gemm(w, wrb, rows, act, arb, num_tokens, cols, y, ldy, scratch);
  }
  static void PackedGemm(const uint8_t* w, int64_t wrb, int64_t rows, const uint8_t* act,
                         int64_t arb, int64_t num_tokens, int64_t cols, float* y, int64_t ldy,
                         WorkerScratch* scratch) {
    RowLanesGemm<Tile, true>(w, wrb, rows, act, arb, num_tokens, cols, y, ldy, scratch);
  }
  template <int T>
  static void RunPanel(const uint8_t* panel, int64_t nb, const uint8_t* act, int64_t arb,
                       int nr, float* y, int64_t ldy) {
    for (int half = 0; half < 2; ++half) {
      K8::template RunPanel<T>(panel + half * (nb / 8) * K8::kSuperBytes, nb, act, arb, 8,
                               y + 8 * half, ldy);
    }
  }
};

// Q45KRowLanes8 reading the model's Q4_K matrices packed at load: per 16-row
// tile and super-block (16 x kBlockBytes bytes, the rows' own), the tile's
// two 8-row halves one after the other, and in each half, for each 16-byte
// span g of the block (the heads, then the quants; Q5_K: heads, qh, quants)
// 4 registers, register i's lane l = bytes 16g + 4i .. 16g + 4i + 3 of lane
// l's row (RowLanes8's order: lane 4L + m, row 2m + L): what Load8 gathers
// with 16-byte loads and transposes, stored. Decode (PackedTile) then reads
// one stream and runs the panel's operations (PanelGroup's integers and
// float operations, so the outputs equal the one-row decode's bitwise) on
// registers unpacked on the way; 4 or more tokens unpack each half into
// the panel (UnpackPacked) and run RowLanesGemm's panel tiles on it.
template <DType kType>
struct Q45KPacked16 : Packed16Halves<Q45KPacked16<kType>, Q45KRowLanes8<kType>> {
  using K8 = Q45KRowLanes8<kType>;
  using Lanes = RowLanes8<DType::kQ4_0>;  // its store
  static constexpr bool kFifthBits = K8::kFifthBits;
  static constexpr int64_t kBlockBytes = K8::kBlockBytes;
  static constexpr int64_t kQsOffset = K8::kQsOffset;
  static_assert(kBlockBytes % 16 == 0);
  static constexpr int64_t kHalfBytes = 8 * kBlockBytes;
  static constexpr int64_t kPackedBlockBytes = 16 * kBlockBytes;
  static constexpr int kRows = 16;
  static constexpr int64_t kPanelMinTokens = K8::kPanelMinTokens;
  static constexpr int kPanelTokens = K8::kPanelTokens;
  // Both halves' panels, one after the other.
  static constexpr int64_t kPanelBlockBytes = 2 * K8::kPanelBlockBytes;


  // Load8's x for half `half` of super-block b of the packed tile at w.
  static inline void LoadPacked(const uint8_t* w, int64_t b, int half, int64_t off,
                                __m256i (&x)[4]) {
    const uint8_t* p = w + b * kPackedBlockBytes + half * kHalfBytes + 8 * off;  // span off / 16
    for (int i = 0; i < 4; ++i) x[i] = _mm256_loadu_si256((const __m256i*)(p + 32 * i));
  }

  static void Pack(const uint8_t* w, int64_t wrb, int64_t rows, int64_t cols, uint8_t* out) {
    CHECK_EQ(rows % kRows, 0);
    for (int64_t r0 = 0; r0 < rows; r0 += kRows) {
      for (int64_t b = 0; b < cols / 256; ++b) {
        uint8_t* o = out + r0 * wrb + b * kPackedBlockBytes;
        for (int half = 0; half < 2; ++half) {
          for (int l = 0; l < 8; ++l) {
            const uint8_t* blk =
                w + (r0 + 8 * half + Lanes::LaneRow(l)) * wrb + b * kBlockBytes;
            for (int64_t g = 0; g < kBlockBytes / 16; ++g) {
              for (int i = 0; i < 4; ++i) {
                std::memcpy(o + half * kHalfBytes + 32 * (4 * g + i) + 4 * l, blk + 16 * g + 4 * i,
                            4);
              }
            }
          }
        }
      }
    }
  }

  static void Row(const uint8_t* w, int64_t wrb, int64_t /*rows*/, int64_t row, int64_t cols,
                  uint8_t* out) {
    const uint8_t* tile = w + row / kRows * kRows * wrb;
    const int r = (int)(row % kRows);
    const int half = r / 8, l = Lanes::RowLane(r % 8);
    for (int64_t b = 0; b < cols / 256; ++b) {
      const uint8_t* o = tile + b * kPackedBlockBytes + half * kHalfBytes;
      for (int64_t g = 0; g < kBlockBytes / 16; ++g) {
        for (int i = 0; i < 4; ++i) {
          std::memcpy(out + b * kBlockBytes + 16 * g + 4 * i, o + 32 * (4 * g + i) + 4 * l, 4);
        }
      }
    }
  }

  static void UnpackPacked(const uint8_t* w, int64_t nb, uint8_t* panel) {
    for (int half = 0; half < 2; ++half) {
      K8::Unpack([&](int64_t b, int64_t off, __m256i(&x)[4]) { LoadPacked(w, b, half, off, x); },
                 nb, panel + half * (nb / 8) * K8::kSuperBytes);
    }
  }


  // T tokens against the packed tile at w: PanelGroup's operations on
  // registers unpacked on the way (bitwise the one-row decode's sums).
  // Each super-block's lines are prefetched 2 KiB ahead
  // (PrefetchStreamAhead): on a Zen 5 (session 30, `TERN_ISA=avx2 tern
  // bench kernels --panel16 -p 4`, 3 runs alternated) Q4_K 19.9-21.3 ->
  // 35.7-37.1 GB/s, Q5_K 16.0-20.5 -> 31.8-34.8, against the file's rows'
  // 27.1-29.5 and 26.0-28.6, so the per-model timing (UsePanel16) now
  // picks the tiles there. An earlier trial (another session's CPU, not
  // recorded) read slower with each line 1152-9216 bytes ahead: 28.9 /
  // 31.8 GB/s without, 26.0 / 22.4 at 2304.
  template <int T>
  __attribute__((noinline)) static void PackedTile(const uint8_t* w, int64_t nb,
                                                   const uint8_t* act, int64_t arb,
                                                   __m256 (&acc)[2][T]) {
    constexpr int kRun = kFifthBits ? 4 : 8;  // words added in int16 (Q45KRowLanes8)
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int half = 0; half < 2; ++half)
      for (int t = 0; t < T; ++t) acc[half][t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb / 8; ++b) {
      const ActBlockQ8K* a[T];
      for (int t = 0; t < T; ++t) a[t] = (const ActBlockQ8K*)(act + t * arb) + b;
      PrefetchStreamAhead<kPackedBlockBytes>(w + b * kPackedBlockBytes);
#pragma GCC unroll 2
      for (int half = 0; half < 2; ++half) {
        __m256i hd[4];
        LoadPacked(w, b, half, 0, hd);
        const typename K8::HeadFields f = K8::Fields(hd);
        __m256i qh[2][4];
        if constexpr (kFifthBits) {
          LoadPacked(w, b, half, 16, qh[0]);
          LoadPacked(w, b, half, 32, qh[1]);
        }
        __m256i s[T];
        for (int t = 0; t < T; ++t) s[t] = _mm256_setzero_si256();
#pragma GCC unroll 4
        for (int j = 0; j < 8; j += 2) {
          // Spans j and j + 1 of the quants: sub-blocks j (low nibbles) and
          // j + 1 (high), element quads 0-3 from span j, 4-7 from j + 1.
          __m256i raw[2][4];
          LoadPacked(w, b, half, kQsOffset + 16 * j, raw[0]);
          LoadPacked(w, b, half, kQsOffset + 16 * (j + 1), raw[1]);
          const auto quant = [&](int u, int k) {
            const __m256i r = raw[k / 4][k % 4];
            __m256i v = _mm256_and_si256(u == 0 ? r : _mm256_srli_epi16(r, 4), m4);
            if constexpr (kFifthBits) {
              const int bit = j + u;
              const __m256i bits = qh[k / 4][k % 4];
              v = _mm256_or_si256(
                  v, _mm256_and_si256(bit <= 4 ? _mm256_slli_epi32(bits, 4 - bit)
                                               : _mm256_srli_epi32(bits, bit - 4),
                                      _mm256_set1_epi8(0x10)));
            }
            return v;
          };
#pragma GCC unroll 2
          for (int u = 0; u < 2; ++u) {
            const int sj = j + u;
#pragma GCC unroll 2
            for (int k0 = 0; k0 < 8; k0 += kRun) {
              __m256i c[T];
#pragma GCC unroll 8
              for (int k = k0; k < k0 + kRun; ++k) {
                const __m256i wq = quant(u, k);
                for (int t = 0; t < T; ++t) {
                  const __m256i p = _mm256_maddubs_epi16(
                      wq, _mm256_set1_epi32((int)LoadU32(a[t]->qs + 32 * sj + 4 * k)));
                  c[t] = k == k0 ? p : _mm256_add_epi16(c[t], p);
                }
              }
              const __m256i sc = K8::ScaleReg(f, sj);
              for (int t = 0; t < T; ++t) {
                s[t] = MaddAcc(s[t], c[t], sc);
                __asm__("" : "+x"(s[t]));  // one chain a token (PanelGroup)
              }
            }
          }
        }
        __m256 d, dmin;
        K8::Deltas(hd[0], &d, &dmin);
        for (int t = 0; t < T; ++t) {
          __m256i m = _mm256_setzero_si256();
          for (int i = 0; i < 4; ++i) {
            m = MaddAcc(m, K8::MinReg(f, i),
                        _mm256_set1_epi32((int)LoadU32(a[t]->sums32 + 2 * i)));
          }
          const __m256 da = _mm256_set1_ps(a[t]->d);
          acc[half][t] =
              _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[t]), _mm256_mul_ps(d, da), acc[half][t]);
          acc[half][t] =
              _mm256_fnmadd_ps(_mm256_cvtepi32_ps(m), _mm256_mul_ps(dmin, da), acc[half][t]);
        }
      }
    }
  }

};

// ---- Q6_K x ActBlockQ8K, 8 weight rows in the lanes (AVX2) --------------------------

// Q6KRowLanes (AVX-512) on 256 bits: per (row, token) and super-block, in
// super-block order, with the exact integer S = sum_j sc_j x sum_i (q_i - 32)
// a_i over the 16 sub-blocks j of 16:
//   acc = fma(float(S), d_w x d_a, acc)
// the AVX-512 table's operations, so the outputs are bitwise its own (lanes
// in RowLanes8's order).
//
// From kPanelMinTokens tokens on (RowLanesGemm), each 8-row tile is unpacked
// once per token chunk into a panel, per super-block 89 registers:
//   64 quant registers: register i, lane l = the 4 unsigned quants (0..63) of
//                       elements 4i .. 4i + 3 of row(l) (sub-block j:
//                       registers 4j .. 4j + 3)
//   16 registers:       sc_j of the 8 rows in both int16 halves of a lane
//   8 registers:        the int16 pairs (-32 sc_2p, -32 sc_2p+1)
//   1 register:         d_w of the 8 rows as floats
// and each token takes per sub-block 4 vpmaddubsw against its quants
// broadcast 4 at a time, their words added two by two (2 x 2 x 63 x 127 <
// 2^15), each pair's words vpmaddwd by sc_j into int32; then 8 vpmaddwd of
// the offset pairs against the token's sums16 (the -32). Fewer tokens
// (decode) take one row at a time (one stream, 16 blocks' prefetch ahead):
// the row's 256 quants in 8 registers of 32 (each built as it is used), a
// vpmaddubsw each against the token's quants, vpmaddwd by the two sub-blocks' scales, the
// offset against sums16, the lanes added up to S, and the same float
// operations on a lane.
struct Q6KRowLanes8 {
  static constexpr int64_t kBlockBytes = sizeof(BlockQ6_K);
  static constexpr int64_t kQhOffset = offsetof(BlockQ6_K, qh);
  static constexpr int64_t kScalesOffset = offsetof(BlockQ6_K, scales);
  static constexpr int64_t kDOffset = offsetof(BlockQ6_K, d);
  // Panel registers of a super-block (layout above).
  static constexpr int kScaleReg = 64, kOffReg = 80, kDReg = 88;
  static constexpr int64_t kSuperBytes = 89 * 32;
  // RowLanesGemm walks blocks of 32: a super-block is 8 of them.
  static constexpr int64_t kPanelBlockBytes = kSuperBytes / 8;
  static constexpr int64_t kPanelMinTokens = 4;
  static constexpr int kPanelTokens = 8;
  static constexpr int kRows = 8;

  using Lanes = RowLanes8<DType::kQ4_0>;    // its row order, scales and store
  using K45 = Q45KRowLanes8<DType::kQ4_K>;  // Load8, DwordBytes

  // sx: Load8 of the scales (lane: scales 4i .. 4i + 3 of the row, int8).
  // Scales j0 and j1 into the low and high words of each lane, sign-extended
  // (put into the high byte of a word and shifted back down).
  static inline __m256i ScaleWords(const __m256i (&sx)[4], int j0, int j1) {
    return _mm256_srai_epi16(
        _mm256_shuffle_epi8(sx[j0 / 4], K45::DwordBytes(-1, j0 % 4, -1, j1 % 4)), 8);
  }
  // The panel's register kOffReg + q: -32 x the scales (2q, 2q + 1).
  static inline __m256i OffReg(const __m256i (&sx)[4], int q) {
    // |sc| <= 128: -32 sc fits int16.
    return _mm256_sub_epi16(_mm256_setzero_si256(),
                            _mm256_slli_epi16(ScaleWords(sx, 2 * q, 2 * q + 1), 5));
  }
  // Quant register 32h + 16hi + 4c + i (elements 128h + 64hi + 16c + 4i ..,
  // unsigned 0..63) from x[i] (Load8 of ql bytes 64h + 16c ..) and
  // qh[i] (Load8 of qh bytes 32h + 16 (c % 2) ..): element 128h + 32jj + l
  // has its bits 4-5 at bits 2jj, 2jj + 1 of qh[32h + l], jj = 2hi + c / 2.
  static inline __m256i Quant(__m256i x, __m256i qh, int hi, int c) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const int jj = 2 * hi + c / 2;
    // Bits 2jj, 2jj + 1 of each byte to bits 4-5 of the same byte.
    const __m256i top =
        jj <= 2 ? _mm256_slli_epi32(qh, 4 - 2 * jj) : _mm256_srli_epi32(qh, 2 * jj - 4);
    const __m256i low =
        hi ? _mm256_and_si256(_mm256_srli_epi16(x, 4), m4) : _mm256_and_si256(x, m4);
    return _mm256_or_si256(low, _mm256_and_si256(top, _mm256_set1_epi8(0x30)));
  }

  // The panel of nb / 8 super-blocks from load(b, off, x) (x[i], lane l:
  // bytes off + 4i .. off + 4i + 3 of super-block b of lane l's row) and
  // d(b) (d_w of super-block b of the 8 rows as floats, lane order).
  template <class Load, class D>
  static inline void Unpack(Load load, D d, int64_t nb, uint8_t* panel) {
    for (int64_t b = 0; b < nb / 8; ++b) {
      uint8_t* out = panel + b * kSuperBytes;
      const auto put = [&](int reg, __m256i v) {
        _mm256_store_si256((__m256i*)(out + 32 * reg), v);
      };
      __m256i sx[4];
      load(b, kScalesOffset, sx);
      for (int j = 0; j < 16; ++j) put(kScaleReg + j, ScaleWords(sx, j, j));
      for (int q = 0; q < 8; ++q) put(kOffReg + q, OffReg(sx, q));
      _mm256_store_ps((float*)(out + 32 * kDReg), d(b));
      for (int h = 0; h < 2; ++h) {
        __m256i qh[2][4];
        load(b, kQhOffset + 32 * h, qh[0]);
        load(b, kQhOffset + 32 * h + 16, qh[1]);
        for (int c = 0; c < 4; ++c) {
          __m256i x[4];
          load(b, 64 * h + 16 * c, x);
          for (int i = 0; i < 4; ++i) {
            for (int hi = 0; hi < 2; ++hi) {
              put(32 * h + 16 * hi + 4 * c + i, Quant(x[i], qh[c % 2][i], hi, c));
            }
          }
        }
      }
    }
  }

  // Super-blocks [0, nb / 8) of the 8 rows at w into the panel.
  static void UnpackPanel(const uint8_t* w, int64_t wrb, int64_t nb, uint8_t* panel) {
    Unpack(
        [&](int64_t b, int64_t off, __m256i(&x)[4]) {
          if (off == kScalesOffset) PrefetchNextTile<8, kBlockBytes>(w + 8 * wrb, b);
          K45::Load8(w + b * kBlockBytes, off, wrb, x);
        },
        [&](int64_t b) { return Lanes::Scales(w + b * kBlockBytes + kDOffset, wrb); }, nb,
        panel);
  }

  // Super-block b of the panel (at pb) against G tokens (GroupedPanelTile).
  static constexpr int kStepBlocks = 8;
  static constexpr int kGroup = 4;
  template <int G>
  __attribute__((always_inline)) static inline void PanelGroup(const uint8_t* pb, int64_t b,
                                                               const uint8_t* act, int64_t arb,
                                                               __m256* acc) {
    const auto reg = [&](int i) { return _mm256_load_si256((const __m256i*)(pb + 32 * i)); };
    const ActBlockQ8K* a[G];
    __m256i s[G];
    for (int t = 0; t < G; ++t) {
      a[t] = (const ActBlockQ8K*)(act + t * arb) + b;
      s[t] = _mm256_setzero_si256();
    }
    const auto bcast = [](const void* p) { return _mm256_set1_epi32((int)LoadU32(p)); };
#pragma GCC unroll 32
    for (int i = 0; i < 64; i += 2) {
      const __m256i w0 = reg(i), w1 = reg(i + 1), sc = reg(kScaleReg + i / 4);
      for (int t = 0; t < G; ++t) {
        const __m256i c = _mm256_add_epi16(_mm256_maddubs_epi16(w0, bcast(a[t]->qs + 4 * i)),
                                           _mm256_maddubs_epi16(w1, bcast(a[t]->qs + 4 * i + 4)));
        s[t] = MaddAcc(s[t], c, sc);
        // One chain a token: GCC otherwise reassociated the adds into a
        // tree and kept its leaves on the stack.
        __asm__("" : "+x"(s[t]));
      }
    }
    for (int q = 0; q < 8; ++q) {
      const __m256i off = reg(kOffReg + q);
      for (int t = 0; t < G; ++t) s[t] = MaddAcc(s[t], off, bcast(a[t]->sums16 + 2 * q));
    }
    const __m256 dw = _mm256_load_ps((const float*)(pb + 32 * kDReg));
    for (int t = 0; t < G; ++t) {
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[t]), _mm256_mul_ps(dw, _mm256_set1_ps(a[t]->d)),
                               acc[t]);
    }
  }

  template <int T>
  static void RunPanel(const uint8_t* panel, int64_t nb, const uint8_t* act, int64_t arb,
                       int nr, float* y, int64_t ldy) {
    __m256 acc[T];
    GroupedPanelTile<Q6KRowLanes8, T>(panel, nb, act, arb, acc);
    Lanes::Store<T>(acc, nr, y, ldy);
  }

  // Rows r < nr of the 8 at w against T tokens: one token 4 rows side by
  // side (DecodeRows4; a short tile is padded to 8 rows, so reading 4 is
  // safe), more one row at a time (DecodeRows).
  template <int T>
  static void RunDecode(const uint8_t* w, int64_t wrb, int64_t nb, const uint8_t* act,
                        int64_t arb, int nr, float* y, int64_t ldy) {
    DecodeTileRows<Q6KRowLanes8, T>(w, wrb, nb, act, arb, nr, y, ldy);
  }

  // One token (its nsb super-blocks at a) against the 4 rows at w (row g at
  // w + g wrb), lane g of the result row g's: per super-block each row's
  // integer sum as DecodeRows takes it (RowSums), the 4 gathered into one
  // register (LaneSums4) and lane g takes row g's float step, fma(S,
  // d_w d_a), DecodeRows's (FmaLaneSum), so the bits are its. The float
  // step and d_w once for 4 rows instead of once a row; the streams
  // prefetched a group (4 rows) ahead into L1 and two groups into L2, as
  // Q45KRowLanes8::DecodeRows4.
  __attribute__((noinline)) static __m128 DecodeRows4(const uint8_t* w, int64_t wrb, int64_t nsb,
                                                      const ActBlockQ8K* a) {
    __m128 acc = _mm_setzero_ps();
    for (int64_t b = 0; b < nsb; ++b) {
      const int64_t off = b * kBlockBytes;
      const ActBlockQ8K* const ab[1] = {a + b};
      __m256i v[4];
      for (int g = 0; g < 4; ++g) {
        const uint8_t* blk = w + g * wrb + off;
        PrefetchNearFar<kBlockBytes>(blk + 4 * wrb, blk + 8 * wrb);
        __m256i vg[1];
        RowSums<1>(blk, ab, vg);
        v[g] = vg[0];
      }
      const auto dh = [&](int g) { return (short)LoadU16(w + g * wrb + off + kDOffset); };
      const __m128 dw = _mm_cvtph_ps(_mm_setr_epi16(dh(0), dh(1), dh(2), dh(3), 0, 0, 0, 0));
      acc = _mm_fmadd_ps(_mm_cvtepi32_ps(LaneSums4(v)), _mm_mul_ps(dw, _mm_set1_ps(ab[0]->d)),
                         acc);
    }
    return acc;
  }

  // T tokens against the G rows at r[0..G-1] (SideRows).
  template <int T, int G>
  __attribute__((noinline)) static void DecodeRows(const uint8_t* const (&r)[G], int64_t /*wrb*/,
                                                   int64_t nsb, const uint8_t* act, int64_t arb,
                                                   __m128 (&out)[G][T]) {
    SideRows<T, G, kBlockBytes>(r, nsb, [&](const uint8_t* row, int64_t b, __m128 (&acc)[T]) {
        const uint8_t* blk = row + b * kBlockBytes;
        const ActBlockQ8K* a[T];
        for (int t = 0; t < T; ++t) a[t] = (const ActBlockQ8K*)(act + t * arb) + b;
        __m256i v[T];
        RowSums<T>(blk, a, v);
        const __m128 dw = _mm_set_ss(HalfToFloat(LoadU16(blk + kDOffset)));
        for (int t = 0; t < T; ++t) acc[t] = FmaLaneSum(v[t], dw, a[t]->d, acc[t]);
    }, out);
  }

  // The super-block at blk against the T tokens' at a[t]: v[t] the 8 int32
  // lanes whose sum is the block's integer dot product, offset included.
  template <int T>
  __attribute__((always_inline)) static inline void RowSums(const uint8_t* blk,
                                                            const ActBlockQ8K* const (&a)[T],
                                                            __m256i (&v)[T]) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i bits45 = _mm256_set1_epi8(0x30);
    // sc(g): sub-block 2g's scale in the words of the low 128-bit lane,
    // 2g + 1's in the high one: one vpshufb each from the scales as
    // words, the even ones in the low lane and the odd ones in the high
    // one (a vpshufb and a vpsraw each from the bytes: 8 more
    // instructions a super-block); sc16: the 16 scales in order, for the
    // offset.
    const __m128i sc8 = _mm_loadu_si128((const __m128i*)(blk + kScalesOffset));
    const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
    const __m256i split = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(
        sc8, _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15)));
    // -32 x sum_j sc_j x sums16_j, then the scaled sums (|.| of a word
    // <= 2 x 63 x 127).
    for (int t = 0; t < T; ++t) {
      v[t] = _mm256_sub_epi32(
          _mm256_setzero_si256(),
          _mm256_slli_epi32(
              _mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i*)a[t]->sums16)), 5));
    }
    // The row's quants (0..63) a register at a time, used at once:
    // register g = 4h + jj holds elements 128h + 32jj .. + 31
    // (sub-blocks 2g and 2g + 1 in its 128-bit lanes), low 4 bits from
    // ql[64h + 32 (jj % 2) ..] (low nibbles for jj < 2, high ones
    // after), bits 4-5 from bits 2jj, 2jj + 1 of qh[32h ..]. All 8 built
    // first (with 8 scale registers) overflowed the 16 registers: GCC
    // kept half of them on the stack, and a 256 x 2048 (rows x
    // columns) matmul of one token in L2 took 20.1 us against 17.1 this
    // way (Zen 4, best of 30 x 200 calls, 3 alternated runs each).
    for (int h = 0; h < 2; ++h) {
      const __m256i qh = _mm256_loadu_si256((const __m256i*)(blk + kQhOffset + 32 * h));
      for (int jj = 0; jj < 4; ++jj) {
        const int g = 4 * h + jj;
        const __m256i ql = _mm256_loadu_si256((const __m256i*)(blk + 64 * h + 32 * (jj % 2)));
        const __m256i low = jj < 2 ? _mm256_and_si256(ql, m4)
                                   : _mm256_and_si256(_mm256_srli_epi16(ql, 4), m4);
        const __m256i top = jj <= 2 ? _mm256_slli_epi16(qh, 4 - 2 * jj)
                                    : _mm256_srli_epi16(qh, 2 * jj - 4);
        const __m256i u = _mm256_or_si256(low, _mm256_and_si256(top, bits45));
        const __m256i sc =
            _mm256_shuffle_epi8(split, _mm256_set1_epi16((short)((2 * g + 1) << 8 | 2 * g)));
        for (int t = 0; t < T; ++t) {
          const __m256i q = _mm256_loadu_si256((const __m256i*)(a[t]->qs + 32 * g));
          v[t] = MaddAcc(v[t], _mm256_maddubs_epi16(u, q), sc);
        }
      }
    }
  }

  static void Gemm(const uint8_t* w, int64_t wrb, int64_t rows, const uint8_t* act,
                   int64_t arb, int64_t num_tokens, int64_t cols, float* y, int64_t ldy,
                   WorkerScratch* scratch) {
    // RowLanesGemm's walk, as Q45KRowLanes8 (QuarterRowsDecode slower).
    RowLanesGemm<Q6KRowLanes8>(w, wrb, rows, act, arb, num_tokens, cols, y, ldy, scratch);
  }
};

// ---- Q6_K in 16-row tiles (WeightLayout::kPanel16), AVX2 ---------------------------

// Q6KRowLanes8 reading packed tiles, as Q45KPacked16 does for Q4_K: per
// 16-row tile and super-block (16 x 210 bytes, the rows' own) the 16 rows'
// d (lane order, half 0 then half 1), then the two 8-row halves one after
// the other, each as registers of 8 rows (lane l: row Lanes::LaneRow(l)): the
// scales as Load8 gathers them, then the quants re-encoded by groups
// (Q6KEncodeGroup, GroupReg), in the order PackedTile reads them. Decode
// (PackedTile) reads one stream and runs PanelGroup's operations on
// registers made on the way (bitwise the one-row decode's sums). The
// layout decides the speed (`tern bench kernels --type q6_k --panel16`,
// 5632 x 2048, 2 threads, avx2 table): the file's 16-byte spans in block
// order with the d after them streamed at 12.6-12.7 GB/s against the
// one-row decode's 31-45; every register 32-byte aligned (d first) 13.2;
// with a software prefetch 1680-13440 bytes ahead 15-17; the spans also
// in reading order 49.4 GB/s (30.4 with the prefetch 3360 bytes ahead, so
// none). The groups re-encoded cut the quant work from 17 to 11 operations
// a register of 4 quads (Quads): in L3 (--rows 128, 1 thread, medians of
// 6 alternated runs) 29.8 -> 35.4-36.0 GB/s, from memory (2 threads, 8
// runs) level at 74-75% of the read probe, prefill 16 tokens 116 -> 129
// GFLOP/s.
struct Q6KPacked16 : Packed16Halves<Q6KPacked16, Q6KRowLanes8> {
  using K8 = Q6KRowLanes8;
  using Lanes = RowLanes8<DType::kQ4_0>;  // its store
  static constexpr int64_t kBlockBytes = K8::kBlockBytes;
  static constexpr int kSlots = 13;  // 16-byte spans of a row before d
  static_assert(K8::kDOffset == 16 * kSlots);
  // Per super-block of the tile: the 16 d (half 0's, then half 1's), then
  // the halves' slots, so every register load is 32-byte aligned.
  static constexpr int64_t kHalfBytes = 32 * 4 * kSlots;
  static constexpr int64_t kPackedBlockBytes = 16 * kBlockBytes;
  static constexpr int kRows = 16;
  static constexpr int64_t kPanelMinTokens = K8::kPanelMinTokens;
  static constexpr int kPanelTokens = K8::kPanelTokens;
  static constexpr int64_t kPanelBlockBytes = 2 * K8::kPanelBlockBytes;

  static inline const uint8_t* HalfAt(const uint8_t* w, int64_t b, int half) {
    return w + b * kPackedBlockBytes + 32 + half * kHalfBytes;
  }
  static inline const uint8_t* DAt(const uint8_t* w, int64_t b, int half) {
    return w + b * kPackedBlockBytes + 16 * half;
  }
  // A half's registers: 0..3 the scales (Load8's), then per group (h, c')
  // (Q6KEncodeGroup) 12, 3i + e: lane l = byte e of the groups (h, c',
  // 4i .. 4i + 3) of lane l's row; PackedTile's reading order.
  static constexpr int GroupReg(int h, int cp, int i, int e) {
    return 4 + 12 * (2 * h + cp) + 3 * i + e;
  }
  // Byte k of register reg's lane l in a half.
  static constexpr int64_t RegByte(int reg, int l, int k) { return 32 * reg + 4 * l + k; }
  static inline __m256i LoadReg(const uint8_t* w, int64_t b, int half, int reg) {
    return _mm256_loadu_si256((const __m256i*)(HalfAt(w, b, half) + 32 * reg));
  }
  static inline __m256 LoadD(const uint8_t* w, int64_t b, int half) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)DAt(w, b, half)));
  }

  // The bytes of super-block b of lane l's row of a half (at oh, d at dh)
  // and the row's block: to(packed, row) moves n bytes one way or the other.
  template <class P, class R, class Move>
  static inline void Block(P oh, P dh, R blk, int l, Move to) {
    for (int i = 0; i < 4; ++i) {
      for (int k = 0; k < 4; ++k) to(oh + RegByte(i, l, k), blk + K8::kScalesOffset + 4 * i + k, 1);
    }
    to(dh + 2 * l, blk + K8::kDOffset, 2);
  }

  static void Pack(const uint8_t* w, int64_t wrb, int64_t rows, int64_t cols, uint8_t* out) {
    CHECK_EQ(rows % kRows, 0);
    const auto copy = [](uint8_t* dst, const uint8_t* src, int n) { std::memcpy(dst, src, n); };
    for (int64_t r0 = 0; r0 < rows; r0 += kRows) {
      for (int64_t b = 0; b < cols / 256; ++b) {
        uint8_t* o = out + r0 * wrb + b * kPackedBlockBytes;
        for (int half = 0; half < 2; ++half) {
          uint8_t* oh = o + 32 + half * kHalfBytes;
          for (int l = 0; l < 8; ++l) {
            const uint8_t* blk =
                w + (r0 + 8 * half + Lanes::LaneRow(l)) * wrb + b * kBlockBytes;
            Block(oh, o + 16 * half, blk, l, copy);
            for (int h = 0; h < 2; ++h) {
              for (int cp = 0; cp < 2; ++cp) {
                for (int n = 0; n < 16; ++n) {
                  uint8_t e[3];
                  Q6KEncodeGroup(blk, h, cp, n, e);
                  for (int k = 0; k < 3; ++k) oh[RegByte(GroupReg(h, cp, n / 4, k), l, n % 4)] = e[k];
                }
              }
            }
          }
        }
      }
    }
  }

  static void Row(const uint8_t* w, int64_t wrb, int64_t /*rows*/, int64_t row, int64_t cols,
                  uint8_t* out) {
    const uint8_t* tile = w + row / kRows * kRows * wrb;
    const int r = (int)(row % kRows);
    const int half = r / 8, l = Lanes::RowLane(r % 8);
    const auto copy = [](const uint8_t* src, uint8_t* dst, int n) { std::memcpy(dst, src, n); };
    for (int64_t b = 0; b < cols / 256; ++b) {
      const uint8_t* oh = HalfAt(tile, b, half);
      uint8_t* blk = out + b * kBlockBytes;
      Block(oh, DAt(tile, b, half), blk, l, copy);
      for (int h = 0; h < 2; ++h) {
        for (int cp = 0; cp < 2; ++cp) {
          for (int n = 0; n < 16; ++n) {
            uint8_t e[3];
            for (int k = 0; k < 3; ++k) e[k] = oh[RegByte(GroupReg(h, cp, n / 4, k), l, n % 4)];
            Q6KDecodeGroup(e, h, cp, n, blk);
          }
        }
      }
    }
  }

  // The unsigned quants q[jj] (elements 128h + 32jj + 16c' + 4i ..: quad i
  // of sub-block 8h + 2jj + c') from register i of the group's slots
  // e[0..2] (Q6KEncodeGroup): q_0..q_2 their low 6 bits; q_3 from their
  // top 2 bits, masked first so that the 16-bit shifts move nothing across
  // a byte: ((t0 >> 2 | t1) >> 2 | t2) >> 2.
  static inline void Quads(const __m256i (&e)[3], __m256i (&q)[4]) {
    const __m256i m3f = _mm256_set1_epi8(0x3F);
    __m256i top[3];
    for (int k = 0; k < 3; ++k) {
      q[k] = _mm256_and_si256(e[k], m3f);
      top[k] = _mm256_xor_si256(e[k], q[k]);
    }
    __m256i t = _mm256_or_si256(_mm256_srli_epi16(top[0], 2), top[1]);
    t = _mm256_or_si256(_mm256_srli_epi16(t, 2), top[2]);
    q[3] = _mm256_srli_epi16(t, 2);
  }

  static void UnpackPacked(const uint8_t* w, int64_t nb, uint8_t* panel) {
    for (int half = 0; half < 2; ++half) {
      uint8_t* hp = panel + half * (nb / 8) * K8::kSuperBytes;
      for (int64_t b = 0; b < nb / 8; ++b) {
        uint8_t* out = hp + b * K8::kSuperBytes;
        const auto put = [&](int reg, __m256i v) {
          _mm256_store_si256((__m256i*)(out + 32 * reg), v);
        };
        __m256i sx[4];
        for (int i = 0; i < 4; ++i) sx[i] = LoadReg(w, b, half, i);
        for (int j = 0; j < 16; ++j) put(K8::kScaleReg + j, K8::ScaleWords(sx, j, j));
        for (int q = 0; q < 8; ++q) put(K8::kOffReg + q, K8::OffReg(sx, q));
        _mm256_store_ps((float*)(out + 32 * K8::kDReg), LoadD(w, b, half));
        for (int h = 0; h < 2; ++h) {
          for (int cp = 0; cp < 2; ++cp) {
            for (int i = 0; i < 4; ++i) {
              __m256i e[3], q[4];
              for (int k = 0; k < 3; ++k) e[k] = LoadReg(w, b, half, GroupReg(h, cp, i, k));
              Quads(e, q);
              // Panel register 4j + i: quad i of sub-block j.
              for (int jj = 0; jj < 4; ++jj) put(4 * (8 * h + 2 * jj + cp) + i, q[jj]);
            }
          }
        }
      }
    }
  }

  // Each super-block's lines are prefetched 2 KiB ahead
  // (PrefetchStreamAhead): on a Zen 5 (session 30, `TERN_ISA=avx2 tern
  // bench kernels --type q6_k --panel16 -p 4`, 3 runs alternated) 20.1-22.0
  // -> 36.3-41.1 GB/s, against the file's rows' 27.4-31.2.
  template <int T>
  __attribute__((noinline)) static void PackedTile(const uint8_t* w, int64_t nb,
                                                   const uint8_t* act, int64_t arb,
                                                   __m256 (&acc)[2][T]) {
    const auto bcast = [](const void* p) { return _mm256_set1_epi32((int)LoadU32(p)); };
    for (int half = 0; half < 2; ++half)
      for (int t = 0; t < T; ++t) acc[half][t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb / 8; ++b) {
      const ActBlockQ8K* a[T];
      for (int t = 0; t < T; ++t) a[t] = (const ActBlockQ8K*)(act + t * arb) + b;
      PrefetchStreamAhead<kPackedBlockBytes>(w + b * kPackedBlockBytes);
#pragma GCC unroll 2
      for (int half = 0; half < 2; ++half) {
        __m256i sx[4];
        for (int i = 0; i < 4; ++i) sx[i] = LoadReg(w, b, half, i);
        __m256i s[T];
        for (int t = 0; t < T; ++t) s[t] = _mm256_setzero_si256();
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
#pragma GCC unroll 2
          for (int cp = 0; cp < 2; ++cp) {
#pragma GCC unroll 2
            for (int i = 0; i < 4; i += 2) {
              // Quads i and i + 1 of the group's four sub-blocks.
              __m256i q[2][4];
              for (int u = 0; u < 2; ++u) {
                __m256i e[3];
                for (int k = 0; k < 3; ++k) e[k] = LoadReg(w, b, half, GroupReg(h, cp, i + u, k));
                Quads(e, q[u]);
              }
#pragma GCC unroll 4
              for (int jj = 0; jj < 4; ++jj) {
                const int j = 8 * h + 2 * jj + cp;
                const __m256i sc = K8::ScaleWords(sx, j, j);
                for (int t = 0; t < T; ++t) {
                  const int8_t* qa = a[t]->qs + 16 * j + 4 * i;
                  const __m256i c16 = _mm256_add_epi16(_mm256_maddubs_epi16(q[0][jj], bcast(qa)),
                                                       _mm256_maddubs_epi16(q[1][jj], bcast(qa + 4)));
                  s[t] = MaddAcc(s[t], c16, sc);
                  __asm__("" : "+x"(s[t]));  // one chain a token (PanelGroup)
                }
              }
            }
          }
        }
#pragma GCC unroll 8
        for (int q = 0; q < 8; ++q) {
          const __m256i off = K8::OffReg(sx, q);
          for (int t = 0; t < T; ++t) s[t] = MaddAcc(s[t], off, bcast(a[t]->sums16 + 2 * q));
        }
        const __m256 dw = LoadD(w, b, half);
        for (int t = 0; t < T; ++t) {
          acc[half][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[t]),
                                         _mm256_mul_ps(dw, _mm256_set1_ps(a[t]->d)), acc[half][t]);
        }
      }
    }
  }

};
#endif  // !TERN_AVX512_VNNI

#ifdef TERN_AVX512_VNNI
// ---- Q4_K / Q5_K x ActBlockQ8KImage, 512-bit (AVX-512 VNNI build only) ---------------

// A super-block's 128 quant bytes in two registers; the low and high nibbles
// of each are two sub-blocks per register (8 lanes each), one vpdpbusd each
// against the activations in register order. Q5_K ORs each quant's fifth
// bit (qh) in as bit 4 first (Q5KFifthBits). The four int32 results fit
// int16 (|sum| <= 4 x 31 x 127), so two vpackssdw, then a vpmaddwd and a
// vpdpwssd against the 6-bit scales (laid out to match the packing), give the
// super-block's scaled integer sum. Per (row, token) and super-block:
//   acc += cvt(isum) * (d_w * d_a)
// and, for the mins, per token and the tile's rows together (row r in
// 128-bit lane r):
//   macc += cvt(sum_i m_i * sums32_i) * (dmin_w * d_a);
// the output is hsum(acc) - hsum(macc's lane r). Q4_K and Q5_K blocks both
// open with d, dmin and the 12 bytes of scales and mins (Q4KHeads).
// Bit 4 of each byte of u0..u3 (SplitNibbles of a Q5_K block's two quant
// registers) from qh: element 64c + l (c = 0..3, l < 32: byte l of the
// low nibbles of the quant bytes 32c..32c + 31) has its fifth bit at bit 2c
// of qh[l], element 64c + 32 + l at bit 2c + 1. qh, repeated in both
// 256-bit halves, is shifted per 64-bit lane so that the wanted bit lands on
// bit 4 of its own byte (never more than 4 places: no bit crosses a byte).
inline void Q5KFifthBits(const uint8_t* qh, __m512i* u0, __m512i* u1, __m512i* u2, __m512i* u3) {
  const __m512i h = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i*)qh));
  const __m512i bit4 = _mm512_set1_epi8(0x10);
  const auto counts = [](int lo, int hi) {
    return _mm512_setr_epi64(lo, lo, lo, lo, hi, hi, hi, hi);
  };
  // u | (shifted & 0x10)
  *u0 = _mm512_ternarylogic_epi64(*u0, _mm512_sllv_epi64(h, counts(4, 2)), bit4, 0xF8);
  *u1 = _mm512_ternarylogic_epi64(*u1, _mm512_sllv_epi64(h, counts(3, 1)), bit4, 0xF8);
  *u2 = _mm512_ternarylogic_epi64(*u2, _mm512_srlv_epi64(h, counts(0, 2)), bit4, 0xF8);
  *u3 = _mm512_ternarylogic_epi64(*u3, _mm512_srlv_epi64(h, counts(1, 3)), bit4, 0xF8);
}


// ---- Q6_K x ActBlockQ8K, 512-bit (AVX-512 VNNI build only) ---------------------------

// A Q6_K super-block's 256 quants in four registers, in element order: half
// h (elements 128h ..) has its low 4 bits in ql[64h .. 64h + 63] (low
// nibbles: elements 128h + 0..63, high nibbles: 128h + 64..127) and bits 4-5
// in qh[32h .. 32h + 31] (element 128h + 32j + l: bits 2j, 2j + 1 of qh[l]).
// So register k (elements 64k ..) holds sub-block 4k + L (16 elements) in
// its 128-bit lane L, and the activations go in as ActBlockQ8K has them. The
// quants q (0..63) enter vpdpbusd unsigned; a lane is at most 4 x 63 x 127 <
// 2^15, so vpackssdw is exact, and the int8 scales (as int16, spread to
// match) weigh the sub-block sums as for Q4_K above. The offset (q - 32)
// comes off in the same integer sum: one more vpdpwssd of the scales x -32
// against the token's sums16. Per (row, token) and super-block:
//   acc += cvt(sum_j sc_j x sum_i (q_i - 32) a_i) * (d_w * d_a).
struct Q6KKernel512 {
  // The quants of one super-block row (layout above).
  static inline void Quants(const BlockQ6_K* blk, __m512i (&u)[4]) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i bits45 = _mm512_set1_epi8(0x30);
    const auto counts = [](int lo, int hi) {
      return _mm512_setr_epi64(lo, lo, lo, lo, hi, hi, hi, hi);
    };
    for (int h = 0; h < 2; ++h) {
      const __m512i ql = _mm512_loadu_si512((const void*)(blk->ql + 64 * h));
      const __m512i qh =
          _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i*)(blk->qh + 32 * h)));
      // Bits (0, 1) | (2, 3) of qh to bits 4-5 under the low nibbles, (4, 5) |
      // (6, 7) under the high ones; q | (shifted & 0x30).
      u[2 * h] = _mm512_ternarylogic_epi64(_mm512_and_si512(ql, m4),
                                           _mm512_sllv_epi64(qh, counts(4, 2)), bits45, 0xF8);
      u[2 * h + 1] =
          _mm512_ternarylogic_epi64(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                                    _mm512_srlv_epi64(qh, counts(0, 2)), bits45, 0xF8);
    }
  }

  // The scales as int16 in the order of the two vpackssdw results (128-bit
  // lane L: 4 words of sub-block L then 4 of 4 + L; 8 + L and 12 + L), and
  // -32 x the scales in sub-block order (the low 256 bits) for the offset.
  static inline void Scales(const BlockQ6_K* blk, __m512i* sc0, __m512i* sc1, __m512i* off) {
    const __m256i sc = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i*)blk->scales));
    const __m512i s = _mm512_zextsi256_si512(sc);
    *sc0 = _mm512_permutexvar_epi16(
        _mm512_set_epi16(7, 7, 7, 7, 3, 3, 3, 3, 6, 6, 6, 6, 2, 2, 2, 2, 5, 5, 5, 5, 1, 1, 1, 1,
                         4, 4, 4, 4, 0, 0, 0, 0),
        s);
    *sc1 = _mm512_permutexvar_epi16(
        _mm512_set_epi16(15, 15, 15, 15, 11, 11, 11, 11, 14, 14, 14, 14, 10, 10, 10, 10, 13, 13,
                         13, 13, 9, 9, 9, 9, 12, 12, 12, 12, 8, 8, 8, 8),
        s);
    // |sc| <= 128: x -32 stays within int16.
    *off = _mm512_zextsi256_si512(
        _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(sc, 5)));
  }

  // The scaled integer sum of a row's super-block with a token's.
  static inline __m512i ScaledSum(const __m512i (&u)[4], __m512i sc0, __m512i sc1, __m512i off,
                                  const ActBlockQ8K& a) {
    const __m512i zero = _mm512_setzero_si512();
    __m512i d[4];
    for (int k = 0; k < 4; ++k) {
      d[k] = _mm512_dpbusd_epi32(zero, u[k], _mm512_loadu_si512((const void*)(a.qs + 64 * k)));
    }
    const __m512i s01 = _mm512_packs_epi32(d[0], d[1]);
    const __m512i s23 = _mm512_packs_epi32(d[2], d[3]);
    const __m512i sums16 = _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i*)a.sums16));
    return _mm512_dpwssd_epi32(_mm512_dpwssd_epi32(_mm512_madd_epi16(s01, sc0), s23, sc1), off,
                               sums16);
  }
};

// ---- Q4_K / Q5_K x ActBlockQ8KImage, 16 weight rows in the lanes ------------------

// Per (row, token) and super-block, in super-block order, with the exact
// integers S = sum_j sc_j x C_j (C_j: sub-block j's sum of unsigned quant x
// activation quant) and M = sum_j m_j x asum_j (the mins against the token's
// sub-block sums):
//   acc = fma(float(S), d_w x d_a, acc);  acc = fnmadd(float(M), dmin_w x d_a, acc)
// (the AMX table's operations). |S| <= 8 x 63 x 32 x 31 x 128 < 2^31.
//
// From kPanelMinTokens tokens on (RowLanesGemm), each 16-row tile is unpacked
// once per token chunk into a panel, per super-block 78 registers:
//   64 quant registers: register 8j + k, lane l = the 4 unsigned quants of
//                       elements 32j + 4k .. 32j + 4k + 3 of row(l)
//                       (sub-block j, natural order; Q5_K with the fifth bit)
//   8 registers:        sc_j of the 16 rows as int32
//   4 registers:        the int16 pairs (m_2i, m_2i+1) of the 16 rows
//   2 registers:        d_w and dmin_w of the 16 rows as floats
// and tiles of kPanelTokens tokens take per sub-block 8 vpdpbusd against the
// token's quants broadcast 4 at a time, one vpmulld by sc_j and an add; per
// super-block 4 vpdpwssd (M), and the float operations above. Lanes hold
// rows in RowLanes's order (lane 4L + m: row 4m + L), restored at the store.
// Fewer tokens (decode) take one row at a time (16
// blocks' prefetch ahead), and add the lanes of its scaled sum (and of its
// mins' sum) into S (and M): the same integers, the same float operations.
template <DType kType>
struct Q45KRowLanes {
  static_assert(kType == DType::kQ4_K || kType == DType::kQ5_K);
  static constexpr bool kFifthBits = kType == DType::kQ5_K;
  static constexpr int64_t kBlockBytes = kFifthBits ? sizeof(BlockQ5_K) : sizeof(BlockQ4_K);
  static constexpr int64_t kQsOffset = kBlockBytes - 128;  // the quants end the block
  // Panel registers of a super-block (layout above).
  static constexpr int kScaleReg = 64, kMinReg = 72, kDReg = 76, kDminReg = 77;
  static constexpr int64_t kSuperBytes = 78 * 64;
  // RowLanesGemm walks blocks of 32: a super-block is 8 of them.
  static constexpr int64_t kPanelBlockBytes = kSuperBytes / 8;
  static constexpr int64_t kPanelMinTokens = 4;
  static constexpr int kPanelTokens = 8;
  static constexpr int kRows = 16;

  using Lanes = RowLanes<DType::kQ4_0>;  // its row order and strides

  // Byte offset of sub-block j's 32 quants in an ActBlockQ8KImage's qs.
  static constexpr int ImageOffset(int j) {
    constexpr int kSlot[8] = {0, 2, 1, 3, 4, 6, 5, 7};
    return 32 * kSlot[j];
  }

  // x[j], lane 4L + m: bytes off + 4j .. off + 4j + 3 of the super-block at
  // p (its start in row 0) of row 4m + L (4 x 4 transposes of 32-bit words
  // within each 128-bit lane of the 4 loads of 4 rows).
  static inline void Load16(const uint8_t* p, int64_t off, const Lanes::Strides& s,
                            __m512i (&x)[4]) {
    __m512i v[4];
    for (int g = 0; g < 4; ++g) {
      const uint8_t* b4 = Lanes::Opaque(p + off + g * s.w4);
      __m512i r = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i*)b4));
      r = _mm512_inserti32x4(r, _mm_loadu_si128((const __m128i*)(b4 + s.wrb)), 1);
      r = _mm512_inserti32x4(r, _mm_loadu_si128((const __m128i*)(b4 + 2 * s.wrb)), 2);
      v[g] = _mm512_inserti32x4(r, _mm_loadu_si128((const __m128i*)(b4 + s.w3)), 3);
    }
    const __m512i t0 = _mm512_unpacklo_epi32(v[0], v[1]);
    const __m512i t1 = _mm512_unpackhi_epi32(v[0], v[1]);
    const __m512i t2 = _mm512_unpacklo_epi32(v[2], v[3]);
    const __m512i t3 = _mm512_unpackhi_epi32(v[2], v[3]);
    x[0] = _mm512_unpacklo_epi64(t0, t2);
    x[1] = _mm512_unpackhi_epi64(t0, t2);
    x[2] = _mm512_unpacklo_epi64(t1, t3);
    x[3] = _mm512_unpackhi_epi64(t1, t3);
  }

  // DwordBytes128 in every 128-bit lane.
  static inline __m512i DwordBytes(int b0, int b1, int b2, int b3) {
    return _mm512_broadcast_i32x4(DwordBytes128(b0, b1, b2, b3));
  }

  // From a super-block's heads (h[0] = d | dmin << 16, h[1..3] = the 12
  // bytes of 6-bit fields: scales 0-3 and mins 0-3 in their low 6 bits; 4-7
  // split over the nibbles of bytes 8-11 and the top bits of bytes 0-7; a
  // row a lane): the panel's scale registers (sub-block j's scales as int32),
  // its min registers (int16 pairs for vpdpwssd), d and dmin.
  static inline void Heads(const __m512i (&h)[4], __m512i (&sc)[8], __m512i (&mn)[4], __m512* d,
                           __m512* dmin) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i m3f = _mm512_set1_epi8(0x3F);
    const __m512i m30 = _mm512_set1_epi8(0x30);
    const __m512i sc03 = _mm512_and_si512(h[1], m3f);
    const __m512i mn03 = _mm512_and_si512(h[2], m3f);
    // (a & m4) | (b & 0x30)
    const __m512i sc47 = _mm512_ternarylogic_epi32(_mm512_and_si512(h[3], m4),
                                                   _mm512_srli_epi32(h[1], 2), m30, 0xF8);
    const __m512i mn47 = _mm512_ternarylogic_epi32(
        _mm512_and_si512(_mm512_srli_epi32(h[3], 4), m4), _mm512_srli_epi32(h[2], 2), m30, 0xF8);
    for (int j = 0; j < 4; ++j) {
      sc[j] = _mm512_shuffle_epi8(sc03, DwordBytes(j, -1, -1, -1));
      sc[4 + j] = _mm512_shuffle_epi8(sc47, DwordBytes(j, -1, -1, -1));
    }
    for (int i = 0; i < 2; ++i) {
      mn[i] = _mm512_shuffle_epi8(mn03, DwordBytes(2 * i, -1, 2 * i + 1, -1));
      mn[2 + i] = _mm512_shuffle_epi8(mn47, DwordBytes(2 * i, -1, 2 * i + 1, -1));
    }
    *d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(h[0]));
    *dmin = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(h[0], 16)));
  }

  // Quant bytes 16c .. 16c + 15 (c = 0..7, x: 4 bytes of each row a lane):
  // the low nibbles are elements 16 (c % 2) .. of sub-block 2 (c / 2), the
  // high nibbles of 2 (c / 2) + 1; Q5_K takes the fifth bits from qh[c % 2]
  // (qh bytes 16c' + 4i .. of the row; element l of sub-block j has its
  // fifth bit at bit j of qh[l]).
  static inline void Quads(const __m512i (&x)[4], const __m512i (&qh)[2][4], int c,
                           __m512i (&lo)[4], __m512i (&hi)[4]) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const int j = 2 * (c / 2);
    for (int i = 0; i < 4; ++i) {
      lo[i] = _mm512_and_si512(x[i], m4);
      hi[i] = _mm512_and_si512(_mm512_srli_epi16(x[i], 4), m4);
      if constexpr (kFifthBits) {
        const __m512i bits = qh[c % 2][i];
        const __m512i bit4 = _mm512_set1_epi8(0x10);
        // Bit j (j + 1) of each byte to bit 4: u | (shifted & 0x10).
        const auto to4 = [&](int bit) {
          return bit <= 4 ? _mm512_slli_epi32(bits, 4 - bit) : _mm512_srli_epi32(bits, bit - 4);
        };
        lo[i] = _mm512_ternarylogic_epi32(lo[i], to4(j), bit4, 0xF8);
        hi[i] = _mm512_ternarylogic_epi32(hi[i], to4(j + 1), bit4, 0xF8);
      }
    }
  }

  // The panel of nb / 8 super-blocks from load(b, off, x) (x[i], lane l:
  // bytes off + 4i .. off + 4i + 3 of super-block b of lane l's row).
  template <class Load>
  static inline void Unpack(Load load, int64_t nb, uint8_t* panel) {
    for (int64_t b = 0; b < nb / 8; ++b) {
      uint8_t* out = panel + b * kSuperBytes;
      const auto put = [&](int reg, __m512i v) {
        _mm512_store_si512((void*)(out + 64 * reg), v);
      };
      __m512i h[4], sc[8], mn[4];
      __m512 d, dmin;
      load(b, 0, h);
      Heads(h, sc, mn, &d, &dmin);
      for (int j = 0; j < 8; ++j) put(kScaleReg + j, sc[j]);
      for (int i = 0; i < 4; ++i) put(kMinReg + i, mn[i]);
      _mm512_store_ps((float*)(out + 64 * kDReg), d);
      _mm512_store_ps((float*)(out + 64 * kDminReg), dmin);
      __m512i qh[2][4];
      if constexpr (kFifthBits) {
        load(b, 16, qh[0]);
        load(b, 32, qh[1]);
      }
      for (int j = 0; j < 8; j += 2) {
        __m512i wa[8], wb[8];
        PairQuants(load, b, qh, j, wa, wb);
        for (int k = 0; k < 8; ++k) {
          put(8 * j + k, wa[k]);
          put(8 * (j + 1) + k, wb[k]);
        }
      }
    }
  }

  // Sub-blocks j and j + 1 (j even) of super-block b as the panel holds
  // them (wa: j's registers, wb: j + 1's; register k: the unsigned quants of
  // elements 4k .. 4k + 3), from quant bytes 16c, c = j, j + 1 (Quads; qh:
  // Q5_K's fifth bits).
  template <class Load>
  __attribute__((always_inline)) static inline void PairQuants(Load load, int64_t b,
                                                               const __m512i (&qh)[2][4], int j,
                                                               __m512i (&wa)[8], __m512i (&wb)[8]) {
    for (int c = j; c < j + 2; ++c) {
      __m512i x[4], lo[4], hi[4];
      load(b, kQsOffset + 16 * c, x);
      Quads(x, qh, c, lo, hi);
      const int k0 = 4 * (c % 2);
      for (int i = 0; i < 4; ++i) {
        wa[k0 + i] = lo[i];
        wb[k0 + i] = hi[i];
      }
    }
  }

  // Super-blocks [0, nb / 8) of the 16 rows at w into the panel.
  static void UnpackPanel(const uint8_t* w, int64_t wrb, int64_t nb, uint8_t* panel) {
    const Lanes::Strides strides(wrb);
    Unpack(
        [&](int64_t b, int64_t off, __m512i(&x)[4]) {
          if (off == 0) PrefetchNextTile<16, kBlockBytes>(w + 16 * wrb, b);
          Load16(w + b * kBlockBytes, off, strides, x);
        },
        nb, panel);
  }

  // s[t] += sub-block j's integer sums of T tokens (wq[k]: the unsigned
  // quants of elements 4k .. 4k + 3 of the sub-block) times its scales.
  template <int T, class Image>
  __attribute__((always_inline)) static inline void AddSubBlock(const __m512i (&wq)[8], int j,
                                                                __m512i sc, Image image,
                                                                __m512i (&s)[T]) {
    // Element quad k outside, tokens inside: T independent chains.
    __m512i c[T];
    for (int t = 0; t < T; ++t) c[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) {
        const int8_t* q = image(t)->qs + ImageOffset(j) + 4 * k;
        c[t] = _mm512_dpbusd_epi32(c[t], wq[k], _mm512_set1_epi32((int)LoadU32(q)));
      }
    }
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      s[t] = _mm512_add_epi32(s[t], _mm512_mullo_epi32(c[t], sc));
      // Here, not deferred: GCC otherwise kept every sub-block's c
      // on the stack until the super-block's end.
      __asm__("" : "+v"(s[t]));
    }
  }

  // acc[t] += the super-block's terms from S (s[t]), the mins, d and dmin.
  template <int T, class Image>
  __attribute__((always_inline)) static inline void AddSuperBlock(const __m512i (&s)[T],
                                                                  const __m512i (&mn)[4],
                                                                  __m512 dw, __m512 dmin,
                                                                  Image image, __m512 (&acc)[T]) {
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      const ActBlockQ8KImage* a = image(t);
      __m512i m = _mm512_setzero_si512();
      for (int i = 0; i < 4; ++i) {
        m = _mm512_dpwssd_epi32(m, mn[i], _mm512_set1_epi32((int)LoadU32(a->sums32 + 2 * i)));
      }
      const __m512 da = _mm512_set1_ps(a->d);
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[t]), _mm512_mul_ps(dw, da), acc[t]);
      acc[t] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(m), _mm512_mul_ps(dmin, da), acc[t]);
    }
  }

  // T tokens (rows arb apart at act) against a panel of nb / 8 super-blocks.
  template <int T>
  __attribute__((always_inline)) static inline void PanelTile(const uint8_t* panel, int64_t nb,
                                                              const uint8_t* act, int64_t arb,
                                                              __m512 (&acc)[T]) {
    for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb / 8; ++b) {
      const uint8_t* pb = panel + b * kSuperBytes;
      const auto reg = [&](int i) { return _mm512_load_si512((const void*)(pb + 64 * i)); };
      const auto image = [&](int t) {
        return (const ActBlockQ8KImage*)(act + t * arb) + b;
      };
      __m512i s[T];
      for (int t = 0; t < T; ++t) s[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) {
        __m512i wq[8];
        for (int k = 0; k < 8; ++k) wq[k] = reg(8 * j + k);
        AddSubBlock<T>(wq, j, reg(kScaleReg + j), image, s);
      }
      __m512i mn[4];
      for (int i = 0; i < 4; ++i) mn[i] = reg(kMinReg + i);
      AddSuperBlock<T>(s, mn, _mm512_load_ps((const float*)(pb + 64 * kDReg)),
                       _mm512_load_ps((const float*)(pb + 64 * kDminReg)), image, acc);
    }
  }

  // ---- the packed layout (WeightLayout::kPanel16) ----
  // RowLanes's packed tiles for super-blocks: per super-block of the 16
  // rows, for each 16-byte span g of the block (Q4_K: the heads, then the
  // quants; Q5_K: heads, qh, quants) 4 registers, register i's lane l =
  // bytes 16g + 4i .. 16g + 4i + 3 of lane l's row: what Load16 gathers,
  // stored (16 x kBlockBytes bytes, the rows' own). Decode (PackedTile) then
  // reads one stream and runs the panel's operations on registers made on
  // the way, instead of each row's super-blocks one row after another.
  static constexpr int64_t kPackedBlockBytes = 16 * kBlockBytes;
  static_assert(kBlockBytes % 16 == 0);
  // GroupedTiles: a unit is a super-block.
  static constexpr int64_t kUnitBlocks = 8;
  static constexpr int64_t kActUnitBytes = sizeof(ActBlockQ8KImage);
  using Layout = GroupedTiles<Q45KRowLanes>;

  static inline void LoadPacked(const uint8_t* w, int64_t b, int64_t off, __m512i (&x)[4]) {
    const uint8_t* p = w + b * kPackedBlockBytes + 16 * off;  // span off / 16: 256 bytes
    for (int i = 0; i < 4; ++i) x[i] = _mm512_loadu_si512((const void*)(p + 64 * i));
  }

  static void Pack(const uint8_t* w, int64_t wrb, int64_t rows, int64_t cols, uint8_t* out) {
    CHECK_EQ(rows % kRows, 0);
    for (int64_t r0 = 0; r0 < rows; r0 += kRows) {
      const uint8_t* rs[16];
      Lanes::LaneRowStarts(w + r0 * wrb, wrb, rs);
      for (int64_t b = 0; b < cols / 256; ++b) {
        uint8_t* o = Layout::At(out, rows / kRows, cols / 256, r0 / kRows, b);
        for (int64_t g = 0; g < kBlockBytes / 16; ++g) {
          for (int i = 0; i < 4; ++i) {
            for (int l = 0; l < 16; ++l) {
              std::memcpy(o + 64 * (4 * g + i) + 4 * l, rs[l] + b * kBlockBytes + 16 * g + 4 * i, 4);
            }
          }
        }
      }
    }
  }

  static void Row(const uint8_t* w, int64_t /*wrb*/, int64_t rows, int64_t row, int64_t cols,
                  uint8_t* out) {
    const int r = (int)(row % kRows);
    const int l = 4 * (r % 4) + r / 4;  // the lane LaneRows gives row r
    for (int64_t b = 0; b < cols / 256; ++b) {
      const uint8_t* o = Layout::At(w, rows / kRows, cols / 256, row / kRows, b);
      for (int64_t g = 0; g < kBlockBytes / 16; ++g) {
        for (int i = 0; i < 4; ++i) {
          std::memcpy(out + b * kBlockBytes + 16 * g + 4 * i, o + 64 * (4 * g + i) + 4 * l, 4);
        }
      }
    }
  }

  static void UnpackPacked(const uint8_t* w, int64_t nb, uint8_t* panel) {
    Unpack([&](int64_t b, int64_t off, __m512i(&x)[4]) { LoadPacked(w, b, off, x); }, nb, panel);
  }

  // Q4_K: s[t] += super-block b's sub-block sums of the packed tile at w
  // times their scales, AddSubBlock's integers (exact, so bitwise) in
  // fewer instructions, since decode streams the tile once with nothing to
  // overlap the arithmetic with: per quant register one load, two ANDs
  // (the high nibbles masked in place, 16 x q, into a chain of their own
  // that one shift brings back a sub-block) and two vpdpbusd with the
  // token's 4 quants broadcast from memory, where AddSubBlock's operands
  // took a shift and two vpbroadcastd more. |16 x C_j| <= 16 x 32 x 15 x
  // 128 < 2^20.
  template <int T, class Image>
  __attribute__((always_inline)) static inline void Q4KSums(const uint8_t* w, int64_t b,
                                                            const __m512i (&sc)[8], Image image,
                                                            __m512i (&s)[T]) {
    const __m512i m4 = _mm512_set1_epi8(0x0F), m4hi = _mm512_set1_epi8((char)0xF0);
#pragma GCC unroll 4
    for (int j = 0; j < 8; j += 2) {  // sub-blocks j and j + 1: quant bytes 16c, c = j, j + 1
      __m512i lo[T], hi[T];
      for (int t = 0; t < T; ++t) lo[t] = hi[t] = _mm512_setzero_si512();
#pragma GCC unroll 2
      for (int c = j; c < j + 2; ++c) {
        __m512i x[4];
        LoadPacked(w, b, kQsOffset + 16 * c, x);
#pragma GCC unroll 4
        for (int i = 0; i < 4; ++i) {
          const __m512i l = _mm512_and_si512(x[i], m4), h = _mm512_and_si512(x[i], m4hi);
          const int k = 4 * (c % 2) + i;  // the quad of sub-blocks j and j + 1
          for (int t = 0; t < T; ++t) {
            lo[t] = DpbusdBroadcast(lo[t], l, image(t)->qs + ImageOffset(j) + 4 * k);
            hi[t] = DpbusdBroadcast(hi[t], h, image(t)->qs + ImageOffset(j + 1) + 4 * k);
          }
        }
      }
      for (int t = 0; t < T; ++t) {
        s[t] = _mm512_add_epi32(s[t], _mm512_mullo_epi32(lo[t], sc[j]));
        s[t] = _mm512_add_epi32(s[t], _mm512_mullo_epi32(_mm512_srai_epi32(hi[t], 4), sc[j + 1]));
        __asm__("" : "+v"(s[t]));  // as in AddSubBlock
      }
    }
  }

  // T tokens against the packed tile at w: PanelTile's operations on
  // registers unpacked on the way (bitwise RunDecode's sums): Q4_K's
  // sums in Q4KSums's fewer instructions, Q5_K's as the panel's.
  // Each super-block's lines are prefetched 2 KiB ahead
  // (PrefetchStreamAhead): tinyllama all-Q4_K tg128 on a Zen 5, 3 runs
  // alternated, 47.3/44.3/42.0 -> 62.9/59.4/60.5 tok/s (paired with the
  // read probe 0.78-0.82 -> 1.03-1.13).
  template <int T>
  __attribute__((noinline)) static void PackedTile(const uint8_t* w, int64_t nb,
                                                   const uint8_t* act, int64_t arb,
                                                   __m512 (&out)[T]) {
    // Local accumulators (in and out, as RowLanes::PackedTile's): out could
    // alias Q4KSums's asm memory operands.
    __m512 acc[T];
    for (int t = 0; t < T; ++t) acc[t] = out[t];
    for (int64_t b = 0; b < nb / 8; ++b) {
      const auto image = [&](int t) {
        return (const ActBlockQ8KImage*)(act + t * arb) + b;
      };
      PrefetchStreamAhead<kPackedBlockBytes>(w + b * kPackedBlockBytes);
      __m512i h[4], sc[8], mn[4];
      __m512 d, dmin;
      LoadPacked(w, b, 0, h);
      Heads(h, sc, mn, &d, &dmin);
      __m512i s[T];
      for (int t = 0; t < T; ++t) s[t] = _mm512_setzero_si512();
      if constexpr (kFifthBits) {
        // Q5_K: the quants with their fifth bits (Quads), the panel's
        // sub-block sums (AddSubBlock).
        __m512i qh[2][4];
        LoadPacked(w, b, 16, qh[0]);
        LoadPacked(w, b, 32, qh[1]);
#pragma GCC unroll 4
        for (int j = 0; j < 8; j += 2) {
          __m512i wa[8], wb[8];
          PairQuants([&](int64_t bb, int64_t off, __m512i(&x)[4]) { LoadPacked(w, bb, off, x); },
                     b, qh, j, wa, wb);
          AddSubBlock<T>(wa, j, sc[j], image, s);
          AddSubBlock<T>(wb, j + 1, sc[j + 1], image, s);
        }
      } else {
        Q4KSums<T>(w, b, sc, image, s);
      }
      AddSuperBlock<T>(s, mn, d, dmin, image, acc);
    }
    for (int t = 0; t < T; ++t) out[t] = acc[t];
  }

  template <int T>
  static void RunPanel(const uint8_t* panel, int64_t nb, const uint8_t* act, int64_t arb,
                       int nr, float* y, int64_t ldy) {
    __m512 acc[T];
    PanelTile<T>(panel, nb, act, arb, acc);
    Lanes::Store<T>(acc, nr, y, ldy);
  }

  // Rows r < nr of the 16 at w (a short tile is padded to 16 rows, so
  // reading up to the next multiple of 4 is safe) against T tokens, 4 rows
  // side by side (DecodeRows4), as Q6KRowLanes::RunDecode.
  template <int T>
  static void RunDecode(const uint8_t* w, int64_t wrb, int64_t nb, const uint8_t* act,
                        int64_t arb, int nr, float* y, int64_t ldy) {
    for (int r0 = 0; r0 < nr; r0 += 4) {
      const uint8_t* const r[4] = {w + r0 * wrb, w + (r0 + 1) * wrb, w + (r0 + 2) * wrb,
                                   w + (r0 + 3) * wrb};
      __m128 acc[T];
      DecodeRows4<T>(r, nb / 8, act, arb, acc);
      alignas(16) float out[4];
      for (int t = 0; t < T; ++t) {
        _mm_store_ps(out, acc[t]);
        for (int g = 0; g < 4 && r0 + g < nr; ++g) y[t * ldy + r0 + g] = out[g];
      }
    }
  }

  // T tokens against the 4 rows at r[0..3] (any rows), side by side, lane g
  // of acc[t] row g's result. Per super-block, what the rows share once for
  // all 4 (row g in 128-bit lane g): the heads' 6-bit fields unpacked
  // (Q4KMinsScales), the mins times the token's sub-block sums
  // (Q4KMinSums), d and dmin; per row its quants and scaled sum
  // (Q4KScaledSum, the activations loaded once for the 4 rows); then the 4
  // rows' integer sums S and M added across lanes in one transpose each
  // (LaneSums4, MinLaneSums) and lane g of acc takes row g's float
  // operations, those of the panel's AddSuperBlock: fma(S, d_w d_a), then
  // fnmadd(M, dmin_w d_a), so the bits are the panel's. Each row's stream
  // prefetched ahead (PrefetchStreamAhead; past a row's end the next row's
  // bytes, the ones QuarterRowsDecode's stream takes next). Against each
  // row alone (its heads, sums and float step one row at a time, SideRows
  // with t0 16 super-blocks ahead), on an Intel Xeon (family 6 model 207,
  // AVX-512 VNNI, no AMX), 2 threads, tinyllama all-Q4_K tg128 (file rows,
  // as this CPU's timing picks), 3 rounds alternated: 46.2/47.9/48.2 ->
  // 47.5/48.9/51.0 tok/s with the same prefetch, 48.3/48.9/49.9 with
  // PrefetchStreamAhead's (paired with the read probe 87/87/89% ->
  // 87-89%); 1 thread 15.1 -> 14.9 GB/s (no faster alone: memory-bound
  // there).
  template <int T>
  __attribute__((noinline)) static void DecodeRows4(const uint8_t* const (&r)[4], int64_t nsb,
                                                    const uint8_t* act, int64_t arb,
                                                    __m128 (&acc)[T]) {
    constexpr int G = 4;
    // Words 0-3: the 4 rows' d; 4-7: their dmin (each 128-bit lane opens
    // with d | dmin << 16).
    const __m512i dd_index = _mm512_castsi128_si512(_mm_setr_epi16(0, 8, 16, 24, 1, 9, 17, 25));
    for (int t = 0; t < T; ++t) acc[t] = _mm_setzero_ps();
    for (int64_t b = 0; b < nsb; ++b) {
      const int64_t off = b * kBlockBytes;
      for (int g = 0; g < G; ++g) PrefetchStreamAhead<kBlockBytes>(r[g] + off);
      const auto head = [&](int g) { return _mm_loadu_si128((const __m128i*)(r[g] + off)); };
      __m512i heads = _mm512_castsi128_si512(head(0));
      heads = _mm512_inserti32x4(heads, head(1), 1);
      heads = _mm512_inserti32x4(heads, head(2), 2);
      heads = _mm512_inserti32x4(heads, head(3), 3);
      const __m512i ms = Q4KMinsScales(heads);
      const __m512i mins = Q4KMins(ms);
      const __m256 dd = _mm256_cvtph_ps(
          _mm512_castsi512_si128(_mm512_permutexvar_epi16(dd_index, heads)));
      const __m128 dw = _mm256_castps256_ps128(dd), dmin = _mm256_extractf128_ps(dd, 1);
      const auto image = [&](int t) { return (const ActBlockQ8KImage*)(act + t * arb) + b; };
      __m512i q[T][4];
      for (int t = 0; t < T; ++t) Q4KActivations(*image(t), q[t]);
      __m512i v[T][G];
      for (int g = 0; g < G; ++g) {
        const uint8_t* blk = r[g] + off;
        __m512i u0, u1, u2, u3;
        SplitNibbles(_mm512_loadu_si512((const void*)(blk + kQsOffset)), &u0, &u1);
        SplitNibbles(_mm512_loadu_si512((const void*)(blk + kQsOffset + 64)), &u2, &u3);
        if constexpr (kFifthBits) Q5KFifthBits(((const BlockQ5_K*)blk)->qh, &u0, &u1, &u2, &u3);
        __m512i sc0, sc1;
        Q4KRowScales(ms, g, &sc0, &sc1);
        for (int t = 0; t < T; ++t) v[t][g] = Q4KScaledSum(u0, u1, u2, u3, q[t], sc0, sc1);
      }
      for (int t = 0; t < T; ++t) {
        const __m128 da = _mm_set1_ps(image(t)->d);
        const __m128 s = _mm_cvtepi32_ps(LaneSums4(v[t]));
        const __m128 m = _mm_cvtepi32_ps(MinLaneSums(Q4KMinSums(mins, *image(t))));
        acc[t] = _mm_fmadd_ps(s, _mm_mul_ps(dw, da), acc[t]);
        acc[t] = _mm_fnmadd_ps(m, _mm_mul_ps(dmin, da), acc[t]);
      }
    }
  }

  // The sum of each 128-bit lane's 4 int32, lane g's in element g.
  static inline __m128i MinLaneSums(__m512i m) {
    m = _mm512_add_epi32(m, _mm512_shuffle_epi32(m, _MM_PERM_BADC));
    m = _mm512_add_epi32(m, _mm512_shuffle_epi32(m, _MM_PERM_CDAB));
    return _mm512_castsi512_si128(
        _mm512_permutexvar_epi32(_mm512_castsi128_si512(_mm_setr_epi32(0, 4, 8, 12)), m));
  }

  // QuarterRowsDecode's view of DecodeRows4: row g's results in lane 0 of
  // out[g].
  template <int T, int G>
  static void DecodeRows(const uint8_t* const (&r)[G], int64_t /*wrb*/, int64_t nsb,
                         const uint8_t* act, int64_t arb, __m128 (&out)[G][T]) {
    static_assert(G == 4);
    __m128 acc[T];
    DecodeRows4<T>(r, nsb, act, arb, acc);
    alignas(16) float v[4];
    for (int t = 0; t < T; ++t) {
      _mm_store_ps(v, acc[t]);
      for (int g = 0; g < G; ++g) out[g][t] = _mm_set_ss(v[g]);
    }
  }

  static void Gemm(const uint8_t* w, int64_t wrb, int64_t rows, const uint8_t* act,
                   int64_t arb, int64_t num_tokens, int64_t cols, float* y, int64_t ldy,
                   WorkerScratch* scratch) {
    // Decode: QuarterRowsDecode on DecodeRows (4 long streams) rather than
    // RowLanesGemm's tile after tile, row after row (one stream): AMD EPYC
    // Zen 5, 2 threads, `tern bench kernels --type q4_k,q5_k -p 4 --rows
    // 65536`, 3 runs alternated, Q4_K 33.0-35.2 -> 38.2-40.1 GB/s, Q5_K
    // 33.2-36.1 -> 39.9-41.7 (the 16-row tiles in the same runs, as this
    // CPU's timing picks: 46.0-50.2).
    if (num_tokens < kPanelMinTokens) {
      QuarterRowsDecode<Q45KRowLanes>(w, wrb, rows, act, arb, num_tokens, cols, y, ldy);
      return;
    }
    RowLanesGemm<Q45KRowLanes>(w, wrb, rows, act, arb, num_tokens, cols, y, ldy, scratch);
  }
  static void PackedGemm(const uint8_t* w, int64_t wrb, int64_t rows, const uint8_t* act,
                         int64_t arb, int64_t num_tokens, int64_t cols, float* y, int64_t ldy,
                         WorkerScratch* scratch) {
    GroupedPackedGemm<Q45KRowLanes>(w, wrb, rows, act, arb, num_tokens, cols, y, ldy, scratch);
  }
};

// ---- Q6_K x ActBlockQ8K, 16 weight rows in the lanes --------------------------------

// Per (row, token) and super-block, in super-block order, with the exact
// integer S = sum_j sc_j x sum_i (q_i - 32) a_i over the 16 sub-blocks j of 16
// (|S| <= 2^27; partial sums < 2^29):
//   acc = fma(float(S), d_w x d_a, acc).
// From kPanelMinTokens tokens on (RowLanesGemm), each 16-row tile is unpacked
// once per token chunk into a panel, per super-block 89 registers:
//   64 quant registers: register i, lane l = the 4 unsigned quants (0..63) of
//                       elements 4i .. 4i + 3 of row(l) (sub-block j:
//                       registers 4j .. 4j + 3)
//   16 registers:       sc_j of the 16 rows as int32
//   8 registers:        the int16 pairs (-32 sc_2p, -32 sc_2p+1)
//   1 register:         d_w of the 16 rows as floats
// and tiles of kPanelTokens tokens take per sub-block 4 vpdpbusd against the
// token's quants broadcast 4 at a time, one vpmulld by sc_j and an add, then
// 8 vpdpwssd of the offset pairs against the token's sums16 (the -32), and the
// float operations above. Lanes hold rows in RowLanes's order. Fewer tokens
// (decode) take one row at a time with Q6KKernel512's integer sum (16 blocks'
// prefetch ahead) and add its lanes into S: the same integer, the same float
// operations.
struct Q6KRowLanes {
  static constexpr int64_t kBlockBytes = sizeof(BlockQ6_K);
  static constexpr int kScaleReg = 64, kOffReg = 80, kDReg = 88;
  static constexpr int64_t kSuperBytes = 89 * 64;
  static constexpr int64_t kPanelBlockBytes = kSuperBytes / 8;  // per block of 32
  static constexpr int64_t kPanelMinTokens = 4;
  static constexpr int kPanelTokens = 8;
  static constexpr int kRows = 16;

  using Lanes = RowLanes<DType::kQ4_0>;
  using K45 = Q45KRowLanes<DType::kQ4_K>;  // Load16, DwordBytes

  static void UnpackPanel(const uint8_t* w, int64_t wrb, int64_t nb, uint8_t* panel) {
    const Lanes::Strides strides(wrb);
    const __m512i offsets = _mm512_mullo_epi32(Lanes::LaneRows(), _mm512_set1_epi32((int)wrb));
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i bits45 = _mm512_set1_epi8(0x30);
    for (int64_t b = 0; b < nb / 8; ++b) {
      const uint8_t* p = w + b * kBlockBytes;
      PrefetchNextTile<16, kBlockBytes>(w + 16 * wrb, b);
      uint8_t* out = panel + b * kSuperBytes;
      const auto put = [&](int reg, __m512i v) {
        _mm512_store_si512((void*)(out + 64 * reg), v);
      };
      // Scales: x[i], lane: scales 4i .. 4i + 3 of the row (int8).
      __m512i sx[4];
      K45::Load16(p, 192, strides, sx);
      __m512i sc[16];
      for (int j = 0; j < 16; ++j) {
        sc[j] = _mm512_srai_epi32(_mm512_slli_epi32(sx[j / 4], 24 - 8 * (j % 4)), 24);
        put(kScaleReg + j, sc[j]);
      }
      for (int q = 0; q < 8; ++q) {
        // |sc| <= 128: -32 sc fits int16.
        const __m512i lo = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(sc[2 * q], 5));
        const __m512i hi =
            _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(sc[2 * q + 1], 21));
        put(kOffReg + q, _mm512_mask_blend_epi16(0xAAAAAAAA, lo, hi));
      }
      // d: the high half of the 32 bits at byte 206 (inside the block).
      _mm512_store_ps((float*)(out + 64 * kDReg),
                      _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(
                          _mm512_i32gather_epi32(offsets, p + 206, 1), 16))));
      for (int h = 0; h < 2; ++h) {
        // qh[c'], lane: qh bytes 32h + 16c' + 4i .. of the row; element
        // 128h + 32jj + l has its bits 4-5 at bits 2jj, 2jj + 1 of qh[32h + l].
        __m512i qh[2][4];
        K45::Load16(p, 128 + 32 * h, strides, qh[0]);
        K45::Load16(p, 128 + 32 * h + 16, strides, qh[1]);
        // ql bytes 64h + 16c + 4i + b: low nibble element 128h + 16c + 4i + b,
        // high nibble element 128h + 64 + 16c + 4i + b.
        for (int c = 0; c < 4; ++c) {
          __m512i x[4];
          K45::Load16(p, 64 * h + 16 * c, strides, x);
          for (int i = 0; i < 4; ++i) {
            for (int hi = 0; hi < 2; ++hi) {
              const int jj = 2 * hi + c / 2;  // element 128h + 32jj + l
              const __m512i bits = qh[c % 2][i];
              const __m512i top = jj <= 2 ? _mm512_slli_epi32(bits, 4 - 2 * jj)
                                          : _mm512_srli_epi32(bits, 2 * jj - 4);
              const __m512i low = hi ? _mm512_and_si512(_mm512_srli_epi16(x[i], 4), m4)
                                     : _mm512_and_si512(x[i], m4);
              put(32 * h + 16 * hi + 4 * c + i, _mm512_ternarylogic_epi32(low, top, bits45, 0xF8));
            }
          }
        }
      }
    }
  }

  template <int T>
  __attribute__((always_inline)) static inline void PanelTile(const uint8_t* panel, int64_t nb,
                                                              const uint8_t* act, int64_t arb,
                                                              __m512 (&acc)[T]) {
    for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb / 8; ++b) {
      const uint8_t* pb = panel + b * kSuperBytes;
      const auto reg = [&](int i) { return _mm512_load_si512((const void*)(pb + 64 * i)); };
      const auto block = [&](int t) { return (const ActBlockQ8K*)(act + t * arb) + b; };
      __m512i s[T];
      for (int t = 0; t < T; ++t) s[t] = _mm512_setzero_si512();
#pragma GCC unroll 16
      for (int j = 0; j < 16; ++j) {
        __m512i c[T];
        for (int t = 0; t < T; ++t) c[t] = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int k = 0; k < 4; ++k) {
          const __m512i wq = reg(4 * j + k);
#pragma GCC unroll 16
          for (int t = 0; t < T; ++t) {
            const int8_t* q = block(t)->qs + 16 * j + 4 * k;
            c[t] = _mm512_dpbusd_epi32(c[t], wq, _mm512_set1_epi32((int)LoadU32(q)));
          }
        }
        const __m512i sc = reg(kScaleReg + j);
#pragma GCC unroll 16
        for (int t = 0; t < T; ++t) {
          s[t] = _mm512_add_epi32(s[t], _mm512_mullo_epi32(c[t], sc));
          __asm__("" : "+v"(s[t]));  // as in Q45KRowLanes
        }
      }
#pragma GCC unroll 8
      for (int q = 0; q < 8; ++q) {
        const __m512i off = reg(kOffReg + q);
#pragma GCC unroll 16
        for (int t = 0; t < T; ++t) {
          s[t] = _mm512_dpwssd_epi32(s[t], off,
                                     _mm512_set1_epi32((int)LoadU32(block(t)->sums16 + 2 * q)));
        }
      }
      const __m512 dw = _mm512_load_ps((const float*)(pb + 64 * kDReg));
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) {
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[t]),
                                 _mm512_mul_ps(dw, _mm512_set1_ps(block(t)->d)), acc[t]);
      }
    }
  }

  template <int T>
  static void RunPanel(const uint8_t* panel, int64_t nb, const uint8_t* act, int64_t arb,
                       int nr, float* y, int64_t ldy) {
    __m512 acc[T];
    PanelTile<T>(panel, nb, act, arb, acc);
    Lanes::Store<T>(acc, nr, y, ldy);
  }

  // Rows r < nr of the 16 at w (a short tile is padded to 16 rows, so
  // reading up to the next multiple of 4 is safe) against T tokens, 4 rows
  // side by side (DecodeRows4). RowLanesGemm's few-token path, which Gemm
  // leaves to QuarterRowsDecode.
  template <int T>
  static void RunDecode(const uint8_t* w, int64_t wrb, int64_t nb, const uint8_t* act,
                        int64_t arb, int nr, float* y, int64_t ldy) {
    for (int r0 = 0; r0 < nr; r0 += 4) {
      const uint8_t* const r[4] = {w + r0 * wrb, w + (r0 + 1) * wrb, w + (r0 + 2) * wrb,
                                   w + (r0 + 3) * wrb};
      __m128 acc[T];
      DecodeRows4<T>(r, nb / 8, act, arb, acc);
      alignas(16) float out[4];
      for (int t = 0; t < T; ++t) {
        _mm_store_ps(out, acc[t]);
        for (int g = 0; g < 4 && r0 + g < nr; ++g) y[t * ldy + r0 + g] = out[g];
      }
    }
  }

  // T tokens against the 4 rows at r[0..3] (any rows), side by side: per
  // super-block each row's scaled sum is Q6KKernel512's, the 4 rows' lanes
  // are added in one transpose (LaneSums4), and lane g of acc takes row g's
  // float operations, those of one row alone. Against one row at a time
  // (whose lanes were summed one row at a time, ~8 more instructions a row
  // and super-block), bench kernels q6_k decode on a Zen 5, 2 threads: see
  // docs/kernels.md. Each row's stream prefetched ahead
  // (PrefetchStreamAhead; past a row's end the next row's bytes, the ones
  // QuarterRowsDecode's stream takes next): against the former t0 16
  // super-blocks ahead alone, Intel Xeon (family 6 model 207), 2 threads,
  // tinyllama Q6_K tg128, 2 rounds alternated: 34.0/34.6 -> 35.7/38.1
  // tok/s (paired with the read probe 88/89% -> 95/96%).
  template <int T>
  __attribute__((noinline)) static void DecodeRows4(const uint8_t* const (&r)[4], int64_t nsb,
                                                    const uint8_t* act, int64_t arb,
                                                    __m128 (&acc)[T]) {
    constexpr int G = 4;
    for (int t = 0; t < T; ++t) acc[t] = _mm_setzero_ps();
    for (int64_t b = 0; b < nsb; ++b) {
      __m512i v[T][G];
      uint16_t dh[G];
      for (int g = 0; g < G; ++g) {
        const uint8_t* p = r[g] + b * kBlockBytes;
        PrefetchStreamAhead<kBlockBytes>(p);
        const BlockQ6_K* blk = (const BlockQ6_K*)p;
        __m512i u[4], sc0, sc1, off;
        Q6KKernel512::Quants(blk, u);
        Q6KKernel512::Scales(blk, &sc0, &sc1, &off);
        dh[g] = blk->d;
        for (int t = 0; t < T; ++t) {
          const ActBlockQ8K& a = ((const ActBlockQ8K*)(act + t * arb))[b];
          v[t][g] = Q6KKernel512::ScaledSum(u, sc0, sc1, off, a);
        }
      }
      const __m128 dw = _mm_cvtph_ps(
          _mm_setr_epi16((short)dh[0], (short)dh[1], (short)dh[2], (short)dh[3], 0, 0, 0, 0));
      for (int t = 0; t < T; ++t) {
        const float da = ((const ActBlockQ8K*)(act + t * arb))[b].d;
        acc[t] = _mm_fmadd_ps(_mm_cvtepi32_ps(LaneSums4(v[t])), _mm_mul_ps(dw, _mm_set1_ps(da)),
                              acc[t]);
      }
    }
  }

  // QuarterRowsDecode's view of DecodeRows4: row g's results in lane 0 of
  // out[g]. Against 4 adjacent rows side by side, tile after tile
  // (RunDecode), whose streams restarted every 4 rows: AMD EPYC Zen 5, 2
  // threads, `tern bench kernels --type q6_k -p 4 --rows 65536`, 3 runs
  // alternated, 39.1-41.1 -> 52.5-56.7 GB/s.
  template <int T, int G>
  static void DecodeRows(const uint8_t* const (&r)[G], int64_t /*wrb*/, int64_t nsb,
                         const uint8_t* act, int64_t arb, __m128 (&out)[G][T]) {
    static_assert(G == 4);
    __m128 acc[T];
    DecodeRows4<T>(r, nsb, act, arb, acc);
    alignas(16) float v[4];
    for (int t = 0; t < T; ++t) {
      _mm_store_ps(v, acc[t]);
      for (int g = 0; g < G; ++g) out[g][t] = _mm_set_ss(v[g]);
    }
  }

  static void Gemm(const uint8_t* w, int64_t wrb, int64_t rows, const uint8_t* act,
                   int64_t arb, int64_t num_tokens, int64_t cols, float* y, int64_t ldy,
                   WorkerScratch* scratch) {
    if (num_tokens < kPanelMinTokens) {
      QuarterRowsDecode<Q6KRowLanes>(w, wrb, rows, act, arb, num_tokens, cols, y, ldy);
      return;
    }
    RowLanesGemm<Q6KRowLanes>(w, wrb, rows, act, arb, num_tokens, cols, y, ldy, scratch);
  }
};
#endif  // TERN_AVX512_VNNI

// ---- activation quantization (bit-identical to the reference) -----------------------

inline float MaxAbs8(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

// Quantizes 32 floats with inverse scale id into out[32]; returns sum of q.
inline int Quantize32(const float* x, __m256 id, int8_t* out) {
  const __m256i lo = _mm256_set1_epi32(-127), hi = _mm256_set1_epi32(127);
  __m256i q[4];
  for (int i = 0; i < 4; ++i) {
    const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + 8 * i), id);
    const __m256 rv = _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    q[i] = _mm256_min_epi32(_mm256_max_epi32(_mm256_cvtps_epi32(rv), lo), hi);
  }
  const __m256i s = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
  const __m256i p01 = _mm256_packs_epi32(q[0], q[1]);
  const __m256i p23 = _mm256_packs_epi32(q[2], q[3]);
  __m256i p = _mm256_packs_epi16(p01, p23);
  p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256((__m256i*)out, p);
  __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
  s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
  s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
  return _mm_cvtsi128_si32(s4);
}

inline float BlockMaxAbs(const float* x, int n) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 m = _mm256_setzero_ps();
  for (int i = 0; i < n; i += 8) m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + i)));
  return MaxAbs8(m);
}

// One block of 32 to int8 at d = max |x| / 127 (*d); returns the sum of qs.
inline int QuantizeBlock32(const float* xb, int8_t* qs, float* d) {
  *d = BlockMaxAbs(xb, 32) / 127.0f;
  const float id = *d != 0.0f ? 1.0f / *d : 0.0f;
  return Quantize32(xb, _mm256_set1_ps(id), qs);
}

void Avx2QuantizeQ8(const float* x, int64_t n, ActBlockQ8* out) {
  for (int64_t b = 0; b < n / 32; ++b) {
    const int sum = QuantizeBlock32(x + b * 32, out[b].qs, &out[b].d);
    out[b].s = out[b].d * (float)sum;
  }
}

// Block b of x quantized like Avx2QuantizeQ8 (qs, d; returns sum of qs), or
// all zero when b >= nb (the missing partner of a short last group).
inline int QuantizeBlockOrZero(const float* x, int64_t b, int64_t nb, int8_t* qs, float* d) {
  std::memset(qs, 0, 32);
  *d = 0.0f;
  if (b >= nb) return 0;
  return QuantizeBlock32(x + b * 32, qs, d);
}

// ActBlockQ8Pair: 2 blocks per pair.
void QuantizeNibblePairs(const float* x, int64_t n, ActBlockQ8Pair* out) {
  const int64_t nb = n / 32;
  for (int64_t g = 0; g < (nb + 1) / 2; ++g) {
    ActBlockQ8Pair& o = out[g];
    for (int h = 0; h < 2; ++h) {
      alignas(32) int8_t qs[32];
      float d;
      const int sum = QuantizeBlockOrZero(x, 2 * g + h, nb, qs, &d);
      const float s = d * (float)sum * 0.25f;
      for (int i = 0; i < 4; ++i) {
        o.d[4 * h + i] = d;
        o.s[4 * h + i] = s;
      }
      std::memcpy(o.lo + 16 * h, qs, 16);
      std::memcpy(o.hi + 16 * h, qs + 16, 16);
    }
    for (int j = 0; j < 16; ++j) {
      o.c[j] = (int16_t)(8 * (o.lo[2 * j] + o.lo[2 * j + 1] + o.hi[2 * j] + o.hi[2 * j + 1]));
    }
  }
}

void Avx2QuantizeQ8Pair(const float* x, int64_t n, ActBlockQ8Pair* out) {
  QuantizeNibblePairs(x, n, out);
}

#ifdef TERN_AVX512_VNNI
// The activation image of a Q4_1 weight row (ActImageQ4_1).
template <class Chunk, int kBlockBytes>
void QuantizeImage(const float* x, int64_t n, Chunk* out) {
  constexpr bool kNibbles = requires(Chunk ch) { ch.hi; };
  constexpr bool kMins = requires(Chunk ch) { ch.s; };
  constexpr int kQuantBytes = kNibbles ? 16 : 32;
  const int64_t nb = n / 32;
  const int64_t chunks = (nb * kBlockBytes + 63) / 64;
  std::memset((void*)out, 0, chunks * sizeof(Chunk));
  // Copies `len` bytes to image positions [pos, pos + len) of one array of
  // the chunks (lo or hi), splitting where a block straddles two chunks.
  const auto place = [out](int64_t pos, const int8_t* src, int len, bool hi) {
    while (len > 0) {
      Chunk& ch = out[pos / 64];
      const int i = (int)(pos % 64);
      const int m = std::min(len, 64 - i);
      int8_t* dst = ch.lo;
      if constexpr (kNibbles) dst = hi ? ch.hi : ch.lo;
      std::memcpy(dst + i, src, m);
      pos += m, src += m, len -= m;
    }
  };
  for (int64_t b = 0; b < nb; ++b) {
    alignas(32) int8_t qs[32];
    float d;
    const int sum = QuantizeBlockOrZero(x, b, nb, qs, &d);
    const int64_t first = (b + 1) * kBlockBytes - kQuantBytes;  // first quant byte
    place(first, qs, kQuantBytes, false);
    if constexpr (kNibbles) place(first, qs + 16, 16, true);
    for (int64_t lane = first / 4; lane <= (first + kQuantBytes - 1) / 4; ++lane) {
      out[lane / 16].d[lane % 16] = d;
      if constexpr (kMins) out[lane / 16].s[lane % 16] = d * (float)sum * 0.25f;
    }
  }
}

void QuantizeImageQ4_1(const float* x, int64_t n, ActImageQ4_1* out) {
  QuantizeImage<ActImageQ4_1, 20>(x, n, out);
}
#endif

// ActBlockQ8C: ActBlockQ8's d and qs, and the weights' offset's share of
// the sum (kOffset: 8 for Q4_0, 128 for Q8_0).
template <int kOffset>
void QuantizeQ8C(const float* x, int64_t n, ActBlockQ8C* out) {
  for (int64_t b = 0; b < n / 32; ++b) {
    out[b].c = -kOffset * QuantizeBlock32(x + b * 32, out[b].qs, &out[b].d);
  }
}

void Avx2QuantizeQ8K(const float* x, int64_t n, ActBlockQ8K* out) {
  for (int64_t b = 0; b < n / 256; ++b) {
    const float* xb = x + b * 256;
    const float d = BlockMaxAbs(xb, 256) / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const __m256 idv = _mm256_set1_ps(id);
    for (int i = 0; i < 8; ++i) {
      out[b].sums32[i] = (int16_t)Quantize32(xb + 32 * i, idv, out[b].qs + 32 * i);
    }
    for (int i = 0; i < 16; ++i) {
      int s = 0;
      for (int j = 0; j < 16; ++j) s += out[b].qs[16 * i + j];
      out[b].sums16[i] = (int16_t)s;
    }
    out[b].d = d;
  }
}

#ifdef TERN_AVX512_VNNI
// ActBlockQ8K's d and quants with the quants in the register order of the Q4_K kernels above.
void QuantizeQ8KImage(const float* x, int64_t n, ActBlockQ8KImage* out) {
  for (int64_t b = 0; b < n / 256; ++b) {
    ActBlockQ8K k;
    Avx2QuantizeQ8K(x + b * 256, 256, &k);
    Q8KToImage(k, out + b);
  }
}
#endif

// ---- this ISA's activation formats (act_format.h) ------------------------------------

int64_t Q8PairRowBytes(int64_t cols) {
  return (cols / 32 + 1) / 2 * (int64_t)sizeof(ActBlockQ8Pair);
}
void Q8PairRow(const KernelTable&, const float* x, int64_t cols, uint8_t* out) {
  Avx2QuantizeQ8Pair(x, cols, (ActBlockQ8Pair*)out);
}
constexpr ActFormat kQ8PairFormat{
    .name = "q8pair", .row_bytes = Q8PairRowBytes, .quantize_row = Q8PairRow};

#ifdef TERN_AVX512_VNNI
// One chunk per 64 bytes of the weight row (blocks of kBlockBytes).
template <class Chunk, int kBlockBytes>
int64_t ImageRowBytes(int64_t cols) {
  return (cols / 32 * kBlockBytes + 63) / 64 * (int64_t)sizeof(Chunk);
}
template <class Chunk, void (*kQuantize)(const float*, int64_t, Chunk*)>
void ImageRow(const KernelTable&, const float* x, int64_t cols, uint8_t* out) {
  kQuantize(x, cols, (Chunk*)out);
}
constexpr ActFormat kImageQ4_1Format{.name = "image_q4_1",
                                     .row_bytes = ImageRowBytes<ActImageQ4_1, 20>,
                                     .quantize_row = ImageRow<ActImageQ4_1, QuantizeImageQ4_1>};
#endif

int64_t Q8CRowBytes(int64_t cols) { return cols / 32 * (int64_t)sizeof(ActBlockQ8C); }
template <int kOffset>
void Q8CRow(const KernelTable&, const float* x, int64_t cols, uint8_t* out) {
  QuantizeQ8C<kOffset>(x, cols, (ActBlockQ8C*)out);
}
// RowLanes unpacks its 16 rows once per chunk: longer chunks spread that
// over more tokens and read the weights from memory fewer times (a tile
// reads each token's 40 bytes per block from L2 or L3; Q4_0 2048 x 5632 x
// 512 tokens, 2 threads: 410-416 GFLOP/s with chunks of 192 KiB of
// activations, 450-500 with 384 KiB, 480-520 with 768 KiB, no clear gain
// beyond).
int64_t Q8CChunkTokens(int64_t row_bytes) {
  return std::max<int64_t>(16, 4 * kActChunkBytes / row_bytes);
}
constexpr ActFormat kQ8CQ4_0Format{.name = "q8c_q4_0",
                                   .row_bytes = Q8CRowBytes,
                                   .quantize_row = Q8CRow<8>,
                                   .chunk_tokens = Q8CChunkTokens};
constexpr ActFormat kQ8CQ8_0Format{.name = "q8c_q8_0",
                                   .row_bytes = Q8CRowBytes,
                                   .quantize_row = Q8CRow<128>,
                                   .chunk_tokens = Q8CChunkTokens};

#ifdef TERN_AVX512_VNNI
int64_t Q8KImageRowBytes(int64_t cols) {
  return cols / 256 * (int64_t)sizeof(ActBlockQ8KImage);
}
void Q8KImageRow(const KernelTable&, const float* x, int64_t cols, uint8_t* out) {
  QuantizeQ8KImage(x, cols, (ActBlockQ8KImage*)out);
}
int64_t Q8KImageChunkTokens(int64_t row_bytes) {
  return std::max<int64_t>(16, 4 * kActChunkBytes / row_bytes);
}
// ActBlockQ8K rows (kQ8KFormat's layout and quantizer) in the chunks of
// kQ8KImageFormat, for Q6KRowLanes's panel.
void Q8KPanelRow(const KernelTable& table, const float* x, int64_t cols, uint8_t* out) {
  table.quantize_q8k(x, cols, (ActBlockQ8K*)out);
}
int64_t Q8KPanelRowBytes(int64_t cols) { return cols / 256 * (int64_t)sizeof(ActBlockQ8K); }
constexpr ActFormat kQ8KPanelFormat{.name = "q8k_panel",
                                    .row_bytes = Q8KPanelRowBytes,
                                    .quantize_row = Q8KPanelRow,
                                    .chunk_tokens = Q8KImageChunkTokens};
constexpr ActFormat kQ8KImageFormat{.name = "q8k_image",
                                    .row_bytes = Q8KImageRowBytes,
                                    .quantize_row = Q8KImageRow,
                                    .chunk_tokens = Q8KImageChunkTokens};
#endif

// ---- element-wise ------------------------------------------------------------------

// exp(x) for x in [-87, 88]; relative error ~2e-7. The same operations per
// lane on either width (Exp8, Exp16), so the AVX2 and AVX-512 tables agree
// bitwise.
template <class V>
inline typename V::Reg ExpV(typename V::Reg x) {
  using R = typename V::Reg;
  x = V::Min(V::Max(x, V::Set1(-87.0f)), V::Set1(88.0f));
  const R n = V::RoundNearest(V::Mul(x, V::Set1(1.44269504088896341f)));
  R r = V::Fnma(n, V::Set1(0.693359375f), x);
  r = V::Fnma(n, V::Set1(-2.12194440e-4f), r);
  R p = V::Set1(1.0f / 5040);
  for (float c : {1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f}) {
    p = V::Fma(p, r, V::Set1(c));
  }
  return V::TimesPow2(p, n);
}
inline __m256 Exp8(__m256 x) { return ExpV<Vec256>(x); }
#ifdef TERN_AVX512_VNNI
inline __m512 Exp16(__m512 x) { return ExpV<Vec512>(x); }
#endif

void Avx2RmsNorm(const float* x, const float* weight, int64_t n, float eps, float* out) {
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
    s0 = _mm256_fmadd_ps(a, a, s0);
    s1 = _mm256_fmadd_ps(b, b, s1);
  }
  double ss = Hsum(_mm256_add_ps(s0, s1));
  for (; i < n; ++i) ss += (double)x[i] * x[i];
  const float scale = (float)(1.0 / std::sqrt(ss / (double)n + (double)eps));
  const __m256 sv = _mm256_set1_ps(scale);
  i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), sv);
    if (weight) v = _mm256_mul_ps(v, _mm256_loadu_ps(weight + i));
    _mm256_storeu_ps(out + i, v);
  }
  for (; i < n; ++i) out[i] = x[i] * scale * (weight ? weight[i] : 1.0f);
}

void Avx2SiluMul(const float* gate, const float* up, int64_t n, float* out) {
  int64_t i = 0;
  const __m256 one = _mm256_set1_ps(1.0f);
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m256 e = Exp8(_mm256_sub_ps(_mm256_setzero_ps(), g));
    const __m256 s = _mm256_div_ps(g, _mm256_add_ps(one, e));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(s, _mm256_loadu_ps(up + i)));
  }
  for (; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void Avx2Softmax(float* x, int64_t n) {
  if (n <= 0) return;
  float mx = x[0];
  int64_t i = 0;
  __m256 mv = _mm256_set1_ps(x[0]);
  for (; i + 8 <= n; i += 8) mv = _mm256_max_ps(mv, _mm256_loadu_ps(x + i));
  {
    alignas(32) float tmp[8];
    _mm256_store_ps(tmp, mv);
    for (float v : tmp) mx = std::max(mx, v);
  }
  for (; i < n; ++i) mx = std::max(mx, x[i]);
  const __m256 mxv = _mm256_set1_ps(mx);
  __m256 sv = _mm256_setzero_ps();
  i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 e = Exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), mxv));
    _mm256_storeu_ps(x + i, e);
    sv = _mm256_add_ps(sv, e);
  }
  double sum = Hsum(sv);
  for (; i < n; ++i) {
    x[i] = std::exp(x[i] - mx);
    sum += x[i];
  }
  const float inv = (float)(1.0 / sum);
  const __m256 iv = _mm256_set1_ps(inv);
  i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), iv));
  for (; i < n; ++i) x[i] *= inv;
}

void Avx2Rope(float* x, int64_t num_heads, int64_t head_dim, int64_t rope_dim,
              const float* cos_sin, bool neox) {
  const int64_t half = rope_dim / 2;
  const __m256 sign_even = _mm256_setr_ps(-0.0f, 0.0f, -0.0f, 0.0f, -0.0f, 0.0f, -0.0f, 0.0f);
  for (int64_t h = 0; h < num_heads; ++h) {
    float* v = x + h * head_dim;
    int64_t i = 0;
    if (!neox) {
      // 4 pairs per vector: out = x * [c c] + swap(x) * [-s s].
      for (; 2 * i + 8 <= rope_dim; i += 4) {
        const __m256 cs = _mm256_loadu_ps(cos_sin + 2 * i);
        const __m256 c = _mm256_moveldup_ps(cs);
        const __m256 s = _mm256_xor_ps(_mm256_movehdup_ps(cs), sign_even);
        const __m256 xv = _mm256_loadu_ps(v + 2 * i);
        const __m256 sw = _mm256_permute_ps(xv, 0xB1);
        _mm256_storeu_ps(v + 2 * i, _mm256_fmadd_ps(sw, s, _mm256_mul_ps(xv, c)));
      }
      for (; i < half; ++i) {
        const float c = cos_sin[2 * i], s = cos_sin[2 * i + 1];
        const float x0 = v[2 * i], x1 = v[2 * i + 1];
        v[2 * i] = x0 * c - x1 * s;
        v[2 * i + 1] = x0 * s + x1 * c;
      }
    } else {
      for (; i + 8 <= half; i += 8) {
        const __m256 cs0 = _mm256_loadu_ps(cos_sin + 2 * i);
        const __m256 cs1 = _mm256_loadu_ps(cos_sin + 2 * i + 8);
        const __m256 c = _mm256_castpd_ps(_mm256_permute4x64_pd(
            _mm256_castps_pd(_mm256_shuffle_ps(cs0, cs1, 0x88)), 0xD8));
        const __m256 s = _mm256_castpd_ps(_mm256_permute4x64_pd(
            _mm256_castps_pd(_mm256_shuffle_ps(cs0, cs1, 0xDD)), 0xD8));
        const __m256 a = _mm256_loadu_ps(v + i), b = _mm256_loadu_ps(v + i + half);
        _mm256_storeu_ps(v + i, _mm256_fnmadd_ps(b, s, _mm256_mul_ps(a, c)));
        _mm256_storeu_ps(v + i + half, _mm256_fmadd_ps(a, s, _mm256_mul_ps(b, c)));
      }
      for (; i < half; ++i) {
        const float c = cos_sin[2 * i], s = cos_sin[2 * i + 1];
        const float x0 = v[i], x1 = v[i + half];
        v[i] = x0 * c - x1 * s;
        v[i + half] = x0 * s + x1 * c;
      }
    }
  }
}

float Avx2DotF32(const float* a, const float* b, int64_t n) {
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
  }
  for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
  float s = Hsum(_mm256_add_ps(s0, s1));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

float Avx2DotF16(const float* a, const uint16_t* b, int64_t n) {
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i),
                         _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(b + i))), s0);
    s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8),
                         _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(b + i + 8))), s1);
  }
  for (; i + 8 <= n; i += 8) {
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i),
                         _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(b + i))), s0);
  }
  float s = Hsum(_mm256_add_ps(s0, s1));
  for (; i < n; ++i) s += a[i] * Fp16ToFp32(b[i]);
  return s;
}

void Avx2AxpyF32(float alpha, const float* x, int64_t n, float* y) {
  const __m256 av = _mm256_set1_ps(alpha);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(av, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  }
  for (; i < n; ++i) y[i] += alpha * x[i];
}

void Avx2AxpyF16(float alpha, const uint16_t* x, int64_t n, float* y) {
  const __m256 av = _mm256_set1_ps(alpha);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 xv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(x + i)));
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(av, xv, _mm256_loadu_ps(y + i)));
  }
  for (; i < n; ++i) y[i] += alpha * Fp16ToFp32(x[i]);
}

void Avx2ScaleF32(float alpha, int64_t n, float* y) {
  const __m256 av = _mm256_set1_ps(alpha);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(av, _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] *= alpha;
}

void Avx2F32ToF16(const float* x, int64_t n, uint16_t* out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128((__m128i*)(out + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) out[i] = Fp32ToFp16(x[i]);
}

// ---- attention ---------------------------------------------------------------------

// Positions per chunk: scores of a chunk for the whole group, one online
// softmax rescale per chunk.
constexpr int kSimdAttnChunk = 64;

// The 8 horizontal sums of a[0..8) as one vector.
inline __m256 Reduce8(const __m256 (&a)[8]) {
  const __m256 t0 = _mm256_hadd_ps(a[0], a[1]);
  const __m256 t1 = _mm256_hadd_ps(a[2], a[3]);
  const __m256 t2 = _mm256_hadd_ps(a[4], a[5]);
  const __m256 t3 = _mm256_hadd_ps(a[6], a[7]);
  const __m256 u0 = _mm256_hadd_ps(t0, t1);
  const __m256 u1 = _mm256_hadd_ps(t2, t3);
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20),
                       _mm256_permute2f128_ps(u0, u1, 0x31));
}

// scores[i] = scale * q . K[i] for 8 positions (f32 rows k[0..8) + off;
// F16 K rows are converted first, once for all the rows of their KV head).
inline __m256 Scores8(const float* q, const uint8_t* const* k, int64_t off, int64_t hd,
                      __m256 scale) {
  __m256 acc[8];
  for (int j = 0; j < 8; ++j) acc[j] = _mm256_setzero_ps();
  for (int64_t d = 0; d < hd; d += 8) {
    const __m256 qv = _mm256_loadu_ps(q + d);
    for (int j = 0; j < 8; ++j) {
      acc[j] = _mm256_fmadd_ps(qv, Vec256::LoadW<DType::kF32>(k[j] + off, d), acc[j]);
    }
  }
  return _mm256_mul_ps(Reduce8(acc), scale);
}

#ifdef TERN_AVX512_VNNI
// Reduce8 of two rows at once: row A's 8 accumulators in the low 256 bits
// of a[0..8), row B's in the high ones; the same additions in the same
// tree (vhaddps has no 512-bit form: two vshufps and an add per step).
inline __m512 Reduce8x2(const __m512 (&a)[8]) {
  const auto hadd = [](__m512 x, __m512 y) {
    return _mm512_add_ps(_mm512_shuffle_ps(x, y, _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_ps(x, y, _MM_SHUFFLE(3, 1, 3, 1)));
  };
  const __m512 u0 = hadd(hadd(a[0], a[1]), hadd(a[2], a[3]));
  const __m512 u1 = hadd(hadd(a[4], a[5]), hadd(a[6], a[7]));
  const __m512i lo = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
  const __m512i hi = _mm512_add_epi32(lo, _mm512_set1_epi32(4));
  return _mm512_add_ps(_mm512_permutex2var_ps(u0, lo, u1), _mm512_permutex2var_ps(u0, hi, u1));
}

// Scores8 of two rows at once, row A in the low 256 bits and row B
// in the high ones: qpair holds their queries 8 elements at a time
// ([d / 8][A's 8 | B's 8]), each lane sees the same FMAs as in Scores8, so
// the results are bitwise Scores8's, at half the FMAs and reductions.
inline __m512 Scores8x2(const float* qpair, const uint8_t* const* k, int64_t off, int64_t hd,
                        __m512 scale) {
  __m512 acc[8];
  for (int j = 0; j < 8; ++j) acc[j] = _mm512_setzero_ps();
  for (int64_t d = 0; d < hd; d += 8) {
    const __m512 qv = _mm512_load_ps(qpair + 2 * d);
    for (int j = 0; j < 8; ++j) {
      // (vbroadcastf64x4: AVX-512 F, where the f32x8 form needs DQ)
      const __m512 kv = _mm512_castpd_ps(
          _mm512_broadcast_f64x4(_mm256_loadu_pd((const double*)((const float*)(k[j] + off) + d))));
      acc[j] = _mm512_fmadd_ps(qv, kv, acc[j]);
    }
  }
  return _mm512_mul_ps(Reduce8x2(acc), scale);
}
#endif

// out[g][d0 .. d0 + L * DC) += sum_i p[g][i] * V[i][...] for G heads (V[i]
// at v[i] + voff), on registers of L = Vec::kLanes lanes. Each output
// element sees the same FMAs in the same order whatever L, so the 16-lane
// result is bitwise the 8-lane one.
template <class Vec, bool kF16, int G, int DC>
inline void AccumulateV(const uint8_t* const* v, int64_t voff, int n, const float* p,
                        int64_t p_stride, float* out, int64_t hd, int64_t d0) {
  using Reg = typename Vec::Reg;
  constexpr int64_t L = Vec::kLanes;
  constexpr DType kType = kF16 ? DType::kF16 : DType::kF32;
  Reg acc[G][DC];
  for (int g = 0; g < G; ++g)
    for (int c = 0; c < DC; ++c) acc[g][c] = Vec::LoadX(out + g * hd + d0 + L * c);
  for (int i = 0; i < n; ++i) {
    Reg vv[DC];
    for (int c = 0; c < DC; ++c) vv[c] = Vec::template LoadW<kType>(v[i] + voff, d0 + L * c);
    for (int g = 0; g < G; ++g) {
      const Reg w = Vec::Set1(p[g * p_stride + i]);
      for (int c = 0; c < DC; ++c) acc[g][c] = Vec::Fma(w, vv[c], acc[g][c]);
    }
  }
  for (int g = 0; g < G; ++g)
    for (int c = 0; c < DC; ++c) Vec::Store(out + g * hd + d0 + L * c, acc[g][c]);
}

// (AccumulateVHeads and AccumulateVGroup, below AccumulateVBlocks, run it
// over all head_dim columns and up to 8 heads at a time.)

// Elements [e0, e0 + n) of a KV row of dtype t (kernels.h IsKvDtype) as
// f32, e0 and n multiples of 8: bitwise LoadKvElems (every format decodes
// exactly: q x d of an 8-bit q and an f16 d is a float without rounding).
// 8 elements never cross a block of 32.
inline void DecodeKvRow(DType t, const uint8_t* row, int64_t e0, int64_t n, float* out) {
  switch (t) {
    case DType::kF32:
      std::memcpy(out, row + 4 * e0, n * sizeof(float));
      return;
    case DType::kF16:
      for (int64_t i = 0; i < n; i += 8) {
        _mm256_storeu_ps(out + i, Vec256::LoadW<DType::kF16>(row, e0 + i));
      }
      return;
    case DType::kBF16:
      for (int64_t i = 0; i < n; i += 8) {
        _mm256_storeu_ps(out + i, Vec256::LoadW<DType::kBF16>(row, e0 + i));
      }
      return;
    case DType::kQ8_0:
      if (e0 % 32 == 0 && n % 32 == 0) {  // whole blocks (head_dim a multiple of 32)
        const uint8_t* b = row + e0 / 32 * 34;
        for (int64_t i = 0; i < n; i += 32, b += 34) {
          const __m256 d = _mm256_set1_ps(_cvtsh_ss(LoadU16(b)));
          for (int j = 0; j < 32; j += 8) {
            const __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i*)(b + 2 + j)));
            _mm256_storeu_ps(out + i + j, _mm256_mul_ps(_mm256_cvtepi32_ps(q), d));
          }
        }
        return;
      }
      // Block by block: one scale conversion per block, 8 quants at a time.
      for (int64_t i = 0; i < n;) {
        const int64_t e = e0 + i, in = e % 32;
        const uint8_t* b = row + e / 32 * 34;
        uint16_t dh;
        std::memcpy(&dh, b, 2);
        const __m256 d = _mm256_set1_ps(_cvtsh_ss(dh));
        const int64_t m = std::min<int64_t>(32 - in, n - i);
        int64_t j = 0;
#ifdef TERN_AVX512_VNNI
        for (; j + 16 <= m; j += 16) {
          const __m512i q =
              _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i*)(b + 2 + in + j)));
          _mm512_storeu_ps(out + i + j,
                           _mm512_mul_ps(_mm512_cvtepi32_ps(q), _mm512_set1_ps(_cvtsh_ss(dh))));
        }
#endif
        for (; j < m; j += 8) {
          const __m256i q =
              _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i*)(b + 2 + in + j)));
          _mm256_storeu_ps(out + i + j, _mm256_mul_ps(_mm256_cvtepi32_ps(q), d));
        }
        i += m;
      }
      return;
    case DType::kQ4_0:
      if (e0 % 32 == 0 && n % 32 == 0) {  // whole blocks
        const uint8_t* b = row + e0 / 32 * 18;
        const __m128i mask = _mm_set1_epi8(0x0F);
        const __m256i eight = _mm256_set1_epi32(8);
        for (int64_t i = 0; i < n; i += 32, b += 18) {
          const __m256 d = _mm256_set1_ps(_cvtsh_ss(LoadU16(b)));
          const __m128i bytes = _mm_loadu_si128((const __m128i*)(b + 2));
          const __m128i lo = _mm_and_si128(bytes, mask);  // elements 0..15
          const __m128i hi = _mm_and_si128(_mm_srli_epi16(bytes, 4), mask);  // 16..31
          const __m128i parts[4] = {lo, _mm_unpackhi_epi64(lo, lo), hi, _mm_unpackhi_epi64(hi, hi)};
          for (int j = 0; j < 4; ++j) {
            const __m256i q = _mm256_sub_epi32(_mm256_cvtepu8_epi32(parts[j]), eight);
            _mm256_storeu_ps(out + i + 8 * j, _mm256_mul_ps(_mm256_cvtepi32_ps(q), d));
          }
        }
        return;
      }
      for (int64_t i = 0; i < n;) {
        const int64_t e = e0 + i, in = e % 32;
        const uint8_t* b = row + e / 32 * 18;
        uint16_t dh;
        std::memcpy(&dh, b, 2);
        const __m256 d = _mm256_set1_ps(_cvtsh_ss(dh));
        const int64_t m = std::min<int64_t>(32 - in, n - i);
        int64_t j = 0;
#ifdef TERN_AVX512_VNNI
        for (; j + 16 <= m && (in + j) % 16 == 0; j += 16) {
          const int64_t k = in + j;  // 0: the low nibbles, 16: the high ones
          __m128i bytes = _mm_loadu_si128((const __m128i*)(b + 2));
          if (k >= 16) bytes = _mm_srli_epi16(bytes, 4);
          bytes = _mm_and_si128(bytes, _mm_set1_epi8(0x0F));
          const __m512i q =
              _mm512_sub_epi32(_mm512_cvtepu8_epi32(bytes), _mm512_set1_epi32(8));
          _mm512_storeu_ps(out + i + j,
                           _mm512_mul_ps(_mm512_cvtepi32_ps(q), _mm512_set1_ps(_cvtsh_ss(dh))));
        }
#endif
        for (; j < m; j += 8) {
          const int64_t k = in + j;  // element of the block: low nibbles 0..15, high 16..31
          __m128i bytes = _mm_loadl_epi64((const __m128i*)(b + 2 + (k & 15)));
          if (k >= 16) bytes = _mm_srli_epi16(bytes, 4);
          bytes = _mm_and_si128(bytes, _mm_set1_epi8(0x0F));
          const __m256i q =
              _mm256_sub_epi32(_mm256_cvtepu8_epi32(bytes), _mm256_set1_epi32(8));
          _mm256_storeu_ps(out + i + j, _mm256_mul_ps(_mm256_cvtepi32_ps(q), d));
        }
        i += m;
      }
      return;
    default:
      std::abort();
  }
}

// Elements [e, e + 8) of a Q8_0 / Q4_0 KV row, decoded (e % 8 == 0):
// bitwise DecodeKvRow's.
template <DType kT>
inline __m256 LoadKvBlock8(const uint8_t* row, int64_t e) {
  const int64_t in = e % 32;
  if constexpr (kT == DType::kQ8_0) {
    const uint8_t* b = row + e / 32 * 34;
    const __m256 d = _mm256_set1_ps(_cvtsh_ss(LoadU16(b)));
    const __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i*)(b + 2 + in)));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(q), d);
  } else {
    static_assert(kT == DType::kQ4_0);
    const uint8_t* b = row + e / 32 * 18;
    const __m256 d = _mm256_set1_ps(_cvtsh_ss(LoadU16(b)));
    __m128i bytes = _mm_loadl_epi64((const __m128i*)(b + 2 + (in & 15)));
    if (in >= 16) bytes = _mm_srli_epi16(bytes, 4);
    bytes = _mm_and_si128(bytes, _mm_set1_epi8(0x0F));
    const __m256i q = _mm256_sub_epi32(_mm256_cvtepu8_epi32(bytes), _mm256_set1_epi32(8));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(q), d);
  }
}

#ifdef TERN_AVX512_VNNI
// The same for [e, e + 16), e % 16 == 0.
template <DType kT>
inline __m512 LoadKvBlock16(const uint8_t* row, int64_t e) {
  const int64_t in = e % 32;
  if constexpr (kT == DType::kQ8_0) {
    const uint8_t* b = row + e / 32 * 34;
    const __m512 d = _mm512_set1_ps(_cvtsh_ss(LoadU16(b)));
    const __m512i q = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i*)(b + 2 + in)));
    return _mm512_mul_ps(_mm512_cvtepi32_ps(q), d);
  } else {
    static_assert(kT == DType::kQ4_0);
    const uint8_t* b = row + e / 32 * 18;
    const __m512 d = _mm512_set1_ps(_cvtsh_ss(LoadU16(b)));
    __m128i bytes = _mm_loadu_si128((const __m128i*)(b + 2));
    if (in >= 16) bytes = _mm_srli_epi16(bytes, 4);
    bytes = _mm_and_si128(bytes, _mm_set1_epi8(0x0F));
    const __m512i q = _mm512_sub_epi32(_mm512_cvtepu8_epi32(bytes), _mm512_set1_epi32(8));
    return _mm512_mul_ps(_mm512_cvtepi32_ps(q), d);
  }
}
#endif

// The 32 values of a Q8_0 / Q4_0 block b, decoded (bitwise DecodeKvRow's)
// into 4 x 8 or 2 x 16 lanes.
template <DType kT>
inline void DecodeKvBlock32(const uint8_t* b, __m256* out) {
  const __m256 d = _mm256_set1_ps(_cvtsh_ss(LoadU16(b)));
  if constexpr (kT == DType::kQ8_0) {
    for (int j = 0; j < 4; ++j) {
      const __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i*)(b + 2 + 8 * j)));
      out[j] = _mm256_mul_ps(_mm256_cvtepi32_ps(q), d);
    }
  } else {
    const __m128i mask = _mm_set1_epi8(0x0F);
    const __m128i bytes = _mm_loadu_si128((const __m128i*)(b + 2));
    const __m128i lo = _mm_and_si128(bytes, mask);
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(bytes, 4), mask);
    const __m128i parts[4] = {lo, _mm_unpackhi_epi64(lo, lo), hi, _mm_unpackhi_epi64(hi, hi)};
    for (int j = 0; j < 4; ++j) {
      const __m256i q = _mm256_sub_epi32(_mm256_cvtepu8_epi32(parts[j]), _mm256_set1_epi32(8));
      out[j] = _mm256_mul_ps(_mm256_cvtepi32_ps(q), d);
    }
  }
}

#ifdef TERN_AVX512_VNNI
template <DType kT>
inline void DecodeKvBlock32(const uint8_t* b, __m512* out) {
  const __m512 d = _mm512_set1_ps(_cvtsh_ss(LoadU16(b)));
  if constexpr (kT == DType::kQ8_0) {
    for (int j = 0; j < 2; ++j) {
      const __m512i q = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i*)(b + 2 + 16 * j)));
      out[j] = _mm512_mul_ps(_mm512_cvtepi32_ps(q), d);
    }
  } else {
    const __m128i mask = _mm_set1_epi8(0x0F);
    const __m128i bytes = _mm_loadu_si128((const __m128i*)(b + 2));
    const __m128i parts[2] = {_mm_and_si128(bytes, mask),
                              _mm_and_si128(_mm_srli_epi16(bytes, 4), mask)};
    for (int j = 0; j < 2; ++j) {
      const __m512i q = _mm512_sub_epi32(_mm512_cvtepu8_epi32(parts[j]), _mm512_set1_epi32(8));
      out[j] = _mm512_mul_ps(_mm512_cvtepi32_ps(q), d);
    }
  }
}
#endif

// AccumulateV of Q8_0 / Q4_0 V rows read in place: out[g][d0 .. d0 + L *
// DC) += sum_i p[g][i] * V[i][e0 + ...], each V vector decoded in registers
// (exact), so every output element sees AccumulateV's FMAs on the decoded
// values: bitwise the result of an f32 tile of them. e0 + d0 a multiple of L.
template <class Vec, DType kT, int G, int DC>
inline void AccumulateVBlocks(const uint8_t* const* v, int64_t e0, int n, const float* p,
                              int64_t p_stride, float* out, int64_t hd, int64_t d0) {
  using Reg = typename Vec::Reg;
  constexpr int64_t L = Vec::kLanes;
  Reg acc[G][DC];
  for (int g = 0; g < G; ++g)
    for (int c = 0; c < DC; ++c) acc[g][c] = Vec::LoadX(out + g * hd + d0 + L * c);
  // 32 columns from a block's start: one block, one scale (and for Q4_0
  // one load of its 16 bytes).
  const bool whole = L * DC == 32 && (e0 + d0) % 32 == 0;
  for (int i = 0; i < n; ++i) {
    Reg vv[DC];
    if constexpr (L * DC == 32) {
      if (whole) {
        DecodeKvBlock32<kT>(v[i] + (e0 + d0) / 32 * (kT == DType::kQ8_0 ? 34 : 18), vv);
      }
    }
    for (int c = 0; c < DC && !(L * DC == 32 && whole); ++c) {
#ifdef TERN_AVX512_VNNI
      if constexpr (L == 16) {
        vv[c] = LoadKvBlock16<kT>(v[i], e0 + d0 + L * c);
      } else
#endif
      {
        vv[c] = LoadKvBlock8<kT>(v[i], e0 + d0 + L * c);
      }
    }
    for (int g = 0; g < G; ++g) {
      const Reg w = Vec::Set1(p[g * p_stride + i]);
      for (int c = 0; c < DC; ++c) acc[g][c] = Vec::Fma(w, vv[c], acc[g][c]);
    }
  }
  for (int g = 0; g < G; ++g)
    for (int c = 0; c < DC; ++c) Vec::Store(out + g * hd + d0 + L * c, acc[g][c]);
}

// V rows of Q8_0 / Q4_0 blocks that each span 32 / hd KV heads (hd < 32,
// a decode item of whole blocks from element e_first of each slot, rows
// kvh * group + g): each position's block is decoded once (DecodeKvBlock32)
// for the rows of all its heads instead of once per head. Every output
// element sees AccumulateVBlocks's FMAs on the same decoded values in the
// same order, so the results are bitwise its.
template <DType kT>
void AccumulateVSpan(const uint8_t* const* v, int64_t e_first, int n, const float* p,
                     int64_t p_stride, float* out, int64_t hd, int num_kv_heads, int group) {
  constexpr int64_t kBlockBytes = kT == DType::kQ8_0 ? 34 : 18;
  const int per_block = (int)(32 / hd);
  for (int kvh0 = 0; kvh0 < num_kv_heads; kvh0 += per_block) {
    const int64_t boff = (e_first + kvh0 * hd) / 32 * kBlockBytes;
    for (int g0 = 0; g0 < group; g0 += 2) {
      const int gn = std::min(2, group - g0);
      // Vector c: the block's elements [8c, 8c + 8), of head kvh0 + 8c / hd.
      int64_t row[2][4];
      __m256 acc[2][4];
      for (int gi = 0; gi < gn; ++gi) {
        for (int c = 0; c < 4; ++c) {
          row[gi][c] = (kvh0 + 8 * c / hd) * group + g0 + gi;
          acc[gi][c] = _mm256_loadu_ps(out + row[gi][c] * hd + 8 * c % hd);
        }
      }
      for (int i = 0; i < n; ++i) {
        __m256 vv[4];
        DecodeKvBlock32<kT>(v[i] + boff, vv);
        for (int gi = 0; gi < gn; ++gi) {
          for (int c = 0; c < 4; ++c) {
            const __m256 w = _mm256_set1_ps(p[row[gi][c] * p_stride + i]);
            acc[gi][c] = _mm256_fmadd_ps(w, vv[c], acc[gi][c]);
          }
        }
      }
      for (int gi = 0; gi < gn; ++gi) {
        for (int c = 0; c < 4; ++c) _mm256_storeu_ps(out + row[gi][c] * hd + 8 * c % hd, acc[gi][c]);
      }
    }
  }
}

// Which AccumulateV reads a chunk's V rows: f16/f32 rows at v[i] + off
// (bytes), or q8_0/q4_0 blocks from element off of each slot, decoded in
// registers (hd and off multiples of 8; 16-lane passes only from a multiple
// of 16).
template <bool kF16>
struct PlainVRows {
  template <class Vec, int G, int DC>
  static void Run(const uint8_t* const* v, int64_t off, int n, const float* p, int64_t p_stride,
                  float* out, int64_t hd, int64_t d) {
    AccumulateV<Vec, kF16, G, DC>(v, off, n, p, p_stride, out, hd, d);
  }
  static bool Wide(int64_t) { return true; }
};
template <DType kT>
struct BlockVRows {
  template <class Vec, int G, int DC>
  static void Run(const uint8_t* const* v, int64_t off, int n, const float* p, int64_t p_stride,
                  float* out, int64_t hd, int64_t d) {
    AccumulateVBlocks<Vec, kT, G, DC>(v, off, n, p, p_stride, out, hd, d);
  }
  static bool Wide(int64_t off) { return off % 16 == 0; }
};

// All head_dim columns for G <= 8 heads: DC column vectors per pass, as many
// as keep G * DC <= 8 accumulators in flight (16-lane ones first in the
// AVX-512 table, up to 16 of them).
template <class Rows, int G>
void AccumulateVHeads(const uint8_t* const* v, int64_t off, int n, const float* p,
                      int64_t p_stride, float* out, int64_t hd) {
  int64_t d = 0;
#ifdef TERN_AVX512_VNNI
  if (Rows::Wide(off)) {  // up to 16 accumulators of 16 lanes
    constexpr int DC16 = G >= 5 ? 2 : 4;
    for (; d + 16 * DC16 <= hd; d += 16 * DC16) {
      Rows::template Run<Vec512, G, DC16>(v, off, n, p, p_stride, out, hd, d);
    }
    for (; d + 16 <= hd; d += 16) Rows::template Run<Vec512, G, 1>(v, off, n, p, p_stride, out, hd, d);
  }
#endif
  constexpr int DC = G >= 8 ? 1 : 8 / G;
  for (; d + 8 * DC <= hd; d += 8 * DC) {
    Rows::template Run<Vec256, G, DC>(v, off, n, p, p_stride, out, hd, d);
  }
  for (; d < hd; d += 8) Rows::template Run<Vec256, G, 1>(v, off, n, p, p_stride, out, hd, d);
}

// A KV head's `group` query rows, 8 at a time.
template <class Rows>
void AccumulateVGroup(const uint8_t* const* v, int64_t off, int n, const float* p,
                      int64_t p_stride, float* out, int64_t hd, int group) {
  for (int g0 = 0; g0 < group; g0 += 8) {
    const float* pg = p + g0 * p_stride;
    float* og = out + g0 * hd;
    switch (std::min(8, group - g0)) {
      case 1: AccumulateVHeads<Rows, 1>(v, off, n, pg, p_stride, og, hd); break;
      case 2: AccumulateVHeads<Rows, 2>(v, off, n, pg, p_stride, og, hd); break;
      case 3: AccumulateVHeads<Rows, 3>(v, off, n, pg, p_stride, og, hd); break;
      case 4: AccumulateVHeads<Rows, 4>(v, off, n, pg, p_stride, og, hd); break;
      case 5: AccumulateVHeads<Rows, 5>(v, off, n, pg, p_stride, og, hd); break;
      case 6: AccumulateVHeads<Rows, 6>(v, off, n, pg, p_stride, og, hd); break;
      case 7: AccumulateVHeads<Rows, 7>(v, off, n, pg, p_stride, og, hd); break;
      default: AccumulateVHeads<Rows, 8>(v, off, n, pg, p_stride, og, hd); break;
    }
  }
}

// Bytes [*off, *off + *len) of a KV row of dtype t that hold elements
// [e0, e0 + n) (whole blocks for the block formats).
inline void KvHeadBytes(DType t, int64_t e0, int64_t n, int64_t* off, int64_t* len) {
  const int64_t bs = BlockSize(t), bb = BlockBytes(t);
  const int64_t b0 = e0 / bs, b1 = (e0 + n + bs - 1) / bs;
  *off = b0 * bb;
  *len = (b1 - b0) * bb;
}

// The rows of an attention item: (query, head) pairs, query by query.
struct ItemRows {
  int32_t lo[kMaxAttnGroup], hi[kMaxAttnGroup];  // the positions a row attends to
  const float* q[kMaxAttnGroup];
  float* out[kMaxAttnGroup];
  int64_t off[kMaxAttnGroup];  // bytes from the first KV head's K/V
  int32_t all_lo = INT32_MAX, all_hi = -1;  // over all rows
  // The rows of each KV head, query by query.
  int kvh_rows[kMaxAttnGroup][kMaxAttnGroup];
  int num_kvh_rows[kMaxAttnGroup] = {};
};

// The rows of a (V elements of elem_bytes).
inline void SetUpRows(const AttnGroupArgs& a, int64_t elem_bytes, ItemRows* rows) {
  const int64_t hd = a.head_dim;
  const int heads = a.group * a.num_kv_heads;  // query heads per query
  for (int qi = 0; qi < a.num_queries; ++qi) {
    const int32_t hi = a.positions[qi];
    const int32_t lo = a.sliding_window > 0 ? std::max(0, hi - a.sliding_window + 1) : 0;
    rows->all_lo = std::min(rows->all_lo, lo);
    rows->all_hi = std::max(rows->all_hi, hi);
    for (int h = 0; h < heads; ++h) {
      const int r = qi * heads + h;
      rows->lo[r] = lo;
      rows->hi[r] = hi;
      rows->q[r] = a.q + qi * a.row_stride + h * hd;
      rows->out[r] = a.out + qi * a.row_stride + h * hd;
      rows->off[r] = (int64_t)(h / a.group) * hd * elem_bytes;
      const int kvh = h / a.group;
      rows->kvh_rows[kvh][rows->num_kvh_rows[kvh]++] = r;
    }
  }
}

#ifdef TERN_AVX512_VNNI
// Scores8x2's queries of each pair of a KV head's rows (t, t + 1 in that
// order), 8 floats of each in turn, at qpairs + the pair's first row x 2 hd.
inline void PairQueries(const ItemRows& rows, int num_kv_heads, int64_t hd, float* qpairs) {
  for (int kvh = 0; kvh < num_kv_heads; ++kvh) {
    for (int t = 0; t + 1 < rows.num_kvh_rows[kvh]; t += 2) {
      const int r0 = rows.kvh_rows[kvh][t], r1 = rows.kvh_rows[kvh][t + 1];
      float* dst = qpairs + (int64_t)r0 * 2 * hd;
      for (int64_t d = 0; d < hd; d += 8) {
        std::memcpy(dst + 2 * d, rows.q[r0] + d, 8 * sizeof(float));
        std::memcpy(dst + 2 * d + 8, rows.q[r1] + d, 8 * sizeof(float));
      }
    }
  }
}
#endif

// Prefetches of the K rows kAhead positions past the 8 at i (into the
// next chunk; krow holds n8 + kAhead rows) and of the V rows of those 8
// (vraw: n rows), the bytes of one KV head (off, len) in each.
// always_inline: not inlined, GCC 12 finds the function free of side
// effects (prefetches only) and deletes its calls, so no prefetch at all
// was issued.
template <int kAhead>
__attribute__((always_inline)) inline void PrefetchKvHead(const uint8_t* const* krow, const uint8_t* const* vraw, int i, int n,
                           int n8, int64_t kpf_off, int64_t kpf_len, int64_t vpf_off,
                           int64_t vpf_len) {
  for (int j = 0; j < 8; ++j) {
    const uint8_t* kpf = krow[std::min(i + kAhead + j, n8 + kAhead - 1)] + kpf_off;
    for (int64_t b = 0; b < kpf_len; b += 64) _mm_prefetch((const char*)kpf + b, _MM_HINT_T0);
    if (i + j < n) {
      for (int64_t b = 0; b < vpf_len; b += 64) {
        _mm_prefetch((const char*)vraw[i + j] + vpf_off + b, _MM_HINT_T0);
      }
    }
  }
}

// A row's scores sc of positions [p0, p0 + 8) (where it needs them), masked
// to its range [lo, hi] of the chunk: stored at sg, and into its running
// maximum; -inf where it needs none of them; nothing where its range is
// empty.
inline void PutScores(__m256 sc, int32_t p0, int32_t lo, int32_t hi, float* sg,
                      __m256* row_max) {
  if (lo > hi) return;
  if (p0 > hi || p0 + 7 < lo) {
    _mm256_store_ps(sg, _mm256_set1_ps(-INFINITY));
    return;
  }
  if (p0 < lo || p0 + 7 > hi) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i pos = _mm256_add_epi32(_mm256_set1_epi32(p0), lane);
    const __m256i valid = _mm256_andnot_si256(
        _mm256_or_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(lo), pos),
                        _mm256_cmpgt_epi32(pos, _mm256_set1_epi32(hi))),
        _mm256_set1_epi32(-1));
    sc = _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), sc, _mm256_castsi256_ps(valid));
  }
  _mm256_store_ps(sg, sc);
  *row_max = _mm256_max_ps(*row_max, sc);
}

// ---- K scores in 8-bit integers (attention.h KScoresInt8) ----

// One query row quantized by QuantizeQueryQ8: qq per element, d and the
// quants' sum per block of 32.
struct QueryQ8Row {
  const int8_t* qq;
  const float* d;
  const int32_t* sum;
};

// Dwords [c, c + 4) (16 bytes from off) of 8 rows, transposed: lane t of
// out[j] is row t's dword c + j.
inline void Transpose8x4(const uint8_t* const* rows, int64_t off, __m256i* out) {
  __m256i r[4];
  for (int t = 0; t < 4; ++t) {
    r[t] = _mm256_inserti128_si256(
        _mm256_castsi128_si256(_mm_loadu_si128((const __m128i*)(rows[t] + off))),
        _mm_loadu_si128((const __m128i*)(rows[t + 4] + off)), 1);
  }
  const __m256i a0 = _mm256_unpacklo_epi32(r[0], r[1]);  // rows 0 1: dwords 0 0 1 1
  const __m256i a1 = _mm256_unpackhi_epi32(r[0], r[1]);  // rows 0 1: dwords 2 2 3 3
  const __m256i a2 = _mm256_unpacklo_epi32(r[2], r[3]);
  const __m256i a3 = _mm256_unpackhi_epi32(r[2], r[3]);
  out[0] = _mm256_unpacklo_epi64(a0, a2);
  out[1] = _mm256_unpackhi_epi64(a0, a2);
  out[2] = _mm256_unpacklo_epi64(a1, a3);
  out[3] = _mm256_unpackhi_epi64(a1, a3);
}

// acc + the 4-byte dots of u (unsigned) and s (signed) per lane, exact
// (DotU8S8's bounds).
inline __m256i DotAccU8S8(__m256i acc, __m256i u, __m256i s) {
#ifdef TERN_AVX512_VNNI
  return _mm256_dpbusd_epi32(acc, u, s);
#else
  return _mm256_add_epi32(acc, DotU8S8(u, s));
#endif
}

// Scores (before nothing but the scale) of 8 positions, lanes = positions
// k[0..8), for m query rows against one KV head's K blocks of kT (Q8_0 or
// Q4_0) from byte block_off of each slot, nb blocks: per block the int32 dot
// of the row's quants with K's (exact: the same integers in every table),
// then s = fma(isum, dq * dk, s), and out = s * scale, as DotQueryQ8 does
// for one position (bitwise). The K quants are transposed once for all rows.
template <DType kT>
inline void ScoresInt8(const uint8_t* const* k, int64_t block_off, int64_t nb,
                       const QueryQ8Row* rows, int m, __m256 scale, __m256* out) {
  constexpr int64_t kBlockBytes = kT == DType::kQ8_0 ? 34 : 18;
  // Q8_0 with vpdpbusd: the quants + 128 as unsigned bytes, less 128 x the
  // query's sum; without it the sign trick (|k| x sign(q, k)). Q4_0: the
  // nibbles (quant + 8), less 8 x the query's sum.
#ifdef TERN_AVX512_VNNI
  constexpr int32_t kBias = kT == DType::kQ8_0 ? 128 : 8;
#else
  constexpr int32_t kBias = kT == DType::kQ8_0 ? 0 : 8;
#endif
  __m256 s[kMaxAttnGroup];
  for (int t = 0; t < m; ++t) s[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t off = block_off + b * kBlockBytes;
    __m256i kq[8];  // dword j: the block's elements [4j, 4j + 4) of each position
    __m256i ku[8];  // the unsigned operand
    if constexpr (kT == DType::kQ8_0) {
      Transpose8x4(k, off + 2, kq);
      Transpose8x4(k, off + 18, kq + 4);
      for (int j = 0; j < 8; ++j) {
#ifdef TERN_AVX512_VNNI
        ku[j] = _mm256_xor_si256(kq[j], _mm256_set1_epi8((char)0x80));
#else
        ku[j] = _mm256_abs_epi8(kq[j]);
#endif
      }
    } else {
      __m256i packed[4];  // byte i: element i (low nibble), element 16 + i (high)
      Transpose8x4(k, off + 2, packed);
      const __m256i mask = _mm256_set1_epi8(0x0F);
      for (int j = 0; j < 4; ++j) {
        ku[j] = _mm256_and_si256(packed[j], mask);
        ku[4 + j] = _mm256_and_si256(_mm256_srli_epi16(packed[j], 4), mask);
      }
    }
    const __m256 dk = _mm256_cvtph_ps(_mm_setr_epi16(
        (short)LoadU16(k[0] + off), (short)LoadU16(k[1] + off), (short)LoadU16(k[2] + off),
        (short)LoadU16(k[3] + off), (short)LoadU16(k[4] + off), (short)LoadU16(k[5] + off),
        (short)LoadU16(k[6] + off), (short)LoadU16(k[7] + off)));
    for (int t = 0; t < m; ++t) {
      const int8_t* qb = rows[t].qq + b * 32;
      __m256i acc = _mm256_setzero_si256();
      for (int j = 0; j < 8; ++j) {
        int32_t qw;
        std::memcpy(&qw, qb + 4 * j, 4);
        __m256i qv = _mm256_set1_epi32(qw);
        if constexpr (kT == DType::kQ8_0 && kBias == 0) qv = _mm256_sign_epi8(qv, kq[j]);
        acc = DotAccU8S8(acc, ku[j], qv);
      }
      if constexpr (kBias != 0) {
        acc = _mm256_sub_epi32(acc, _mm256_set1_epi32(kBias * rows[t].sum[b]));
      }
      const __m256 dqk = _mm256_mul_ps(_mm256_set1_ps(rows[t].d[b]), dk);
      s[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc), dqk, s[t]);
    }
  }
  for (int t = 0; t < m; ++t) out[t] = _mm256_mul_ps(s[t], scale);
}

// The slots of a chunk's positions [base, fill_end) (K; V up to end): the
// block table walked position by position from `first` (one division per
// chunk, not one per position); positions before `first` read its slot.
// vrow: vraw + v_head_off.
inline void ChunkSlots(const KvPagesView& kv, int32_t base, int32_t first, int32_t end,
                       int32_t fill_end, int64_t v_head_off, const uint8_t** krow,
                       const uint8_t** vraw, const uint8_t** vrow) {
  int32_t blk = first / kv.block_size, in_blk = first % kv.block_size;
  const int64_t kslot = kv.KSlotBytes(), kstride = kv.KBlockStride();
  const int64_t vslot = kv.VSlotBytes(), vstride = kv.VBlockStride();
  for (int32_t p = base; p < fill_end; ++p) {
    const int64_t b = kv.block_table[blk];
    krow[p - base] = kv.k + b * kstride + (int64_t)in_blk * kslot;
    if (p < end) {
      vraw[p - base] = kv.v + b * vstride + (int64_t)in_blk * vslot;
      vrow[p - base] = vraw[p - base] + v_head_off;
    }
    if (p >= first && ++in_blk == kv.block_size) in_blk = 0, ++blk;
  }
}

// The online softmax of one row over a chunk: its scores sg[0, n8) (-inf
// where masked) become weights exp(s - max), its running max and sum move
// on, and its output so far is rescaled where the max grew. chunk_max: the
// lanes' maxima of the chunk's scores.
inline void SoftmaxStep(__m256 chunk_max, float* sg, int n8, int64_t hd, float* running_max,
                        float* running_sum, float* out) {
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, chunk_max);
  float cmax = *running_max;
  for (float l : lanes) cmax = std::max(cmax, l);
  const float correction = std::exp(*running_max - cmax);
  if (correction != 1.0f) {
    Avx2ScaleF32(correction, hd, out);
    *running_sum *= correction;
  }
  *running_max = cmax;
  const __m256 mv = _mm256_set1_ps(cmax);
  __m256 sum = _mm256_setzero_ps();
  int i = 0;
#ifdef TERN_AVX512_VNNI
  // 16 scores at a time, summed 8 lanes at a time in the same order.
  const __m512 mv16 = _mm512_set1_ps(cmax);
  for (; i + 16 <= n8; i += 16) {
    const __m512 x = _mm512_loadu_ps(sg + i);
    const __mmask16 live = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-INFINITY), _CMP_NEQ_OQ);
    const __m512 e = _mm512_maskz_mov_ps(live, Exp16(_mm512_sub_ps(x, mv16)));
    _mm512_storeu_ps(sg + i, e);
    sum = _mm256_add_ps(sum, _mm512_castps512_ps256(e));
    sum = _mm256_add_ps(sum, _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1)));
  }
#endif
  for (; i < n8; i += 8) {
    const __m256 x = _mm256_load_ps(sg + i);
    // Masked lanes (-inf): Exp8 clamps, so zero them explicitly.
    const __m256 e = _mm256_and_ps(Exp8(_mm256_sub_ps(x, mv)),
                                   _mm256_cmp_ps(x, _mm256_set1_ps(-INFINITY), _CMP_NEQ_OQ));
    _mm256_store_ps(sg + i, e);
    sum = _mm256_add_ps(sum, e);
  }
  *running_sum += Hsum(sum);
}

// out rows += the chunk's weights (scores, rows kStride apart) x its n V
// rows, the rows of each KV head at their offset row_off.
template <bool kF16>
inline void AccumulateChunkV(const AttnGroupArgs& a, const uint8_t* const* vrow, int n,
                             const float* scores, int64_t kStride, const int64_t* row_off,
                             float* acc_out, int rows) {
  const int64_t hd = a.head_dim;
  if (a.num_kv_heads == 1) {
    AccumulateVGroup<PlainVRows<kF16>>(vrow, 0, n, scores, kStride, acc_out, hd, rows);
  } else {
    for (int r = 0; r < rows; r += a.group) {  // the rows of one KV head
      AccumulateVGroup<PlainVRows<kF16>>(vrow, row_off[r], n, scores + r * kStride, kStride,
                             acc_out + r * hd, hd, a.group);
    }
  }
}

// Rows = (query, head) pairs: num_queries x group x num_kv_heads; the rows
// of a KV head read its K/V at a fixed offset from the first's.
// K: Q8_0 / Q4_0 of whole blocks scored in 8-bit integers (ScoresInt8,
// 8 positions at a time for all the rows of their KV head); otherwise F32
// rows are read in place, the others decoded (DecodeKvRow) 8 positions at a
// time into a small f32 tile, once for all the rows of their KV head. V:
// kF16, F16 rows in place; else F32 rows in place, Q8_0 / Q4_0 blocks
// decoded in registers, or (BF16) the chunk's V rows of the item's heads
// decoded into an f32 tile first. A decoded value is exact, so a quantized
// V (and a quantized K not scored in 8 bits) gives the results of an F32
// cache holding the decoded values.
// Chunks are aligned to absolute positions (multiples of 64) and each chunk's
// positions go 8 to a vector from a multiple of 8, so a row sees the same
// operations whatever rows it is bundled with: positions outside a row's
// [lo, hi] score -inf, weigh exactly 0 and add exact zeros.
// kInt8K: K scored in 8 bits (KScoresInt8; a template parameter so that the
// f32 score path compiles as it did without it).
template <bool kF16, bool kInt8K>
void AttendGroupSimd(const AttnGroupArgs& a) {
  const KvPagesView& kv = *a.kv;
  const int64_t hd = a.head_dim;
  const int heads = a.group * a.num_kv_heads;  // query heads per query
  const int rows = heads * a.num_queries;
  const DType kdt = kv.KDtype(), vdt = kv.VDtype();
  // Q8_0 / Q4_0 V rows are read in place, each vector decoded in registers
  // as AccumulateV takes it (AccumulateVGroup<BlockVRows>); BF16 ones are decoded
  // into a tile first.
  const bool v_blocks = vdt == DType::kQ8_0 || vdt == DType::kQ4_0;
  const bool v_decode = vdt != DType::kF16 && vdt != DType::kF32 && !v_blocks;
  // Decode of heads below 32 whose item holds whole blocks (stories260K: a
  // token's 4 KV heads of 8): each V block decoded once for all its heads
  // (AccumulateVSpan).
  const bool v_span = v_blocks && a.num_queries == 1 && hd < 32 && 32 % hd == 0 &&
                      (int64_t)a.kv_head * hd % 32 == 0 && a.num_kv_heads * hd % 32 == 0;
  constexpr int64_t kElem = kF16 ? 2 : 4;  // V elements as AccumulateV reads them
  const int64_t e_first = (int64_t)a.kv_head * hd;  // the first KV head's element in a slot
  // V rows in place: the first head's elements; decoded: the tile's rows.
  const int64_t v_head_off = v_decode ? 0 : e_first * kElem;
  constexpr int kStride = kSimdAttnChunk;
  alignas(64) float scores[kMaxAttnGroup * kStride];
  float running_max[kMaxAttnGroup], running_sum[kMaxAttnGroup];
  ItemRows item;
  SetUpRows(a, kElem, &item);
  const int32_t* row_lo = item.lo;
  const int32_t* row_hi = item.hi;
  const float* const* row_q = item.q;
  float* const* row_out = item.out;
  const int64_t* row_off = item.off;
  const int32_t all_lo = item.all_lo, all_hi = item.all_hi;
  // Rows in one contiguous block for AccumulateVGroup: out rows are
  // accumulated in a scratch [rows][hd] and copied out at the end.
  float* acc_out = nullptr;
  if (a.num_queries == 1) {
    acc_out = a.out;  // the group's heads are contiguous already
  } else {
    acc_out = a.scratch->Get<float>(ScratchBuf::kAttnRows, (int64_t)rows * hd);
  }
  for (int r = 0; r < rows; ++r) {
    running_max[r] = -INFINITY;
    running_sum[r] = 0.0f;
    std::memset(acc_out + r * hd, 0, sizeof(float) * hd);
  }
  const __m256 scale = _mm256_set1_ps(a.scale);
  const auto& kvh_rows = item.kvh_rows;
  const int* num_kvh_rows = item.num_kvh_rows;
#ifdef TERN_AVX512_VNNI
  // Scores8x2's queries of each pair of a KV head's rows (t, t + 1 in that
  // order), at the pair's first row.
  const __m512 scale512 = _mm512_set1_ps(a.scale);
  float* const qpairs =
      a.scratch->Get<float>(ScratchBuf::kAttnQueryPairs, (int64_t)rows * 2 * hd);
  PairQueries(item, a.num_kv_heads, hd, qpairs);
#endif
  // K rows are prefetched kAhead positions ahead of the scores (into the
  // next chunk), V rows of a chunk while its scores are computed (16 was no
  // faster, 32 slower).
  constexpr int kAhead = 8;
  // Q8_0 / Q4_0 K of whole blocks: scores in 8-bit integers against each
  // row's query quantized per block (KScoresInt8), the rows of each KV head
  // in kvh_q8[kvh].
  constexpr bool k_int8 = kInt8K;
  DCHECK_EQ(k_int8, KScoresInt8(kdt, e_first, hd));
  // A rotated K (KvKeyRotated, head_dim < 32): each row's query is
  // RotatedKeyQuery's, over the whole blocks its head lies in
  // (KeyScoreBlocks: kvh_b0 / kvh_nb per KV head).
  const bool k_rot = KvKeyRotated(kdt, hd);
  const int64_t qn_max = k_rot ? kMaxRotatedKeyBlocks * 32 : hd;  // query elements
  const int64_t nb_max = qn_max / 32;
  int64_t kvh_b0[kMaxAttnGroup], kvh_nb[kMaxAttnGroup];
  QueryQ8Row kvh_q8[kMaxAttnGroup][kMaxAttnGroup];
  if constexpr (k_int8) {
    const int64_t row_bytes = qn_max + 8 * nb_max;  // quants, then d and sum per block
    int8_t* const q8 = a.scratch->Get<int8_t>(ScratchBuf::kAttnQueryQ8, rows * row_bytes);
    for (int kvh = 0; kvh < a.num_kv_heads; ++kvh) {
      const int64_t ke0 = e_first + kvh * hd;
      KeyScoreBlocks(ke0, hd, &kvh_b0[kvh], &kvh_nb[kvh]);
      const int64_t qn = kvh_nb[kvh] * 32;
      for (int t = 0; t < num_kvh_rows[kvh]; ++t) {
        const int r = kvh_rows[kvh][t];
        int8_t* const qq = q8 + r * row_bytes;
        float* const d = (float*)(qq + qn_max);
        int32_t* const sum = (int32_t*)(d + nb_max);
        alignas(32) float rotated[kMaxRotatedKeyBlocks * 32];
        const float* qr = row_q[r];
        if (k_rot) {
          RotatedKeyQuery(qr, ke0, hd, rotated);
          qr = rotated;
        }
        QuantizeQueryQ8(qr, qn, qq, d, sum);
        kvh_q8[kvh][t] = {qq, d, sum};
      }
    }
  }
  // KV heads whose scores read the same blocks (a rotated K: the heads of
  // one block of 32) are scored together, the K quants of 8 positions
  // transposed once for all their rows: span_rows[kvh] / span_q8[kvh] hold
  // the rows of kvh and of the heads after it that share its blocks,
  // span_m[kvh] their number (0: scored with an earlier head). Each row's
  // lane sees the same operations either way.
  int span_m[kMaxAttnGroup] = {};
  int span_rows[kMaxAttnGroup][kMaxAttnGroup];
  QueryQ8Row span_q8[kMaxAttnGroup][kMaxAttnGroup];
  if constexpr (k_int8) {
    int lead = -1;
    for (int kvh = 0; kvh < a.num_kv_heads; ++kvh) {
      if (lead < 0 || kvh_b0[kvh] != kvh_b0[lead] || kvh_nb[kvh] != kvh_nb[lead]) lead = kvh;
      for (int t = 0; t < num_kvh_rows[kvh]; ++t) {
        span_rows[lead][span_m[lead]] = kvh_rows[kvh][t];
        span_q8[lead][span_m[lead]++] = kvh_q8[kvh][t];
      }
    }
  }
  const auto scores_int8 =
      kdt == DType::kQ8_0 ? ScoresInt8<DType::kQ8_0> : ScoresInt8<DType::kQ4_0>;
  const int64_t k_block_bytes = BlockBytes(kdt);
  // 8 K rows in f32.
  float* const kconv = kdt != DType::kF32 && !k_int8
                           ? a.scratch->Get<float>(ScratchBuf::kAttnKRows, 8 * hd)
                           : nullptr;
  // Decoded V: the chunk's rows of the item's heads, [position][kv head][hd].
  const int64_t vtile_row = (int64_t)a.num_kv_heads * hd;
  float* const vtile =
      v_decode ? a.scratch->Get<float>(ScratchBuf::kAttnVTile, kSimdAttnChunk * vtile_row)
               : nullptr;
  // Slots (K: whole; V: from the first head's elements, or the decoded tile).
  const uint8_t* krow[kSimdAttnChunk + kAhead];
  const uint8_t* vraw[kSimdAttnChunk];
  const uint8_t* vrow[kSimdAttnChunk];
  // Prefetch ranges of each KV head of the item in a slot.
  int64_t kpf_off[kMaxAttnGroup], kpf_len[kMaxAttnGroup], vpf_off[kMaxAttnGroup],
      vpf_len[kMaxAttnGroup];
  for (int kvh = 0; kvh < a.num_kv_heads; ++kvh) {
    KvHeadBytes(kdt, e_first + kvh * hd, hd, &kpf_off[kvh], &kpf_len[kvh]);
    KvHeadBytes(vdt, e_first + kvh * hd, hd, &vpf_off[kvh], &vpf_len[kvh]);
  }
  for (int32_t c0 = all_lo / kSimdAttnChunk * kSimdAttnChunk; c0 <= all_hi;
       c0 += kSimdAttnChunk) {
    // Positions [base, end): from the multiple of 8 at or below the first
    // one any row needs.
    const int32_t first = std::max(c0, all_lo);
    const int32_t base = c0 + (first - c0) / 8 * 8;
    const int32_t end = std::min(c0 + kSimdAttnChunk, all_hi + 1);
    const int n = end - base;
    const int n8 = (n + 7) / 8 * 8;
    // Rows of this chunk (positions before `first` read a valid row, their
    // scores are masked), then up to kAhead of the next chunk to prefetch.
    const int32_t fill_end = std::min(end + kAhead, all_hi + 1);
    ChunkSlots(kv, base, first, end, fill_end, v_head_off, krow, vraw, vrow);
    for (int i = fill_end - base; i < n8 + kAhead; ++i) krow[i] = krow[0];
    // Scores, 8 positions at a time: each KV head's 8 K rows (F16: converted
    // to f32 once for all its rows, the same values the FMAs would convert)
    // against each of its rows' queries.
    __m256 row_max[kMaxAttnGroup];
    int32_t lo_in[kMaxAttnGroup], hi_in[kMaxAttnGroup];
    for (int r = 0; r < rows; ++r) {
      lo_in[r] = std::max(row_lo[r], base);
      hi_in[r] = std::min(row_hi[r], end - 1);
      row_max[r] = _mm256_set1_ps(-INFINITY);
      // Nothing of this row here: weight 0 everywhere.
      if (lo_in[r] > hi_in[r]) std::memset(scores + r * kStride, 0, sizeof(float) * n8);
    }
    for (int i = 0; i < n8; i += 8) {
      const int32_t p0 = base + i;
      for (int kvh = 0; kvh < a.num_kv_heads; ++kvh) {
        const int64_t ke0 = e_first + kvh * hd;  // this head's first K element
        PrefetchKvHead<kAhead>(krow, vraw, i, n, n8, kpf_off[kvh], kpf_len[kvh], vpf_off[kvh],
                               vpf_len[kvh]);
        const uint8_t* kp[8];
        int64_t koff = ke0 * 4;  // F32 K rows in place
        bool converted = false;
        // Does row r need this block's scores?
        const auto needs = [&](int r) {
          return lo_in[r] <= hi_in[r] && p0 <= hi_in[r] && p0 + 7 >= lo_in[r];
        };
        const auto convert = [&]() {
          if (converted) return;
          converted = true;
          for (int j = 0; j < 8; ++j) kp[j] = krow[i + j];
          if (kdt != DType::kF32) {
            for (int j = 0; j < 8; ++j) {
              float* dst = kconv + j * hd;
              DecodeKvRow(kdt, krow[i + j], ke0, hd, dst);
              kp[j] = (const uint8_t*)dst;
            }
            koff = 0;
          }
        };
        const auto put = [&](int r, __m256 sc) {
          PutScores(sc, p0, lo_in[r], hi_in[r], scores + r * kStride + i, &row_max[r]);
        };
        const int m = num_kvh_rows[kvh];
        if constexpr (k_int8) {
          const int ms = span_m[kvh];  // 0: scored with an earlier KV head
          bool any = false;
          for (int t = 0; t < ms; ++t) any = any || needs(span_rows[kvh][t]);
          __m256 sc[kMaxAttnGroup];
          if (any) {
            scores_int8(krow + i, kvh_b0[kvh] * k_block_bytes, kvh_nb[kvh], span_q8[kvh], ms,
                        scale, sc);
          } else {
            for (int t = 0; t < ms; ++t) sc[t] = _mm256_setzero_ps();
          }
          for (int t = 0; t < ms; ++t) put(span_rows[kvh][t], sc[t]);
          continue;
        }
        for (int t = 0; t < m;) {
          const int r = kvh_rows[kvh][t];
#ifdef TERN_AVX512_VNNI
          if (t + 1 < m) {  // a pair (qpair at its first row)
            const int r1 = kvh_rows[kvh][t + 1];
            if (needs(r) || needs(r1)) {
              convert();
              const __m512 sc2 = Scores8x2(qpairs + (int64_t)r * 2 * hd, kp, koff, hd,
                                           scale512);
              put(r, _mm512_castps512_ps256(sc2));
              put(r1, _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(sc2), 1)));
            } else {
              put(r, _mm256_setzero_ps());
              put(r1, _mm256_setzero_ps());
            }
            t += 2;
            continue;
          }
#endif
          if (needs(r)) {
            convert();
            put(r, Scores8(row_q[r], kp, koff, hd, scale));
          } else {
            put(r, _mm256_setzero_ps());
          }
          ++t;
        }
      }
    }
    for (int r = 0; r < rows; ++r) {
      if (lo_in[r] > hi_in[r]) continue;
      SoftmaxStep(row_max[r], scores + r * kStride, n8, hd, &running_max[r], &running_sum[r],
                  acc_out + r * hd);
    }
    if (v_decode) {
      for (int i = 0; i < n; ++i) {
        float* dst = vtile + i * vtile_row;
        DecodeKvRow(vdt, vraw[i], e_first, vtile_row, dst);
        vrow[i] = (const uint8_t*)dst;
      }
    }
    if (v_span) {
      const auto acc_v = vdt == DType::kQ8_0 ? AccumulateVSpan<DType::kQ8_0>
                                             : AccumulateVSpan<DType::kQ4_0>;
      acc_v(vraw, e_first, n, scores, kStride, acc_out, hd, a.num_kv_heads, a.group);
    } else if (v_blocks) {
      const auto acc_v = vdt == DType::kQ8_0 ? AccumulateVGroup<BlockVRows<DType::kQ8_0>>
                                             : AccumulateVGroup<BlockVRows<DType::kQ4_0>>;
      if (a.num_kv_heads == 1) {
        acc_v(vraw, e_first, n, scores, kStride, acc_out, hd, rows);
      } else {
        for (int r = 0; r < rows; r += a.group) {  // the rows of one KV head
          acc_v(vraw, e_first + row_off[r] / kElem, n, scores + r * kStride, kStride,
                acc_out + r * hd, hd, a.group);
        }
      }
    } else {
      AccumulateChunkV<kF16>(a, vrow, n, scores, kStride, row_off, acc_out, rows);
    }
  }
  for (int r = 0; r < rows; ++r) {
    const float inv = running_sum[r] > 0.0f ? 1.0f / running_sum[r] : 0.0f;
    Avx2ScaleF32(inv, hd, acc_out + r * hd);
    if (acc_out != a.out) std::memcpy(row_out[r], acc_out + r * hd, sizeof(float) * hd);
  }
}

bool Avx2AttendGroup(const AttnGroupArgs& a) {
  if (a.head_dim % 8 != 0 || a.group * a.num_kv_heads * a.num_queries > kMaxAttnGroup) {
    return false;
  }
  if (!IsKvDtype(a.kv->KDtype()) || !IsKvDtype(a.kv->VDtype())) return false;
  const bool v_f16 = a.kv->VDtype() == DType::kF16;
  if (KScoresInt8(a.kv->KDtype(), (int64_t)a.kv_head * a.head_dim, a.head_dim)) {
    if (v_f16) AttendGroupSimd<true, true>(a);
    else AttendGroupSimd<false, true>(a);
  } else {
    if (v_f16) AttendGroupSimd<true, false>(a);
    else AttendGroupSimd<false, false>(a);
  }
  return true;
}

// Fills every entry this ISA has.
inline void FillSimdTable(KernelTable* t, const char* isa) {
  t->isa = isa;
  auto set = [&](DType d, const ActFormat& a, GemmFn f) { t->matmul[(int)d] = {&a, f}; };
  set(DType::kF32, kF32Format, FloatGemm<DType::kF32>);
  // Kernels that also read their own 16-row tiles (WeightLayout::kPanel16).
  const auto set_packed = [&](DType d, const ActFormat& a, auto kernel) {
    using K = decltype(kernel);
    t->matmul[(int)d] = {&a, K::Gemm, K::Pack, K::PackedGemm, K::Row};
    if constexpr (requires { typename K::Layout; }) {
      t->matmul[(int)d].gemm16_row_grain = K::Layout::kGroupTiles * K::kRows;
    }
  };
  const auto set_float = [&](auto kernel) {
    using K = decltype(kernel);
    t->matmul[(int)K::kDType] = {&kF32TilesFormat, FloatGemm<K::kDType>, K::Pack, K::Gemm, K::Row};
  };
  set_float(FloatLanes16<DType::kF16>{});
  set_float(FloatLanes16<DType::kBF16>{});
#ifdef TERN_AVX512_VNNI
  set_packed(DType::kQ4_0, kQ8CQ4_0Format, RowLanes<DType::kQ4_0>{});
  set(DType::kQ4_1, kImageQ4_1Format, TiledGemm<ImageKernel<DType::kQ4_1>>);
  set_packed(DType::kQ8_0, kQ8CQ8_0Format, RowLanes<DType::kQ8_0>{});
#else
  // Tiles or rows timed per machine (UsePanel16), as the K-quants below:
  // the tiles won on a Zen 5 (docs/kernels.md) and no other CPU has run them.
  set_packed(DType::kQ4_0, kQ8CQ4_0Format, RowLanes8Packed16<DType::kQ4_0>{});
  set(DType::kQ4_1, kQ8PairFormat, TiledGemm<NibblePairKernel<DType::kQ4_1>>);
  set_packed(DType::kQ8_0, kQ8CQ8_0Format, RowLanes8Packed16<DType::kQ8_0>{});
  for (DType d : {DType::kQ4_0, DType::kQ8_0}) t->matmul[(int)d].panel16_timed = true;
#endif
  set(DType::kQ5_0, kQ8PairFormat, TiledGemm<NibblePairKernel<DType::kQ5_0>>);
  set(DType::kQ5_1, kQ8PairFormat, TiledGemm<NibblePairKernel<DType::kQ5_1>>);
#ifdef TERN_AVX512_VNNI
  // Q4_K and Q5_K: tiles or rows timed per machine (UsePanel16), since
  // their tiles' decode leans on a software prefetch measured on one CPU
  // (PrefetchStreamAhead). Q5_K's tiles decoded no faster before it
  // (tinyllama Q5_K_M tg128, 4 rounds: 37.2 against 39.3 tok/s,
  // docs/kernels.md).
  set_packed(DType::kQ4_K, kQ8KImageFormat, Q45KRowLanes<DType::kQ4_K>{});
  set_packed(DType::kQ5_K, kQ8KImageFormat, Q45KRowLanes<DType::kQ5_K>{});
  for (DType d : {DType::kQ4_K, DType::kQ5_K}) t->matmul[(int)d].panel16_timed = true;
  // Q6_K keeps the file's rows: packed with the quants re-encoded it was
  // faster on a Zen 4 but slower on a Zen 5 (docs/kernels.md).
  set(DType::kQ6_K, kQ8KPanelFormat, Q6KRowLanes::Gemm);
#else
  // The K-quants' 16-row tiles decode faster than the file's rows on some
  // CPUs and slower on others (Zen 4: tinyllama Q5_K_M tg128 58.3-59.6
  // against 43.6-46.6 tok/s; Zen 5: Q4_K_M 42.6 against 51.7, Q6_K 30.9
  // against 40.8; docs/kernels.md): each model times both once
  // (UsePanel16).
  set_packed(DType::kQ4_K, kQ8KFormat, Q45KPacked16<DType::kQ4_K>{});
  set_packed(DType::kQ5_K, kQ8KFormat, Q45KPacked16<DType::kQ5_K>{});
  set_packed(DType::kQ6_K, kQ8KFormat, Q6KPacked16{});
  for (DType d : {DType::kQ4_K, DType::kQ5_K, DType::kQ6_K}) t->matmul[(int)d].panel16_timed = true;
#endif
  t->quantize_q8 = Avx2QuantizeQ8;
  t->quantize_q8k = Avx2QuantizeQ8K;
  t->rms_norm = Avx2RmsNorm;
  t->silu_mul = Avx2SiluMul;
  t->softmax = Avx2Softmax;
  t->rope = Avx2Rope;
  t->dot_f32 = Avx2DotF32;
  t->dot_f16 = Avx2DotF16;
  t->axpy_f32 = Avx2AxpyF32;
  t->axpy_f16 = Avx2AxpyF16;
  t->scale_f32 = Avx2ScaleF32;
  t->f32_to_f16 = Avx2F32ToF16;
  t->attend_group = Avx2AttendGroup;
}

}  // namespace
}  // namespace tern::kernels
