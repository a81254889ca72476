// Scalar IEEE half and bfloat16 conversions (the spec; SIMD kernels use F16C).
#pragma once

#include <cstdint>
#include <cstring>

namespace tern {

inline float Fp32FromBits(uint32_t w) { float f; std::memcpy(&f, &w, 4); return f; }
inline uint32_t Fp32ToBits(float f) { uint32_t w; std::memcpy(&w, &f, 4); return w; }

// Exact half -> float (handles subnormals, inf, nan).
inline float Fp16ToFp32(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  if (exp == 0) {
    if (mant == 0) return Fp32FromBits(sign);
    // subnormal: normalise
    int e = -1;
    do { ++e; mant <<= 1; } while ((mant & 0x400u) == 0);
    mant &= 0x3FFu;
    return Fp32FromBits(sign | ((uint32_t)(127 - 15 - e) << 23) | (mant << 13));
  }
  if (exp == 0x1F) return Fp32FromBits(sign | 0x7F800000u | (mant << 13));
  return Fp32FromBits(sign | ((exp + 112) << 23) | (mant << 13));
}

// float -> half, round to nearest even (as F16C's _cvtss_sh with mode 0).
inline uint16_t Fp32ToFp16(float f) {
  uint32_t x = Fp32ToBits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  x &= 0x7FFFFFFFu;
  if (x >= 0x7F800000u) {  // inf or nan
    return (uint16_t)(sign | 0x7C00u | (x > 0x7F800000u ? 0x200u : 0));
  }
  if (x >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u);  // overflow -> inf
  if (x < 0x38800000u) {  // subnormal or zero in half
    if (x < 0x33000000u) return (uint16_t)sign;  // < 2^-25 rounds to 0
    const uint32_t e = x >> 23;
    uint32_t m = (x & 0x7FFFFFu) | 0x800000u;
    const uint32_t shift = 126 - e;  // 14..24
    uint32_t r = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1))) ++r;
    return (uint16_t)(sign | r);
  }
  uint32_t r = ((x >> 13) - (112u << 10));
  const uint32_t rem = x & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1))) ++r;
  return (uint16_t)(sign | r);
}

inline float Bf16ToFp32(uint16_t h) { return Fp32FromBits((uint32_t)h << 16); }

// float -> bf16, round to nearest even; nan stays nan.
inline uint16_t Fp32ToBf16(float f) {
  uint32_t x = Fp32ToBits(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((x >> 16) | 64);
  return (uint16_t)((x + (0x7FFFu + ((x >> 16) & 1))) >> 16);
}

}  // namespace tern
