// AMX-INT8 build: the AVX-512 VNNI table with Q8_0, Q4_0, Q4_1, Q5_0, Q5_1,
// Q4_K, Q5_K and Q6_K weights through tile dot products (tdpbssd / tdpbusd; the K-quants: see
// "Q4_K" and "Q6_K" below). Compiled with the AVX2 flags only; AVX-512
// and AMX are switched on by pragma after every library header, as in
// avx512_vnni_kernels.cc.
//
// Per tile of 16 weight rows x a group of 16 tokens (kAmxQ8Format) and per block
// b of 32 (in order), with isum the exact int32 sum of q_w x q_a (Q4_0 /
// Q5_0: the quants less 8 / 16):
//   acc[r][t] = fma(float(isum[r][t][b]), d_a[t][b] x d_w[r][b], acc[r][t])
// A lone token (decode) takes the same exact sums from vpdpbusd on the
// vector unit and the same float operations lane for lane, so it equals the
// same token in any batch bitwise.
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "base/aligned_vector.h"
#include "base/fp16.h"
#include "kernels/kernel_table.h"
#include "kernels/x86/act_formats.h"
#include "kernels/x86/avx2_kernels.h"
#include "kernels/x86/row_prefetch.h"
#include "quant/blocks.h"

namespace tern::kernels {

bool EnableAmx() {
#if defined(__linux__) && defined(__x86_64__)
  constexpr long kArchReqXcompPerm = 0x1023;  // arch_prctl: ask for an XSAVE feature
  constexpr long kXfeatureXtiledata = 18;
  static const bool ok = syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  return ok;
#else
  return false;
#endif
}

}  // namespace tern::kernels

#pragma GCC push_options
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wpsabi"
#pragma GCC target("avx512f,avx512vl,avx512bw,avx512vnni,avx512vbmi,amx-tile,amx-int8")
#include "kernels/x86/q4k_avx512.h"

namespace tern::kernels {
namespace {

// ---- this table's activation formats: groups of 16 tokens as AMX B tiles ----------

// kAmxQ8Format: the ActBlockQ8 quants and scales of 16 tokens at a
// time (a group; the last one padded with zero tokens), laid out per block
// of 32 as an AMX B tile and the tokens' scales:
//   qs[k / 4][token][k % 4] (8 x 64 bytes), then d[token] and s[token]
// (16 floats each), 640 bytes per block. Per token cols / 32 x 40 bytes, so the group holding
// token t starts at act + (t / 16) x 16 x act_row_bytes, and a GemmFn for
// this format is given act at the first token of a group.
// A last group of at most kAmxFewTokens tokens is followed by those tokens'
// blocks as AmxDecodeQ8 (d, the sum of the quants, the quants in order),
// token after token: the kernels take such tokens on the vector unit, up to
// 3 per load of the weights (the same bits as in a tile), cheaper than a
// tile of padding.
struct AmxBlockQ8 {
  int8_t qs[8][16][4];
  float d[16];
  float s[16];  // ActBlockQ8::s, for the mins of Q4_1 / Q5_1
};
static_assert(sizeof(AmxBlockQ8) == 640);
struct AmxDecodeQ8 {
  float d;
  int32_t qsum;
  int8_t qs[32];
};
static_assert(sizeof(AmxDecodeQ8) == 40);
constexpr int kAmxGroup = 16;

// kAmxQ8KFormat (Q4_K / Q5_K weights): the ActBlockQ8K quants of a group of 16
// tokens per super-block of 256 as four B tiles of 64 elements each
// (qs[s][k / 4][token][k % 4], element 64 s + k), then the tokens' d, then
// per token the sub-block sums of the quants in pairs for vpdpwssd against
// the mins (sums[2i] in the low 16 bits, sums[2i + 1] in the high): 16 x 276
// bytes, so per token cols / 256 x 276 bytes, as ActBlockQ8KImage. A last
// group of at most kAmxFewTokens tokens is followed by those tokens'
// ActBlockQ8KImage rows.
struct AmxBlockQ8K {
  int8_t qs[4][16][16][4];
  float d[16];
  int32_t sum_pairs[4][16];
};
static_assert(sizeof(AmxBlockQ8K) == 16 * 276);
// kAmxQ8KPlainFormat (Q6_K weights): the groups as kAmxQ8KFormat, but a last
// group of few tokens is followed by those tokens' ActBlockQ8K rows (the
// quants in order, with the sums of 16 that Q6_K's offset of 32 needs).
// Up to this many tokens a group goes token by token on the vector unit
// (weights loaded once for 3 tokens): tinyllama Q4_0 `tern batch` at 8
// sequences 81 tok/s through a tile, 103-104 so (the VNNI table: 83).
constexpr int kAmxFewTokens = 10;

// Tile registers (token groups): 0 and 1 the sums of two consecutive
// blocks (16 rows x 16 tokens of int32), 2 and 3 their weights (16 rows x
// 32 quants), 4 the activations (8 x 16 tokens x 4 quants). Q4_K: 0 and 1
// its two sums, 5 and 6 its two weight tiles (16 rows x 64), 7 the
// activations (16 x 16 tokens x 4).
template <DType kType>
constexpr int kBlockBytes = kType == DType::kQ8_0   ? (int)sizeof(quant::BlockQ8_0)
                            : kType == DType::kQ4_1 ? (int)sizeof(quant::BlockQ4_1)
                            : kType == DType::kQ5_0 ? (int)sizeof(quant::BlockQ5_0)
                            : kType == DType::kQ5_1 ? (int)sizeof(quant::BlockQ5_1)
                                                    : (int)sizeof(quant::BlockQ4_0);
// The nibble formats: Q4_0 and Q5_0 hold their quants less an offset (8,
// 16), Q4_1 and Q5_1 a min m after d (weights d q + m, q unsigned), Q5_0
// and Q5_1 a fifth bit per quant (32 bits after d / m).
template <DType kType>
constexpr bool kHasMin = kType == DType::kQ4_1 || kType == DType::kQ5_1;
template <DType kType>
constexpr bool kFifthBit = kType == DType::kQ5_0 || kType == DType::kQ5_1;
template <DType kType>
constexpr bool kNibbles = kType != DType::kQ8_0;
template <DType kType>
constexpr int kQuantOffset = kType == DType::kQ8_0   ? 128
                             : kType == DType::kQ4_0 ? 8
                             : kType == DType::kQ5_0 ? 16
                                                     : 0;
// Where a block's fifth bits and nibbles start.
template <DType kType>
constexpr int kHighBitsOffset = kHasMin<kType> ? 4 : 2;
template <DType kType>
constexpr int kNibbleOffset = kHighBitsOffset<kType> + (kFifthBit<kType> ? 4 : 0);

struct alignas(64) TileConfig {
  uint8_t palette_id;
  uint8_t start_row;
  uint8_t reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
};
static_assert(sizeof(TileConfig) == 64);

// Loads this thread's tile configuration (once per thread; nothing else in
// tern uses the tiles). The one thread_local of the kernels, and not
// scratch: it mirrors the tile configuration register, hardware state that
// belongs to the OS thread (ldtilecfg loads it for the thread that runs it,
// whichever pool slot or Workspace that thread serves), so it is kept where
// the register is: per thread.
void ConfigureTiles() {
  thread_local bool configured = false;
  if (configured) return;
  TileConfig c;
  std::memset(&c, 0, sizeof(c));
  c.palette_id = 1;
  const struct {
    int tile, rows, colsb;
  } shapes[] = {{0, 16, 64}, {1, 16, 64}, {2, 16, 32}, {3, 16, 32},
                {4, 8, 64},  {5, 16, 64}, {6, 16, 64}, {7, 16, 64}};
  for (const auto& s : shapes) {
    c.rows[s.tile] = (uint8_t)s.rows;
    c.colsb[s.tile] = (uint16_t)s.colsb;
  }
  // ldtilecfg through asm with the config as a memory input: GCC 12 does
  // not see the builtin read it and drops the stores that fill it.
  __asm__ volatile("ldtilecfg %0" : : "m"(c));
  configured = true;
}

// Lane i holds i.
inline __m512i LaneIndex() {
  return _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
}

// Gather offsets of 16 rows: lane i holds rows[i] x wrb (rows: the row in
// each lane, by default lane r row r).
inline __m512i RowOffsets(int64_t wrb, __m512i rows = LaneIndex()) {
  return _mm512_mullo_epi32(rows, _mm512_set1_epi32((int)wrb));
}

// d_w of block b of 16 rows (d leads every format's blocks; at = 2: the
// min m of Q4_1 / Q5_1): the 4 bytes there, the fp16 and 2 bytes dropped.
template <DType kType, int at = 0>
inline __m512 BlockScales(const uint8_t* w, __m512i offsets, int64_t b) {
  return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(
      _mm512_i32gather_epi32(offsets, w + b * kBlockBytes<kType> + at, 1)));
}

// d_w (at 0) or m_w (at 2) of blocks [0, nb) of 16 rows, transposed:
// out[b * 16 + r].
template <DType kType, int at = 0>
void RowScales(const uint8_t* w, int64_t wrb, int64_t nb, float* out) {
  const __m512i offsets = RowOffsets(wrb);
  for (int64_t b = 0; b < nb; ++b) {
    _mm512_storeu_ps(out + b * 16, BlockScales<kType, at>(w, offsets, b));
  }
}

// acc[r] (lane t) += float(sums[r][t]) x (d_a[t] x d_w[r]) for r < 16,
// then (Q4_1 / Q5_1: mw) += m_w[r] x s_a[t].
template <bool kMin>
inline void Accumulate16(const int32_t* sums, __m512 da, const float* dw, __m512 sa,
                         const float* mw, __m512 (&acc)[16]) {
  for (int r = 0; r < 16; ++r) {
    const __m512 s = _mm512_cvtepi32_ps(_mm512_load_si512((const void*)(sums + 16 * r)));
    acc[r] = _mm512_fmadd_ps(s, _mm512_mul_ps(da, _mm512_set1_ps(dw[r])), acc[r]);
    if constexpr (kMin) acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(mw[r]), sa, acc[r]);
  }
}

