// KV rows: the element formats of the KV cache (kernels.h, "KV rows").
#include <cstring>

#include "base/check.h"
#include "base/fp16.h"
#include "kernels/kernels.h"
#include "quant/blocks.h"
#include "quant/formats.h"

namespace tern::kernels {

bool IsKvDtype(DType t) {
  return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16 || t == DType::kQ8_0 ||
         t == DType::kQ4_0;
}

void StoreKvRow(DType t, const float* x, int64_t n, uint8_t* out) {
  switch (t) {
    case DType::kF32:
      std::memcpy(out, x, n * sizeof(float));
      return;
    case DType::kF16:
      ConvertF32ToF16(x, n, reinterpret_cast<uint16_t*>(out));
      return;
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = Fp32ToBf16(x[i]);
        std::memcpy(out + 2 * i, &h, 2);
      }
      return;
    case DType::kQ8_0:
      CHECK(n % 32 == 0);
      quant::QuantizeQ8_0(x, reinterpret_cast<quant::BlockQ8_0*>(out), n / 32);
      return;
    case DType::kQ4_0:
      CHECK(n % 32 == 0);
      quant::QuantizeLegacy(x, reinterpret_cast<quant::BlockQ4_0*>(out), n / 32, nullptr, false);
      return;
    default:
      CHECK(IsKvDtype(t));
  }
}

void LoadKvElems(DType t, const uint8_t* row, int64_t e0, int64_t n, float* out) {
  switch (t) {
    case DType::kF32:
      std::memcpy(out, row + 4 * e0, n * sizeof(float));
      return;
    case DType::kF16:
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, row + 2 * (e0 + i), 2);
        out[i] = t == DType::kF16 ? Fp16ToFp32(h) : Bf16ToFp32(h);
      }
      return;
    case DType::kQ8_0:
      for (int64_t i = 0; i < n; ++i) {
        const int64_t e = e0 + i;
        const uint8_t* b = row + e / 32 * 34;
        uint16_t d;
        std::memcpy(&d, b, 2);
        out[i] = (float)(int8_t)b[2 + e % 32] * Fp16ToFp32(d);
      }
      return;
    case DType::kQ4_0:
      for (int64_t i = 0; i < n; ++i) {
        const int64_t e = e0 + i;
        const uint8_t* b = row + e / 32 * 18;
        uint16_t d;
        std::memcpy(&d, b, 2);
        const int j = (int)(e % 32);
        const int q = j < 16 ? (b[2 + j] & 0xF) : (b[2 + j - 16] >> 4);
        out[i] = (float)(q - 8) * Fp16ToFp32(d);
      }
      return;
    default:
      CHECK(IsKvDtype(t));
  }
}

bool KvKeyRotated(DType k, int64_t head_dim) {
  return (k == DType::kQ8_0 || k == DType::kQ4_0) && head_dim < 32;
}

void HadamardBlock32(float* x, float scale) {
  for (int len = 1; len < 32; len <<= 1) {
    for (int i = 0; i < 32; i += 2 * len) {
      for (int j = i; j < i + len; ++j) {
        const float a = x[j], b = x[j + len];
        x[j] = a + b;
        x[j + len] = a - b;
      }
    }
  }
  for (int j = 0; j < 32; ++j) x[j] *= scale;
}

void StoreKvKeyRow(DType t, const float* x, int64_t n, int64_t head_dim, uint8_t* out) {
  if (!KvKeyRotated(t, head_dim)) {
    StoreKvRow(t, x, n, out);
    return;
  }
  CHECK(n % 32 == 0);
  const int64_t block_bytes = BlockBytes(t);
  float y[32];
  for (int64_t b = 0; b < n / 32; ++b) {
    std::memcpy(y, x + b * 32, sizeof(y));
    HadamardBlock32(y, 0.25f);
    StoreKvRow(t, y, 32, out + b * block_bytes);
  }
}

void LoadKvKeyRow(DType t, const uint8_t* row, int64_t n, int64_t head_dim, float* out) {
  LoadKvElems(t, row, 0, n, out);
  if (!KvKeyRotated(t, head_dim)) return;
  for (int64_t b = 0; b < n / 32; ++b) HadamardBlock32(out + b * 32, 0.125f);
}

}  // namespace tern::kernels
