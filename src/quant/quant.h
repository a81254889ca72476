// Scalar reference quantization and dequantization of GGUF block formats.
// This is the spec: SIMD kernels in kernels/ must agree with it. Layouts are
// those of quant/blocks.h. All functions are pure and thread-safe.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace tern::quant {

// F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K.
bool CanDequantize(DType t);
// Dequantizes n elements (a multiple of BlockSize(t)) from src into dst.
void DequantizeRow(DType t, const void* src, float* dst, int64_t n);

// F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K (and more
// where implemented).
bool CanQuantize(DType t);
// Quantizes n elements (a multiple of BlockSize(t)) of src into dst
// (RowBytes(t, n) bytes). importance: optional per-element weights of the
// squared rounding error (an imatrix column importance), nullptr = uniform.
void QuantizeRow(DType t, const float* src, void* dst, int64_t n,
                 const float* importance = nullptr);

}  // namespace tern::quant