// y[t * ldy + r] = acc[r] lane t for r < rows, t < tokens: the 16 x 16
// tile transposed in registers (4 rounds of shuffles), then a masked store
// of each token's rows (256 scalar copies through memory had been 5% of
// tinyllama Q4_0 prefill).
inline void StoreTile(const __m512* acc, int rows, int tokens, float* y, int64_t ldy) {
  __m512 a[16], b[16];
  for (int i = 0; i < 16; i += 2) {  // pairs of rows interleaved
    a[i] = _mm512_unpacklo_ps(acc[i], acc[i + 1]);
    a[i + 1] = _mm512_unpackhi_ps(acc[i], acc[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {  // 4 rows' elements k, k + 1 together
    b[i] = _mm512_shuffle_ps(a[i], a[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    b[i + 1] = _mm512_shuffle_ps(a[i], a[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    b[i + 2] = _mm512_shuffle_ps(a[i + 1], a[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    b[i + 3] = _mm512_shuffle_ps(a[i + 1], a[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  // b[4 g + j], 128-bit lane L: rows 4 g .. 4 g + 3 of token 4 L + j.
  for (int j = 0; j < 4; ++j) {  // 128-bit lanes of rows 0-7 / 8-15
    a[j] = _mm512_shuffle_f32x4(b[j], b[4 + j], _MM_SHUFFLE(2, 0, 2, 0));
    a[4 + j] = _mm512_shuffle_f32x4(b[j], b[4 + j], _MM_SHUFFLE(3, 1, 3, 1));
    a[8 + j] = _mm512_shuffle_f32x4(b[8 + j], b[12 + j], _MM_SHUFFLE(2, 0, 2, 0));
    a[12 + j] = _mm512_shuffle_f32x4(b[8 + j], b[12 + j], _MM_SHUFFLE(3, 1, 3, 1));
  }
  const __mmask16 keep = (__mmask16)((1u << rows) - 1);
  for (int j = 0; j < 4; ++j) {
    for (int h = 0; h < 2; ++h) {  // tokens 4 L + j: L = 0, 2 (h = 0) and 1, 3
      const __m512 lo = a[4 * h + j], hi = a[8 + 4 * h + j];
      const __m512 t0 = _mm512_shuffle_f32x4(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
      const __m512 t1 = _mm512_shuffle_f32x4(lo, hi, _MM_SHUFFLE(3, 1, 3, 1));
      const int tok0 = 4 * h + j, tok1 = 4 * (h + 2) + j;
      if (tok0 < tokens) _mm512_mask_storeu_ps(y + tok0 * ldy, keep, t0);
      if (tok1 < tokens) _mm512_mask_storeu_ps(y + tok1 * ldy, keep, t1);
    }
  }
}

// Block b of a token group into sums (tiles c, a, x: see above); block b of
// the 16 weight rows' quants at wq + b * wstep, rows wrb apart (signed, or
// unsigned for the formats with a min).
#define TERN_AMX_GROUP_BLOCK(c, a, x, b)                      \
  do {                                                        \
    _tile_zero(c);                                            \
    _tile_loadd(a, wq + (b) * wstep, wrb);                    \
    _tile_loadd(x, act_g[b].qs, 64);                          \
    if constexpr (kHasMin<kType>) _tile_dpbusd(c, a, x);      \
    else _tile_dpbssd(c, a, x);                               \
  } while (0)

// The float operations of block b (sums: its tile).
#define TERN_AMX_ACCUMULATE(sums, b)                                                   \
  Accumulate16<kHasMin<kType>>(sums, _mm512_loadu_ps(act_g[b].d), dw + (b) * 16,       \
                               _mm512_loadu_ps(act_g[b].s), mw + (b) * 16, acc)

// One group of 16 tokens against 16 rows, two blocks a step so that the
// tile unit works on one while the vector unit scales the other. Always
// inlined: out of line its accumulators live in memory (tinyllama Q4_0
// pp512 283-287 against 338 tok/s). mw: the rows' mins (Q4_1 / Q5_1).
template <DType kType>
__attribute__((always_inline)) inline void GroupTile(
    const uint8_t* wq, int64_t wstep, int64_t wrb, int64_t nb, const AmxBlockQ8* act_g,
    const float* dw, const float* mw, __m512 (&acc)[16]) {
  alignas(64) int32_t sums[2][16 * 16];
  for (int r = 0; r < 16; ++r) acc[r] = _mm512_setzero_ps();
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    TERN_AMX_GROUP_BLOCK(0, 2, 4, b);
    TERN_AMX_GROUP_BLOCK(1, 3, 4, b + 1);
    _tile_stored(0, sums[0], 64);
    _tile_stored(1, sums[1], 64);
    TERN_AMX_ACCUMULATE(sums[0], b);
    TERN_AMX_ACCUMULATE(sums[1], b + 1);
  }
  if (b < nb) {
    TERN_AMX_GROUP_BLOCK(0, 2, 4, b);
    _tile_stored(0, sums[0], 64);
    TERN_AMX_ACCUMULATE(sums[0], b);
  }
}
#undef TERN_AMX_GROUP_BLOCK
#undef TERN_AMX_ACCUMULATE

// Adds lane pairs: lane k < 8 of the result is a[2k] + a[2k + 1], lane
// 8 + k is b[2k] + b[2k + 1] (rows spread over lanes keep their order).
inline __m512i PairSums(__m512i a, __m512i b) {
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  return _mm512_add_epi32(_mm512_permutex2var_epi32(a, even, b),
                          _mm512_permutex2var_epi32(a, odd, b));
}

// Block b of 16 rows (at p, the block's start in row 0, rows wrb apart)
// in registers for DecodeSums: Q8_0, q_w + 128 of 2 rows a register (8
// lanes each); Q4_0, the low (elements 0..15) and high (16..31) nibbles of
// 4 rows a register (4 lanes each).
struct DecodeWeights {
  __m512i v[8];
};

// The strides of 16 rows: rows 4k + i of a block lie at base + k x w4 +
// i x wrb, and i x wrb (0, wrb, 2 wrb, w3) is an addressing mode; an opaque
// base a group of 4 keeps GCC from holding 16 row pointers (it spills them
// to vector registers and moves them back every block: tinyllama Q4_0 tg
// 38.6-39.2 -> 41.5-42.0 tok/s).
struct RowStrides {
  int64_t wrb, w3, w4;
  explicit RowStrides(int64_t row_bytes) : wrb(row_bytes), w3(3 * row_bytes), w4(4 * row_bytes) {}
};

template <typename T>
inline T Opaque(T v) {
  __asm__("" : "+r"(v));
  return v;
}

template <DType kType>
inline DecodeWeights LoadDecodeWeights(const uint8_t* p, const RowStrides& s) {
  DecodeWeights w;
  const uint8_t* q = p + (kNibbles<kType> ? kNibbleOffset<kType> : 2);
  if constexpr (kType == DType::kQ8_0) {
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    for (int k = 0; k < 4; ++k) {
      const uint8_t* g = Opaque(q + k * s.w4);
      const uint8_t* at[4] = {g, g + s.wrb, g + 2 * s.wrb, g + s.w3};
      for (int h = 0; h < 2; ++h) {
        const __m256i lo = _mm256_loadu_si256((const __m256i*)at[2 * h]);
        const __m256i hi = _mm256_loadu_si256((const __m256i*)at[2 * h + 1]);
        w.v[2 * k + h] =
            _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1), flip);
      }
    }
  } else {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    for (int j = 0; j < 4; ++j) {
      const uint8_t* b4 = Opaque(q + j * s.w4);
      __m512i raw = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i*)b4));
      raw = _mm512_inserti32x4(raw, _mm_loadu_si128((const __m128i*)(b4 + s.wrb)), 1);
      raw = _mm512_inserti32x4(raw, _mm_loadu_si128((const __m128i*)(b4 + 2 * s.wrb)), 2);
      raw = _mm512_inserti32x4(raw, _mm_loadu_si128((const __m128i*)(b4 + s.w3)), 3);
      w.v[2 * j] = _mm512_and_si512(raw, m4);
      w.v[2 * j + 1] = _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4);
      if constexpr (kFifthBit<kType>) {
        // The fifth bits (bit i of qh: element i's): 16 bits a row for
        // each half, row r's at bits 16 r of a byte mask.
        const uint8_t* h4 = b4 - (kNibbleOffset<kType> - kHighBitsOffset<kType>);
        const uint8_t* at[4] = {h4, h4 + s.wrb, h4 + 2 * s.wrb, h4 + s.w3};
        uint32_t qh[4];
        for (int i = 0; i < 4; ++i) std::memcpy(&qh[i], at[i], 4);
        const __m128i h = _mm_loadu_si128((const __m128i*)qh);
        const __mmask64 lo = _cvtu64_mask64((uint64_t)_mm_cvtsi128_si64(_mm_cvtepi32_epi16(h)));
        const __mmask64 hi = _cvtu64_mask64(
            (uint64_t)_mm_cvtsi128_si64(_mm_cvtepi32_epi16(_mm_srli_epi32(h, 16))));
        const __m512i bit = _mm512_set1_epi8(0x10);
        w.v[2 * j] = _mm512_mask_add_epi8(w.v[2 * j], lo, w.v[2 * j], bit);
        w.v[2 * j + 1] = _mm512_mask_add_epi8(w.v[2 * j + 1], hi, w.v[2 * j + 1], bit);
      }
    }
  }
  return w;
}

// The row in each lane of DecodeSums: Q8_0 lane r is row r; Q4_0 lane
// 4i + k is row 4k + i (its int16 tree, below, works within 128-bit lanes).
// The map is its own inverse: it orders the gather of the rows' scales and
// puts the rows back in order at the end.
template <DType kType>
inline __m512i DecodeLaneRows() {
  if constexpr (kNibbles<kType>) {
    return _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);
  } else {
    return LaneIndex();
  }
}

// Exact int32 sums of a block of 16 rows (LoadDecodeWeights) with one
// token's quants, a row a lane (DecodeLaneRows), less the offset (Q8_0: 128,
// Q4_0: 8) x the sum of the token's quants. vpdpbusd on the unsigned
// weights, then Q8_0: a tree of PairSums; Q4_0: a lane sum is at most 8
// products of a nibble (<= 15) and a quant (|q| <= 128), 15360, and a pair
// of them 30720, both within int16: vpackssdw (exact) then vpmaddwd by
// ones, twice, fewer port-5 operations than PairSums (tinyllama Q4_0 tg
// with the Opaque row bases 41.5-42.0 -> 42.1-42.2 tok/s).
template <DType kType>
inline __m512i DecodeSums(const DecodeWeights& w, const AmxDecodeQ8& a) {
  const __m512i zero = _mm512_setzero_si512();
  if constexpr (kType == DType::kQ8_0) {
    const __m512i ab = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i*)a.qs));
    __m512i v[8];
    for (int j = 0; j < 8; ++j) v[j] = _mm512_dpbusd_epi32(zero, w.v[j], ab);
    const __m512i s = PairSums(PairSums(PairSums(v[0], v[1]), PairSums(v[2], v[3])),
                               PairSums(PairSums(v[4], v[5]), PairSums(v[6], v[7])));
    return _mm512_sub_epi32(s, _mm512_set1_epi32(128 * a.qsum));
  } else {
    const __m512i alo = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i*)a.qs));
    const __m512i ahi = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i*)(a.qs + 16)));
    __m512i v[4];
    for (int j = 0; j < 4; ++j) {
      v[j] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, w.v[2 * j], alo), w.v[2 * j + 1], ahi);
    }
    const __m512i ones = _mm512_set1_epi16(1);
    const __m512i s01 = _mm512_madd_epi16(_mm512_packs_epi32(v[0], v[1]), ones);
    const __m512i s23 = _mm512_madd_epi16(_mm512_packs_epi32(v[2], v[3]), ones);
    __m512i s;
    if constexpr (kFifthBit<kType>) {
      // Q5_0 / Q5_1 (quants <= 31): a lane is at most 31744, still within int16,
      // but a pair 63488 is not; the pairs are added in int32 instead (the
      // same lanes as vpackssdw + vpmaddwd).
      const __m512 a01 = _mm512_castsi512_ps(s01), a23 = _mm512_castsi512_ps(s23);
      s = _mm512_add_epi32(
          _mm512_castps_si512(_mm512_shuffle_ps(a01, a23, _MM_SHUFFLE(2, 0, 2, 0))),
          _mm512_castps_si512(_mm512_shuffle_ps(a01, a23, _MM_SHUFFLE(3, 1, 3, 1))));
    } else {
      s = _mm512_madd_epi16(_mm512_packs_epi32(s01, s23), ones);
    }
    if constexpr (kQuantOffset<kType> == 0) return s;
    return _mm512_sub_epi32(s, _mm512_set1_epi32(kQuantOffset<kType> * a.qsum));
  }
}

