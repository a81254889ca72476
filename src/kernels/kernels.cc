#include "kernels/kernels.h"

#include <vector>

#include "base/fp16.h"
#include "quant/quant.h"

namespace tern::kernels {

// Reference implementation: dequantize each weight row, dot in f32.
// (Replaced by the dispatched SIMD kernels; kept as the spec.)
void MatMul(const WeightView& w, const float* x, int64_t num_tokens, float* y,
            ThreadPool* pool) {
  auto body = [&](int64_t r0, int64_t r1, int) {
    std::vector<float> row(w.cols);
    const int64_t row_bytes = RowBytes(w.dtype, w.cols);
    for (int64_t r = r0; r < r1; ++r) {
      quant::DequantizeRow(w.dtype, (const uint8_t*)w.data + r * row_bytes, row.data(), w.cols);
      for (int64_t t = 0; t < num_tokens; ++t) {
        const float* xt = x + t * w.cols;
        double acc = 0;
        for (int64_t k = 0; k < w.cols; ++k) acc += (double)row[k] * xt[k];
        y[t * w.rows + r] = (float)acc;
      }
    }
  };
  if (pool) pool->ParallelFor(w.rows, body, 16);
  else body(0, w.rows, 0);
}

void GetRow(const WeightView& w, int64_t row, float* out) {
  const int64_t row_bytes = RowBytes(w.dtype, w.cols);
  quant::DequantizeRow(w.dtype, (const uint8_t*)w.data + row * row_bytes, out, w.cols);
}

const char* ActiveIsa() { return "scalar"; }

}  // namespace tern::kernels
