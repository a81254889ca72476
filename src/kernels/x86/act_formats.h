// The x86 tables' private activation layouts (act_format.h has the shared
// ones). Their ActFormat descriptors live with the kernels that read them
// (simd_kernels_impl.h; the AMX groups in amx_kernels.cc).
//
// Thread rules: plain data; Q8KToImage is reentrant.
#pragma once

#include <cstdint>

#include "kernels/act_format.h"

namespace tern::kernels {

// Two ActBlockQ8 of 32 (blocks 2i and 2i+1) rearranged for the AVX2 nibble
// kernels (Q4_0/Q4_1/Q5_0/Q5_1), which unpack two weight blocks into one
// 256-bit register: lo = [x_2i[0..16) | x_2i+1[0..16)], hi = the same for
// [16..32); d and s (= d * sum(qs) / 4) broadcast over each 128-bit half;
// c[j] = 8 x (lo[2j] + lo[2j+1] + hi[2j] + hi[2j+1]), the int16 lanes of
// vpmaddubsw, so the offset of Q4_0 (q - 8) and Q5_0 (q - 16, 2c) is taken
// off in integers. Same d and qs as ActBlockQ8. An odd last block has a zero
// partner.
struct ActBlockQ8Pair {
  float d[8];
  float s[8];
  int8_t lo[32];
  int8_t hi[32];
  int16_t c[16];
};
static_assert(sizeof(ActBlockQ8Pair) == 160);

// One activation super-block of 256 for the 512-bit Q4_K kernel (AVX-512
// VNNI table): the same d and quants as ActBlockQ8K, the quants in the order
// in which a Q4_K super-block's nibbles come in two 64-byte registers
// (32-element sub-blocks 0, 2 | 1, 3 | 4, 6 | 5, 7: low nibbles of bytes
// 0..63, high nibbles, low of 64..127, high); sums32[i] = the sum of the
// quants of sub-block i (natural order), for the mins.
struct ActBlockQ8KImage {
  float d;
  int16_t sums32[8];
  int8_t qs[256];
};
static_assert(sizeof(ActBlockQ8KImage) == 276);
// The same super-block as an ActBlockQ8KImage (act_formats.cc).
void Q8KToImage(const ActBlockQ8K& k, ActBlockQ8KImage* out);

// One activation block of 32 for the AVX-512 Q4_0 / Q8_0 kernel that holds
// 16 weight rows in the lanes (RowLanes): the same d and qs as ActBlockQ8,
// and c = -8 (Q4_0) or -128 (Q8_0) x the sum of qs, the weights' offset's
// share of the block's integer sum (the weights enter vpdpbusd unsigned: the
// nibbles q for q - 8, q + 128 for q).
struct ActBlockQ8C {
  float d;
  int32_t c;
  int8_t qs[32];
};
static_assert(sizeof(ActBlockQ8C) == 40);

// ActImageQ4_1: activations laid out in the byte image of a Q4_1 weight row
// (20-byte blocks), 64 weight bytes per chunk (AVX-512 VNNI table). Blocks
// start at even offsets with their 2-byte scale and min first, so no 4-byte
// lane of a weight row holds quants of two blocks; the activation bytes sit
// where their weight quants sit (zero under scales, mins and past the row's
// end), so one vpdpbusd over 64 raw weight bytes gives each lane an integer
// sum within a single block. lo under the low nibbles (elements 0..15 of a
// block), hi under the high ones (16..31). c: 0 (it would hold an offset's
// share of each lane; Q4_1 has none). d: the lane's block's activation scale;
// s: d x the block's sum of quants / 4 on each of its 4 lanes (the min's
// term). 0 past the row's end. A row of n elements has ceil(n / 32 x 20 /
// 64) chunks.
struct ActImageQ4_1 {
  int8_t lo[64];
  int8_t hi[64];
  int32_t c[16];
  float d[16];
  float s[16];
};
static_assert(sizeof(ActImageQ4_1) == 320);

}  // namespace tern::kernels