// T tokens (AmxDecodeQ8 rows nb apart) against the 16 rows at wt, on the
// vector unit, the weights loaded once for all: out[t] a row a lane in the
// order of DecodeLaneRows, through the same float operations as GroupTile
// (d_w x d_a multiplied the other way round, the same product).
// Not inlined (as DecodeRows4Q4K): inlined into the row-tile walk, Q4_0
// decode streamed 10% slower; out of line it is 5-8% faster than the
// session-8 build (tinyllama Q4_0 tg 43-45 -> 46-48 tok/s).
template <DType kType, int T>
__attribute__((noinline)) void DecodeTile(const uint8_t* wt, int64_t wrb, int64_t nb,
                                          const AmxDecodeQ8* a, __m512 (&acc)[T]) {
  constexpr int kBB = kBlockBytes<kType>;
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  const __m512i offsets = RowOffsets(wrb, DecodeLaneRows<kType>());
  const RowStrides strides(wrb);
  // The next tile into L2 along this one (into L1 it would push this tile
  // out: Q8_0, 2 threads from memory, 0.75-0.78 -> 0.85-0.89 of the read
  // probe; without it 0.5-0.7 in the model).
  const uint8_t* next = wt + 16 * wrb;
  constexpr int kLines = (16 * kBB + 63) / 64;
  for (int64_t b = 0; b < nb; ++b) {
    for (int j = 0; j < kLines; ++j) {
      _mm_prefetch((const char*)(next + b * 16 * kBB + 64 * j), _MM_HINT_T1);
    }
    const DecodeWeights w = LoadDecodeWeights<kType>(wt + b * kBB, strides);
    // d (and Q4_1 / Q5_1: m, the next 2 bytes) of the 16 rows, one gather.
    const __m512i dm = _mm512_i32gather_epi32(offsets, wt + b * kBB, 1);
    const __m512 dw = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dm));
    [[maybe_unused]] __m512 mw;
    if constexpr (kHasMin<kType>) {
      mw = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dm, 16)));
    }
    for (int t = 0; t < T; ++t) {
      const AmxDecodeQ8& at = a[t * nb + b];
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(DecodeSums<kType>(w, at)),
                               _mm512_mul_ps(dw, _mm512_set1_ps(at.d)), acc[t]);
      if constexpr (kHasMin<kType>) {
        // s_a as the quantizer forms ActBlockQ8::s (AmxBlockQ8::s).
        acc[t] = _mm512_fmadd_ps(mw, _mm512_set1_ps(at.d * (float)at.qsum), acc[t]);
      }
    }
  }
}

// Up to 3 tokens of [0, n) at a time: run(std::integral_constant<int, T>, t0).
template <class Run>
inline void ForTokenRuns(int64_t n, Run run) {
  int64_t t = 0;
  for (; t + 3 <= n; t += 3) run(std::integral_constant<int, 3>(), t);
  if (n - t == 2) run(std::integral_constant<int, 2>(), t);
  if (n - t == 1) run(std::integral_constant<int, 1>(), t);
}

// Tokens [0, n) of a few-token group (n <= kAmxFewTokens) against the 16
// rows at wt (nr of them real), up to 3 at a time.
template <DType kType>
void DecodeFew(const uint8_t* wt, int64_t wrb, int64_t nb, const AmxDecodeQ8* a, int64_t n,
               int nr, float* y, int64_t ldy) {
  auto run = [&](auto tokens, int64_t t0) {
    constexpr int T = decltype(tokens)::value;
    __m512 acc[T];
    DecodeTile<kType, T>(wt, wrb, nb, a + t0 * nb, acc);
    for (int t = 0; t < T; ++t) {
      alignas(64) float out[16];
      _mm512_store_ps(out, _mm512_permutexvar_ps(DecodeLaneRows<kType>(), acc[t]));
      std::memcpy(y + (t0 + t) * ldy, out, nr * sizeof(float));
    }
  };
  ForTokenRuns(n, run);
}

