#include "kv/kv_storage.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace tern {
namespace {

KvShape SmallShape(DType dtype) {
  return {.num_layers = 2, .num_kv_heads = 3, .head_dim = 4, .block_size = 8, .num_blocks = 5,
          .dtype = dtype, .v_dtype = std::nullopt};
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

KvShape BlockShape(DType k, DType v) {
  KvShape s;
  s.num_layers = 3;
  s.num_kv_heads = 4;
  s.head_dim = 8;  // stories260K: one block of 32 spans the 4 heads
  s.block_size = 4;
  s.num_blocks = 6;
  s.dtype = k;
  s.v_dtype = v;
  return s;
}

// K and V of different types: slots of their own sizes side by side in a
// block, each written and read back as its format's rounding.
TEST(KvStorageTest, QuantizedKAndVRoundTripInTheirOwnSlots) {
  for (DType k : {DType::kQ8_0, DType::kQ4_0, DType::kBF16, DType::kF16}) {
    for (DType v : {DType::kQ4_0, DType::kQ8_0, DType::kF32}) {
      SCOPED_TRACE(std::string(DTypeName(k)) + "/" + DTypeName(v));
      KvStorage kv(BlockShape(k, v));
      EXPECT_EQ(kv.k_slot_bytes(), RowBytes(k, 32));
      EXPECT_EQ(kv.v_slot_bytes(), RowBytes(v, 32));
      EXPECT_EQ(kv.block_stride(), 3 * 4 * (RowBytes(k, 32) + RowBytes(v, 32)));
      EXPECT_EQ(kv.total_bytes(), 6 * kv.block_stride());
      std::vector<std::vector<float>> ks, vs;
      for (int64_t slot = 0; slot < kv.num_slots(); ++slot) {
        for (int layer = 0; layer < 3; ++layer) {
          std::vector<float> kr(32), vr(32);
          for (int i = 0; i < 32; ++i) {
            kr[i] = std::sin(0.37f * i + slot + 5 * layer) * (1 + i % 7);
            vr[i] = std::cos(0.11f * i - slot + layer) * 3;
          }
          kv.WriteSlot(layer, slot, kr.data(), vr.data());
          ks.push_back(kr);
          vs.push_back(vr);
        }
      }
      // Read after all writes: no slot overwrote another.
      size_t n = 0;
      for (int64_t slot = 0; slot < kv.num_slots(); ++slot) {
        for (int layer = 0; layer < 3; ++layer, ++n) {
          std::vector<float> k2(32), v2(32);
          kv.ReadSlot(layer, slot, k2.data(), v2.data());
          // A q8_0 / q4_0 K of head_dim 8 is stored rotated
          // (kernels::KvKeyRotated): ReadSlot undoes the rotation, exactly
          // as LoadKvKeyRow does, and its rounding error is spread over the
          // block (bounded in L2, not per element).
          const bool rotated = kernels::KvKeyRotated(k, 8);
          std::vector<uint8_t> kbytes(RowBytes(k, 32));
          std::vector<float> kexpect(32);
          kernels::StoreKvKeyRow(k, ks[n].data(), 32, 8, kbytes.data());
          kernels::LoadKvKeyRow(k, kbytes.data(), 32, 8, kexpect.data());
          double kerr2 = 0;
          for (int i = 0; i < 32; ++i) {
            const float kmax = 7, vmax = 3;
            const float ktol = k == DType::kQ4_0 ? kmax / 8 : k == DType::kQ8_0 ? kmax / 200
                                                                                : kmax / 128;
            const float vtol = v == DType::kQ4_0 ? vmax / 8 : v == DType::kQ8_0 ? vmax / 200 : 0;
            ASSERT_EQ(k2[i], kexpect[i]) << "slot " << slot << " layer " << layer;
            if (!rotated) {
              ASSERT_NEAR(k2[i], ks[n][i], ktol) << "slot " << slot << " layer " << layer;
            }
            kerr2 += (k2[i] - ks[n][i]) * (k2[i] - ks[n][i]);
            ASSERT_NEAR(v2[i], vs[n][i], vtol) << "slot " << slot << " layer " << layer;
          }
          // Rotated k' = H k / 4 has max |k'| <= |k'|_2 = sqrt(32) / 4 |k|_2 and
          // a step d' = that / 127 (q8_0) or / 8 (q4_0), each k' off by d' / 2
          // (q4_0: d'), and k = H k' / 8 keeps sqrt(32) / 8 of that in L2.
          double knorm2 = 0;
          for (float e : ks[n]) knorm2 += (double)e * e;
          const double dk = std::sqrt(32.0 * knorm2) / 4 / (k == DType::kQ4_0 ? 8 : 127);
          const double kl2tol = rotated ? std::sqrt(32.0) / 8 * std::sqrt(32.0) * dk *
                                              (k == DType::kQ4_0 ? 1.0 : 0.5)
                                        : 7.0 / 128 * std::sqrt(32.0);
          ASSERT_LE(std::sqrt(kerr2), kl2tol) << "slot " << slot << " layer " << layer;
        }
      }
      // The layer view the kernels read: the same bytes at KOffset/VOffset.
      const kernels::KvPagesView view = kv.LayerView(2);
      const int32_t table[6] = {0, 1, 2, 3, 4, 5};
      kernels::KvPagesView paged = view;
      paged.block_table = table;
      EXPECT_EQ(paged.KDtype(), k);
      EXPECT_EQ(paged.VDtype(), v);
      EXPECT_EQ(view.k + paged.KOffset(13), kv.KeySlot(2, 13));
      EXPECT_EQ(view.v + paged.VOffset(13), kv.ValueSlot(2, 13));
    }
  }
}

// A row no block layout can hold is an error naming head_dim and KV heads.
TEST(KvStorageTest, RowThatHoldsNoWholeBlockIsNamed) {
  EXPECT_TRUE(CheckKvRow(DType::kQ8_0, 4, 8).ok());
  EXPECT_TRUE(CheckKvRow(DType::kQ4_0, 8, 80).ok());
  EXPECT_TRUE(CheckKvRow(DType::kF16, 3, 4).ok());
  const Status st = CheckKvRow(DType::kQ8_0, 3, 4);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("3 KV heads x head_dim 4 = 12"), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("q8_0"), std::string::npos) << st.message();
  const Status bad = CheckKvRow(DType::kQ4_K, 8, 128);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("f16, bf16, f32, q8_0, q4_0"), std::string::npos)
      << bad.message();
}

