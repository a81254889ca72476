#include "quant/quant.h"

#include "base/check.h"
#include "base/fp16.h"

namespace tern::quant {

// Float formats only so far; the block formats follow.
bool CanDequantize(DType t) {
  return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16;
}

void DequantizeRow(DType t, const void* src, float* dst, int64_t n) {
  switch (t) {
    case DType::kF32: {
      const float* s = (const float*)src;
      for (int64_t i = 0; i < n; ++i) dst[i] = s[i];
      return;
    }
    case DType::kF16: {
      const uint16_t* s = (const uint16_t*)src;
      for (int64_t i = 0; i < n; ++i) dst[i] = Fp16ToFp32(s[i]);
      return;
    }
    case DType::kBF16: {
      const uint16_t* s = (const uint16_t*)src;
      for (int64_t i = 0; i < n; ++i) dst[i] = Bf16ToFp32(s[i]);
      return;
    }
    default:
      CHECK(false && "DequantizeRow: unsupported dtype");
  }
}

bool CanQuantize(DType t) { return CanDequantize(t); }

void QuantizeRow(DType t, const float* src, void* dst, int64_t n, const float*) {
  switch (t) {
    case DType::kF32: {
      float* d = (float*)dst;
      for (int64_t i = 0; i < n; ++i) d[i] = src[i];
      return;
    }
    case DType::kF16: {
      uint16_t* d = (uint16_t*)dst;
      for (int64_t i = 0; i < n; ++i) d[i] = Fp32ToFp16(src[i]);
      return;
    }
    case DType::kBF16: {
      uint16_t* d = (uint16_t*)dst;
      for (int64_t i = 0; i < n; ++i) d[i] = Fp32ToBf16(src[i]);
      return;
    }
    default:
      CHECK(false && "QuantizeRow: unsupported dtype");
  }
}

}  // namespace tern::quant