// Q4_0 / Q5_0 quants of blocks [0, nb) of 16 rows as int8 (q - 8 / q -
// 16), block b's rows at out + b * 512, 32 bytes each: the tiles' weights.
template <DType kType>
void UnpackNibbles(const uint8_t* w, int64_t wrb, int64_t nb, int8_t* out) {
  const __m128i m4 = _mm_set1_epi8(0x0F), offset = _mm_set1_epi8(kQuantOffset<kType>);
  for (int r = 0; r < 16; ++r) {
    const uint8_t* row = w + r * wrb;
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* blk = row + b * kBlockBytes<kType>;
      __m128i q0 = _mm_loadu_si128((const __m128i*)(blk + kNibbleOffset<kType>));
      __m128i q1 = _mm_and_si128(_mm_srli_epi16(q0, 4), m4);
      q0 = _mm_and_si128(q0, m4);
      if constexpr (kFifthBit<kType>) {
        uint32_t qh;
        std::memcpy(&qh, blk + kHighBitsOffset<kType>, 4);
        const __m128i bit = _mm_set1_epi8(0x10);
        q0 = _mm_mask_add_epi8(q0, _cvtu32_mask16(qh & 0xFFFF), q0, bit);
        q1 = _mm_mask_add_epi8(q1, _cvtu32_mask16(qh >> 16), q1, bit);
      }
      const __m128i lo = _mm_sub_epi8(q0, offset);
      const __m128i hi = _mm_sub_epi8(q1, offset);
      int8_t* o = out + (b * 16 + r) * 32;
      _mm_storeu_si128((__m128i*)o, lo);
      _mm_storeu_si128((__m128i*)(o + 16), hi);
    }
  }
}

// How a batch splits into groups of kAmxGroup tokens: a last group of at
// most kAmxFewTokens tokens goes to the vector unit (see kAmxFewTokens).
struct AmxGroups {
  int64_t groups, last_n;
  bool few;
  int64_t tile_groups;
  explicit AmxGroups(int64_t num_tokens)
      : groups((num_tokens + kAmxGroup - 1) / kAmxGroup),
        last_n(num_tokens - (groups - 1) * kAmxGroup),
        few(last_n <= kAmxFewTokens),
        tile_groups(few ? groups - 1 : groups) {}
};

// The walk of the AMX kernels over tiles of 16 rows: a short last tile is
// its rows, then zero rows (never stored), so no load reads past the
// matrix. Per tile, a last group of few tokens first, on the vector unit
// (few(wt, nr, act of those tokens, y)), before the tiles take the full
// groups from the same rows in cache; then prepare(wt) once and
// groups(act, group_bytes, n, accs): the 16 accumulators of each of the n
// full groups (group g at accs + 16 g).
template <class Few, class Prepare, class Groups>
void AmxRowTiles(const uint8_t* w, int64_t wrb, int64_t rows, const uint8_t* act, int64_t arb,
                 int64_t num_tokens, float* y, int64_t ldy, WorkerScratch* scratch, Few few,
                 Prepare prepare, Groups groups) {
  ConfigureTiles();
  const AmxGroups split(num_tokens);
  const int64_t group_bytes = kAmxGroup * arb;
  // 64-byte aligned (WorkerScratch's buffers are).
  __m512* accs = (__m512*)scratch->Get<float>(ScratchBuf::kAmxAcc, 256 * split.tile_groups);
  for (int64_t r0 = 0; r0 < rows; r0 += 16) {
    const int nr = (int)std::min<int64_t>(16, rows - r0);
    const uint8_t* wt = w + r0 * wrb;
    if (nr < 16) {
      uint8_t* pad = scratch->Get<uint8_t>(ScratchBuf::kAmxPad, 16 * wrb);
      std::memcpy(pad, wt, nr * wrb);
      std::memset(pad + nr * wrb, 0, (16 - nr) * wrb);
      wt = pad;
    }
    if (split.few) {
      few(wt, nr, act + split.groups * group_bytes,
          y + (split.groups - 1) * kAmxGroup * ldy + r0);
      if (split.groups == 1) continue;
    }
    prepare(wt);
    groups(act, group_bytes, split.tile_groups, accs);
    for (int64_t g = 0; g < split.tile_groups; ++g) {
      const int nt = (int)std::min<int64_t>(kAmxGroup, num_tokens - g * kAmxGroup);
      StoreTile(accs + 16 * g, nr, nt, y + g * kAmxGroup * ldy + r0, ldy);
    }
  }
}

template <DType kType>
void AmxGemm(const uint8_t* w, int64_t wrb, int64_t rows, const uint8_t* act, int64_t arb,
             int64_t num_tokens, int64_t cols, float* y, int64_t ldy, WorkerScratch* scratch) {
  const int64_t nb = cols / 32;
  const AmxGroups split(num_tokens);
  // Scratch of the tile path only (a lone token never touches it): d_w,
  // then m_w; the nibbles unpacked.
  float* dw = nullptr;
  int8_t* unpacked = nullptr;
  if (split.tile_groups > 0) {
    dw = scratch->Get<float>(ScratchBuf::kAmxRowScales, 32 * nb);
    if (kNibbles<kType>) unpacked = scratch->Get<int8_t>(ScratchBuf::kAmxUnpacked, 512 * nb);
  }
  float* mw = dw != nullptr ? dw + 16 * nb : nullptr;
  // The tiles' weights: Q8_0 as they lie, Q4_0 unpacked once per row tile.
  const uint8_t* wq = nullptr;
  int64_t wstep = kBlockBytes<kType>, wstride = wrb;
  AmxRowTiles(
      w, wrb, rows, act, arb, num_tokens, y, ldy, scratch,
      [&](const uint8_t* wt, int nr, const uint8_t* a, float* yf) {
        DecodeFew<kType>(wt, wrb, nb, (const AmxDecodeQ8*)a, split.last_n, nr, yf, ldy);
      },
      [&](const uint8_t* wt) {
        RowScales<kType>(wt, wrb, nb, dw);
        if constexpr (kHasMin<kType>) RowScales<kType, 2>(wt, wrb, nb, mw);
        wq = wt + 2;
        if constexpr (kNibbles<kType>) {
          UnpackNibbles<kType>(wt, wrb, nb, unpacked);
          wq = (const uint8_t*)unpacked;
          wstep = 512;
          wstride = 32;
        }
      },
      [&](const uint8_t* a, int64_t group_bytes, int64_t n, __m512* accs) {
        // Group by group: here the weights of the whole row tile stream from
        // L2 (blocks taken 4-32 at a time for all groups, as Q4_K does,
        // measured 0-8% slower for Q4_0 and Q8_0).
        for (int64_t g = 0; g < n; ++g) {
          __m512 acc[16];  // in registers while the group runs
          GroupTile<kType>(wq, wstep, wstride, nb, (const AmxBlockQ8*)(a + g * group_bytes), dw,
                           mw, acc);
          for (int r = 0; r < 16; ++r) accs[16 * g + r] = acc[r];
        }
      });
}

// ---- Q4_K ---------------------------------------------------------------------------
//
// Per (row, token) and super-block, with C_j the exact int32 sum of q_w x q_a
// over sub-block j (q_w the 4-bit quant, 0..15), sc_j / m_j its 6-bit scale
// and min, and asum_j the sum of the token's quants over it:
//   S = sum_j sc_j x C_j,  M = sum_j m_j x asum_j   (exact int32)
//   acc = fma(float(S), d_w x d_a, acc); acc = fnmadd(float(M), dmin_w x d_a, acc)
// The tiles take S with each scale split as sc = 8 sh + sl (both <= 7): the
// quants unpacked once per row tile as q x sl and q x sh (<= 105, bytes) give
// S = C_l + 8 C_h, four tdpbusd of 64 elements each per sum and super-block.
// A few tokens take S on the vector unit as Q4KKernel512 does (vpdpbusd,
// then int16 products with the scales) and reduce each row's lanes to one
// sum; the same integers, then the same float operations lane for lane.

// Q4_K and Q5_K: the same head (d, dmin, 12 bytes of 6-bit scales and
// mins); Q5_K then has 32 bytes of fifth bits (qh: bit 2 c of byte i is
// element 64 c + i's, bit 2 c + 1 element 64 c + 32 + i's), then the
// nibbles as Q4_K's. Its quants (<= 31) times a scale part (<= 7) still fit
// a byte (217), and 4 products with activation quants an int16 lane.
template <DType kType>
constexpr int kKBytes =
    kType == DType::kQ4_K ? (int)sizeof(quant::BlockQ4_K) : (int)sizeof(quant::BlockQ5_K);
