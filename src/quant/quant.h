// Scalar reference quantization and dequantization of GGUF block formats.
// This is the spec: SIMD kernels in kernels/ must agree with it. Layouts are
// those of quant/blocks.h. All functions are pure and thread-safe.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace tern::quant {

// F32, F16, BF16, Q8_0, Q8_1, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K,
// Q6_K, Q8_K.
bool CanDequantize(DType t);
// Dequantizes n elements (a multiple of BlockSize(t)) from src into dst.
void DequantizeRow(DType t, const void* src, float* dst, int64_t n);

// The same set as CanDequantize.
bool CanQuantize(DType t);
// Quantizes n elements (a multiple of BlockSize(t)) of src into dst
// (RowBytes(t, n) bytes). importance: optional per-element weights of the
// squared rounding error (an imatrix column importance), nullptr = uniform.
void QuantizeRow(DType t, const float* src, void* dst, int64_t n,
                 const float* importance = nullptr);
// What QuantizeRow does per format (details in docs/quantization.md):
// - Q4_0, Q5_0 (scale = the value of largest magnitude / -8, -16), Q8_0
//   (largest magnitude / 127), Q4_1, Q5_1 (span [min, max]) round to nearest
//   when importance is nullptr, as the common GGUF reference rounding does,
//   so requantizing dequantized blocks reproduces their bytes. With
//   importance, Q4_0..Q5_1 search the block scale (and min) minimising
//   sum(importance * err^2). Q8_0/Q8_1/Q8_K ignore importance.
// - K-quants always search each sub-block's scale (and min) for the lowest
//   weighted squared error (weights: importance + the row's mean importance,
//   a floor; 1 without importance), starting from the round-to-nearest
//   choice, then tune the 6-bit (Q2_K: 4-bit, Q6_K: 8-bit) quantized sub-block
//   scales by +-1 and refit the super-block d/dmin by weighted least squares. Each sub-block's search never loses to round-to-nearest
//   under the weights used; after the shared scale quantization the total is
//   not guaranteed but in tests always lower.

// Whether QuantizeRow(t, ..., importance) uses importance: Q4_0, Q4_1, Q5_0,
// Q5_1 and the K-quants Q2_K..Q6_K; not the float formats nor Q8_0/Q8_1/Q8_K.
bool UsesImportance(DType t);

// Plain round-to-nearest: absmax (or min/max) scales, no search, no
// importance. The baseline the searching quantizers are measured against.
void QuantizeRowRoundToNearest(DType t, const float* src, void* dst, int64_t n);

}  // namespace tern::quant
