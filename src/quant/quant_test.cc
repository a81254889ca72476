// Scalar reference formats: hand-built blocks decode to values worked out
// from the layout, seeded round trips stay within per-format error bounds,
// the scale searches beat plain round-to-nearest, and importance weights
// move error away from the columns that matter.
#include "quant/quant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "quant/blocks.h"
#include "quant/formats.h"

namespace tern::quant {
namespace {

constexpr uint16_t kHalfOne = 0x3C00;      // 1.0
constexpr uint16_t kHalfHalf = 0x3800;     // 0.5
constexpr uint16_t kHalfQuarter = 0x3400;  // 0.25
constexpr uint16_t kHalfMinusOne = 0xBC00; // -1.0

template <typename Block>
std::vector<float> Decode(DType t, const Block& block) {
  std::vector<float> out(BlockSize(t));
  DequantizeRow(t, &block, out.data(), BlockSize(t));
  return out;
}

// ---- (1) Layout: known bytes -> known values ---------------------------------

TEST(QuantLayoutTest, FloatFormatsDecode) {
  const uint16_t half[2] = {kHalfOne, 0xC000};  // 1, -2
  float out[2];
  DequantizeRow(DType::kF16, half, out, 2);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -2.0f);
  const uint16_t bf[2] = {0x3F80, 0xC040};  // 1, -3
  DequantizeRow(DType::kBF16, bf, out, 2);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -3.0f);
}

TEST(QuantLayoutTest, Q4_0LowNibbleIsFirstHalfHighNibbleSecondHalf) {
  BlockQ4_0 b{};
  b.d = kHalfHalf;
  std::memset(b.qs, 0x88, sizeof(b.qs));  // all zeros
  b.qs[0] = 0x2F;
  b.qs[15] = 0x80;
  const auto y = Decode(DType::kQ4_0, b);
  EXPECT_EQ(y[0], 3.5f);    // (15 - 8) * 0.5
  EXPECT_EQ(y[16], -3.0f);  // (2 - 8) * 0.5
  EXPECT_EQ(y[15], -4.0f);  // (0 - 8) * 0.5
  EXPECT_EQ(y[31], 0.0f);
  EXPECT_EQ(y[1], 0.0f);
}

TEST(QuantLayoutTest, Q4_1AddsMin) {
  BlockQ4_1 b{};
  b.d = kHalfHalf;
  b.m = kHalfOne;
  b.qs[1] = 0xA3;
  const auto y = Decode(DType::kQ4_1, b);
  EXPECT_EQ(y[1], 2.5f);   // 3 * 0.5 + 1
  EXPECT_EQ(y[17], 6.0f);  // 10 * 0.5 + 1
  EXPECT_EQ(y[0], 1.0f);
}

TEST(QuantLayoutTest, Q5_0FifthBitFromQhBitJ) {
  BlockQ5_0 b{};
  b.d = kHalfOne;
  b.qh[0] = 0x01;  // bit 0 -> element 0
  b.qh[2] = 0x02;  // bit 17 -> element 17
  b.qs[0] = 0x05;
  b.qs[1] = 0x70;
  const auto y = Decode(DType::kQ5_0, b);
  EXPECT_EQ(y[0], 5.0f);     // (5 | 16) - 16
  EXPECT_EQ(y[16], -16.0f);  // 0 - 16
  EXPECT_EQ(y[1], -16.0f);
  EXPECT_EQ(y[17], 7.0f);    // (7 | 16) - 16
}

TEST(QuantLayoutTest, Q5_1HighBitOfLastElement) {
  BlockQ5_1 b{};
  b.d = kHalfHalf;
  b.m = kHalfMinusOne;
  b.qh[3] = 0x80;  // bit 31
  b.qs[15] = 0xF0;
  const auto y = Decode(DType::kQ5_1, b);
  EXPECT_EQ(y[15], -1.0f);  // 0 * 0.5 - 1
  EXPECT_EQ(y[31], 14.5f);  // 31 * 0.5 - 1
}

TEST(QuantLayoutTest, Q8_0AndQ8_K) {
  BlockQ8_0 b{};
  b.d = kHalfQuarter;
  b.qs[3] = -7;
  b.qs[31] = 127;
  const auto y = Decode(DType::kQ8_0, b);
  EXPECT_EQ(y[3], -1.75f);
  EXPECT_EQ(y[31], 31.75f);
  BlockQ8_K k{};
  k.d = 0.5f;
  k.qs[200] = -3;
  const auto z = Decode(DType::kQ8_K, k);
  EXPECT_EQ(z[200], -1.5f);
  EXPECT_EQ(z[0], 0.0f);
}

