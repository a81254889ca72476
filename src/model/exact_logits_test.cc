#include "model/exact_logits.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "quant/quant.h"
#include "tensor/dtype.h"

namespace tern {
namespace {

struct Matrix {
  DType t;
  int64_t rows, cols;
  std::vector<uint8_t> bytes;
  kernels::WeightView View() const { return {t, bytes.data(), rows, cols}; }
  // Row j of w (dequantized) . x, in double.
  double Exact(int64_t j, const float* x) const {
    std::vector<float> row(cols);
    quant::DequantizeRow(t, bytes.data() + j * RowBytes(t, cols), row.data(), cols);
    double s = 0;
    for (int64_t k = 0; k < cols; ++k) s += (double)row[k] * x[k];
    return s;
  }
};

// rows x cols of type t from f32 values (row j's values: rows_fn(j, k)).
template <class Fn>
Matrix MakeMatrix(DType t, int64_t rows, int64_t cols, Fn value) {
  Matrix m{t, rows, cols, std::vector<uint8_t>(rows * RowBytes(t, cols))};
  std::vector<float> row(cols);
  for (int64_t j = 0; j < rows; ++j) {
    for (int64_t k = 0; k < cols; ++k) row[k] = value(j, k);
    quant::QuantizeRowRoundToNearest(t, row.data(), m.bytes.data() + j * RowBytes(t, cols), cols);
  }
  return m;
}

std::vector<float> Random(int64_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

// Every logit within kRefineMargin of its row's largest becomes the exact
// dot product of the dequantized row and the f32 activations; the others
// keep the kernel's bits; each row is the same in a batch over threads as
// alone.
TEST(ExactLogitsTest, LeadingLogitsBecomeExactOthersUnchanged) {
  for (DType t : {DType::kQ8_0, DType::kQ4_0, DType::kQ6_K}) {
    SCOPED_TRACE(DTypeName(t));
    const int64_t rows = 400, cols = 512, n = 5;
    const auto wv = Random(rows * cols, 7, 0.05f);
    const Matrix m = MakeMatrix(t, rows, cols, [&](int64_t j, int64_t k) { return wv[j * cols + k]; });
    const auto x = Random(n * cols, 9, 3.0f);
    std::vector<float> y(n * rows);
    kernels::MatMul(m.View(), x.data(), n, y.data(), nullptr, nullptr);
    std::vector<float> got = y;
    ThreadPool pool(3);
    RefineTopLogits(m.View(), x.data(), n, got.data(), &pool);
    int refined = 0, changed = 0;
    for (int64_t r = 0; r < n; ++r) {
      const float* yr = y.data() + r * rows;
      const float mx = *std::max_element(yr, yr + rows);
      for (int64_t j = 0; j < rows; ++j) {
        const float g = got[r * rows + j];
        if (yr[j] >= mx - kRefineMargin) {
          ++refined;
          EXPECT_EQ(g, (float)m.Exact(j, x.data() + r * cols)) << "row " << r << " token " << j;
          changed += g != yr[j];
        } else {
          EXPECT_EQ(0, std::memcmp(&g, &yr[j], sizeof(float))) << "row " << r << " token " << j;
        }
      }
      std::vector<float> alone(yr, yr + rows);
      RefineTopLogits(m.View(), x.data() + r * cols, 1, alone.data(), nullptr);
      EXPECT_EQ(0, std::memcmp(alone.data(), got.data() + r * rows, rows * sizeof(float)))
          << "row " << r << " alone";
    }
    EXPECT_GE(refined, n);
    EXPECT_LE(refined, n * (int)kRefineMax);
    // The 8-bit activations moved the leading logits: the refinement did something.
    EXPECT_GT(changed, 0);
  }
}

// Where more than kRefineMax logits lead by less than the margin, the
// kRefineMax largest are refined (ties by token id) and the rest kept.
TEST(ExactLogitsTest, AtMostKRefineMaxPerRow) {
  const int64_t rows = 64, cols = 256;
  // Rows j and j + 32 alike; values near each other.
  const auto base = Random(cols, 3, 0.05f);
  const Matrix m = MakeMatrix(DType::kQ8_0, rows, cols, [&](int64_t j, int64_t k) {
    return base[k] * (1.0f + 0.0005f * (float)(j % 32));
  });
  const auto x = Random(cols, 4, 1.0f);
  std::vector<float> y(rows);
  kernels::MatMul(m.View(), x.data(), 1, y.data(), nullptr, nullptr);
  const float mx = *std::max_element(y.begin(), y.end());
  std::vector<int32_t> within;
  for (int32_t j = 0; j < rows; ++j) {
    if (y[j] >= mx - kRefineMargin) within.push_back(j);
  }
  ASSERT_GT(within.size(), kRefineMax);
  std::vector<int32_t> order = within;
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return y[a] > y[b]; });
  std::vector<float> got = y;
  RefineTopLogits(m.View(), x.data(), 1, got.data(), nullptr);
  for (size_t i = 0; i < order.size(); ++i) {
    const int32_t j = order[i];
    if (i < kRefineMax) {
      EXPECT_EQ(got[j], (float)m.Exact(j, x.data())) << "token " << j;
    } else {
      EXPECT_EQ(got[j], y[j]) << "token " << j;
    }
  }
}

// A large vocabulary's one row is scanned in parts over the pool's threads:
// the same logits as the scan on one thread, with more candidates than
// kRefineMax (ties by token id across the parts) and with few.
TEST(ExactLogitsTest, SplitScanOfOneRowEqualsSerial) {
  const int64_t rows = 40000, cols = 64;
  for (float spread : {0.0002f, 0.05f}) {
    SCOPED_TRACE(spread);
    const auto base = Random(cols, 11, 0.05f);
    // Rows repeat every 997 (ties across the parts), scaled by up to 1 + spread.
    const Matrix m = MakeMatrix(DType::kQ8_0, rows, cols, [&](int64_t j, int64_t k) {
      return base[k] * (1.0f + spread * (float)((j * 7) % 997) / 997.0f);
    });
    const auto x = Random(cols, 12, 1.0f);
    std::vector<float> y(rows);
    kernels::MatMul(m.View(), x.data(), 1, y.data(), nullptr, nullptr);
    std::vector<float> serial = y, split = y;
    RefineTopLogits(m.View(), x.data(), 1, serial.data(), nullptr);
    for (int threads : {2, 3}) {
      ThreadPool pool(threads);
      split = y;
      RefineTopLogits(m.View(), x.data(), 1, split.data(), &pool);
      EXPECT_EQ(0, std::memcmp(serial.data(), split.data(), rows * sizeof(float)))
          << threads << " threads";
    }
    EXPECT_NE(0, std::memcmp(serial.data(), y.data(), rows * sizeof(float)));
  }
}

// Float matrices' kernels read f32 activations: nothing to refine.
TEST(ExactLogitsTest, FloatMatricesUnchanged) {
  const int64_t rows = 50, cols = 128;
  const auto wv = Random(rows * cols, 5, 0.1f);
  const Matrix m = MakeMatrix(DType::kF16, rows, cols, [&](int64_t j, int64_t k) { return wv[j * cols + k]; });
  const auto x = Random(2 * cols, 6, 1.0f);
  std::vector<float> y(2 * rows);
  kernels::MatMul(m.View(), x.data(), 2, y.data(), nullptr, nullptr);
  std::vector<float> got = y;
  RefineTopLogits(m.View(), x.data(), 2, got.data(), nullptr);
  EXPECT_EQ(0, std::memcmp(y.data(), got.data(), y.size() * sizeof(float)));
}

}  // namespace
}  // namespace tern