// A q4_0 K whose blocks span heads gets a warning that points to q8_0 K.
TEST(KvStorageTest, Q4_0KAcrossHeadsWarns) {
  const std::string w = KvRowWarning(DType::kQ4_0, 4, 8);
  EXPECT_NE(w.find("spans 4 KV heads"), std::string::npos) << w;
  EXPECT_NE(w.find("--kv-cache-dtype-k q8_0"), std::string::npos) << w;
  EXPECT_EQ(KvRowWarning(DType::kQ8_0, 4, 8), "");
  EXPECT_EQ(KvRowWarning(DType::kQ4_0, 4, 64), "");
  EXPECT_EQ(KvRowWarning(DType::kF16, 4, 8), "");
}

TEST(KvStorageTest, WindowGroupHasItsOwnBlocksAndLayout) {
  // Layer 0 full, layers 1 and 2 windowed; 5 full blocks, 2 windowed.
  KvShape shape = SmallShape(DType::kF32);
  shape.num_layers = 3;
  shape.window_group_layers = {false, true, true};
  shape.window_group_blocks = 2;
  KvStorage kv(shape);
  ASSERT_TRUE(kv.has_window_group());
  EXPECT_EQ(kv.LayerGroup(0), 0);
  EXPECT_EQ(kv.LayerGroup(2), 1);
  EXPECT_EQ(kv.LayerSlots(0), 40);
  EXPECT_EQ(kv.LayerSlots(1), 16);
  // A full block: 1 layer x {K, V} x 8 slots x 48 bytes; a windowed one 2 layers.
  EXPECT_EQ(kv.LayerBlockStride(0), 768);
  EXPECT_EQ(kv.LayerBlockStride(1), 1536);
  EXPECT_EQ(kv.LayerView(2).block_stride, 1536);
  EXPECT_EQ(kv.total_bytes(), 5 * 768 + 2 * 1536);
  // The windowed group starts after the full one; layer 2 after layer 1.
  EXPECT_EQ(kv.KeyData(1) - kv.KeyData(0), 5 * 768);
  EXPECT_EQ(kv.KeyData(2) - kv.KeyData(1), 2 * 8 * 48);
  // Slot 9 of each layer is its own memory.
  std::vector<float> k(12), v(12), k2(12), v2(12);
  for (int layer = 0; layer < 3; ++layer) {
    for (int i = 0; i < 12; ++i) k[i] = 100.0f * layer + i, v[i] = -k[i];
    kv.WriteSlot(layer, 9, k.data(), v.data());
  }
  for (int layer = 0; layer < 3; ++layer) {
    kv.ReadSlot(layer, 9, k2.data(), v2.data());
    EXPECT_EQ(k2[5], 100.0f * layer + 5) << layer;
    EXPECT_EQ(v2[5], -(100.0f * layer + 5)) << layer;
  }
  // Slot 9 of layer 2 = block 1 offset 1 of the windowed group.
  const float* raw = reinterpret_cast<const float*>(kv.KeyData(1));
  EXPECT_EQ(raw[(1536 + 2 * 8 * 48 + 48) / 4 + 5], 205.0f);
}

}  // namespace
}  // namespace tern