template <DType kType>
constexpr int kKQsOffset = kType == DType::kQ4_K ? 16 : 48;
// How far ahead a decode row stream is prefetched. Tinyllama tg, Q5_K:
// 1 KiB 28.9, 2 KiB 32.2, 4 KiB 32.5-32.9 tok/s (VNNI 33.4-33.9); Q4_K the
// same within noise from 1 to 4 KiB.
template <DType kType>
constexpr int64_t kKPrefetchBytes = kType == DType::kQ4_K ? 1024 : 4096;
// ... and into L2 for Q5_K: 35.1-35.6 tok/s against 32.8 into L1 (VNNI
// 34.1-34.2); Q4_K stays level with VNNI into L1.
template <DType kType>
constexpr _mm_hint kKPrefetchHint = kType == DType::kQ4_K ? _MM_HINT_T0 : _MM_HINT_T1;

// A 16-row tile of K-quant weights unpacked for the tiles (thread-local
// storage): lo / hi at [((b x 4 + s) x 16 + r) x 64 + k] (super-block b,
// element 64 s + k, row r), Q4_K / Q5_K q x sl and q x sh, Q6_K P_l and P_h
// (see "Q6_K" below); d, dmin at [b x 16 + r]; min_pairs at
// [(b x 4 + i) x 16 + r]: m_2i | m_2i+1 << 16 (dmin and min_pairs: Q4_K and
// Q5_K only).
struct KTile {
  uint8_t* lo;
  uint8_t* hi;
  float* d;
  float* dmin;
  int32_t* min_pairs;
};

template <DType kType>
void UnpackQ4K(const uint8_t* w, int64_t wrb, int64_t nb, const KTile& t) {
  constexpr int kQ4KBytes = kKBytes<kType>;
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  for (int64_t b = 0; b < nb; ++b) {
    for (int g = 0; g < 4; ++g) {
      // 4 rows' d, dmin (fp16) and mins / scales (bytes, Q4KMinsScales).
      alignas(64) uint8_t heads[64], ms[64];
      const __m512i h = Q4KHeads<4>(w + 4 * g * wrb, wrb, b * kQ4KBytes);
      _mm512_store_si512((void*)heads, h);
      _mm512_store_si512((void*)ms, Q4KMinsScales(h));
      for (int i = 0; i < 4; ++i) {
        const int r = 4 * g + i;
        const uint8_t* m = ms + 16 * i;
        const uint8_t* sc = m + 8;
        uint16_t d, dmin;
        std::memcpy(&d, heads + 16 * i, 2);
        std::memcpy(&dmin, heads + 16 * i + 2, 2);
        t.d[b * 16 + r] = _cvtsh_ss(d);
        t.dmin[b * 16 + r] = _cvtsh_ss(dmin);
        for (int j = 0; j < 4; ++j) {
          t.min_pairs[(b * 4 + j) * 16 + r] = (int32_t)m[2 * j] | ((int32_t)m[2 * j + 1] << 16);
        }
        const uint8_t* blk = w + r * wrb + b * kQ4KBytes;
        const uint8_t* qs = blk + kKQsOffset<kType>;
        [[maybe_unused]] const __m256i qh =
            _mm256_loadu_si256((const __m256i*)(blk + 16));  // Q5_K's fifth bits
        for (int s = 0; s < 4; ++s) {
          // Elements 64 s .. 64 s + 31: low nibbles (sub-block 2 s), then the
          // high ones (2 s + 1). A byte times a scale <= 7 stays within its
          // byte, so 16-bit multiplies scale both bytes of a lane.
          const __m256i raw = _mm256_loadu_si256((const __m256i*)(qs + 32 * s));
          __m256i q0 = _mm256_and_si256(raw, m4);
          __m256i q1 = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
          if constexpr (kType == DType::kQ5_K) {
            const __m256i one = _mm256_set1_epi8(1);
            q0 = _mm256_or_si256(
                q0, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * s), one), 4));
            q1 = _mm256_or_si256(
                q1, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * s + 1), one), 4));
          }
          const int64_t o = ((b * 4 + s) * 16 + r) * 64;
          for (int part = 0; part < 2; ++part) {
            uint8_t* dst = part == 0 ? t.lo : t.hi;
            const int sa = part == 0 ? sc[2 * s] & 7 : sc[2 * s] >> 3;
            const int sb = part == 0 ? sc[2 * s + 1] & 7 : sc[2 * s + 1] >> 3;
            _mm256_storeu_si256((__m256i*)(dst + o),
                                _mm256_mullo_epi16(q0, _mm256_set1_epi16((short)sa)));
            _mm256_storeu_si256((__m256i*)(dst + o + 32),
                                _mm256_mullo_epi16(q1, _mm256_set1_epi16((short)sb)));
          }
        }
      }
    }
  }
}

// The n full groups of 16 tokens (group_bytes apart from act) against a
// 16-row tile, super-block by super-block: the tile's 8 KiB of unpacked
// weights for a super-block stay in L1 while every group's activations
// (4 KiB) stream past; the groups' accumulators wait in accs (group g at
// accs + 16 g), each (row, token) still summed over the super-blocks in
// order.
template <DType kType>
void GroupsTileK(const KTile& w, int64_t nb, const uint8_t* act, int64_t group_bytes,
                 int64_t n, __m512* accs) {
  // Q6_K: S = C_l + 64 C_h (P_h signed), no mins; else S = C_l + 8 C_h.
  constexpr bool kQ6 = kType == DType::kQ6_K;
  constexpr int kHighShift = kQ6 ? 6 : 3;
  alignas(64) int32_t sums[2][16 * 16];
  for (int64_t i = 0; i < 16 * n; ++i) accs[i] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const int32_t* mp = w.min_pairs + b * 64;
    for (int64_t g = 0; g < n; ++g) {
      const AmxBlockQ8K& a = ((const AmxBlockQ8K*)(act + g * group_bytes))[b];
      __m512* acc = accs + 16 * g;
      _tile_zero(0);
      _tile_zero(1);
      for (int s = 0; s < 4; ++s) {
        const int64_t o = (b * 4 + s) * 16 * 64;
        _tile_loadd(7, a.qs[s], 64);
        _tile_loadd(5, w.lo + o, 64);
        _tile_dpbusd(0, 5, 7);
        _tile_loadd(6, w.hi + o, 64);
        if constexpr (kQ6) {
          _tile_dpbssd(1, 6, 7);
        } else {
          _tile_dpbusd(1, 6, 7);
        }
      }
      _tile_stored(0, sums[0], 64);
      _tile_stored(1, sums[1], 64);
      const __m512 da = _mm512_loadu_ps(a.d);
      [[maybe_unused]] __m512i pairs[4];
      if constexpr (!kQ6) {
        for (int i = 0; i < 4; ++i) pairs[i] = _mm512_loadu_si512((const void*)a.sum_pairs[i]);
      }
      for (int r = 0; r < 16; ++r) {
        const __m512i s = _mm512_add_epi32(
            _mm512_load_si512((const void*)(sums[0] + 16 * r)),
            _mm512_slli_epi32(_mm512_load_si512((const void*)(sums[1] + 16 * r)), kHighShift));
        const __m512 v = _mm512_fmadd_ps(
            _mm512_cvtepi32_ps(s), _mm512_mul_ps(da, _mm512_set1_ps(w.d[b * 16 + r])), acc[r]);
        if constexpr (kQ6) {
          acc[r] = v;
        } else {
          __m512i m = _mm512_madd_epi16(pairs[0], _mm512_set1_epi32(mp[r]));
          for (int i = 1; i < 4; ++i) {
            m = _mm512_dpwssd_epi32(m, pairs[i], _mm512_set1_epi32(mp[16 * i + r]));
          }
          acc[r] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(m),
                                    _mm512_mul_ps(da, _mm512_set1_ps(w.dmin[b * 16 + r])), v);
        }
      }
    }
  }
}

// Each row's total over its 128-bit lane: row r's 16 lanes in v[r] (r < 4),
// summed into every lane of 128-bit lane r (exact int32).
inline __m512i RowTotals4(const __m512i (&v)[4]) {
  __m512i s = PairSums(PairSums(v[0], v[1]), PairSums(v[2], v[3]));
  s = _mm512_add_epi32(s, _mm512_shuffle_epi32(s, _MM_PERM_BADC));
  return _mm512_add_epi32(s, _mm512_shuffle_epi32(s, _MM_PERM_CDAB));
}

// The same for 4 lanes a row already in its 128-bit lane.
inline __m512i LaneTotals(__m512i s) {
  s = _mm512_add_epi32(s, _mm512_shuffle_epi32(s, _MM_PERM_BADC));
  return _mm512_add_epi32(s, _mm512_shuffle_epi32(s, _MM_PERM_CDAB));
}