TEST(QuantLayoutTest, Q2_KTwoBitFieldsAndFourBitScaleMin) {
  BlockQ2_K b{};
  b.d = kHalfOne;
  b.dmin = kHalfHalf;
  b.scales[0] = 0x23;  // scale 3, min 2
  b.scales[4] = 0x23;
  b.scales[5] = 0x02;
  b.scales[6] = 0x11;
  b.scales[9] = 0xF0;  // scale 0, min 15
  b.qs[0] = 0xE4;      // fields 0,1,2,3 for elements 0, 32, 64, 96
  b.qs[17] = 0x30;     // element 81: shift 4 -> 3
  b.qs[49] = 0x03;     // element 145: second half, shift 0 -> 3
  const auto y = Decode(DType::kQ2_K, b);
  EXPECT_EQ(y[0], -1.0f);   // 3*0 - 0.5*2
  EXPECT_EQ(y[64], 5.0f);   // 3*2 - 0.5*2
  EXPECT_EQ(y[96], 2.5f);   // 1*3 - 0.5*1
  EXPECT_EQ(y[81], 6.0f);   // 2*3 - 0
  EXPECT_EQ(y[145], -7.5f); // 0*3 - 0.5*15
}

TEST(QuantLayoutTest, Q3_KSixBitScalesAndHmask) {
  BlockQ3_K b{};
  b.d = kHalfHalf;
  b.scales[0] = 0x14;  // scale 0 low nibble 4, scale 8 low nibble 1
  b.scales[8] = 0x12;  // scale 0 high 2 bits = 2, scale 8 high 2 bits = 1
  b.scales[5] = 0xF0;  // scale 13 low nibble 15
  b.scales[9] = 0xC0;  // scale 13 high 2 bits = 3
  b.qs[0] = 0x03;
  b.hmask[0] = 0x01;   // element 0 high bit set
  b.qs[32] = 0x01;     // element 128, high bit clear
  b.qs[48] = 0x20;     // element 208: second half, shift 4
  b.hmask[16] = 0x40;  // element 208 = bit 6 of hmask[16]
  const auto y = Decode(DType::kQ3_K, b);
  EXPECT_EQ(y[0], 6.0f);      // 0.5 * (36-32) * 3
  EXPECT_EQ(y[1], -8.0f);     // 0.5 * 4 * (0 - 4)
  EXPECT_EQ(y[128], 22.5f);   // 0.5 * (17-32) * (1 - 4)
  EXPECT_EQ(y[208], 31.0f);   // 0.5 * (63-32) * 2
  EXPECT_EQ(y[16], 0.5f * -32 * -4);  // scale 1 is stored 0 -> -32
}

TEST(QuantLayoutTest, Q4_KAndQ5_KPackedScalesAndNibbles) {
  BlockQ4_K b{};
  b.d = kHalfOne;
  b.dmin = kHalfHalf;
  b.scales[0] = 0x02;  // scale 0 = 2
  b.scales[4] = 0x03;  // min 0 = 3
  b.scales[1] = 0x40;  // scale 1 = 0, bits 4-5 of scale 5 = 1
  b.scales[5] = 0x80;  // min 1 = 0, bits 4-5 of min 5 = 2
  b.scales[9] = 0x37;  // scale 5 low = 7, min 5 low = 3
  b.qs[0] = 0xA5;      // element 0 = 5, element 32 = 10
  b.qs[67] = 0xC0;     // element 163 (sub-block 5, high nibble) = 12
  const auto y = Decode(DType::kQ4_K, b);
  EXPECT_EQ(y[0], 8.5f);      // 2*5 - 0.5*3
  EXPECT_EQ(y[32], 0.0f);     // scale 1 = 0, min 1 = 0
  EXPECT_EQ(y[163], 258.5f);  // 23*12 - 0.5*35
  EXPECT_EQ(y[1], -1.5f);     // 2*0 - 0.5*3

  BlockQ5_K c{};
  c.d = b.d;
  c.dmin = b.dmin;
  std::memcpy(c.scales, b.scales, sizeof(c.scales));
  std::memcpy(c.qs, b.qs, sizeof(c.qs));
  c.qh[0] = 0x01;  // element 0: bit 0 of qh[0]
  c.qh[3] = 0x20;  // element 163: bit 5 of qh[3]
  const auto z = Decode(DType::kQ5_K, c);
  EXPECT_EQ(z[0], 40.5f);     // 2*21 - 1.5
  EXPECT_EQ(z[163], 626.5f);  // 23*28 - 17.5
  EXPECT_EQ(z[32], 0.0f);
}

