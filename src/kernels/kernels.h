// kernels: the compute primitives of the forward pass, dispatched through a
// function table filled once at start-up from CPU feature detection.
// kernels/ref/ holds the scalar spec of every kernel; kernels/x86/ the AVX2 +
// FMA + F16C versions. Every SIMD kernel must match its reference within
// per-format bounds (kernels_test.cc).
//
// Thread rules: all functions are reentrant; MatMul uses the given pool (which
// must not be in use by another caller).
#pragma once

#include <cstdint>

#include "base/thread_pool.h"
#include "tensor/dtype.h"

namespace tern::kernels {

// A weight matrix as stored in GGUF: rows of `cols` elements of `dtype`,
// row-major, each row RowBytes(dtype, cols) bytes. In ggml terms a tensor
// with shape [cols, rows].
struct WeightView {
  DType dtype = DType::kF32;
  const void* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
};

// y[t, r] = sum_k W[r, k] * x[t, k] for t < num_tokens, r < rows.
// x: [num_tokens, cols] f32 row-major; y: [num_tokens, rows] f32 row-major.
// pool may be null (single-threaded).
void MatMul(const WeightView& w, const float* x, int64_t num_tokens, float* y,
            ThreadPool* pool);

// Copies row `row` of w, dequantized to f32, into out[cols] (embedding lookup).
void GetRow(const WeightView& w, int64_t row, float* out);

// Name of the implementation chosen at start-up ("avx2", "scalar").
const char* ActiveIsa();

}  // namespace tern::kernels