// T tokens (ActBlockQ8KImage rows nb apart) against the 4 Q4_K rows at w
// (rows wrb apart) on the vector unit: row r's result in the lanes of
// 128-bit lane r of out[t]. One sequential stream a row, prefetched
// kKPrefetchBytes ahead (past a row's end, into the row 4 further: the next
// call's).
// Not inlined: inlined into DecodeFewK's caller it streamed 7% slower
// (tinyllama Q4_K tg 40.7-41.3 against 43-44 tok/s), the same code.
template <DType kType, int T>
__attribute__((noinline)) void DecodeRows4Q4K(const uint8_t* w, int64_t wrb, int64_t nb,
                                              const ActBlockQ8KImage* a, __m512 (&acc)[T]) {
  constexpr int kQ4KBytes = kKBytes<kType>;
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  const int64_t rb = nb * kQ4KBytes;
  const RowStrides strides(wrb);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* base = Opaque(w + b * kQ4KBytes);
    const uint8_t* at[4] = {base, base + strides.wrb, base + 2 * strides.wrb, base + strides.w3};
    const int64_t pf = b * kQ4KBytes + kKPrefetchBytes<kType>;
    __m512i aq[T][4];
    for (int t = 0; t < T; ++t) Q4KActivations(a[t * nb + b], aq[t]);
    __m512i heads = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i*)at[0]));
    for (int i = 1; i < 4; ++i) {
      heads = _mm512_inserti32x4(heads, _mm_loadu_si128((const __m128i*)at[i]), i);
    }
    const __m512i ms = Q4KMinsScales(heads);
    __m512i srow[T][4];
    for (int i = 0; i < 4; ++i) {
      // Each row's prefetches just before its work, the choice per line
      // (PrefetchAddress): one choice a block, or the addresses formed
      // together, streamed 4-8% slower (tinyllama tg 39.5 against 43).
      for (int k = 0; k < kQ4KBytes; k += 64) {
        _mm_prefetch(PrefetchAddress(w, wrb, i, 4, pf + k, rb), kKPrefetchHint<kType>);
      }
      const __m512i q0 = _mm512_loadu_si512((const void*)(at[i] + kKQsOffset<kType>));
      const __m512i q1 = _mm512_loadu_si512((const void*)(at[i] + kKQsOffset<kType> + 64));
      const __m512i m4 = _mm512_set1_epi8(0x0F);
      __m512i u[4] = {_mm512_and_si512(q0, m4), _mm512_and_si512(_mm512_srli_epi16(q0, 4), m4),
                      _mm512_and_si512(q1, m4), _mm512_and_si512(_mm512_srli_epi16(q1, 4), m4)};
      if constexpr (kType == DType::kQ5_K) {
        // u[k]'s bytes 0-31 are chunk c = 2 (k / 2) (low or high nibbles: k
        // % 2), bytes 32-63 chunk c + 1: qh bit 2 c + k % 2, then 2 further.
        const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i*)(at[i] + 16)));
        const __m512i one = _mm512_set1_epi8(1);
        for (int k = 0; k < 4; ++k) {
          const int bit = 4 * (k / 2) + k % 2;
          const __m512i count = _mm512_inserti64x4(_mm512_set1_epi16((short)bit),
                                                   _mm256_set1_epi16((short)(bit + 2)), 1);
          u[k] = _mm512_or_si512(
              u[k], _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(qh, count), one), 4));
        }
      }
      __m512i sc0, sc1;
      Q4KRowScales(ms, i, &sc0, &sc1);
      for (int t = 0; t < T; ++t) {
        srow[t][i] = Q4KScaledSum(u[0], u[1], u[2], u[3], aq[t], sc0, sc1);
      }
    }
    // d | dmin << 16 of row r over 128-bit lane r.
    const __m512i dd = _mm512_shuffle_epi32(heads, _MM_PERM_AAAA);
    const __m512 d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dd));
    const __m512 dmin = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dd, 16)));
    const __m512i mins = Q4KMins(ms);
    for (int t = 0; t < T; ++t) {
      const ActBlockQ8KImage& at_t = a[t * nb + b];
      const __m512i s = RowTotals4(srow[t]);
      const __m512i m = LaneTotals(Q4KMinSums(mins, at_t));
      const __m512 da = _mm512_set1_ps(at_t.d);
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(d, da), acc[t]);
      acc[t] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(m), _mm512_mul_ps(dmin, da), acc[t]);
    }
  }
}

// ---- Q6_K ---------------------------------------------------------------------------
//
// Per (row, token) and super-block, with q the 6-bit quant (0..63), sc_j the
// signed 8-bit scale of sub-block j (16 elements) and a the token's quants:
//   S = sum_i sc_j(i) x (q_i - 32) x a_i   (exact int32, |S| <= 2^27)
//   acc = fma(float(S), d_w x d_a, acc)
// The tiles take S from the weights' products P = sc x (q - 32), in
// [-4064, 4096], split as P = 64 P_h + P_l with P_l in [0, 63] and P_h in
// [-64, 64], both bytes, unpacked once per row tile: S = C_l + 64 C_h, a
// tdpbusd (P_l) and a tdpbssd (P_h) of 64 elements each per quarter
// super-block. A few tokens take S on the vector unit: vpdpbusd of q with
// the token's quants, int16 products with the scales, less 32 x sum_j sc_j x
// (the token's sum over sub-block j); each row's lanes reduced to one sum,
// then the same float operation.

// A Q6_K super-block: ql (128 bytes), qh (64), 16 int8 scales, d (fp16).
// Element 128 h + 32 i + l (h < 2, i < 4, l < 32) has its low 4 bits in
// ql byte 64 h + 32 (i % 2) + l (the low nibble for i < 2, else the high
// one) and its top 2 bits at bit 2 i of qh byte 32 h + l.
constexpr int kQ6KBytes = (int)sizeof(quant::BlockQ6_K);
constexpr int kQ6KScales = 192;
constexpr int kQ6KD = 208;
// How far ahead a decode row stream is prefetched, and into which cache, as
// for Q5_K. Tinyllama Q6_K tg (VNNI 30.2-30.6 tok/s alongside): 512 B,
// 1 KiB or 2 KiB into L1 28.2-29.0; into L2 2 KiB 28.8, 3 KiB 29.2-29.6,
// 4 KiB 29.5-30.7, 6 KiB 29.8-29.9, 8 KiB 30.0-30.2.
constexpr int64_t kQ6KPrefetchBytes = 4096;
constexpr _mm_hint kQ6KPrefetchHint = _MM_HINT_T1;

// The quants (0..63) of the super-block at blk: elements 64 k .. 64 k + 63
// in order in q[k].
inline void Q6KQuants(const uint8_t* blk, __m512i (&q)[4]) {
  const __m512i m4 = _mm512_set1_epi8(0x0F), top = _mm512_set1_epi8(0x30);
  // qh bits 2 i, 2 i + 1 to bits 4, 5: the low nibbles are i = 0 (bytes
  // 0-31) and 1 (32-63), the high ones i = 2 and 3.
  const __m512i up = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
  const __m512i down = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
  for (int h = 0; h < 2; ++h) {
    const __m512i ql = _mm512_loadu_si512((const void*)(blk + 64 * h));
    const __m512i qh =
        _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i*)(blk + 128 + 32 * h)));
    // a | (b & c)
    q[2 * h] = _mm512_ternarylogic_epi32(_mm512_and_si512(ql, m4), _mm512_sllv_epi16(qh, up),
                                         top, 0xF8);
    q[2 * h + 1] = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                                             _mm512_srlv_epi16(qh, down), top, 0xF8);
  }
}

// vpermt2b indices 2 j: the low bytes of the int16 lanes of two registers.
struct alignas(64) LowBytesIndex {
  int8_t v[64];
};
constexpr LowBytesIndex MakeLowBytesIndex() {
  LowBytesIndex e{};
  for (int j = 0; j < 64; ++j) e.v[j] = (int8_t)(2 * j);
  return e;
}
constexpr LowBytesIndex kLowBytesIndex = MakeLowBytesIndex();