TEST(QuantLayoutTest, Q6_KQlQhInterleave) {
  BlockQ6_K b{};
  b.d = kHalfHalf;
  b.scales[0] = 3;
  b.scales[4] = -2;
  b.scales[12] = 127;
  b.ql[0] = 0x07;
  b.qh[0] = 0x02;   // element 0: q = 7 | 2<<4 = 39
  b.ql[6] = 0x90;   // element 70: high nibble of ql[6] = 9
  b.qh[6] = 0x30;   // element 70: bits 4-5 = 3 -> q = 57
  b.ql[72] = 0x10;  // element 200: high nibble of ql[72] = 1; qh[40] = 0
  const auto y = Decode(DType::kQ6_K, b);
  EXPECT_EQ(y[0], 10.5f);      // 0.5*3*(39-32)
  EXPECT_EQ(y[70], -25.0f);    // 0.5*-2*(57-32)
  EXPECT_EQ(y[200], -1968.5f); // 0.5*127*(1-32)
  EXPECT_EQ(y[1], 0.5f * 3 * -32);
}

TEST(QuantLayoutTest, K4ScalePackingRoundTripsEveryValue) {
  for (int v = 0; v < 64; ++v) {
    uint8_t scales[8], mins[8], packed[12];
    for (int j = 0; j < 8; ++j) {
      scales[j] = (uint8_t)((v + 7 * j) % 64);
      mins[j] = (uint8_t)((v * 3 + j) % 64);
    }
    PackScaleMinK4(scales, mins, packed);
    for (int j = 0; j < 8; ++j) {
      uint8_t s, m;
      UnpackScaleMinK4(packed, j, &s, &m);
      EXPECT_EQ(s, scales[j]);
      EXPECT_EQ(m, mins[j]);
    }
  }
}

TEST(QuantLayoutTest, Q3_KScalePackingRoundTripsEveryValue) {
  for (int v = 0; v < 64; ++v) {
    int8_t scales[16];
    uint8_t packed[12];
    for (int j = 0; j < 16; ++j) scales[j] = (int8_t)((v + 5 * j) % 64 - 32);
    PackScalesQ3_K(scales, packed);
    for (int j = 0; j < 16; ++j) EXPECT_EQ(UnpackScaleQ3_K(packed, j), scales[j]);
  }
}

// ---- Helpers for the numeric tests -------------------------------------------

std::vector<float> RandomRow(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(n);
  for (float& v : x) v = normal(rng);
  return x;
}

std::vector<float> RoundTrip(DType t, const std::vector<float>& x, const float* importance,
                             bool search = true) {
  std::vector<uint8_t> bytes(RowBytes(t, (int64_t)x.size()));
  if (search) {
    QuantizeRow(t, x.data(), bytes.data(), (int64_t)x.size(), importance);
  } else {
    QuantizeRowRoundToNearest(t, x.data(), bytes.data(), (int64_t)x.size());
  }
  std::vector<float> y(x.size());
  DequantizeRow(t, bytes.data(), y.data(), (int64_t)x.size());
  return y;
}

double SquaredError(const std::vector<float>& x, const std::vector<float>& y,
                    const std::vector<float>* w = nullptr) {
  double err = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    err += (w ? (*w)[i] : 1.0) * (double)(x[i] - y[i]) * (x[i] - y[i]);
  }
  return err;
}

double RelativeRmse(const std::vector<float>& x, const std::vector<float>& y) {
  double energy = 0;
  for (float v : x) energy += (double)v * v;
  return std::sqrt(SquaredError(x, y) / energy);
}

struct FormatCase {
  DType dtype;
  double max_relative_rmse;  // on N(0,1) data
};

const FormatCase kFormats[] = {
    {DType::kF32, 0.0},     {DType::kF16, 5e-4},   {DType::kBF16, 4e-3},
    {DType::kQ8_0, 0.006},  {DType::kQ8_1, 0.006}, {DType::kQ8_K, 0.008},
    {DType::kQ6_K, 0.02},   {DType::kQ5_0, 0.045}, {DType::kQ5_1, 0.04},
    {DType::kQ5_K, 0.035},  {DType::kQ4_0, 0.09},  {DType::kQ4_1, 0.085},
    {DType::kQ4_K, 0.075},  {DType::kQ3_K, 0.17},  {DType::kQ2_K, 0.35},
};

