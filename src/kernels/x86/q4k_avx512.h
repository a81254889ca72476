// Q4_K helpers on 512-bit registers, shared by the AVX-512 VNNI table
// (Q45KRowLanes in simd_kernels_impl.h) and the AMX table's vector-unit path
// (amx_kernels.cc). Include only after the AVX-512 target pragma, as those
// files do; everything here has internal linkage.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/kernel_table.h"

namespace tern::kernels {
namespace {

// The first 16 bytes of super-block b of up to 4 rows, row r in 128-bit
// lane r (zero past R): d and dmin (fp16), then 12 bytes of 6-bit fields.
template <int R>
inline __m512i Q4KHeads(const uint8_t* w, int64_t wrb, int64_t off) {
  static_assert(R >= 1 && R <= 4);
  const auto head = [&](int r) { return _mm_loadu_si128((const __m128i*)(w + r * wrb + off)); };
  __m512i v = _mm512_zextsi128_si512(head(0));
  if constexpr (R > 1) v = _mm512_inserti32x4(v, head(1), 1);
  if constexpr (R > 2) v = _mm512_inserti32x4(v, head(2), 2);
  if constexpr (R > 3) v = _mm512_inserti32x4(v, head(3), 3);
  return v;
}

// Per 128-bit lane of Q4KHeads: the 8 mins (bytes 0..7) and 8 scales (bytes
// 8..15). Mins 0-3 and scales 0-3 are the low 6 bits of field bytes 4-7
// and 0-3; mins and scales 4-7 take their low 4 bits from the high / low
// nibbles of field bytes 8-11 and their top 2 bits from the top bits of
// field bytes 4-7 / 0-3 (field byte i is the lane's byte 4 + i).
inline __m512i Q4KMinsScales(__m512i v) {
  __m512i low = _mm512_shuffle_epi8(
      v, _mm512_broadcast_i32x4(
             _mm_setr_epi8(8, 9, 10, 11, 12, 13, 14, 15, 4, 5, 6, 7, 12, 13, 14, 15)));
  low = _mm512_srlv_epi32(low, _mm512_broadcast_i32x4(_mm_setr_epi32(0, 4, 0, 0)));
  low = _mm512_and_si512(low, _mm512_broadcast_i32x4(_mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f,
                                                                    0x3f3f3f3f, 0x0f0f0f0f)));
  const __m512i top = _mm512_shuffle_epi8(
      v, _mm512_broadcast_i32x4(
             _mm_setr_epi8(-1, -1, -1, -1, 8, 9, 10, 11, -1, -1, -1, -1, 4, 5, 6, 7)));
  return _mm512_or_si512(low,
                         _mm512_and_si512(_mm512_srli_epi16(top, 2), _mm512_set1_epi8(0x30)));
}

// vpermb indices (zeroing the odd bytes) that spread the 8 scale bytes over
// the int16 lanes of vpackssdw(lo, hi): 128-bit lane L holds 4 sums of the
// low-nibble sub-block, then 4 of the high one; lanes 0-1 are sub-blocks
// (0, 1) and lanes 2-3 (2, 3) of the first register, (4, 5) / (6, 7) of the
// second.
struct alignas(64) Q4KScaleIndex {
  int8_t v[4][2][64];  // [row's 128-bit lane][half]
};
constexpr Q4KScaleIndex MakeQ4KScaleIndex() {
  Q4KScaleIndex idx{};
  for (int row = 0; row < 4; ++row) {
    for (int half = 0; half < 2; ++half) {
      for (int j = 0; j < 32; ++j) {
        const int lane = j / 8, hi = (j / 4) % 2;
        idx.v[row][half][2 * j] = (int8_t)(16 * row + 8 + 4 * half + 2 * (lane / 2) + hi);
        idx.v[row][half][2 * j + 1] = 0;
      }
    }
  }
  return idx;
}
constexpr Q4KScaleIndex kQ4KScaleIndex = MakeQ4KScaleIndex();

// Row `row`'s scales (128-bit lane `row` of Q4KMinsScales) as int16 in the
// order of Q4KScaledSum's two vpackssdw results.
inline void Q4KRowScales(__m512i ms, int row, __m512i* sc0, __m512i* sc1) {
  constexpr __mmask64 kEvenBytes = 0x5555555555555555ull;
  *sc0 = _mm512_maskz_permutexvar_epi8(
      kEvenBytes, _mm512_load_si512((const void*)kQ4KScaleIndex.v[row][0]), ms);
  *sc1 = _mm512_maskz_permutexvar_epi8(
      kEvenBytes, _mm512_load_si512((const void*)kQ4KScaleIndex.v[row][1]), ms);
}

// The scaled integer sum of one super-block row with one token (16 int32
// lanes): u0..u3 the low and high nibbles of the row's two 64-byte halves
// of quants (Q5_K: with the fifth bits), a the token's ActBlockQ8KImage
// quants (Q4KActivations), sc0 / sc1 from Q4KRowScales. Each vpdpbusd lane
// is at most 4 x 31 x 127, so vpackssdw is exact.
inline __m512i Q4KScaledSum(__m512i u0, __m512i u1, __m512i u2, __m512i u3,
                            const __m512i (&a)[4], __m512i sc0, __m512i sc1) {
  const __m512i zero = _mm512_setzero_si512();
  const __m512i s01 = _mm512_packs_epi32(_mm512_dpbusd_epi32(zero, u0, a[0]),
                                         _mm512_dpbusd_epi32(zero, u1, a[1]));
  const __m512i s23 = _mm512_packs_epi32(_mm512_dpbusd_epi32(zero, u2, a[2]),
                                         _mm512_dpbusd_epi32(zero, u3, a[3]));
  return _mm512_dpwssd_epi32(_mm512_madd_epi16(s01, sc0), s23, sc1);
}

// A token's 256 ActBlockQ8KImage quants in four registers.
inline void Q4KActivations(const ActBlockQ8KImage& a, __m512i (&out)[4]) {
  for (int k = 0; k < 4; ++k) out[k] = _mm512_loadu_si512((const void*)(a.qs + 64 * k));
}

// The mins bytes (0..7 of each 128-bit lane of Q4KMinsScales) as int16.
inline __m512i Q4KMins(__m512i ms) {
  return _mm512_shuffle_epi8(ms, _mm512_broadcast_i32x4(_mm_setr_epi8(
                                     0, -1, 1, -1, 2, -1, 3, -1, 4, -1, 5, -1, 6, -1, 7, -1)));
}

// Per 128-bit lane (row) of Q4KMins: the mins times the token's sub-block
// sums of quants, in 4 int32 lanes (pairs of sub-blocks).
inline __m512i Q4KMinSums(__m512i mins, const ActBlockQ8KImage& a) {
  return _mm512_madd_epi16(mins,
                           _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i*)a.sums32)));
}

}  // namespace
}  // namespace tern::kernels