// The Q6_K tiles' weights (KTile lo, hi, d) of 16 rows.
void UnpackQ6K(const uint8_t* w, int64_t wrb, int64_t nb, const KTile& t) {
  const __m512i offset = _mm512_set1_epi8(32), low6 = _mm512_set1_epi8(63);
  // Byte j of vpermt2b(x, even, y): byte 2 j of x then y (their low bytes).
  const __m512i even = _mm512_load_si512((const void*)kLowBytesIndex.v);
  // int16 lanes 0-15 take a sub-block's scale, 16-31 the next one's.
  const __m512i second = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(1), 1);
  for (int r = 0; r < 16; ++r) {
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* blk = w + r * wrb + b * kQ6KBytes;
      uint16_t d;
      std::memcpy(&d, blk + kQ6KD, 2);
      t.d[b * 16 + r] = _cvtsh_ss(d);
      const __m512i sc = _mm512_castsi256_si512(
          _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i*)(blk + kQ6KScales))));
      __m512i q[4];
      Q6KQuants(blk, q);
      for (int k = 0; k < 4; ++k) {
        const __m512i qs = _mm512_sub_epi8(q[k], offset);
        const __m512i px = _mm512_mullo_epi16(
            _mm512_cvtepi8_epi16(_mm512_castsi512_si256(qs)),
            _mm512_permutexvar_epi16(_mm512_add_epi16(second, _mm512_set1_epi16(4 * k)), sc));
        const __m512i py = _mm512_mullo_epi16(
            _mm512_cvtepi8_epi16(_mm512_extracti64x4_epi64(qs, 1)),
            _mm512_permutexvar_epi16(_mm512_add_epi16(second, _mm512_set1_epi16(4 * k + 2)), sc));
        const int64_t o = ((b * 4 + k) * 16 + r) * 64;
        _mm512_storeu_si512((void*)(t.lo + o),
                            _mm512_and_si512(_mm512_permutex2var_epi8(px, even, py), low6));
        _mm512_storeu_si512((void*)(t.hi + o),
                            _mm512_permutex2var_epi8(_mm512_srai_epi16(px, 6), even,
                                                     _mm512_srai_epi16(py, 6)));
      }
    }
  }
}


// vpermb indices (into the scales broadcast to every 128-bit lane, the
// result's even bytes zeroed) that put the scales in the high bytes of the
// int16 lanes of vpackssdw(v[2 p], v[2 p + 1]) (v[k]: vpdpbusd over
// elements 64 k ..): 128-bit lane L holds 4 sums of sub-block 8 p + L, then
// 4 of 8 p + 4 + L.
struct alignas(64) Q6KScaleIndex {
  int8_t v[2][64];
};
constexpr Q6KScaleIndex MakeQ6KScaleIndex() {
  Q6KScaleIndex idx{};
  for (int p = 0; p < 2; ++p) {
    for (int j = 0; j < 32; ++j) {
      const int lane = j / 8, m = j % 8;
      idx.v[p][2 * j] = 0;
      idx.v[p][2 * j + 1] = (int8_t)(8 * p + 4 * (m / 4) + lane);
    }
  }
  return idx;
}
constexpr Q6KScaleIndex kQ6KScaleIndex = MakeQ6KScaleIndex();

// T tokens (ActBlockQ8K rows nb apart) against the 4 Q6_K rows at w (rows
// wrb apart) on the vector unit: row r's result in the lanes of 128-bit
// lane r of acc[t]. Prefetched as DecodeRows4Q4K; not inlined, as it.
template <int T>
__attribute__((noinline)) void DecodeRows4Q6K(const uint8_t* w, int64_t wrb, int64_t nb,
                                              const ActBlockQ8K* a, __m512 (&acc)[T]) {
  constexpr __mmask64 kOddBytes = 0xAAAAAAAAAAAAAAAAull;
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  const int64_t rb = nb * kQ6KBytes;
  const RowStrides strides(wrb);
  const __m512i zero = _mm512_setzero_si512();
  const __m512i lane_rows = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* base = Opaque(w + b * kQ6KBytes);
    const uint8_t* at[4] = {base, base + strides.wrb, base + 2 * strides.wrb, base + strides.w3};
    const int64_t pf = b * kQ6KBytes + kQ6KPrefetchBytes;
    __m512i aq[T][4];
    __m256i asums[T];
    for (int t = 0; t < T; ++t) {
      const ActBlockQ8K& at_t = a[t * nb + b];
      for (int k = 0; k < 4; ++k) aq[t][k] = _mm512_loadu_si512((const void*)(at_t.qs + 64 * k));
      asums[t] = _mm256_loadu_si256((const __m256i*)at_t.sums16);
    }
    __m512i srow[T][4];
    uint16_t dbits[4];
    for (int i = 0; i < 4; ++i) {
      for (int k = 0; k < kQ6KBytes; k += 64) {
        _mm_prefetch(PrefetchAddress(w, wrb, i, 4, pf + k, rb), kQ6KPrefetchHint);
      }
      std::memcpy(&dbits[i], at[i] + kQ6KD, 2);
      __m512i q[4];
      Q6KQuants(at[i], q);
      const __m128i sc8 = _mm_loadu_si128((const __m128i*)(at[i] + kQ6KScales));
      const __m512i scb = _mm512_broadcast_i32x4(sc8);
      const __m512i sc01 = _mm512_srai_epi16(
          _mm512_maskz_permutexvar_epi8(
              kOddBytes, _mm512_load_si512((const void*)kQ6KScaleIndex.v[0]), scb),
          8);
      const __m512i sc23 = _mm512_srai_epi16(
          _mm512_maskz_permutexvar_epi8(
              kOddBytes, _mm512_load_si512((const void*)kQ6KScaleIndex.v[1]), scb),
          8);
      const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
      for (int t = 0; t < T; ++t) {
        // Each vpdpbusd lane is at most 4 x 63 x 128: vpackssdw is exact.
        __m512i v[4];
        for (int k = 0; k < 4; ++k) v[k] = _mm512_dpbusd_epi32(zero, q[k], aq[t][k]);
        const __m512i s = _mm512_dpwssd_epi32(_mm512_madd_epi16(_mm512_packs_epi32(v[0], v[1]),
                                                                sc01),
                                              _mm512_packs_epi32(v[2], v[3]), sc23);
        const __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(sc16, asums[t]), 5);
        srow[t][i] = _mm512_sub_epi32(s, _mm512_zextsi256_si512(offset));
      }
    }
    // d of row r over 128-bit lane r.
    const __m128i dh = _mm_loadl_epi64((const __m128i*)dbits);
    const __m512 dw = _mm512_permutexvar_ps(lane_rows, _mm512_castps128_ps512(_mm_cvtph_ps(dh)));
    for (int t = 0; t < T; ++t) {
      const __m512 da = _mm512_set1_ps(a[t * nb + b].d);
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(RowTotals4(srow[t])), _mm512_mul_ps(dw, da),
                               acc[t]);
    }
  }
}

// The few-token activations of a K-quant: Q6_K's plain ActBlockQ8K rows
// (kAmxQ8KPlainFormat), Q4_K's and Q5_K's images (kAmxQ8KFormat).
template <DType kType>
using KDecodeAct =
    std::conditional_t<kType == DType::kQ6_K, ActBlockQ8K, ActBlockQ8KImage>;

// Tokens [0, n) against rows [0, rows) at w, up to 3 tokens a pass over 4
// rows; rows past `rows` up to a multiple of 4 are read (zero padding).
template <DType kType>
void DecodeFewK(const uint8_t* w, int64_t wrb, int64_t rows, int64_t nb,
                const KDecodeAct<kType>* a, int64_t n, float* y, int64_t ldy) {
  for (int64_t r0 = 0; r0 < rows; r0 += 4) {
    const int nr = (int)std::min<int64_t>(4, rows - r0);
    auto run = [&](auto tokens, int64_t t0) {
      constexpr int T = decltype(tokens)::value;
      __m512 acc[T];
      if constexpr (kType == DType::kQ6_K) {
        DecodeRows4Q6K<T>(w + r0 * wrb, wrb, nb, a + t0 * nb, acc);
      } else {
        DecodeRows4Q4K<kType, T>(w + r0 * wrb, wrb, nb, a + t0 * nb, acc);
      }
      for (int t = 0; t < T; ++t) {
        alignas(64) float out[16];
        _mm512_store_ps(out, acc[t]);
        for (int r = 0; r < nr; ++r) y[(t0 + t) * ldy + r0 + r] = out[4 * r];
      }
    };
    ForTokenRuns(n, run);
  }
}

template <DType kType>
void AmxGemmK(const uint8_t* w, int64_t wrb, int64_t rows, const uint8_t* act, int64_t arb,
              int64_t num_tokens, int64_t cols, float* y, int64_t ldy, WorkerScratch* scratch) {
  const int64_t nb = cols / 256;
  const AmxGroups split(num_tokens);
  KTile tile{};
  if (split.tile_groups > 0) {
    // lo, hi: 4 KiB a super-block each; d, dmin: 64 bytes; min_pairs: 256.
    uint8_t* p = scratch->Get<uint8_t>(ScratchBuf::kAmxKTile, nb * (2 * 4096 + 384));
    tile = {p, p + 4096 * nb, (float*)(p + 8192 * nb), (float*)(p + 8192 * nb) + 16 * nb,
            (int32_t*)(p + 8192 * nb + 128 * nb)};
  }
  AmxRowTiles(
      w, wrb, rows, act, arb, num_tokens, y, ldy, scratch,
      [&](const uint8_t* wt, int nr, const uint8_t* a, float* yf) {
        DecodeFewK<kType>(wt, wrb, nr, nb, (const KDecodeAct<kType>*)a, split.last_n, yf, ldy);
      },
      [&](const uint8_t* wt) {
        if constexpr (kType == DType::kQ6_K) {
          UnpackQ6K(wt, wrb, nb, tile);
        } else {
          UnpackQ4K<kType>(wt, wrb, nb, tile);
        }
      },
      [&](const uint8_t* a, int64_t group_bytes, int64_t n, __m512* accs) {
        GroupsTileK<kType>(tile, nb, a, group_bytes, n, accs);
      });
}

