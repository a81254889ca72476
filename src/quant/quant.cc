#include "quant/quant.h"

#include "base/check.h"
#include "base/fp16.h"
#include "quant/blocks.h"
#include "quant/formats.h"

namespace tern::quant {
namespace {

template <typename Block>
const Block* As(const void* p) { return static_cast<const Block*>(p); }
template <typename Block>
Block* As(void* p) { return static_cast<Block*>(p); }

void Quantize(DType t, const float* src, void* dst, int64_t n, const float* w, bool search) {
  CHECK_EQ(n % BlockSize(t), 0);
  const int64_t nb = n / BlockSize(t);
  switch (t) {
    case DType::kF32: {
      float* d = static_cast<float*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = src[i];
      return;
    }
    case DType::kF16: {
      uint16_t* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = Fp32ToFp16(src[i]);
      return;
    }
    case DType::kBF16: {
      uint16_t* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = Fp32ToBf16(src[i]);
      return;
    }
    case DType::kQ4_0: return QuantizeLegacy(src, As<BlockQ4_0>(dst), nb, w, search);
    case DType::kQ4_1: return QuantizeLegacy(src, As<BlockQ4_1>(dst), nb, w, search);
    case DType::kQ5_0: return QuantizeLegacy(src, As<BlockQ5_0>(dst), nb, w, search);
    case DType::kQ5_1: return QuantizeLegacy(src, As<BlockQ5_1>(dst), nb, w, search);
    case DType::kQ8_0: return QuantizeQ8_0(src, As<BlockQ8_0>(dst), nb);
    case DType::kQ8_1: return QuantizeQ8_1(src, As<BlockQ8_1>(dst), nb);
    case DType::kQ2_K: return QuantizeQ2_K(src, As<BlockQ2_K>(dst), nb, w, search);
    case DType::kQ3_K: return QuantizeQ3_K(src, As<BlockQ3_K>(dst), nb, w, search);
    case DType::kQ4_K: return QuantizeQ45K(src, As<BlockQ4_K>(dst), nb, w, search);
    case DType::kQ5_K: return QuantizeQ45K(src, As<BlockQ5_K>(dst), nb, w, search);
    case DType::kQ6_K: return QuantizeQ6_K(src, As<BlockQ6_K>(dst), nb, w, search);
    case DType::kQ8_K: return QuantizeQ8_K(src, As<BlockQ8_K>(dst), nb);
    default:
      CHECK(false && "QuantizeRow: unsupported dtype");
  }
}

}  // namespace

bool CanDequantize(DType t) {
  switch (t) {
    case DType::kF32: case DType::kF16: case DType::kBF16:
    case DType::kQ4_0: case DType::kQ4_1: case DType::kQ5_0: case DType::kQ5_1:
    case DType::kQ8_0: case DType::kQ8_1:
    case DType::kQ2_K: case DType::kQ3_K: case DType::kQ4_K: case DType::kQ5_K:
    case DType::kQ6_K: case DType::kQ8_K:
      return true;
    default:
      return false;
  }
}

void DequantizeRow(DType t, const void* src, float* dst, int64_t n) {
  CHECK_EQ(n % BlockSize(t), 0);
  const int64_t nb = n / BlockSize(t);
  switch (t) {
    case DType::kF32: {
      const float* s = static_cast<const float*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = s[i];
      return;
    }
    case DType::kF16: {
      const uint16_t* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = Fp16ToFp32(s[i]);
      return;
    }
    case DType::kBF16: {
      const uint16_t* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = Bf16ToFp32(s[i]);
      return;
    }
    case DType::kQ4_0: return DequantizeQ4_0(As<BlockQ4_0>(src), dst, nb);
    case DType::kQ4_1: return DequantizeQ4_1(As<BlockQ4_1>(src), dst, nb);
    case DType::kQ5_0: return DequantizeQ5_0(As<BlockQ5_0>(src), dst, nb);
    case DType::kQ5_1: return DequantizeQ5_1(As<BlockQ5_1>(src), dst, nb);
    case DType::kQ8_0: return DequantizeQ8_0(As<BlockQ8_0>(src), dst, nb);
    case DType::kQ8_1: return DequantizeQ8_1(As<BlockQ8_1>(src), dst, nb);
    case DType::kQ2_K: return DequantizeQ2_K(As<BlockQ2_K>(src), dst, nb);
    case DType::kQ3_K: return DequantizeQ3_K(As<BlockQ3_K>(src), dst, nb);
    case DType::kQ4_K: return DequantizeQ45K(As<BlockQ4_K>(src), dst, nb);
    case DType::kQ5_K: return DequantizeQ45K(As<BlockQ5_K>(src), dst, nb);
    case DType::kQ6_K: return DequantizeQ6_K(As<BlockQ6_K>(src), dst, nb);
    case DType::kQ8_K: return DequantizeQ8_K(As<BlockQ8_K>(src), dst, nb);
    default:
      CHECK(false && "DequantizeRow: unsupported dtype");
  }
}

bool CanQuantize(DType t) { return CanDequantize(t); }

bool UsesImportance(DType t) {
  switch (t) {
    case DType::kQ4_0: case DType::kQ4_1: case DType::kQ5_0: case DType::kQ5_1:
    case DType::kQ2_K: case DType::kQ3_K: case DType::kQ4_K: case DType::kQ5_K:
    case DType::kQ6_K:
      return true;
    default:
      return false;
  }
}

void QuantizeRow(DType t, const float* src, void* dst, int64_t n, const float* importance) {
  Quantize(t, src, dst, n, importance, /*search=*/true);
}

void QuantizeRowRoundToNearest(DType t, const float* src, void* dst, int64_t n) {
  Quantize(t, src, dst, n, nullptr, /*search=*/false);
}

}  // namespace tern::quant
