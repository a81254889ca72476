// AMX-INT8 build: the AVX-512 VNNI table with Q8_0 weights through tile
// dot products (tdpbssd). Compiled with the AVX2 flags only; AVX-512 and AMX
// are switched on by pragma after every library header, as in
// avx512_vnni_kernels.cc.
//
// Q8_0 x kAmxQ8, per tile of 16 weight rows x a group of 16 tokens and per
// block b of 32 (in order), with isum the exact int32 sum of q_w x q_a:
//   acc[r][t] = fma(float(isum[r][t][b]), d_a[t][b] x d_w[r][b], acc[r][t])
// Each (r, t) goes through the same operations whatever the tile holds
// around it, so decode (one token in a group of zeros) equals the same
// token in any batch bitwise.
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
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
constexpr int kQ8BlockBytes = (int)sizeof(quant::BlockQ8_0);

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
  _tile_loadconfig(&c);
  configured = true;
}

// r x wrb in lane r (gather offsets of 16 rows).
inline __m512i RowOffsets(int64_t wrb) {
  return _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                            _mm512_set1_epi32((int)wrb));
}

// d_w of blocks [0, nb) of 16 rows, transposed: out[b * 16 + r].
void RowScales(const uint8_t* w, int64_t wrb, int64_t nb, float* out) {
  const __m512i offsets = RowOffsets(wrb);
  for (int64_t b = 0; b < nb; ++b) {
    // The 4 bytes at each row's block start: d, then 2 quants (dropped).
    const __m512i v = _mm512_i32gather_epi32(offsets, w + b * kQ8BlockBytes, 1);
    _mm512_storeu_ps(out + b * 16, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(v)));
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

// Block b of a token group into sums (tiles c, a, x: see above).
#define TERN_AMX_GROUP_BLOCK(c, a, x, b)                      \
  do {                                                        \
    _tile_zero(c);                                            \
    _tile_loadd(a, wt + (b) * kQ8BlockBytes + 2, wrb);        \
    _tile_loadd(x, act_g[b].qs, 64);                          \
    _tile_dpbssd(c, a, x);                                    \
  } while (0)

// One group of 16 tokens against the 16 rows at wt, two blocks a step so
// that the tile unit works on one while the vector unit scales the other.
void GroupTile(const uint8_t* wt, int64_t wrb, int64_t nb, const AmxBlockQ8* act_g,
               const float* dw, __m512 (&acc)[16]) {
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

// Lane i of the result: the sum of the 8 int32 lanes of row i, where row
// 2j fills lanes 0-7 and row 2j + 1 lanes 8-15 of v[j].
inline __m512i RowSums16(const __m512i (&v)[8]) {
  // Each level adds lane pairs: even lanes of (a, b) + odd lanes of (a, b),
  // a's in the low half; rows keep their order.
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  auto level = [&](__m512i a, __m512i b) {
    return _mm512_add_epi32(_mm512_permutex2var_epi32(a, even, b),
                            _mm512_permutex2var_epi32(a, odd, b));
  };
  const __m512i e0 = level(v[0], v[1]), e1 = level(v[2], v[3]);
  const __m512i e2 = level(v[4], v[5]), e3 = level(v[6], v[7]);
  return level(level(e0, e1), level(e2, e3));
}

// One token against the 16 rows at wt, on the vector unit: the same exact
// int32 sums as the tiles (vpdpbusd on q_w + 128, less 128 x the sum of the
// token's quants), then lane for lane the float operations of GroupTile
// (d_w x d_a multiplied the other way round, the same product).
__m512 DecodeTile(const uint8_t* wt, int64_t wrb, int64_t nb, const AmxDecodeQ8* a) {
  __m512 acc = _mm512_setzero_ps();
  const __m512i offsets = RowOffsets(wrb);
  const __m512i flip = _mm512_set1_epi8((char)0x80);
  const uint8_t* next = wt + 16 * wrb;  // the next tile, prefetched along
  for (int64_t b = 0; b < nb; ++b) {
    // The next tile into L2 along this one (into L1 it would push this
    // tile out: 2 threads from memory, 0.75-0.78 -> 0.85-0.89 of the read
    // probe).
    for (int j = 0; j < 9; ++j) {
      _mm_prefetch((const char*)(next + b * 16 * kQ8BlockBytes + 64 * j), _MM_HINT_T1);
    }
    const __m512i ab = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i*)a[b].qs));
    const uint8_t* p = wt + b * kQ8BlockBytes + 2;
    __m512i v[8];
    for (int j = 0; j < 8; ++j) {
      const __m256i lo = _mm256_loadu_si256((const __m256i*)(p + 2 * j * wrb));
      const __m256i hi = _mm256_loadu_si256((const __m256i*)(p + (2 * j + 1) * wrb));
      const __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
      v[j] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_xor_si512(q, flip), ab);
    }
    const __m512i isum = _mm512_sub_epi32(RowSums16(v), _mm512_set1_epi32(a[b].qsum128));
    const __m512 dwb = _mm512_cvtph_ps(
        _mm512_cvtepi32_epi16(_mm512_i32gather_epi32(offsets, p - 2, 1)));
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dwb, _mm512_set1_ps(a[b].d)),
                          acc);
  }
  return acc;
}

void AmxGemmQ8_0(const uint8_t* w, int64_t wrb, int64_t rows, const uint8_t* act, int64_t arb,
                 int64_t num_tokens, int64_t cols, float* y, int64_t ldy) {
  ConfigureTiles();
  const int64_t nb = cols / 32;
  const int64_t groups = (num_tokens + kAmxGroup - 1) / kAmxGroup;
  const int64_t group_bytes = kAmxGroup * arb;
  thread_local std::vector<float> dw_storage;
  thread_local std::vector<uint8_t> pad;
  if ((int64_t)dw_storage.size() < 16 * nb) dw_storage.resize(16 * nb);
  float* dw = dw_storage.data();
  for (int64_t r0 = 0; r0 < rows; r0 += 16) {
    const int nr = (int)std::min<int64_t>(16, rows - r0);
    const uint8_t* wt = w + r0 * wrb;
    if (nr < 16) {
      // A short last tile: its rows, then zero rows (never stored), so no
      // tile load reads past the matrix.
      pad.assign(16 * wrb, 0);
      std::memcpy(pad.data(), wt, nr * wrb);
      wt = pad.data();
    }
    if (num_tokens == 1) {
      alignas(64) float out[16];
      _mm512_store_ps(out, DecodeTile(wt, wrb, nb, (const AmxDecodeQ8*)(act + group_bytes)));
      std::memcpy(y + r0, out, nr * sizeof(float));
      continue;
    }
    RowScales(wt, wrb, nb, dw);
    for (int64_t g = 0; g < groups; ++g) {
      __m512 acc[16];
      for (int r = 0; r < 16; ++r) acc[r] = _mm512_setzero_ps();
      GroupTile(wt, wrb, nb, (const AmxBlockQ8*)(act + g * group_bytes), dw, acc);
      const int nt = (int)std::min<int64_t>(kAmxGroup, num_tokens - g * kAmxGroup);
      StoreTile(acc, nr, nt, y + g * kAmxGroup * ldy + r0, ldy);
    }
  }
}

}  // namespace

void FillAmxKernels(KernelTable* t) {
  FillAvx512VnniKernels(t);
  t->isa = "amx";
  t->matmul[(int)DType::kQ8_0] = {ActKind::kAmxQ8, AmxGemmQ8_0};
}

}  // namespace tern::kernels
#pragma GCC pop_options