// Each group of 16 tokens quantized as Q rows (ActBlockQ8 / ActBlockQ8K:
// the same quants and scales as the other tables, through the table's
// quantize_q8 / quantize_q8k), then laid out per block as the group's tiles
// (fill_group(q, token, group block)) and, after a last group of few
// tokens, as those tokens' blocks for the vector unit (fill_decode(q,
// decode block)).
template <class Q, class Group, class Decode, int kBlockCols, class Quantize, class FillGroup,
          class FillDecode>
const uint8_t* PrepareAmx(const float* x, int64_t num_tokens, int64_t cols,
                          AlignedVector<uint8_t>* scratch, ThreadPool* pool, Workspace* workspace,
                          Quantize quantize, FillGroup fill_group, FillDecode fill_decode) {
  const int64_t nb = cols / kBlockCols;
  const int64_t groups = (num_tokens + kAmxGroup - 1) / kAmxGroup;
  const int64_t group_bytes = nb * (int64_t)sizeof(Group);
  const int64_t last_n = num_tokens - (groups - 1) * kAmxGroup;
  const bool few_last = last_n <= kAmxFewTokens;
  const int64_t decode_bytes = few_last ? last_n * nb * (int64_t)sizeof(Decode) : 0;
  if ((int64_t)scratch->size() < group_bytes * groups + decode_bytes) {
    scratch->resize(group_bytes * groups + decode_bytes);
  }
  uint8_t* act = scratch->data();
  workspace->Reserve(pool != nullptr ? pool->num_threads() : 1);
  auto body = [&](int64_t g0, int64_t g1, int slot) {
    Q* rows = workspace->Slot(slot).Get<Q>(ScratchBuf::kAmxQuantRows, kAmxGroup * nb);
    for (int64_t g = g0; g < g1; ++g) {
      const int64_t n = std::min<int64_t>(kAmxGroup, num_tokens - g * kAmxGroup);
      for (int64_t t = 0; t < n; ++t) {
        quantize(x + (g * kAmxGroup + t) * cols, cols, rows + t * nb);
      }
      if (few_last && g == groups - 1) {
        // The kernels take these tokens on the vector unit: no tiles.
        Decode* dec = (Decode*)(act + groups * group_bytes);
        for (int64_t i = 0; i < n * nb; ++i) fill_decode(rows[i], dec[i]);
        continue;
      }
      Group* out = (Group*)(act + g * group_bytes);
      if (n < kAmxGroup) std::memset((void*)out, 0, group_bytes);  // the padding tokens
      for (int64_t b = 0; b < nb; ++b) {
        for (int64_t t = 0; t < n; ++t) fill_group(rows[t * nb + b], (int)t, out[b]);
      }
    }
  };
  if (groups >= 2) ForRange(pool, groups, 1, body);
  else body(0, groups, 0);
  return act;
}

const uint8_t* PrepareAmxQ8(const KernelTable& table, const float* x, int64_t num_tokens,
                            int64_t cols, AlignedVector<uint8_t>* scratch, ThreadPool* pool,
                            Workspace* workspace) {
  return PrepareAmx<ActBlockQ8, AmxBlockQ8, AmxDecodeQ8, 32>(
      x, num_tokens, cols, scratch, pool, workspace, table.quantize_q8,
      [](const ActBlockQ8& a, int t, AmxBlockQ8& o) {
        o.d[t] = a.d;
        o.s[t] = a.s;
        for (int k4 = 0; k4 < 8; ++k4) std::memcpy(o.qs[k4][t], a.qs + 4 * k4, 4);
      },
      [](const ActBlockQ8& a, AmxDecodeQ8& o) {
        int32_t sum = 0;
        for (int k = 0; k < 32; ++k) sum += a.qs[k];
        o.d = a.d;
        o.qsum = sum;
        std::memcpy(o.qs, a.qs, 32);
      });
}

void FillGroupQ8K(const ActBlockQ8K& a, int t, AmxBlockQ8K& o) {
  o.d[t] = a.d;
  for (int s = 0; s < 4; ++s) {
    for (int k4 = 0; k4 < 16; ++k4) std::memcpy(o.qs[s][k4][t], a.qs + 64 * s + 4 * k4, 4);
  }
  for (int i = 0; i < 4; ++i) {
    o.sum_pairs[i][t] = (int32_t)(uint16_t)a.sums32[2 * i] |
                        (int32_t)((uint32_t)(uint16_t)a.sums32[2 * i + 1] << 16);
  }
}

const uint8_t* PrepareAmxQ8K(const KernelTable& table, const float* x, int64_t num_tokens,
                             int64_t cols, AlignedVector<uint8_t>* scratch, ThreadPool* pool,
                             Workspace* workspace) {
  return PrepareAmx<ActBlockQ8K, AmxBlockQ8K, ActBlockQ8KImage, 256>(
      x, num_tokens, cols, scratch, pool, workspace, table.quantize_q8k, FillGroupQ8K,
      [](const ActBlockQ8K& a, ActBlockQ8KImage& o) { Q8KToImage(a, &o); });
}

const uint8_t* PrepareAmxQ8KPlain(const KernelTable& table, const float* x, int64_t num_tokens,
                                  int64_t cols, AlignedVector<uint8_t>* scratch,
                                  ThreadPool* pool, Workspace* workspace) {
  return PrepareAmx<ActBlockQ8K, AmxBlockQ8K, ActBlockQ8K, 256>(
      x, num_tokens, cols, scratch, pool, workspace, table.quantize_q8k, FillGroupQ8K,
      [](const ActBlockQ8K& a, ActBlockQ8K& o) { o = a; });
}

int64_t AmxQ8RowBytes(int64_t cols) {
  return cols / 32 * (int64_t)sizeof(AmxBlockQ8) / kAmxGroup;
}
int64_t AmxQ8KRowBytes(int64_t cols) {
  return cols / 256 * (int64_t)sizeof(AmxBlockQ8K) / kAmxGroup;
}
// A tile reads 512 bytes of a group's activations per block, so they may
// come from anywhere in L2, and bigger chunks spread the per-row-tile set-up
// (Q4_0 unpacking) wider; whole groups.
int64_t AmxChunkTokens(int64_t row_bytes) {
  return std::max<int64_t>(kAmxGroup, 4 * kActChunkBytes / row_bytes / kAmxGroup * kAmxGroup);
}

constexpr ActFormat kAmxQ8Format{.name = "amx_q8",
                                 .row_bytes = AmxQ8RowBytes,
                                 .prepare = PrepareAmxQ8,
                                 .chunk_tokens = AmxChunkTokens};
constexpr ActFormat kAmxQ8KFormat{.name = "amx_q8k",
                                  .row_bytes = AmxQ8KRowBytes,
                                  .prepare = PrepareAmxQ8K,
                                  .chunk_tokens = AmxChunkTokens};
constexpr ActFormat kAmxQ8KPlainFormat{.name = "amx_q8k_plain",
                                       .row_bytes = AmxQ8KRowBytes,
                                       .prepare = PrepareAmxQ8KPlain,
                                       .chunk_tokens = AmxChunkTokens};

}  // namespace

void FillAmxKernels(KernelTable* t) {
  FillAvx512VnniKernels(t);
  t->isa = "amx";
  t->matmul[(int)DType::kQ8_0] = {&kAmxQ8Format, AmxGemm<DType::kQ8_0>};
  t->matmul[(int)DType::kQ4_0] = {&kAmxQ8Format, AmxGemm<DType::kQ4_0>};
  t->matmul[(int)DType::kQ4_1] = {&kAmxQ8Format, AmxGemm<DType::kQ4_1>};
  t->matmul[(int)DType::kQ5_0] = {&kAmxQ8Format, AmxGemm<DType::kQ5_0>};
  t->matmul[(int)DType::kQ5_1] = {&kAmxQ8Format, AmxGemm<DType::kQ5_1>};
  t->matmul[(int)DType::kQ4_K] = {&kAmxQ8KFormat, AmxGemmK<DType::kQ4_K>};
  t->matmul[(int)DType::kQ5_K] = {&kAmxQ8KFormat, AmxGemmK<DType::kQ5_K>};
  t->matmul[(int)DType::kQ6_K] = {&kAmxQ8KPlainFormat, AmxGemmK<DType::kQ6_K>};
}

}  // namespace tern::kernels
#pragma GCC pop_options