bool IsKQuant(DType t) { return BlockSize(t) == kQK_K; }

// ---- (2) Round trips ------------------------------------------------------------

TEST(QuantRoundTripTest, SeededRandomRowsStayWithinPerFormatBounds) {
  for (const FormatCase& f : kFormats) {
    ASSERT_TRUE(CanQuantize(f.dtype)) << DTypeName(f.dtype);
    ASSERT_TRUE(CanDequantize(f.dtype)) << DTypeName(f.dtype);
    for (int64_t blocks : {1, 3, 8}) {
      const int64_t n = blocks * std::max<int64_t>(BlockSize(f.dtype), 256);
      const std::vector<float> x = RandomRow(n, 1234 + (uint32_t)blocks);
      const std::vector<float> y = RoundTrip(f.dtype, x, nullptr);
      EXPECT_LE(RelativeRmse(x, y), f.max_relative_rmse) << DTypeName(f.dtype) << " n=" << n;
    }
  }
}

TEST(QuantRoundTripTest, QuantizationIsDeterministic) {
  const std::vector<float> x = RandomRow(512, 7);
  for (const FormatCase& f : kFormats) {
    std::vector<uint8_t> a(RowBytes(f.dtype, 512)), b(a.size());
    QuantizeRow(f.dtype, x.data(), a.data(), 512);
    QuantizeRow(f.dtype, x.data(), b.data(), 512);
    EXPECT_EQ(a, b) << DTypeName(f.dtype);
  }
}

TEST(QuantRoundTripTest, ZeroRowsStayZero) {
  const std::vector<float> x(512, 0.0f);
  for (const FormatCase& f : kFormats) {
    const std::vector<float> y = RoundTrip(f.dtype, x, nullptr);
    for (float v : y) ASSERT_EQ(v, 0.0f) << DTypeName(f.dtype);
  }
}

TEST(QuantRoundTripTest, NonFiniteValuesStayInTheirBlock) {
  // Block 0 holds NaN, +-inf and huge values; block 1 (elements 256..511)
  // is ordinary data and must round-trip as usual.
  std::vector<float> x = RandomRow(512, 5);
  x[0] = std::nanf("");
  x[1] = INFINITY;
  x[2] = -INFINITY;
  x[3] = 3e38f;
  const std::vector<float> tail(x.begin() + 256, x.end());
  for (const FormatCase& f : kFormats) {
    const std::vector<float> y = RoundTrip(f.dtype, x, nullptr);
    const std::vector<float> y_tail(y.begin() + 256, y.end());
    EXPECT_LE(RelativeRmse(tail, y_tail), f.max_relative_rmse) << DTypeName(f.dtype);
  }
}

TEST(QuantRoundTripTest, F32IsExactAndRequantizingIsStable) {
  const std::vector<float> x = RandomRow(256, 3);
  EXPECT_EQ(RoundTrip(DType::kF32, x, nullptr), x);
  // Dequantized values of a legacy format requantize to themselves.
  for (DType t : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1}) {
    const std::vector<float> y = RoundTrip(t, x, nullptr);
    EXPECT_EQ(RoundTrip(t, y, nullptr), y) << DTypeName(t);
  }
}

TEST(QuantRoundTripTest, Q4_0RoundsByLargestMagnitude) {
  // max magnitude -4 -> d = 0.5, so -4 -> q 0, 3.5 -> q 15, 0.3 -> q 9 (0.6+8.5).
  std::vector<float> x(32, 0.0f);
  x[0] = -4.0f;
  x[1] = 3.5f;
  x[2] = 0.3f;
  BlockQ4_0 b;
  QuantizeRow(DType::kQ4_0, x.data(), &b, 32);
  EXPECT_EQ(b.d, kHalfHalf);
  EXPECT_EQ(b.qs[0] & 0xF, 0);
  EXPECT_EQ(b.qs[1] & 0xF, 15);
  EXPECT_EQ(b.qs[2] & 0xF, 9);
  EXPECT_EQ(b.qs[3], 0x88);
}

// ---- (3) Scale search vs round-to-nearest --------------------------------------

