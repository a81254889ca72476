// AMX-INT8 build: the AVX-512 VNNI table with Q8_0 and Q4_0 weights through
// tile dot products (tdpbssd). Compiled with the AVX2 flags only; AVX-512
// and AMX are switched on by pragma after every library header, as in
// avx512_vnni_kernels.cc.
//
// Per tile of 16 weight rows x a group of 16 tokens (kAmxQ8) and per block
// b of 32 (in order), with isum the exact int32 sum of q_w x q_a (Q4_0: the
// quants less 8):
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

#include "base/fp16.h"
#include "kernels/kernel_table.h"
#include "kernels/x86/avx2_kernels.h"
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

namespace tern::kernels {
namespace {

// Tile registers (token groups): 0 and 1 the sums of two consecutive
// blocks (16 rows x 16 tokens of int32), 2 and 3 their weights (16 rows x
// 32 quants), 4 the activations (8 x 16 tokens x 4 quants).
template <DType kType>
constexpr int kBlockBytes =
    kType == DType::kQ8_0 ? (int)sizeof(quant::BlockQ8_0) : (int)sizeof(quant::BlockQ4_0);

struct alignas(64) TileConfig {
  uint8_t palette_id;
  uint8_t start_row;
  uint8_t reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
};
static_assert(sizeof(TileConfig) == 64);

// Loads this thread's tile configuration (once per thread; nothing else in
// tern uses the tiles).
void ConfigureTiles() {
  thread_local bool configured = false;
  if (configured) return;
  TileConfig c;
  std::memset(&c, 0, sizeof(c));
  c.palette_id = 1;
  const struct {
    int tile, rows, colsb;
  } shapes[] = {{0, 16, 64}, {1, 16, 64}, {2, 16, 32}, {3, 16, 32}, {4, 8, 64}};
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

// d_w of block b of 16 rows (d leads both formats' blocks): the 4 bytes at
// each row's block start, d and 2 quant bytes (dropped).
template <DType kType>
inline __m512 BlockScales(const uint8_t* w, __m512i offsets, int64_t b) {
  return _mm512_cvtph_ps(
      _mm512_cvtepi32_epi16(_mm512_i32gather_epi32(offsets, w + b * kBlockBytes<kType>, 1)));
}

// d_w of blocks [0, nb) of 16 rows, transposed: out[b * 16 + r].
template <DType kType>
void RowScales(const uint8_t* w, int64_t wrb, int64_t nb, float* out) {
  const __m512i offsets = RowOffsets(wrb);
  for (int64_t b = 0; b < nb; ++b) {
    _mm512_storeu_ps(out + b * 16, BlockScales<kType>(w, offsets, b));
  }
}

// acc[r] (lane t) += float(sums[r][t]) x (d_a[t] x d_w[r]) for r < 16.
inline void Accumulate16(const int32_t* sums, __m512 da, const float* dw, __m512 (&acc)[16]) {
  for (int r = 0; r < 16; ++r) {
    const __m512 s = _mm512_cvtepi32_ps(_mm512_load_si512((const void*)(sums + 16 * r)));
    acc[r] = _mm512_fmadd_ps(s, _mm512_mul_ps(da, _mm512_set1_ps(dw[r])), acc[r]);
  }
}

// y[t * ldy + r] = acc[r] lane t for r < rows, t < tokens.
inline void StoreTile(const __m512 (&acc)[16], int rows, int tokens, float* y, int64_t ldy) {
  alignas(64) float out[16][16];
  for (int r = 0; r < 16; ++r) _mm512_store_ps(out[r], acc[r]);
  for (int t = 0; t < tokens; ++t) {
    for (int r = 0; r < rows; ++r) y[t * ldy + r] = out[r][t];
  }
}

// Block b of a token group into sums (tiles c, a, x: see above); block b of
// the 16 weight rows' quants at wq + b * wstep, rows wrb apart.
#define TERN_AMX_GROUP_BLOCK(c, a, x, b)        \
  do {                                          \
    _tile_zero(c);                              \
    _tile_loadd(a, wq + (b) * wstep, wrb);      \
    _tile_loadd(x, act_g[b].qs, 64);            \
    _tile_dpbssd(c, a, x);                      \
  } while (0)

// One group of 16 tokens against 16 rows, two blocks a step so that the
// tile unit works on one while the vector unit scales the other.
void GroupTile(const uint8_t* wq, int64_t wstep, int64_t wrb, int64_t nb,
               const AmxBlockQ8* act_g, const float* dw, __m512 (&acc)[16]) {
  alignas(64) int32_t sums[2][16 * 16];
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    TERN_AMX_GROUP_BLOCK(0, 2, 4, b);
    TERN_AMX_GROUP_BLOCK(1, 3, 4, b + 1);
    _tile_stored(0, sums[0], 64);
    _tile_stored(1, sums[1], 64);
    Accumulate16(sums[0], _mm512_loadu_ps(act_g[b].d), dw + b * 16, acc);
    Accumulate16(sums[1], _mm512_loadu_ps(act_g[b + 1].d), dw + (b + 1) * 16, acc);
  }
  if (b < nb) {
    TERN_AMX_GROUP_BLOCK(0, 2, 4, b);
    _tile_stored(0, sums[0], 64);
    Accumulate16(sums[0], _mm512_loadu_ps(act_g[b].d), dw + b * 16, acc);
  }
}
#undef TERN_AMX_GROUP_BLOCK

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
  const uint8_t* q = p + 2;
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
  if constexpr (kType == DType::kQ4_0) {
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
    const __m512i s = _mm512_madd_epi16(_mm512_packs_epi32(s01, s23), ones);
    return _mm512_sub_epi32(s, _mm512_set1_epi32(8 * a.qsum));
  }
}

// T tokens (AmxDecodeQ8 rows nb apart) against the 16 rows at wt, on the
// vector unit, the weights loaded once for all: out[t] a row a lane in the
// order of DecodeLaneRows, through the same float operations as GroupTile
// (d_w x d_a multiplied the other way round, the same product).
template <DType kType, int T>
void DecodeTile(const uint8_t* wt, int64_t wrb, int64_t nb, const AmxDecodeQ8* a,
                __m512 (&acc)[T]) {
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
    const __m512 dw = BlockScales<kType>(wt, offsets, b);
    for (int t = 0; t < T; ++t) {
      const AmxDecodeQ8& at = a[t * nb + b];
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(DecodeSums<kType>(w, at)),
                               _mm512_mul_ps(dw, _mm512_set1_ps(at.d)), acc[t]);
    }
  }
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
  int64_t t = 0;
  for (; t + 3 <= n; t += 3) run(std::integral_constant<int, 3>(), t);
  if (n - t == 2) run(std::integral_constant<int, 2>(), t);
  if (n - t == 1) run(std::integral_constant<int, 1>(), t);
}

