#include "kv/kv_storage.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace tern {
namespace {

KvShape SmallShape(DType dtype) {
  KvShape s;
  s.num_layers = 2;
  s.num_kv_heads = 3;
  s.head_dim = 4;
  s.block_size = 8;
  s.num_blocks = 5;
  s.dtype = dtype;
  return s;
}

TEST(KvStorageTest, SizesFollowShapeAndDtype) {
  KvStorage f32(SmallShape(DType::kF32));
  EXPECT_EQ(f32.num_slots(), 40);
  EXPECT_EQ(f32.slot_elems(), 12);
  EXPECT_EQ(f32.slot_bytes(), 48);
  EXPECT_EQ(f32.total_bytes(), 2 * 2 * 40 * 48);
  KvStorage f16(SmallShape(DType::kF16));
  EXPECT_EQ(f16.slot_bytes(), 24);
  EXPECT_EQ(f16.total_bytes(), 2 * 2 * 40 * 24);
}

TEST(KvStorageTest, F32SlotRoundTripsExactlyAtLayoutOffset) {
  KvStorage kv(SmallShape(DType::kF32));
  std::vector<float> k(12), v(12);
  for (int i = 0; i < 12; ++i) {
    k[i] = 0.1f * i + 1e-7f;
    v[i] = -3.0f * i;
  }
  kv.WriteSlot(1, 17, k.data(), v.data());
  std::vector<float> k2(12), v2(12);
  kv.ReadSlot(1, 17, k2.data(), v2.data());
  EXPECT_EQ(k, k2);
  EXPECT_EQ(v, v2);
  // Block-major: slot 17 = block 2, offset 1. A block is 2 layers x {K, V}
  // x 8 slots x 12 elements = 384 floats; layer 1's K starts 2 x 8 x 12 = 192
  // floats into it.
  const float* raw = reinterpret_cast<const float*>(kv.KeyData(0));
  EXPECT_EQ(kv.block_stride(), 384 * 4);
  EXPECT_EQ(raw[2 * 384 + 192 + 1 * 12 + 5], k[5]);
  EXPECT_EQ(reinterpret_cast<const float*>(kv.ValueSlot(1, 17))[5], v[5]);
  // Other layer untouched.
  kv.ReadSlot(0, 17, k2.data(), v2.data());
  EXPECT_EQ(k2[5], 0.0f);
}

TEST(KvStorageTest, F16SlotRoundTripsWithinHalfPrecision) {
  KvStorage kv(SmallShape(DType::kF16));
  std::vector<float> k(12), v(12);
  for (int i = 0; i < 12; ++i) {
    k[i] = 0.37f * i - 2.0f;
    v[i] = 100.0f / (i + 1);
  }
  kv.WriteSlot(0, 39, k.data(), v.data());
  std::vector<float> k2(12), v2(12);
  kv.ReadSlot(0, 39, k2.data(), v2.data());
  for (int i = 0; i < 12; ++i) {
    EXPECT_NEAR(k2[i], k[i], std::abs(k[i]) * 1e-3 + 1e-6);
    EXPECT_NEAR(v2[i], v[i], std::abs(v[i]) * 1e-3 + 1e-6);
  }
}

}  // namespace
}  // namespace tern