TEST(QuantSearchTest, KQuantErrorIsNoWorseThanRoundToNearest) {
  for (const FormatCase& f : kFormats) {
    if (!IsKQuant(f.dtype) || f.dtype == DType::kQ8_K) continue;
    for (uint32_t seed : {1u, 2u, 3u}) {
      const std::vector<float> x = RandomRow(2048, seed);
      const double searched = SquaredError(x, RoundTrip(f.dtype, x, nullptr));
      const double rtn = SquaredError(x, RoundTrip(f.dtype, x, nullptr, /*search=*/false));
      EXPECT_LE(searched, rtn) << DTypeName(f.dtype) << " seed " << seed;
      EXPECT_LT(searched, 0.98 * rtn) << DTypeName(f.dtype) << " search should gain";
    }
  }
}

TEST(QuantSearchTest, LegacySearchWithUniformImportanceIsNoWorseThanRoundToNearest) {
  const std::vector<float> ones(2048, 1.0f);
  for (DType t : {DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1}) {
    const std::vector<float> x = RandomRow(2048, 11);
    const double searched = SquaredError(x, RoundTrip(t, x, ones.data()));
    const double rtn = SquaredError(x, RoundTrip(t, x, nullptr));
    EXPECT_LE(searched, rtn) << DTypeName(t);
  }
}

// ---- (4) Importance weighting -------------------------------------------------

TEST(QuantImportanceTest, ConcentratedImportanceLowersErrorOfThoseColumns) {
  const int64_t n = 2048;
  std::vector<float> importance(n, 1.0f);
  std::vector<float> mask(n, 0.0f);
  for (int64_t i = 0; i < n; i += 8) {
    importance[i] = 100.0f;
    mask[i] = 1.0f;
  }
  for (const FormatCase& f : kFormats) {
    if (!UsesImportance(f.dtype)) continue;  // checked by the next test
    double uniform = 0, weighted = 0;
    for (uint32_t seed : {21u, 22u, 23u}) {
      const std::vector<float> x = RandomRow(n, seed);
      uniform += SquaredError(x, RoundTrip(f.dtype, x, nullptr), &mask);
      weighted += SquaredError(x, RoundTrip(f.dtype, x, importance.data()), &mask);
    }
    EXPECT_LT(weighted, 0.9 * uniform) << DTypeName(f.dtype);
  }
}

// UsesImportance says exactly which formats' bytes change with an importance.
TEST(QuantImportanceTest, UsesImportanceMatchesWhatQuantizeRowDoes) {
  const int64_t n = 2048;
  std::vector<float> importance(n, 1.0f);
  for (int64_t i = 0; i < n; i += 8) importance[i] = 100.0f;
  const std::vector<float> x = RandomRow(n, 31);
  for (const FormatCase& f : kFormats) {
    std::vector<uint8_t> plain(RowBytes(f.dtype, n)), weighted(RowBytes(f.dtype, n));
    QuantizeRow(f.dtype, x.data(), plain.data(), n, nullptr);
    QuantizeRow(f.dtype, x.data(), weighted.data(), n, importance.data());
    EXPECT_EQ(UsesImportance(f.dtype), plain != weighted) << DTypeName(f.dtype);
  }
}

// The regime of a model whose columns matter about equally (importance
// within 2x, as an imatrix of a random-weight model) and that of a trained
// model (a few columns 10x-50x): in both the weighted search must do at
// least as well under its own weights as the unweighted search does.
TEST(QuantImportanceTest, WeightedPathHasNoHigherWeightedErrorThanUnweightedPath) {
  const int64_t n = 4096;
  std::mt19937 rng(31);
  std::uniform_real_distribution<float> mild(0.5f, 1.5f);
  std::lognormal_distribution<float> heavy(0.0f, 1.0f);
  std::vector<float> mild_w(n), heavy_w(n);
  for (int64_t i = 0; i < n; ++i) {
    mild_w[i] = mild(rng);
    heavy_w[i] = heavy(rng);
  }
  for (DType t : {DType::kQ2_K, DType::kQ3_K, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K}) {
    for (const std::vector<float>* w : {&mild_w, &heavy_w}) {
      double unweighted = 0, weighted = 0;
      for (uint32_t seed : {41u, 42u, 43u}) {
        const std::vector<float> x = RandomRow(n, seed);
        unweighted += SquaredError(x, RoundTrip(t, x, nullptr), w);
        weighted += SquaredError(x, RoundTrip(t, x, w->data()), w);
      }
      EXPECT_LE(weighted, unweighted)
          << DTypeName(t) << (w == &mild_w ? " mild" : " heavy") << " importance";
    }
  }
}

}  // namespace
}  // namespace tern::quant