// Q4_0 quants of blocks [0, nb) of 16 rows as int8 (q - 8), block b's rows
// at out + b * 512, 32 bytes each: the tiles' weights.
void UnpackQ4_0(const uint8_t* w, int64_t wrb, int64_t nb, int8_t* out) {
  const __m128i m4 = _mm_set1_epi8(0x0F), eight = _mm_set1_epi8(8);
  for (int r = 0; r < 16; ++r) {
    const uint8_t* row = w + r * wrb;
    for (int64_t b = 0; b < nb; ++b) {
      const __m128i raw =
          _mm_loadu_si128((const __m128i*)(row + b * kBlockBytes<DType::kQ4_0> + 2));
      const __m128i lo = _mm_sub_epi8(_mm_and_si128(raw, m4), eight);
      const __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(raw, 4), m4), eight);
      int8_t* o = out + (b * 16 + r) * 32;
      _mm_storeu_si128((__m128i*)o, lo);
      _mm_storeu_si128((__m128i*)(o + 16), hi);
    }
  }
}

template <DType kType>
void AmxGemm(const uint8_t* w, int64_t wrb, int64_t rows, const uint8_t* act, int64_t arb,
             int64_t num_tokens, int64_t cols, float* y, int64_t ldy) {
  ConfigureTiles();
  const int64_t nb = cols / 32;
  const int64_t groups = (num_tokens + kAmxGroup - 1) / kAmxGroup;
  const int64_t group_bytes = kAmxGroup * arb;
  const int64_t last_n = num_tokens - (groups - 1) * kAmxGroup;
  const bool few = last_n <= kAmxFewTokens;  // see kAmxFewTokens
  const int64_t tile_groups = few ? groups - 1 : groups;
  thread_local std::vector<float> dw_storage;
  thread_local std::vector<uint8_t> pad;
  thread_local std::vector<int8_t> unpacked;
  // Scratch of the tile path only (a lone token never touches it).
  if (tile_groups > 0) {
    if ((int64_t)dw_storage.size() < 16 * nb) dw_storage.resize(16 * nb);
    if (kType == DType::kQ4_0 && (int64_t)unpacked.size() < 512 * nb) unpacked.resize(512 * nb);
  }
  float* dw = dw_storage.data();
  for (int64_t r0 = 0; r0 < rows; r0 += 16) {
    const int nr = (int)std::min<int64_t>(16, rows - r0);
    const uint8_t* wt = w + r0 * wrb;
    if (nr < 16) {
      // A short last tile: its rows, then zero rows (never stored), so no
      // load reads past the matrix.
      pad.assign(16 * wrb, 0);
      std::memcpy(pad.data(), wt, nr * wrb);
      wt = pad.data();
    }
    // A last group of few tokens: on the vector unit (DecodeFew), before
    // the tiles take the full groups from the same rows in cache.
    if (few) {
      DecodeFew<kType>(wt, wrb, nb, (const AmxDecodeQ8*)(act + groups * group_bytes), last_n, nr,
                       y + (groups - 1) * kAmxGroup * ldy + r0, ldy);
      if (groups == 1) continue;
    }
    RowScales<kType>(wt, wrb, nb, dw);
    // The tiles' weights: Q8_0 as they lie, Q4_0 unpacked once per row tile.
    const uint8_t* wq = wt + 2;
    int64_t wstep = kBlockBytes<kType>, wstride = wrb;
    if constexpr (kType == DType::kQ4_0) {
      UnpackQ4_0(wt, wrb, nb, unpacked.data());
      wq = (const uint8_t*)unpacked.data();
      wstep = 512;
      wstride = 32;
    }
    for (int64_t g = 0; g < tile_groups; ++g) {
      __m512 acc[16];
      for (int r = 0; r < 16; ++r) acc[r] = _mm512_setzero_ps();
      GroupTile(wq, wstep, wstride, nb, (const AmxBlockQ8*)(act + g * group_bytes), dw, acc);
      const int nt = (int)std::min<int64_t>(kAmxGroup, num_tokens - g * kAmxGroup);
      StoreTile(acc, nr, nt, y + g * kAmxGroup * ldy + r0, ldy);
    }
  }
}

}  // namespace

void FillAmxKernels(KernelTable* t) {
  FillAvx512VnniKernels(t);
  t->isa = "amx";
  t->matmul[(int)DType::kQ8_0] = {ActKind::kAmxQ8, AmxGemm<DType::kQ8_0>};
  t->matmul[(int)DType::kQ4_0] = {ActKind::kAmxQ8, AmxGemm<DType::kQ4_0>};
}

}  // namespace tern::kernels
#pragma GCC pop_options
