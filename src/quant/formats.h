// Per-format scalar reference kernels behind quant.h's dispatch. Each works on
// whole blocks: num_blocks blocks of the format's struct (quant/blocks.h) and
// num_blocks * block_size floats. importance is nullptr or one weight per
// element (weights of the squared rounding error). search = false gives plain
// round-to-nearest (absmax or min/max scales, no scale search): the baseline
// the searches are measured against; the legacy formats use it also when
// search is true and no importance is given, so that they round exactly like
// the reference rounding other GGUF tools use. Pure and thread-safe.
#pragma once

#include <cstdint>

#include "quant/blocks.h"

namespace tern::quant {

// Legacy 32-element formats (quant_legacy.cc).
void DequantizeQ4_0(const BlockQ4_0* x, float* y, int64_t num_blocks);
void DequantizeQ4_1(const BlockQ4_1* x, float* y, int64_t num_blocks);
void DequantizeQ5_0(const BlockQ5_0* x, float* y, int64_t num_blocks);
void DequantizeQ5_1(const BlockQ5_1* x, float* y, int64_t num_blocks);
void DequantizeQ8_0(const BlockQ8_0* x, float* y, int64_t num_blocks);
void DequantizeQ8_1(const BlockQ8_1* x, float* y, int64_t num_blocks);

// Block: BlockQ4_0, BlockQ4_1, BlockQ5_0 or BlockQ5_1 (instantiated in
// quant_legacy.cc). Each block's scale (and min) searched against the
// importance where one is given and search is set, else rounded from the
// block's extremes.
template <class Block>
void QuantizeLegacy(const float* x, Block* y, int64_t num_blocks, const float* importance,
                    bool search);
void QuantizeQ8_0(const float* x, BlockQ8_0* y, int64_t num_blocks);
void QuantizeQ8_1(const float* x, BlockQ8_1* y, int64_t num_blocks);

// K-quants, 256-element super-blocks (quant_k.cc).
void DequantizeQ2_K(const BlockQ2_K* x, float* y, int64_t num_blocks);
void DequantizeQ3_K(const BlockQ3_K* x, float* y, int64_t num_blocks);
// Block: BlockQ4_K or BlockQ5_K (instantiated in quant_k.cc), as
// QuantizeQ45K below.
template <class Block>
void DequantizeQ45K(const Block* x, float* y, int64_t num_blocks);
void DequantizeQ6_K(const BlockQ6_K* x, float* y, int64_t num_blocks);
void DequantizeQ8_K(const BlockQ8_K* x, float* y, int64_t num_blocks);

void QuantizeQ2_K(const float* x, BlockQ2_K* y, int64_t num_blocks, const float* importance,
                  bool search);
void QuantizeQ3_K(const float* x, BlockQ3_K* y, int64_t num_blocks, const float* importance,
                  bool search);
// Block: BlockQ4_K or BlockQ5_K (8 sub-blocks of 32, 6-bit scales and mins;
// Q5_K's fifth bits in qh).
template <class Block>
void QuantizeQ45K(const float* x, Block* y, int64_t num_blocks, const float* importance,
                  bool search);
void QuantizeQ6_K(const float* x, BlockQ6_K* y, int64_t num_blocks, const float* importance,
                  bool search);
void QuantizeQ8_K(const float* x, BlockQ8_K* y, int64_t num_blocks);

// Q4_K / Q5_K scale packing: 8 six-bit scales and 8 six-bit mins in 12 bytes.
//   bytes 0-3 : scale j (j<4) in bits 0-5; bits 6-7 = bits 4-5 of scale j+4
//   bytes 4-7 : min j   (j<4) in bits 0-5; bits 6-7 = bits 4-5 of min j+4
//   bytes 8-11: low 4 bits of scale j+4 | low 4 bits of min j+4 << 4
void UnpackScaleMinK4(const uint8_t* packed, int j, uint8_t* scale, uint8_t* min);
void PackScaleMinK4(const uint8_t scales[8], const uint8_t mins[8], uint8_t* packed);

// Q3_K scale packing: 16 six-bit values (stored scale + 32) in 12 bytes.
//   bytes 0-7 : low 4 bits of value j (low nibble) and value j+8 (high nibble)
//   bytes 8-11: 2-bit high parts; byte 8+k holds values k, k+4, k+8, k+12 at
//               bits 0-1, 2-3, 4-5, 6-7
int UnpackScaleQ3_K(const uint8_t* packed, int j);  // returns value - 32
void PackScalesQ3_K(const int8_t scales[16], uint8_t* packed);  // each in [-32,31]

}  // namespace tern::quant
