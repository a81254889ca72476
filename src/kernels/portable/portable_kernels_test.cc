// The portable table's own promise beyond the table-vs-reference tests of
// kernels_test.cc (which cover it as a registered table): its legacy-format
// matmuls equal the scalar spec's bitwise.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "kernels/kernel_table.h"
#include "quant/quant.h"

namespace tern::kernels {
namespace {

TEST(PortableKernelsTest, LegacyFormatsEqualTheSpecBitwise) {
  const KernelTable& portable = ChooseKernelTable("portable");
  ASSERT_STREQ(portable.isa, "portable");
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t rows = 37, cols = 320;
  for (DType t : {DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1, DType::kQ8_0}) {
    std::vector<float> wf(rows * cols);
    for (float& v : wf) v = normal(rng) * 0.05f;
    std::vector<uint8_t> w(rows * RowBytes(t, cols));
    for (int64_t r = 0; r < rows; ++r) {
      quant::QuantizeRow(t, wf.data() + r * cols, w.data() + r * RowBytes(t, cols), cols);
    }
    for (int64_t tokens : {1, 5}) {
      std::vector<float> x(tokens * cols);
      for (float& v : x) v = normal(rng);
      std::vector<float> y_ref(tokens * rows), y(tokens * rows);
      const WeightView view{t, w.data(), rows, cols};
      MatMulWith(RefKernelTable(), view, x.data(), tokens, y_ref.data(), nullptr, nullptr);
      MatMulWith(portable, view, x.data(), tokens, y.data(), nullptr, nullptr);
      EXPECT_EQ(0, std::memcmp(y_ref.data(), y.data(), y.size() * sizeof(float)))
          << DTypeName(t) << " tokens=" << tokens;
    }
  }
}

}  // namespace
}  // namespace tern::kernels
