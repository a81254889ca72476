// Block layouts of the GGUF quantized formats, byte for byte as stored in
// files (little-endian, no padding). Half-precision scales are raw uint16 bits
// (see base/fp16.h). The static_assert after each block pins the size that DType traits state.
#pragma once

#include <cstdint>

namespace tern::quant {

constexpr int kQK = 32;        // elements per block of the legacy formats
constexpr int kQK_K = 256;     // elements per super-block of the K-quants
constexpr int kKScaleSize = 12;

// x = d * (q - 8), q in [0,15]; element j in low nibble of qs[j], element
// j+16 in the high nibble of qs[j].
struct BlockQ4_0 { uint16_t d; uint8_t qs[kQK / 2]; };
static_assert(sizeof(BlockQ4_0) == 18);
// x = d * q + m
struct BlockQ4_1 { uint16_t d; uint16_t m; uint8_t qs[kQK / 2]; };
static_assert(sizeof(BlockQ4_1) == 20);
// 5th bit of element j in bit j of qh (little-endian uint32); x = d * (q - 16)
struct BlockQ5_0 { uint16_t d; uint8_t qh[4]; uint8_t qs[kQK / 2]; };
static_assert(sizeof(BlockQ5_0) == 22);
struct BlockQ5_1 { uint16_t d; uint16_t m; uint8_t qh[4]; uint8_t qs[kQK / 2]; };
static_assert(sizeof(BlockQ5_1) == 24);
struct BlockQ8_0 { uint16_t d; int8_t qs[kQK]; };
static_assert(sizeof(BlockQ8_0) == 34);
// s = d * sum(qs)
struct BlockQ8_1 { uint16_t d; uint16_t s; int8_t qs[kQK]; };
static_assert(sizeof(BlockQ8_1) == 36);

struct BlockQ2_K {
  uint8_t scales[kQK_K / 16];  // low 4 bits scale, high 4 bits min
  uint8_t qs[kQK_K / 4];       // 2-bit quants
  uint16_t d;                  // super-block scale for scales
  uint16_t dmin;               // super-block scale for mins
};
static_assert(sizeof(BlockQ2_K) == 84);
struct BlockQ3_K {
  uint8_t hmask[kQK_K / 8];    // high bit of each quant
  uint8_t qs[kQK_K / 4];       // low 2 bits
  uint8_t scales[12];          // 16 scales, 6 bits each
  uint16_t d;
};
static_assert(sizeof(BlockQ3_K) == 110);
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleSize];  // 8 scales + 8 mins, 6 bits each
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ4_K) == 144);
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleSize];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ5_K) == 176);
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];       // low 4 bits
  uint8_t qh[kQK_K / 4];       // high 2 bits
  int8_t scales[kQK_K / 16];   // 8-bit scales
  uint16_t d;
};
static_assert(sizeof(BlockQ6_K) == 210);
struct BlockQ8_K {
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];   // sums of groups of 16
};
static_assert(sizeof(BlockQ8_K) == 292);

}  // namespace tern::quant
