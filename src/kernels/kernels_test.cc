#include "kernels/kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "base/fp16.h"
#include "kernels/kernel_table.h"
#include "kernels/workspace.h"
#include "quant/formats.h"
#include "quant/quant.h"

namespace tern::kernels {
namespace {

constexpr DType kFormats[] = {DType::kF32,  DType::kF16,  DType::kBF16, DType::kQ8_0,
                              DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1,
                              DType::kQ4_K, DType::kQ5_K, DType::kQ6_K};

bool IsKQuant(DType t) { return BlockSize(t) == 256; }

// Every registered table this CPU runs (the scalar reference last): a table
// is tested here by registering it (table_list.h).
std::vector<const KernelTable*> AvailableTables() { return AvailableKernelTables(); }

// The same without the scalar reference (the tables compared with it).
std::vector<const KernelTable*> TablesBesideReference() {
  std::vector<const KernelTable*> tables;
  for (const KernelTable* t : AvailableKernelTables()) {
    if (t != &RefKernelTable()) tables.push_back(t);
  }
  return tables;
}

void PutHalf(uint8_t* p, float v) {
  const uint16_t h = Fp32ToFp16(v);
  std::memcpy(p, &h, 2);
}

// Random but valid weight rows: random quant bytes, scales of a realistic size.
std::vector<uint8_t> RandomWeights(DType t, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  std::uniform_real_distribution<float> unif(0.0005f, 0.01f);
  const int64_t row_bytes = RowBytes(t, cols);
  std::vector<uint8_t> w(rows * row_bytes);
  if (t == DType::kF32 || t == DType::kF16 || t == DType::kBF16) {
    std::vector<float> row(cols);
    for (int64_t r = 0; r < rows; ++r) {
      for (auto& v : row) v = normal(rng);
      quant::QuantizeRow(t, row.data(), w.data() + r * row_bytes, cols);
    }
    return w;
  }
  for (auto& b : w) b = (uint8_t)(rng() & 0xFF);
  const int64_t bb = BlockBytes(t);
  for (int64_t off = 0; off < (int64_t)w.size(); off += bb) {
    uint8_t* blk = w.data() + off;
    switch (t) {
      case DType::kQ4_1:
      case DType::kQ5_1:
        PutHalf(blk, unif(rng));
        PutHalf(blk + 2, -8 * unif(rng));
        break;
      case DType::kQ4_K:
      case DType::kQ5_K:
        PutHalf(blk, unif(rng) * 0.1f);
        PutHalf(blk + 2, unif(rng) * 0.1f);
        break;
      case DType::kQ6_K:
        PutHalf(blk + 208, unif(rng) * 0.05f);
        break;
      default:
        PutHalf(blk, unif(rng));
    }
  }
  return w;
}

std::vector<float> RandomActivations(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(n);
  for (auto& v : x) v = normal(rng);
  // A few outliers, as real activations have.
  for (int64_t i = 0; i < n; i += 97) x[i] *= 8.0f;
  return x;
}

std::vector<float> Dequantize(DType t, const std::vector<uint8_t>& w, int64_t rows,
                              int64_t cols) {
  std::vector<float> out(rows * cols);
  const int64_t row_bytes = RowBytes(t, cols);
  for (int64_t r = 0; r < rows; ++r) {
    quant::DequantizeRow(t, w.data() + r * row_bytes, out.data() + r * cols, cols);
  }
  return out;
}

struct Case {
  int64_t rows, cols, tokens;
};

std::vector<Case> CasesFor(DType t) {
  std::vector<Case> cases;
  const std::vector<int64_t> cols =
      IsKQuant(t) ? std::vector<int64_t>{256, 512, 4096} : std::vector<int64_t>{32, 64, 96, 160, 256, 2080, 4096};
  const int64_t rows[] = {1, 31, 32, 33, 255, 257};
  const int64_t tokens[] = {1, 3, 7, 16, 33};
  for (int64_t c : cols) {
    for (int64_t r : rows) {
      for (int64_t n : tokens) {
        // Keep the test fast: skip the largest products.
        if (c * r * n > 4096 * 64 * 8 && !(r == 257 && n == 1)) continue;
        cases.push_back({r, c, n});
      }
    }
  }
  return cases;
}

class MatMulFormatTest : public ::testing::TestWithParam<DType> {};

TEST_P(MatMulFormatTest, SimdMatchesReference) {
  const DType t = GetParam();
  for (const KernelTable* simd : TablesBesideReference()) {
  SCOPED_TRACE(simd->isa);
  uint32_t seed = 1;
  for (const Case& c : CasesFor(t)) {
    const auto w = RandomWeights(t, c.rows, c.cols, seed++);
    const auto x = RandomActivations(c.tokens * c.cols, seed++);
    const auto wf = Dequantize(t, w, c.rows, c.cols);
    std::vector<float> y_ref(c.tokens * c.rows), y_simd(c.tokens * c.rows);
    const WeightView view{t, w.data(), c.rows, c.cols};
    MatMulWith(RefKernelTable(), view, x.data(), c.tokens, y_ref.data(), nullptr, nullptr);
    MatMulWith(*simd, view, x.data(), c.tokens, y_simd.data(), nullptr, nullptr);
    for (int64_t tok = 0; tok < c.tokens; ++tok) {
      for (int64_t r = 0; r < c.rows; ++r) {
        double abs_sum = 0;
        for (int64_t k = 0; k < c.cols; ++k) {
          abs_sum += std::fabs((double)wf[r * c.cols + k] * x[tok * c.cols + k]);
        }
        const double bound = 2e-5 * abs_sum + 1e-6;
        ASSERT_NEAR(y_simd[tok * c.rows + r], y_ref[tok * c.rows + r], bound)
            << DTypeName(t) << " rows=" << c.rows << " cols=" << c.cols
            << " tokens=" << c.tokens << " at token " << tok << " row " << r;
      }
    }
  }
  }
}

// The AVX-512 VNNI build differs from the AVX2 build only in how the exact
// 8-bit integer dot products are formed, so its outputs are bitwise equal —
// except Q4_1, which it computes with 512-bit tiles of other operations.
// (Q4_0, Q8_0: both tables' rows-in-lanes kernels add fma(float(exact block
// sum), d_w x d_a) block by block; Q4_K, Q5_K the same with the exact scaled
// sum and the mins' sum per super-block; Q6_K with the exact scaled sum of
// q - 32 per super-block. Float weights: 16-lane accumulators in both,
// AVX2's in two 8-lane halves, summed by the same tree.)
TEST_P(MatMulFormatTest, Avx512VnniEqualsAvx2Bitwise) {
  const DType t = GetParam();
  if (t == DType::kQ4_1) {
    GTEST_SKIP() << "own 512-bit tile";
  }
  const KernelTable* avx2 = Avx2KernelTable();
  const KernelTable* vnni = Avx512VnniKernelTable();
  if (avx2 == nullptr || vnni == nullptr) GTEST_SKIP() << "CPU lacks AVX-512 VNNI";
  uint32_t seed = 7;
  for (const Case& c : CasesFor(t)) {
    const auto w = RandomWeights(t, c.rows, c.cols, seed++);
    const auto x = RandomActivations(c.tokens * c.cols, seed++);
    std::vector<float> y_avx2(c.tokens * c.rows), y_vnni(c.tokens * c.rows);
    const WeightView view{t, w.data(), c.rows, c.cols};
    MatMulWith(*avx2, view, x.data(), c.tokens, y_avx2.data(), nullptr, nullptr);
    MatMulWith(*vnni, view, x.data(), c.tokens, y_vnni.data(), nullptr, nullptr);
    ASSERT_EQ(0, std::memcmp(y_avx2.data(), y_vnni.data(), y_avx2.size() * sizeof(float)))
        << DTypeName(t) << " rows=" << c.rows << " cols=" << c.cols << " tokens=" << c.tokens;
  }
}

// The scalar spec against dequantize + double dot. Quantized formats also
// quantize the activations (step amax/127 per block), which bounds the error
// by sum |w| * step / 2.
TEST_P(MatMulFormatTest, ReferenceMatchesDequantizedDot) {
  const DType t = GetParam();
  const int64_t act_block = t == DType::kF32 || t == DType::kF16 || t == DType::kBF16
                                ? 0
                                : (IsKQuant(t) ? 256 : 32);
  uint32_t seed = 100;
  for (const Case& c : {Case{33, IsKQuant(t) ? 512 : 96, 3}, Case{7, 4096, 2}}) {
    const auto w = RandomWeights(t, c.rows, c.cols, seed++);
    const auto x = RandomActivations(c.tokens * c.cols, seed++);
    const auto wf = Dequantize(t, w, c.rows, c.cols);
    std::vector<float> y(c.tokens * c.rows);
    MatMulWith(RefKernelTable(), {t, w.data(), c.rows, c.cols}, x.data(), c.tokens, y.data(),
               nullptr, nullptr);
    for (int64_t tok = 0; tok < c.tokens; ++tok) {
      const float* xt = x.data() + tok * c.cols;
      for (int64_t r = 0; r < c.rows; ++r) {
        double exact = 0, abs_sum = 0, quant_err = 0;
        for (int64_t k = 0; k < c.cols; ++k) {
          const double wk = wf[r * c.cols + k];
          exact += wk * xt[k];
          abs_sum += std::fabs(wk * xt[k]);
        }
        if (act_block > 0) {
          for (int64_t b0 = 0; b0 < c.cols; b0 += act_block) {
            double amax = 0, wsum = 0;
            for (int64_t k = b0; k < b0 + act_block; ++k) {
              amax = std::max(amax, (double)std::fabs(xt[k]));
              wsum += std::fabs(wf[r * c.cols + k]);
            }
            quant_err += wsum * amax / 127.0 * 0.5;
          }
        }
        const double bound = quant_err * 1.01 + 1e-6 * abs_sum + 1e-6;
        ASSERT_NEAR(y[tok * c.rows + r], exact, bound)
            << DTypeName(t) << " rows=" << c.rows << " cols=" << c.cols << " token " << tok
            << " row " << r;
      }
    }
  }
}

TEST_P(MatMulFormatTest, ThreadedEqualsUnthreadedBitwise) {
  const DType t = GetParam();
  ThreadPool pool(3);
  // More threads than (pretended) cores: shares for two, the rest steal.
  ThreadPool oversubscribed(8, /*cores=*/2);
  for (const KernelTable* table : AvailableTables()) {
  SCOPED_TRACE(table->isa);
  // Column counts that leave the decode tiles' unrolled loops a remainder.
  for (const int64_t cols : IsKQuant(t) ? std::vector<int64_t>{512, 768}
                                        : std::vector<int64_t>{256, 352, 480}) {
  for (int64_t tokens : {1, 5, 33}) {
    const int64_t rows = 129;
    const auto w = RandomWeights(t, rows, cols, 7 + (uint32_t)tokens);
    const auto x = RandomActivations(tokens * cols, 9);
    std::vector<float> y1(tokens * rows), y2(tokens * rows);
    const WeightView view{t, w.data(), rows, cols};
    MatMulWith(*table, view, x.data(), tokens, y1.data(), nullptr, nullptr);
    MatMulWith(*table, view, x.data(), tokens, y2.data(), &pool, nullptr);
    ASSERT_EQ(0, std::memcmp(y1.data(), y2.data(), y1.size() * sizeof(float)))
        << DTypeName(t) << " tokens=" << tokens;
    MatMulWith(*table, view, x.data(), tokens, y2.data(), &oversubscribed, nullptr);
    ASSERT_EQ(0, std::memcmp(y1.data(), y2.data(), y1.size() * sizeof(float)))
        << DTypeName(t) << " tokens=" << tokens << ", 8 threads on 2 cores";
    // A token's row of a batch (the first, in a full token tile, and the
    // last) equals that token alone.
    for (const int64_t k : {(int64_t)0, tokens - 1}) {
      std::vector<float> y_one(rows);
      MatMulWith(*table, view, x.data() + k * cols, 1, y_one.data(), &pool, nullptr);
      ASSERT_EQ(0, std::memcmp(y_one.data(), y1.data() + k * rows, rows * sizeof(float)))
          << DTypeName(t) << " cols=" << cols << " tokens=" << tokens << " token " << k;
    }
  }
  }
  }
}


// Each of `tokens_list`'s batches through `table` gives every token the bits
// it gets alone (random weights of type t, rows x cols; seeds from `seed`).
void ExpectBatchEqualsTokensAlone(const KernelTable& table, DType t, int64_t rows, int64_t cols,
                                  std::initializer_list<int64_t> tokens_list, uint32_t seed) {
  const auto w = RandomWeights(t, rows, cols, seed);
  const WeightView view{t, w.data(), rows, cols};
  for (int64_t tokens : tokens_list) {
    const auto x = RandomActivations(tokens * cols, seed + 1 + (uint32_t)tokens);
    std::vector<float> y(tokens * rows), one(rows);
    MatMulWith(table, view, x.data(), tokens, y.data(), nullptr, nullptr);
    for (int64_t k = 0; k < tokens; ++k) {
      MatMulWith(table, view, x.data() + k * cols, 1, one.data(), nullptr, nullptr);
      ASSERT_EQ(0, std::memcmp(one.data(), y.data() + k * rows, rows * sizeof(float)))
          << DTypeName(t) << " tokens=" << tokens << " token " << k;
    }
  }
}
// Float weights (F32, F16, BF16): decode walks the rows one after another and
// prefill packs row tiles in K blocks; both keep one summation order per
// (row, token), so a token in any batch gets the bits it gets alone: across
// token chunks (48 tokens at these widths), with a short last row tile (43
// rows) and with columns that are not a multiple of the vector width (1000).
TEST(MatMulTest, FloatWeightsBatchEqualsTokensAloneBitwise) {
  for (const KernelTable* table : AvailableTables()) {
    SCOPED_TRACE(table->isa);
    for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
      for (int64_t cols : {2048, 1000}) {
        ExpectBatchEqualsTokensAlone(*table, t, 43, cols, {2, 3, 4, 5, 17, 49, 80}, 41);
      }
    }
  }
}

// The AMX table computes a token alone (decode, on the vector unit) and in
// token groups of 16 (tiles) with the same float operations: any batch, cut
// into chunks or not, gives each token the bits it gets alone.
TEST(MatMulTest, AmxBatchEqualsTokensAloneBitwise) {
  const KernelTable* amx = AmxKernelTable();
  if (amx == nullptr) GTEST_SKIP() << "CPU or OS lacks AMX-INT8";
  const int64_t rows = 40, cols = 4096;  // 4096 columns: chunks of 32 tokens
  for (DType t : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1,
                  DType::kQ4_K, DType::kQ5_K, DType::kQ6_K}) {
    ExpectBatchEqualsTokensAlone(*amx, t, rows, cols, {2, 6, 7, 15, 16, 17, 22, 23, 33, 47}, 21);
  }
}

// Every table gives a token in a batch the bits it gets alone, for batches
// on either side of each kernel's few-token path (the AVX-512 Q4_0 kernel:
// under 4 tokens on the rows as they lie, from 4 on through an unpacked
// panel, in tiles of 16 tokens), across two token chunks (80 tokens of 4096
// columns), with a short last row tile (40 rows).
TEST(MatMulTest, BatchEqualsTokensAloneBitwise) {
  const int64_t rows = 40, cols = 4096;
  for (const KernelTable* table : AvailableTables()) {
    SCOPED_TRACE(table->isa);
    for (DType t : {DType::kQ4_0, DType::kQ4_1, DType::kQ8_0, DType::kQ4_K, DType::kQ5_K,
                    DType::kQ6_K}) {
      ExpectBatchEqualsTokensAlone(*table, t, rows, cols, {2, 3, 4, 5, 15, 16, 17, 33, 80}, 31);
    }
  }
}

// Where a table reads weights in its own 16-row tiles (kPanel16: pack16,
// gemm16, row16), row16 returns each row's bytes, and the packed copy gives
// every token the bits the rows as they lie give (16-bit float weights,
// whose tiles hold the rows in the lanes: the bits of the scalar chain
// acc = fma(w, x, acc) over the columns in order, on every table), for token
// counts on either side of the few-token path, across token chunks (4096
// columns), split over threads, and in one MatMulMany with a row-major
// matrix of 24 rows before it (so the packed part starts off the 16-row
// grain of the concatenated rows).
TEST(MatMulTest, Panel16EqualsRowMajorOrFmaChainBitwise) {
  ThreadPool pool(3);
  int tested = 0;
  for (const KernelTable* table : AvailableTables()) {
    for (DType t : kFormats) {
      const MatMulKernel* k = table->FindMatMul(t);
      if (k == nullptr || k->pack16 == nullptr) continue;
      SCOPED_TRACE(std::string(table->isa) + " " + DTypeName(t));
      ASSERT_NE(k->gemm16, nullptr);
      ++tested;
      // Float weights: also a row length off the 16-column groups; K-quants
      // also an odd count of super-blocks; blocks of 32: also rows off the
      // 256-column grain, in 3 tiles and in 1, and in 37 (float weights: 13):
      // one thread's range decoded in quarters of several tiles, and tiles
      // left over.
      for (int64_t cols : {int64_t{4096}, int64_t{4104}, int64_t{3840}, int64_t{4000},
                           int64_t{1056}, int64_t{2080}}) {
      if (cols % BlockSize(t) != 0) continue;
      if (cols == 4104 && BlockSize(t) != 1) continue;
      if (cols == 3840 && BlockSize(t) != 256) continue;
      if ((cols == 4000 || cols == 1056 || cols == 2080) && BlockSize(t) != 32) continue;
      SCOPED_TRACE(std::to_string(cols) + " columns");
      // 5 tiles: a group of 4 and 1; 3; 1.
      const int64_t rows = cols == 4000 ? 48 : cols == 1056 ? 16 : cols == 2080 ? 16 * 37 : cols == 4104 ? 16 * 13 : 80;
      const auto w = RandomWeights(t, rows, cols, 41);
      std::vector<uint8_t> packed(w.size());
      k->pack16(w.data(), RowBytes(t, cols), rows, cols, packed.data());
      EXPECT_NE(0, std::memcmp(w.data(), packed.data(), w.size()));
      // row16 gives every row's own bytes back (GetRow's path).
      ASSERT_NE(k->row16, nullptr);
      const int64_t row_bytes = RowBytes(t, cols);
      std::vector<uint8_t> row(row_bytes);
      for (int64_t r = 0; r < rows; ++r) {
        k->row16(packed.data(), row_bytes, rows, r, cols, row.data());
        ASSERT_EQ(0, std::memcmp(row.data(), w.data() + r * row_bytes, row_bytes)) << "row " << r;
      }
      const WeightView plain{t, w.data(), rows, cols};
      const WeightView panel{t, packed.data(), rows, cols, WeightLayout::kPanel16};
      const auto other_w = RandomWeights(t, 24, cols, 43);
      const WeightView other{t, other_w.data(), 24, cols};
      for (int64_t tokens : {1, 2, 3, 4, 5, 7, 16, 17, 33, 80}) {
        const auto x = RandomActivations(tokens * cols, 42 + (uint32_t)tokens);
        std::vector<float> want(tokens * rows), got(tokens * rows), got_many(tokens * rows),
            other_y(tokens * 24), other_want(tokens * 24);
        if (BlockSize(t) == 1) {
          std::vector<float> wf(cols);
          for (int64_t r = 0; r < rows; ++r) {
            quant::DequantizeRow(t, w.data() + r * row_bytes, wf.data(), cols);
            for (int64_t i = 0; i < tokens; ++i) {
              float acc = 0.0f;
              for (int64_t c = 0; c < cols; ++c) acc = std::fma(wf[c], x[i * cols + c], acc);
              want[i * rows + r] = acc;
            }
          }
        } else {
          MatMulWith(*table, plain, x.data(), tokens, want.data(), &pool, nullptr);
        }
        MatMulWith(*table, panel, x.data(), tokens, got.data(), &pool, nullptr);
        EXPECT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)))
            << tokens << " tokens";
        MatMulWith(*table, panel, x.data(), tokens, got.data(), nullptr, nullptr);
        EXPECT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)))
            << tokens << " tokens, one thread";
        const WeightView both[2] = {other, panel};
        float* const ys[2] = {other_y.data(), got_many.data()};
        MatMulManyWith(*table, both, x.data(), tokens, ys, &pool, nullptr);
        MatMulWith(*table, other, x.data(), tokens, other_want.data(), &pool, nullptr);
        EXPECT_EQ(0, std::memcmp(want.data(), got_many.data(), want.size() * sizeof(float)))
            << tokens << " tokens, MatMulMany";
        EXPECT_EQ(0, std::memcmp(other_want.data(), other_y.data(),
                                 other_want.size() * sizeof(float)))
            << tokens << " tokens, MatMulMany's row-major part";
      }
      }
    }
  }
  if (tested == 0) GTEST_SKIP() << "no table on this CPU reads kPanel16 weights";
}

// Every output of `table` on the weights w (rows x cols of t), with 1, 3
// and 17 tokens (17: the AMX tiles too) of activations all `sign` (so
// quantized to +-127), equals `exact` within float rounding.
void ExpectExactOutputs(const KernelTable& table, DType t, const std::vector<uint8_t>& w,
                        int64_t rows, int64_t cols, float sign, double exact, int pattern) {
  const std::vector<float> x(17 * cols, sign);
  for (int64_t tokens : {1, 3, 17}) {
    std::vector<float> y(tokens * rows);
    MatMulWith(table, {t, w.data(), rows, cols}, x.data(), tokens, y.data(), nullptr, nullptr);
    for (int64_t i = 0; i < tokens * rows; ++i) {
      ASSERT_NEAR(y[i], exact, 1e-5 * std::fabs(exact))
          << DTypeName(t) << " pattern " << pattern << " tokens " << tokens << " at " << i;
    }
  }
}

// Extreme quants (every weight quant at its largest magnitude, activations
// all +1 or all -1, so quantized to +-127) push the integer sums of every
// table's kernels to their bounds: each output must be the exact dot
// product (scales 1 and 1/127, so only rounding of the float sums differs).
TEST(MatMulTest, ExtremeQuantsGiveExactSums) {
  const int64_t rows = 33, cols = 256;
  for (const KernelTable* table : AvailableTables()) {
    SCOPED_TRACE(table->isa);
    for (DType t : {DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1, DType::kQ8_0}) {
      const bool has_min = t == DType::kQ4_1 || t == DType::kQ5_1;
      for (int pattern = 0; pattern < 4; ++pattern) {
        // Weights all at the top (nibble 15, 31 with the fifth bit, Q8_0
        // 127: patterns 0, 1) or the bottom (0, -128: 2, 3); activations +1
        // (0, 2) or -1. Q4_1 / Q5_1 with a min of -40 (top) or 3.
        const bool top = pattern < 2;
        const uint8_t q = t == DType::kQ8_0 ? (top ? 0x7F : 0x80) : (top ? 0xFF : 0x00);
        std::vector<uint8_t> w(rows * RowBytes(t, cols), q);
        const float m = top ? -40.0f : 3.0f;
        for (int64_t off = 0; off < (int64_t)w.size(); off += BlockBytes(t)) {
          PutHalf(w.data() + off, 1.0f);
          if (has_min) PutHalf(w.data() + off + 2, m);
        }
        const float q_top = t == DType::kQ4_0   ? 7.0f
                            : t == DType::kQ4_1 ? 15.0f
                            : t == DType::kQ5_0 ? 15.0f
                            : t == DType::kQ5_1 ? 31.0f
                                                : 127.0f;
        const float q_bottom = t == DType::kQ4_0   ? -8.0f
                               : t == DType::kQ5_0 ? -16.0f
                               : t == DType::kQ8_0 ? -128.0f
                                                   : 0.0f;
        const float per = (top ? q_top : q_bottom) + (has_min ? m : 0.0f);
        const float sign = pattern % 2 == 0 ? 1.0f : -1.0f;
        ASSERT_NO_FATAL_FAILURE(ExpectExactOutputs(*table, t, w, rows, cols, sign,
                                                   (double)per * sign * cols, pattern));
      }
    }
  }
}

// The same for Q4_K and Q5_K at the bounds of their integer sums: every
// quant at its top (15 / 31) with every 6-bit scale 63 (a super-block's
// scaled sum, 8 x 63 x 32 x 31 x 127, past 2^25), or every quant 0 with
// every min 63.
TEST(MatMulTest, ExtremeKQuantsGiveExactSums) {
  const int64_t rows = 33, cols = 512;
  for (const KernelTable* table : AvailableTables()) {
    SCOPED_TRACE(table->isa);
    for (DType t : {DType::kQ4_K, DType::kQ5_K}) {
      const int64_t bb = BlockBytes(t);
      for (int pattern = 0; pattern < 4; ++pattern) {
        const bool top = pattern < 2;
        const uint8_t sc[8] = {63, 63, 63, 63, 63, 63, 63, 63};
        const uint8_t mn[8] = {63, 63, 63, 63, 63, 63, 63, 63};
        std::vector<uint8_t> w(rows * RowBytes(t, cols));
        for (int64_t off = 0; off < (int64_t)w.size(); off += bb) {
          PutHalf(w.data() + off, 1.0f);
          PutHalf(w.data() + off + 2, 1.0f);
          quant::PackScaleMinK4(sc, mn, w.data() + off + 4);
          // The quants (and Q5_K's fifth bits) all ones or all zeros.
          std::memset(w.data() + off + 16, top ? 0xFF : 0x00, bb - 16);
        }
        const float q = t == DType::kQ4_K ? 15.0f : 31.0f;
        const float per = top ? 63.0f * q - 63.0f : -63.0f;
        const float sign = pattern % 2 == 0 ? 1.0f : -1.0f;
        ASSERT_NO_FATAL_FAILURE(ExpectExactOutputs(*table, t, w, rows, cols, sign,
                                                   (double)per * sign * cols, pattern));
      }
    }
  }
}

// Q6_K at the bounds of its integer sums: every quant 0 or 63 (q - 32 =
// -32 or 31) with every scale -128 or 127, so a weight is up to 4096 (the
// AMX tiles' split product at its top) and a super-block's sum 2^27.
TEST(MatMulTest, ExtremeQ6KGivesExactSums) {
  const int64_t rows = 33, cols = 512;
  const DType t = DType::kQ6_K;
  const int64_t bb = BlockBytes(t);
  for (const KernelTable* table : AvailableTables()) {
    SCOPED_TRACE(table->isa);
    for (int pattern = 0; pattern < 8; ++pattern) {
      const bool top = pattern & 1, negative_scale = pattern & 2;
      const float sign = pattern & 4 ? -1.0f : 1.0f;
      const int8_t sc = negative_scale ? -128 : 127;
      std::vector<uint8_t> w(rows * RowBytes(t, cols));
      for (int64_t off = 0; off < (int64_t)w.size(); off += bb) {
        std::memset(w.data() + off, top ? 0xFF : 0x00, 192);  // ql, qh
        std::memset(w.data() + off + 192, (uint8_t)sc, 16);
        PutHalf(w.data() + off + 208, 1.0f);
      }
      const double per = (double)sc * (top ? 31 : -32);
      ASSERT_NO_FATAL_FAILURE(
          ExpectExactOutputs(*table, t, w, rows, cols, sign, per * sign * cols, pattern));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllFormats, MatMulFormatTest, ::testing::ValuesIn(kFormats),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(DTypeName(info.param));
                         });

TEST(MatMulTest, FallbackFormatsMatchDequantizedDot) {
  // Q2_K/Q3_K have no fast kernel: dequantize + f32 dot.
  for (DType t : {DType::kQ2_K, DType::kQ3_K}) {
    const int64_t rows = 5, cols = 512;
    std::vector<float> src = RandomActivations(rows * cols, 3);
    std::vector<uint8_t> w(rows * RowBytes(t, cols));
    for (int64_t r = 0; r < rows; ++r) {
      quant::QuantizeRow(t, src.data() + r * cols, w.data() + r * RowBytes(t, cols), cols);
    }
    const auto wf = Dequantize(t, w, rows, cols);
    const auto x = RandomActivations(cols, 4);
    std::vector<float> y(rows);
    MatMul({t, w.data(), rows, cols}, x.data(), 1, y.data(), nullptr, nullptr);
    for (int64_t r = 0; r < rows; ++r) {
      double exact = 0, abs_sum = 0;
      for (int64_t k = 0; k < cols; ++k) {
        exact += (double)wf[r * cols + k] * x[k];
        abs_sum += std::fabs((double)wf[r * cols + k] * x[k]);
      }
      EXPECT_NEAR(y[r], exact, 1e-5 * abs_sum) << DTypeName(t);
    }
  }
}

TEST(MatMulTest, ManyEqualsSeparateMatMulsBitwise) {
  const int64_t cols = 512, tokens = 6;
  const DType types[] = {DType::kQ4_K, DType::kQ6_K, DType::kF16, DType::kQ8_0, DType::kQ2_K};
  const int64_t rows[] = {64, 33, 17, 8, 5};
  std::vector<std::vector<uint8_t>> data;
  std::vector<WeightView> views;
  for (int i = 0; i < 5; ++i) {
    const auto src = RandomActivations(rows[i] * cols, 20 + i);
    std::vector<uint8_t> w(rows[i] * RowBytes(types[i], cols));
    for (int64_t r = 0; r < rows[i]; ++r) {
      quant::QuantizeRow(types[i], src.data() + r * cols,
                         w.data() + r * RowBytes(types[i], cols), cols);
    }
    data.push_back(std::move(w));
    views.push_back({types[i], data.back().data(), rows[i], cols});
  }
  const auto x = RandomActivations(tokens * cols, 30);
  ThreadPool pool(2);
  std::vector<std::vector<float>> many(5), single(5);
  std::vector<float*> ys;
  for (int i = 0; i < 5; ++i) {
    many[i].resize(tokens * rows[i]);
    single[i].resize(tokens * rows[i]);
    ys.push_back(many[i].data());
    MatMul(views[i], x.data(), tokens, single[i].data(), nullptr, nullptr);
  }
  MatMulMany(views, x.data(), tokens, ys.data(), &pool, nullptr);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(0, std::memcmp(many[i].data(), single[i].data(), many[i].size() * 4))
        << DTypeName(types[i]);
  }
}

TEST(MatMulTest, F32ColumnsNotMultipleOfEight) {
  const int64_t rows = 9, cols = 172, tokens = 4;
  const auto wv = RandomActivations(rows * cols, 5);
  const auto x = RandomActivations(tokens * cols, 6);
  std::vector<float> y(tokens * rows);
  MatMul({DType::kF32, wv.data(), rows, cols}, x.data(), tokens, y.data(), nullptr, nullptr);
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t r = 0; r < rows; ++r) {
      double exact = 0;
      for (int64_t k = 0; k < cols; ++k) exact += (double)wv[r * cols + k] * x[t * cols + k];
      EXPECT_NEAR(y[t * rows + r], exact, 1e-4);
    }
}

// 16-bit float weights whose rows end in a partial vector (the tiles' sums
// of whole vectors plus a scalar tail): every table agrees with the exact
// dot product, and a token of a batch gets the bits it gets alone (prefill
// and decode tiles, 8-row tiles and the rows left over).
TEST(MatMulTest, HalfFloatColumnsNotMultipleOfSixteen) {
  for (const DType t : {DType::kF16, DType::kBF16}) {
    for (const KernelTable* table : AvailableTables()) {
      SCOPED_TRACE(std::string(DTypeName(t)) + " " + table->isa);
      for (const int64_t cols : {(int64_t)40, (int64_t)1064, (int64_t)2053}) {
        const int64_t rows = 19, tokens = 7;
        const auto w = RandomWeights(t, rows, cols, 11);
        const auto x = RandomActivations(tokens * cols, 12);
        const auto wf = Dequantize(t, w, rows, cols);
        const WeightView view{t, w.data(), rows, cols};
        std::vector<float> y(tokens * rows);
        MatMulWith(*table, view, x.data(), tokens, y.data(), nullptr, nullptr);
        for (int64_t k = 0; k < tokens; ++k) {
          std::vector<float> y_one(rows);
          MatMulWith(*table, view, x.data() + k * cols, 1, y_one.data(), nullptr, nullptr);
          ASSERT_EQ(0, std::memcmp(y_one.data(), y.data() + k * rows, rows * sizeof(float)))
              << "cols=" << cols << " token " << k;
          for (int64_t r = 0; r < rows; ++r) {
            double exact = 0, mag = 0;
            for (int64_t c = 0; c < cols; ++c) {
              exact += (double)wf[r * cols + c] * x[k * cols + c];
              mag += std::fabs((double)wf[r * cols + c] * x[k * cols + c]);
            }
            ASSERT_NEAR(y[k * rows + r], exact, 1e-5 * (1 + mag)) << "cols=" << cols << " row " << r;
          }
        }
      }
    }
  }
}

TEST(ActivationQuantTest, EveryTableIsBitIdenticalToReference) {
  const auto x = RandomActivations(4096, 11);
  std::vector<ActBlockQ8> a(128), b(128);
  std::vector<ActBlockQ8K> ak(16), bk(16);
  RefKernelTable().quantize_q8(x.data(), 4096, a.data());
  RefKernelTable().quantize_q8k(x.data(), 4096, ak.data());
  for (const KernelTable* t : TablesBesideReference()) {
    t->quantize_q8(x.data(), 4096, b.data());
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), sizeof(ActBlockQ8) * a.size())) << t->isa;
    t->quantize_q8k(x.data(), 4096, bk.data());
    EXPECT_EQ(0, std::memcmp(ak.data(), bk.data(), sizeof(ActBlockQ8K) * ak.size())) << t->isa;
  }
}

// ---- element-wise kernels: SIMD vs reference ---------------------------------------

// Each test compares every table beside the reference (simd_) with it.
class ElementwiseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (TablesBesideReference().empty()) GTEST_SKIP() << "no table beside the reference";
  }
  const KernelTable& ref_ = RefKernelTable();
};

TEST_F(ElementwiseTest, RmsNormMatches) {
  for (const KernelTable* simd_ : TablesBesideReference()) {
    SCOPED_TRACE(simd_->isa);
    for (int64_t n : {1, 7, 64, 2049}) {
      const auto x = RandomActivations(n, 1);
      const auto w = RandomActivations(n, 2);
      std::vector<float> a(n), b(n);
      ref_.rms_norm(x.data(), w.data(), n, 1e-5f, a.data());
      simd_->rms_norm(x.data(), w.data(), n, 1e-5f, b.data());
      for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(a[i], b[i], 1e-5 * (1 + std::fabs(a[i])));
    }
  }
}

TEST_F(ElementwiseTest, SiluMulMatches) {
  for (const KernelTable* simd_ : TablesBesideReference()) {
    SCOPED_TRACE(simd_->isa);
    const int64_t n = 1003;
    auto g = RandomActivations(n, 3);
    g[0] = -100.0f;
    g[1] = 100.0f;
    const auto u = RandomActivations(n, 4);
    std::vector<float> a(n), b(n);
    ref_.silu_mul(g.data(), u.data(), n, a.data());
    simd_->silu_mul(g.data(), u.data(), n, b.data());
    for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(a[i], b[i], 2e-6 * (1 + std::fabs(a[i]))) << i;
  }
}

TEST_F(ElementwiseTest, SoftmaxMatches) {
  for (const KernelTable* simd_ : TablesBesideReference()) {
    SCOPED_TRACE(simd_->isa);
    for (int64_t n : {1, 5, 32000}) {
      auto a = RandomActivations(n, 5);
      for (auto& v : a) v *= 3.0f;
      auto b = a;
      ref_.softmax(a.data(), n);
      simd_->softmax(b.data(), n);
      double sum = 0;
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_NEAR(a[i], b[i], 1e-6 * std::fabs(a[i]) + 1e-9) << i;
        sum += b[i];
      }
      EXPECT_NEAR(sum, 1.0, 1e-5);
    }
  }
}

TEST_F(ElementwiseTest, RopeMatchesBothLayouts) {
  for (const KernelTable* simd_ : TablesBesideReference()) {
    SCOPED_TRACE(simd_->isa);
    const int64_t heads = 3, head_dim = 64;
    for (int64_t rope_dim : {64, 32, 24}) {
      std::vector<float> inv_freq(rope_dim / 2), cs(rope_dim);
      for (int64_t i = 0; i < rope_dim / 2; ++i) {
        inv_freq[i] = std::pow(10000.0f, -2.0f * i / rope_dim);
      }
      RopeCosSin(37.0f, inv_freq.data(), rope_dim, cs.data());
      for (bool neox : {false, true}) {
        auto a = RandomActivations(heads * head_dim, 6);
        auto b = a;
        const auto orig = a;
        ref_.rope(a.data(), heads, head_dim, rope_dim, cs.data(), neox);
        simd_->rope(b.data(), heads, head_dim, rope_dim, cs.data(), neox);
        for (int64_t i = 0; i < heads * head_dim; ++i) ASSERT_NEAR(a[i], b[i], 1e-5) << i;
        // Dims past rope_dim are untouched; rotation keeps the norm.
        for (int64_t h = 0; h < heads; ++h) {
          double n0 = 0, n1 = 0;
          for (int64_t i = 0; i < head_dim; ++i) {
            const int64_t k = h * head_dim + i;
            if (i >= rope_dim) {
              ASSERT_EQ(a[k], orig[k]);
            }
            n0 += (double)orig[k] * orig[k];
            n1 += (double)a[k] * a[k];
          }
          EXPECT_NEAR(n0, n1, 1e-3);
        }
      }
    }
  }
}

// The Walsh-Hadamard rotation equals the orthonormal Sylvester matrix
// (H[i][j] = (-1)^popcount(i & j) / sqrt(n)) chunk by chunk, is its own
// inverse, and keeps dot products.
TEST(WalshHadamardTest, IsTheOrthonormalSylvesterMatrixAndItsOwnInverse) {
  for (int64_t n : {64, 128, 256}) {
    SCOPED_TRACE(n);
    const int64_t chunks = 3;
    std::mt19937 rng(7);
    std::normal_distribution<float> dist(0.0f, 2.0f);
    std::vector<float> a(chunks * n), b(chunks * n);
    for (float& v : a) v = dist(rng);
    for (float& v : b) v = dist(rng);
    a[5] = 40.0f;  // an outlier channel
    std::vector<float> ha = a, hb = b;
    WalshHadamard(ha.data(), chunks, n);
    WalshHadamard(hb.data(), chunks, n);
    double max_abs = 0;
    for (int64_t c = 0; c < chunks; ++c) {
      for (int64_t i = 0; i < n; ++i) {
        double want = 0;
        for (int64_t j = 0; j < n; ++j) {
          want += ((__builtin_popcountll((uint64_t)(i & j)) & 1) ? -1.0 : 1.0) * a[c * n + j];
        }
        want /= std::sqrt((double)n);
        ASSERT_NEAR(ha[c * n + i], want, 1e-4 * (1 + std::fabs(want))) << c << " " << i;
        if (c == 0) max_abs = std::max(max_abs, std::fabs((double)ha[i]));
      }
      double dot = 0, hdot = 0;
      for (int64_t i = 0; i < n; ++i) {
        dot += (double)a[c * n + i] * b[c * n + i];
        hdot += (double)ha[c * n + i] * hb[c * n + i];
      }
      EXPECT_NEAR(hdot, dot, 1e-3 * (1 + std::fabs(dot)));
    }
    EXPECT_LT(max_abs, 20.0);  // the outlier is spread over the chunk
    WalshHadamard(ha.data(), chunks, n);
    for (int64_t i = 0; i < chunks * n; ++i) ASSERT_NEAR(ha[i], a[i], 1e-4 * (1 + std::fabs(a[i])));
  }
}

TEST_F(ElementwiseTest, DotAndAxpyMatch) {
  for (const KernelTable* simd_ : TablesBesideReference()) {
    SCOPED_TRACE(simd_->isa);
    for (int64_t n : {1, 8, 64, 77}) {
      const auto a = RandomActivations(n, 7);
      const auto b = RandomActivations(n, 8);
      std::vector<uint16_t> bh(n);
      for (int64_t i = 0; i < n; ++i) bh[i] = Fp32ToFp16(b[i]);
      double abs_sum = 0;
      for (int64_t i = 0; i < n; ++i) abs_sum += std::fabs(a[i] * b[i]);
      EXPECT_NEAR(ref_.dot_f32(a.data(), b.data(), n), simd_->dot_f32(a.data(), b.data(), n),
                  1e-6 * abs_sum + 1e-7);
      EXPECT_NEAR(ref_.dot_f16(a.data(), bh.data(), n), simd_->dot_f16(a.data(), bh.data(), n),
                  1e-6 * abs_sum + 1e-7);
      std::vector<float> y1 = b, y2 = b;
      ref_.axpy_f16(0.5f, bh.data(), n, y1.data());
      simd_->axpy_f16(0.5f, bh.data(), n, y2.data());
      for (int64_t i = 0; i < n; ++i) ASSERT_FLOAT_EQ(y1[i], y2[i]);
    }
  }
}

// ---- attention -------------------------------------------------------------------

// A query head as the kernels score it against K of dtype k from element
// kv_off: itself over its head's elements, or where K's scores are 8-bit
// (KScoresInt8) its per-block 8-bit quantization's values; a rotated K
// (KvKeyRotated) is scored in the stored (rotated) values of the whole
// blocks the head lies in, with RotatedKeyQuery's query.
struct ScoredQ {
  std::vector<float> q;
  int k_off = 0;  // the K row elements q is dotted with: [k_off, k_off + q.size())
};
ScoredQ ScoredQuery(DType k, int kv_off, int head_dim, const float* q) {
  ScoredQ out{std::vector<float>(q, q + head_dim), kv_off};
  if (!KScoresInt8(k, kv_off, head_dim)) return out;
  if (KvKeyRotated(k, head_dim)) {
    int64_t b0, nb;
    KeyScoreBlocks(kv_off, head_dim, &b0, &nb);
    out.q.resize(nb * 32);
    out.k_off = (int)(b0 * 32);
    RotatedKeyQuery(q, kv_off, head_dim, out.q.data());
  }
  const int64_t n = (int64_t)out.q.size();
  std::vector<int8_t> qq(n);
  std::vector<float> d(n / 32);
  std::vector<int32_t> sum(n / 32);
  QuantizeQueryQ8(out.q.data(), n, qq.data(), d.data(), sum.data());
  for (int64_t i = 0; i < n; ++i) out.q[i] = (float)qq[i] * d[i / 32];
  return out;
}

// Naive attention for one query and head over contiguous positions: scores
// of q against K's elements [k_off, k_off + k_len), V's [kv_off, kv_off +
// head_dim) weighed.
void NaiveAttention(const float* q, int k_off, int k_len, const std::vector<std::vector<float>>& k,
                    const std::vector<std::vector<float>>& v, int lo, int hi, int kv_off,
                    int head_dim, float scale, float* out) {
  std::vector<double> s;
  double mx = -1e300;
  for (int p = lo; p <= hi; ++p) {
    double d = 0;
    for (int i = 0; i < k_len; ++i) d += (double)q[i] * k[p][k_off + i];
    s.push_back(d * scale);
    mx = std::max(mx, s.back());
  }
  double sum = 0;
  for (auto& e : s) sum += (e = std::exp(e - mx));
  for (int i = 0; i < head_dim; ++i) {
    double acc = 0;
    for (int p = lo; p <= hi; ++p) acc += s[p - lo] * v[p][kv_off + i];
    out[i] = (float)(acc / sum);
  }
}
void NaiveAttention(const float* q, const std::vector<std::vector<float>>& k,
                    const std::vector<std::vector<float>>& v, int lo, int hi, int kv_off,
                    int head_dim, float scale, float* out) {
  NaiveAttention(q, kv_off, head_dim, k, v, lo, hi, kv_off, head_dim, scale, out);
}
void NaiveAttention(const ScoredQ& q, const std::vector<std::vector<float>>& k,
                    const std::vector<std::vector<float>>& v, int lo, int hi, int kv_off,
                    int head_dim, float scale, float* out) {
  NaiveAttention(q.q.data(), q.k_off, (int)q.q.size(), k, v, lo, hi, kv_off, head_dim, scale,
                 out);
}

TEST(AttentionTest, PagedGqaMatchesNaive) {
  const int n_head = 8, n_head_kv = 2, head_dim = 16, block_size = 4;
  const int ctx = 150;
  const int slot_elems = n_head_kv * head_dim;
  // Blocks in a scrambled order to exercise the block table.
  const int num_blocks = (ctx + block_size - 1) / block_size;
  std::vector<int32_t> table(num_blocks);
  for (int i = 0; i < num_blocks; ++i) table[i] = (i * 7 + 3) % num_blocks;
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<std::vector<float>> k(ctx, std::vector<float>(slot_elems)),
      v(ctx, std::vector<float>(slot_elems));
  for (DType dtype : {DType::kF32, DType::kF16}) {
    const int64_t eb = dtype == DType::kF32 ? 4 : 2;
    std::vector<uint8_t> kbuf(num_blocks * block_size * slot_elems * eb),
        vbuf(kbuf.size());
    for (int p = 0; p < ctx; ++p) {
      const int64_t slot = (int64_t)table[p / block_size] * block_size + p % block_size;
      for (int i = 0; i < slot_elems; ++i) {
        float kv = nd(rng), vv = nd(rng);
        if (dtype == DType::kF16) {
          kv = Fp16ToFp32(Fp32ToFp16(kv));
          vv = Fp16ToFp32(Fp32ToFp16(vv));
          const uint16_t kh = Fp32ToFp16(kv), vh = Fp32ToFp16(vv);
          std::memcpy(&kbuf[(slot * slot_elems + i) * 2], &kh, 2);
          std::memcpy(&vbuf[(slot * slot_elems + i) * 2], &vh, 2);
        } else {
          std::memcpy(&kbuf[(slot * slot_elems + i) * 4], &kv, 4);
          std::memcpy(&vbuf[(slot * slot_elems + i) * 4], &vv, 4);
        }
        k[p][i] = kv;
        v[p][i] = vv;
      }
    }
    const KvPagesView view{kbuf.data(), vbuf.data(), dtype, slot_elems, table.data(),
                           block_size, 0, dtype};
    const std::vector<int32_t> positions = {0, 1, 63, 64, 65, 149};
    const int nq = (int)positions.size();
    std::vector<float> q(nq * n_head * head_dim);
    for (auto& e : q) e = nd(rng);
    const float scale = 1.0f / std::sqrt((float)head_dim);
    ThreadPool pool(2);
    for (int window : {0, 20}) {
      std::vector<float> out(q.size());
      Attention(q.data(), nq, positions.data(), n_head, n_head_kv, head_dim, scale, window,
                view, out.data(), &pool, nullptr);
      for (int i = 0; i < nq; ++i) {
        for (int h = 0; h < n_head; ++h) {
          std::vector<float> expect(head_dim);
          const int hi = positions[i];
          const int lo = window > 0 ? std::max(0, hi - window + 1) : 0;
          NaiveAttention(&q[(i * n_head + h) * head_dim], k, v, lo, hi,
                         (h / (n_head / n_head_kv)) * head_dim, head_dim, scale,
                         expect.data());
          for (int d = 0; d < head_dim; ++d) {
            ASSERT_NEAR(out[(i * n_head + h) * head_dim + d], expect[d], 1e-5)
                << "query " << i << " head " << h << " window " << window;
          }
        }
      }
    }
  }
}

// Paged K/V of ctx positions with random values (exact in F16), blocks in a
// scrambled order, plus the float copies for NaiveAttention. K of kdtype, V
// of vdtype (any KV dtype: the copies hold the decoded values; a rotated K,
// KvKeyRotated at head_dim, its stored rotated values as decoded).
struct PagedKv {
  std::vector<int32_t> table;
  std::vector<uint8_t> kbuf, vbuf;
  std::vector<std::vector<float>> k, v;
  KvPagesView view;
};

PagedKv MakePagedKv(DType kdtype, DType vdtype, int ctx, int slot_elems, int block_size,
                    uint32_t seed, int head_dim = 64) {
  PagedKv kv;
  const int num_blocks = (ctx + block_size - 1) / block_size;
  kv.table.resize(num_blocks);
  for (int i = 0; i < num_blocks; ++i) kv.table[i] = (i * 7 + 3) % num_blocks;
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int64_t kslot = RowBytes(kdtype, slot_elems), vslot = RowBytes(vdtype, slot_elems);
  kv.kbuf.resize((size_t)num_blocks * block_size * kslot);
  kv.vbuf.resize((size_t)num_blocks * block_size * vslot);
  kv.k.assign(ctx, std::vector<float>(slot_elems));
  kv.v.assign(ctx, std::vector<float>(slot_elems));
  std::vector<float> krow(slot_elems), vrow(slot_elems);
  for (int p = 0; p < ctx; ++p) {
    const int64_t slot = (int64_t)kv.table[p / block_size] * block_size + p % block_size;
    for (int i = 0; i < slot_elems; ++i) {
      krow[i] = Fp16ToFp32(Fp32ToFp16(nd(rng)));
      vrow[i] = Fp16ToFp32(Fp32ToFp16(nd(rng)));
    }
    StoreKvKeyRow(kdtype, krow.data(), slot_elems, head_dim, &kv.kbuf[slot * kslot]);
    StoreKvRow(vdtype, vrow.data(), slot_elems, &kv.vbuf[slot * vslot]);
    LoadKvElems(kdtype, &kv.kbuf[slot * kslot], 0, slot_elems, kv.k[p].data());
    LoadKvElems(vdtype, &kv.vbuf[slot * vslot], 0, slot_elems, kv.v[p].data());
  }
  kv.view = KvPagesView{kv.kbuf.data(), kv.vbuf.data(), kdtype, slot_elems, kv.table.data(),
                        block_size, 0, vdtype};
  return kv;
}

// The K/V dtype pairs the attention tests cover: the float formats, the
// block formats, and mixed K/V.
struct KvDtypes {
  DType k, v;
};
const KvDtypes kKvDtypes[] = {{DType::kF16, DType::kF16},   {DType::kF32, DType::kF32},
                              {DType::kQ8_0, DType::kQ8_0}, {DType::kQ4_0, DType::kQ4_0},
                              {DType::kBF16, DType::kBF16}, {DType::kQ8_0, DType::kQ4_0},
                              {DType::kF16, DType::kQ8_0}};

// Whether a slot of slot_elems fits the block formats among d.
bool FitsBlocks(const KvDtypes& d, int slot_elems) {
  return slot_elems % BlockSize(d.k) == 0 && slot_elems % BlockSize(d.v) == 0;
}

std::string KvName(const KvDtypes& d) {
  return std::string(DTypeName(d.k)) + "/" + DTypeName(d.v);
}

// Every table's attend_group (or the generic fallback where it declines)
// against the naive double-precision attention, over head sizes with and
// without a SIMD kernel, group sizes 1..16 and several chunks of context.
TEST(AttentionTest, EveryTableMatchesNaive) {
  WorkerScratch scratch;
  const std::vector<const KernelTable*> tables = AvailableTables();
  struct Shape { int head_dim, group, n_head_kv; };
  // Block formats: rows of 32-value blocks, heads starting inside a block
  // (head_dim 8, 40, 80) and a block spanning 4 heads (head_dim 8).
  const Shape shapes[] = {{8, 8, 1}, {64, 1, 3}, {64, 8, 2}, {128, 4, 2}, {16, 16, 1},
                          {12, 3, 2}, {24, 7, 1}, {32, 5, 2}, {80, 4, 2}, {8, 2, 4},
                          {40, 3, 4}};
  const int ctx = 200, block_size = 16;
  for (const KvDtypes& dt : kKvDtypes) {
    const std::string dtype = KvName(dt);
    for (const Shape& sh : shapes) {
      const int slot_elems = sh.n_head_kv * sh.head_dim;
      if (!FitsBlocks(dt, slot_elems)) continue;
      PagedKv kv =
          MakePagedKv(dt.k, dt.v, ctx, slot_elems, block_size, 11 + sh.head_dim, sh.head_dim);
      std::mt19937 rng(5);
      std::normal_distribution<float> nd(0.0f, 1.0f);
      const std::vector<int32_t> positions = {0, 7, 63, 64, 65, 130, 199, 71};
      const int nq = (int)positions.size();
      const int64_t row = (int64_t)sh.group * sh.head_dim;  // one query's heads
      std::vector<float> q(nq * row);
      for (auto& e : q) e = nd(rng) * 2.0f;  // peaky softmax too
      const float scale = 1.0f / std::sqrt((float)sh.head_dim);
      const int kv_head = sh.n_head_kv - 1;
      for (int window : {0, 10}) {
        std::vector<float> expect(nq * row);
        for (int i = 0; i < nq; ++i) {
          const int hi = positions[i], lo = window > 0 ? std::max(0, hi - window + 1) : 0;
          for (int g = 0; g < sh.group; ++g) {
            const ScoredQ qs = ScoredQuery(dt.k, kv_head * sh.head_dim, sh.head_dim,
                                           &q[i * row + g * sh.head_dim]);
            NaiveAttention(qs, kv.k, kv.v, lo, hi, kv_head * sh.head_dim, sh.head_dim,
                           scale, &expect[i * row + g * sh.head_dim]);
          }
        }
        for (const KernelTable* t : tables) {
          // Each query alone, then bundles of as many as fit kMaxAttnGroup rows.
          const int bundle = std::max(1, kMaxAttnGroup / sh.group);
          std::vector<float> alone(expect.size(), NAN), bundled(expect.size(), NAN);
          for (int pass = 0; pass < 2; ++pass) {
            const int step = pass == 0 ? 1 : bundle;
            std::vector<float>& out = pass == 0 ? alone : bundled;
            for (int i0 = 0; i0 < nq; i0 += step) {
              AttnGroupArgs args;
              args.q = q.data() + i0 * row;
              args.out = out.data() + i0 * row;
              args.group = sh.group;
              args.num_queries = std::min(step, nq - i0);
              args.row_stride = row;
              args.positions = positions.data() + i0;
              args.sliding_window = window;
              args.head_dim = sh.head_dim;
              args.kv_head = kv_head;
              args.scale = scale;
              args.kv = &kv.view;
              args.scratch = &scratch;  // one for every table and shape
              if (!t->attend_group(args)) AttendGroupGeneric(*t, args);
            }
          }
          for (size_t i = 0; i < expect.size(); ++i) {
            ASSERT_NEAR(alone[i], expect[i], 2e-5 * (1 + std::fabs(expect[i])))
                << t->isa << " " << dtype << " hd " << sh.head_dim << " group "
                << sh.group << " window " << window << " query " << i / row << " at " << i % row;
          }
          // A row does not depend on what it is bundled with.
          ASSERT_EQ(0, std::memcmp(alone.data(), bundled.data(), alone.size() * sizeof(float)))
              << t->isa << " " << dtype << " hd " << sh.head_dim << " group "
              << sh.group << " window " << window;
        }
      }
    }
  }
}

// Items of several consecutive KV heads (decode with few heads per KV head)
// give each head the same result as an item of that head alone, bitwise, and
// the naive attention's within rounding; the SIMD tables agree bitwise.
TEST(AttentionTest, KvHeadBundlesEqualSingleHeadsBitwise) {
  WorkerScratch scratch;
  const std::vector<const KernelTable*> tables = AvailableTables();
  struct Shape { int head_dim, group, n_head_kv; };
  const Shape shapes[] = {{64, 1, 6}, {32, 2, 4}, {16, 3, 5},
                          {8, 1, 16}, {64, 8, 2}, {48, 5, 3}, {80, 2, 4}, {8, 2, 4}};
  const int ctx = 150, block_size = 16;
  for (const KvDtypes& dt : kKvDtypes) {
    const std::string dtype = KvName(dt);
    for (const Shape& sh : shapes) {
      const int slot_elems = sh.n_head_kv * sh.head_dim;
      if (!FitsBlocks(dt, slot_elems)) continue;
      PagedKv kv =
          MakePagedKv(dt.k, dt.v, ctx, slot_elems, block_size, 31 + sh.head_dim, sh.head_dim);
      const int n_head = sh.group * sh.n_head_kv;
      const int64_t row = (int64_t)n_head * sh.head_dim;
      std::mt19937 rng(7);
      std::normal_distribution<float> nd(0.0f, 1.0f);
      std::vector<float> q(row);
      for (auto& e : q) e = nd(rng) * 2.0f;
      const float scale = 1.0f / std::sqrt((float)sh.head_dim);
      for (int32_t pos : {0, 63, 64, 100, 149}) {
        for (int window : {0, 10}) {
          const int lo = window > 0 ? std::max(0, pos - window + 1) : 0;
          std::vector<float> expect(row);
          for (int h = 0; h < n_head; ++h) {
            const int kv_off = (h / sh.group) * sh.head_dim;
            const ScoredQ qs = ScoredQuery(dt.k, kv_off, sh.head_dim, &q[h * sh.head_dim]);
            NaiveAttention(qs, kv.k, kv.v, lo, pos, kv_off, sh.head_dim, scale,
                           &expect[h * sh.head_dim]);
          }
          std::vector<std::vector<float>> per_table;
          for (const KernelTable* t : tables) {
            std::vector<float> single(row, NAN);
            for (int per_item : {1, 2, sh.n_head_kv}) {
              std::vector<float> out(row, NAN);
              for (int kvh = 0; kvh < sh.n_head_kv; kvh += per_item) {
                AttnGroupArgs args;
                args.q = q.data() + (int64_t)kvh * sh.group * sh.head_dim;
                args.out = out.data() + (int64_t)kvh * sh.group * sh.head_dim;
                args.group = sh.group;
                args.num_queries = 1;
                args.row_stride = row;
                args.positions = &pos;
                args.sliding_window = window;
                args.head_dim = sh.head_dim;
                args.kv_head = kvh;
                args.num_kv_heads = std::min(per_item, sh.n_head_kv - kvh);
                args.scale = scale;
                args.kv = &kv.view;
                args.scratch = &scratch;  // one for every table and shape
                if (!t->attend_group(args)) AttendGroupGeneric(*t, args);
              }
              if (per_item == 1) {
                single = out;
                for (int64_t i = 0; i < row; ++i) {
                  ASSERT_NEAR(out[i], expect[i], 2e-5 * (1 + std::fabs(expect[i])))
                      << t->isa << " " << dtype << " hd " << sh.head_dim << " at "
                      << i;
                }
              } else {
                ASSERT_EQ(0, std::memcmp(single.data(), out.data(), row * sizeof(float)))
                    << t->isa << " " << dtype << " hd " << sh.head_dim << " group "
                    << sh.group << " " << per_item << " KV heads per item, position " << pos;
              }
            }
            per_table.push_back(single);
          }
          // The AVX-512 table (16-lane P x V) equals the AVX2 table bitwise.
          const auto avx2 = std::find(tables.begin(), tables.end(), Avx2KernelTable());
          const auto vnni = std::find(tables.begin(), tables.end(), Avx512VnniKernelTable());
          if (avx2 != tables.end() && vnni != tables.end()) {
            ASSERT_EQ(0, std::memcmp(per_table[avx2 - tables.begin()].data(),
                                     per_table[vnni - tables.begin()].data(),
                                     row * sizeof(float)))
                << dtype << " hd " << sh.head_dim << " group " << sh.group;
          }
        }
      }
    }
  }
}

// One dispatch for many sequences gives each sequence's Attention result bitwise.
TEST(AttentionTest, BatchEqualsPerSequenceBitwise) {
  const int n_head = 8, n_head_kv = 2, head_dim = 64, block_size = 16, ctx = 150;
  const int slot_elems = n_head_kv * head_dim;
  for (const KvDtypes& dt : kKvDtypes) {
  SCOPED_TRACE(KvName(dt));
  PagedKv kv = MakePagedKv(dt.k, dt.v, ctx, slot_elems, block_size, 21);
  // Two sequences over the same pages with different block tables.
  std::vector<int32_t> table2(kv.table.rbegin(), kv.table.rend());
  const std::vector<int32_t> pos1 = {149}, pos2 = {10, 11, 12, 100};
  std::mt19937 rng(9);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int row = n_head * head_dim;
  std::vector<float> q1(pos1.size() * row), q2(pos2.size() * row);
  for (auto& e : q1) e = nd(rng);
  for (auto& e : q2) e = nd(rng);
  const float scale = 0.125f;
  ThreadPool pool(2);
  std::vector<float> a1(q1.size()), a2(q2.size()), b1(q1.size()), b2(q2.size());
  KvPagesView v1 = kv.view, v2 = kv.view;
  v2.block_table = table2.data();
  Attention(q1.data(), 1, pos1.data(), n_head, n_head_kv, head_dim, scale, 0, v1, a1.data(),
            nullptr, nullptr);
  Attention(q2.data(), 4, pos2.data(), n_head, n_head_kv, head_dim, scale, 0, v2, a2.data(),
            nullptr, nullptr);
  const AttentionSeq seqs[] = {{q1.data(), b1.data(), pos1.data(), 1, kv.table.data()},
                               {q2.data(), b2.data(), pos2.data(), 4, table2.data()}};
  AttentionBatch(seqs, n_head, n_head_kv, head_dim, scale, 0, kv.view, &pool, nullptr);
  EXPECT_EQ(0, std::memcmp(a1.data(), b1.data(), a1.size() * 4));
  EXPECT_EQ(0, std::memcmp(a2.data(), b2.data(), a2.size() * 4));
  }
}

// KV rows: a stored row reads back as the weight formats' dequantization of
// the same bytes, within the format's rounding of the input, and any
// element range reads as the same slice.
TEST(KvRowsTest, StoreLoadRoundTrip) {
  const int n = 96;
  std::mt19937 rng(4);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  std::vector<float> x(n);
  for (auto& e : x) e = nd(rng);
  x[40] = 0;  // a zero, and a block of zeros (scale 0)
  std::vector<float> zeros(32, 0.0f);
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0}) {
    SCOPED_TRACE(DTypeName(t));
    ASSERT_TRUE(IsKvDtype(t));
    std::vector<uint8_t> row(RowBytes(t, n));
    StoreKvRow(t, x.data(), n, row.data());
    std::vector<float> y(n), dq(n);
    LoadKvElems(t, row.data(), 0, n, y.data());
    for (int i = 0; i < n; ++i) {
      float expect = x[i];
      if (t == DType::kF16) expect = Fp16ToFp32(Fp32ToFp16(x[i]));
      if (t == DType::kBF16) expect = Bf16ToFp32(Fp32ToBf16(x[i]));
      if (t == DType::kF32 || t == DType::kF16 || t == DType::kBF16) {
        ASSERT_EQ(y[i], expect);
      }
    }
    if (t == DType::kQ8_0 || t == DType::kQ4_0) {
      if (t == DType::kQ8_0) {
        quant::DequantizeQ8_0((const quant::BlockQ8_0*)row.data(), dq.data(), n / 32);
      } else {
        quant::DequantizeQ4_0((const quant::BlockQ4_0*)row.data(), dq.data(), n / 32);
      }
      for (int b = 0; b < n / 32; ++b) {
        float amax = 0;
        for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
        // Q8_0: half a step of amax / 127; Q4_0: the clamped top of
        // amax / 8 (and the f16 scale's rounding).
        const float bound = t == DType::kQ8_0 ? amax / 254 * 1.01f : amax / 8 * 1.01f;
        for (int j = 0; j < 32; ++j) {
          const int i = b * 32 + j;
          ASSERT_EQ(y[i], dq[i]) << i;
          ASSERT_LE(std::fabs(y[i] - x[i]), bound) << i;
        }
      }
    }
    for (int e0 : {0, 8, 24, 40, 56}) {
      std::vector<float> part(16);
      LoadKvElems(t, row.data(), e0, 16, part.data());
      ASSERT_EQ(0, std::memcmp(part.data(), y.data() + e0, 16 * sizeof(float))) << e0;
    }
    if (BlockSize(t) == 32) {  // an all-zero block stores scale 0 and reads as zeros
      std::vector<uint8_t> zrow(RowBytes(t, 32));
      StoreKvRow(t, zeros.data(), 32, zrow.data());
      std::vector<float> z(32, 1.0f);
      LoadKvElems(t, zrow.data(), 0, 32, z.data());
      for (float e : z) ASSERT_EQ(e, 0.0f);
    }
  }
}

// The kernels read a quantized cache as the F32 cache of its decoded values:
// every table, bitwise (decoded values are exact; the same FMAs follow), at
// head sizes whose heads start inside a block and positions off the block
// grid. Except K where its scores are 8-bit (KScoresInt8: Q8_0 / Q4_0 K of
// whole blocks): the copy keeps those K bytes, and V alone is compared.
TEST(AttentionTest, QuantizedCacheEqualsF32CacheOfDecodedValuesBitwise) {
  WorkerScratch scratch;
  struct Shape { int head_dim, group, n_head_kv; };
  const Shape shapes[] = {{64, 8, 2}, {80, 4, 2}, {128, 1, 2}, {8, 2, 4}, {40, 1, 4}};
  const int ctx = 170, block_size = 16;
  for (const KvDtypes& dt : kKvDtypes) {
    for (const Shape& sh : shapes) {
      const int slot_elems = sh.n_head_kv * sh.head_dim;
      if (!FitsBlocks(dt, slot_elems)) continue;
      PagedKv kv =
          MakePagedKv(dt.k, dt.v, ctx, slot_elems, block_size, 41 + sh.head_dim, sh.head_dim);
      // The F32 copy: same block table, the decoded values (K's bytes kept
      // where its scores are 8-bit; every head alike, as head_dim decides).
      const bool k_int8 = KScoresInt8(dt.k, 0, sh.head_dim);
      PagedKv f32 = kv;
      f32.vbuf.assign((size_t)kv.table.size() * block_size * slot_elems * 4, 0);
      if (!k_int8) f32.kbuf.assign(f32.vbuf.size(), 0);
      for (int p = 0; p < ctx; ++p) {
        const int64_t slot = (int64_t)kv.table[p / block_size] * block_size + p % block_size;
        if (!k_int8) std::memcpy(&f32.kbuf[slot * slot_elems * 4], kv.k[p].data(), slot_elems * 4);
        std::memcpy(&f32.vbuf[slot * slot_elems * 4], kv.v[p].data(), slot_elems * 4);
      }
      f32.view = KvPagesView{f32.kbuf.data(), f32.vbuf.data(), k_int8 ? dt.k : DType::kF32,
                             slot_elems, f32.table.data(), block_size, 0, DType::kF32};
      const int n_head = sh.group * sh.n_head_kv;
      const int64_t row = (int64_t)n_head * sh.head_dim;
      const std::vector<int32_t> positions = {0, 33, 95, 101, 169};
      const int nq = (int)positions.size();
      std::mt19937 rng(8);
      std::normal_distribution<float> nd(0.0f, 1.0f);
      std::vector<float> q(nq * row);
      for (auto& e : q) e = nd(rng) * 2.0f;
      const float scale = 1.0f / std::sqrt((float)sh.head_dim);
      for (const KernelTable* t : AvailableTables()) {
        // Items of one KV head, and of two (as decode bundles them).
        for (int item = 0; item < 2 * sh.n_head_kv; ++item) {
          const int nkv = item < sh.n_head_kv ? 1 : 2;
          const int kv_head = item % sh.n_head_kv;
          if (kv_head + nkv > sh.n_head_kv || nkv * sh.group > kMaxAttnGroup) continue;
          std::vector<float> a(nq * row, NAN), b(nq * row, NAN);
          for (int pass = 0; pass < 2; ++pass) {
            AttnGroupArgs args;
            const int64_t head0 = (int64_t)kv_head * sh.group * sh.head_dim;
            args.q = q.data() + head0;
            args.out = (pass == 0 ? a : b).data() + head0;
            args.group = sh.group;
            args.num_kv_heads = nkv;
            args.num_queries = std::min(nq, kMaxAttnGroup / (sh.group * nkv));
            args.row_stride = row;
            args.positions = positions.data();
            args.head_dim = sh.head_dim;
            args.kv_head = kv_head;
            args.scale = scale;
            args.kv = pass == 0 ? &kv.view : &f32.view;
            args.scratch = &scratch;  // one for every table and shape
            if (!t->attend_group(args)) AttendGroupGeneric(*t, args);
          }
          ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)))
              << t->isa << " " << KvName(dt) << " hd " << sh.head_dim << " kv head "
              << kv_head << " of " << nkv;
        }
      }
    }
  }
}

// 8-bit K scores: the query's per-block quantization stays within half a
// step of each element, and a position's score is the exact dot of the
// quantized query's values with K's decoded values, up to float rounding.
TEST(AttentionTest, QueryQ8DotIsTheDotOfTheQuantizedValues) {
  const int n = 128;
  std::mt19937 rng(12);
  std::normal_distribution<float> nd(0.0f, 1.5f);
  std::vector<float> q(n), k(n);
  for (auto& e : q) e = nd(rng);
  for (auto& e : k) e = nd(rng);
  for (int j = 64; j < 96; ++j) q[j] = 0.0f;  // an all-zero block: d 0, quants 0
  std::vector<int8_t> qq(n);
  std::vector<float> d(n / 32);
  std::vector<int32_t> sum(n / 32);
  QuantizeQueryQ8(q.data(), n, qq.data(), d.data(), sum.data());
  for (int b = 0; b < n / 32; ++b) {
    int32_t s = 0;
    for (int j = 0; j < 32; ++j) {
      s += qq[b * 32 + j];
      ASSERT_LE(std::fabs((float)qq[b * 32 + j] * d[b] - q[b * 32 + j]), d[b] * 0.5f * 1.001f);
    }
    ASSERT_EQ(s, sum[b]);
  }
  EXPECT_EQ(d[2], 0.0f);
  for (DType t : {DType::kQ8_0, DType::kQ4_0}) {
    SCOPED_TRACE(DTypeName(t));
    std::vector<uint8_t> row(RowBytes(t, n));
    StoreKvRow(t, k.data(), n, row.data());
    std::vector<float> kd(n);
    LoadKvElems(t, row.data(), 0, n, kd.data());
    double exact = 0, mag = 0;
    for (int i = 0; i < n; ++i) {
      exact += (double)qq[i] * d[i / 32] * kd[i];
      mag += std::fabs((double)qq[i] * d[i / 32] * kd[i]);
    }
    EXPECT_NEAR(DotQueryQ8(t, qq.data(), d.data(), row.data(), n), exact, 1e-6 * mag);
  }
}

// A rotated K row (KvKeyRotated: q8_0 / q4_0 K, head_dim < 32):
// HadamardBlock32 is H with H H = 32 I; LoadKvKeyRow undoes StoreKvKeyRow's
// rotation; a block with one large channel among small ones rounds with
// less error rotated than plain (the point of the layout); any other K row
// is stored and read exactly as StoreKvRow / LoadKvElems.
TEST(KvRowsTest, RotatedKeyRowsRoundTripWithLessErrorThanPlain) {
  EXPECT_FALSE(KvKeyRotated(DType::kQ4_0, 32));
  EXPECT_FALSE(KvKeyRotated(DType::kF16, 8));
  EXPECT_TRUE(KvKeyRotated(DType::kQ8_0, 8));
  EXPECT_TRUE(KvKeyRotated(DType::kQ4_0, 16));
  std::mt19937 rng(4);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(64);
  for (auto& e : x) e = nd(rng);
  std::vector<float> y = x;
  HadamardBlock32(y.data(), 1.0f);
  HadamardBlock32(y.data(), 1.0f / 32);
  for (int i = 0; i < 32; ++i) ASSERT_NEAR(y[i], x[i], 1e-5f);
  // Stories260K-like rows: one channel pair of each head of 8 much larger.
  for (int i = 0; i < 64; ++i) x[i] = i % 8 >= 6 ? 18.0f * nd(rng) : 2.0f * nd(rng);
  for (DType t : {DType::kQ8_0, DType::kQ4_0}) {
    SCOPED_TRACE(DTypeName(t));
    std::vector<uint8_t> rot(RowBytes(t, 64)), plain(rot.size());
    std::vector<float> xr(64), xp(64);
    StoreKvKeyRow(t, x.data(), 64, 8, rot.data());
    LoadKvKeyRow(t, rot.data(), 64, 8, xr.data());
    StoreKvRow(t, x.data(), 64, plain.data());
    LoadKvElems(t, plain.data(), 0, 64, xp.data());
    double err_rot = 0, err_plain = 0;
    for (int i = 0; i < 64; ++i) {
      err_rot += (xr[i] - x[i]) * (xr[i] - x[i]);
      err_plain += (xp[i] - x[i]) * (xp[i] - x[i]);
    }
    EXPECT_LT(err_rot, err_plain);
    // head_dim 32: not rotated, the plain bytes.
    std::vector<uint8_t> b32(rot.size());
    std::vector<float> x32(64);
    StoreKvKeyRow(t, x.data(), 64, 32, b32.data());
    LoadKvKeyRow(t, b32.data(), 64, 32, x32.data());
    EXPECT_EQ(0, std::memcmp(b32.data(), plain.data(), b32.size()));
    EXPECT_EQ(0, std::memcmp(x32.data(), xp.data(), 64 * sizeof(float)));
  }
}

TEST(KernelsTest, F32ToF16IsRoundToNearestEvenEverywhere) {
  std::vector<float> x = {0.0f, -0.0f, 1.0f, 65504.0f, 65520.0f, 1e-8f, 5.96e-8f, 2.98e-8f,
                          3.0e-5f, -6.1e-5f, INFINITY, -INFINITY, 1.0009765625f, 1.00048828125f};
  std::mt19937 rng(3);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 20000; ++i) {
    const float f = Fp32FromBits(bits(rng));
    if (!std::isnan(f)) x.push_back(f);
  }
  const std::vector<const KernelTable*> tables = AvailableTables();
  for (const KernelTable* t : tables) {
    std::vector<uint16_t> out(x.size());
    t->f32_to_f16(x.data(), (int64_t)x.size(), out.data());
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_EQ(out[i], Fp32ToFp16(x[i])) << t->isa << " " << x[i];
    }
  }
}

TEST(KernelsTest, ActiveIsaIsRegistered) {
  const std::string isa = ActiveIsa();
  bool found = false;
  for (const KernelTableEntry& e : KernelTables()) found = found || isa == e.name;
  EXPECT_TRUE(found) << isa;
}

// Each registered table calls itself by its registered name, and a cap
// walks the registry from the named table down to the first one available.
TEST(KernelsTest, ChooseKernelTableWalksTheRegistryFromTheCap) {
  const std::span<const KernelTableEntry> entries = KernelTables();
  ASSERT_FALSE(entries.empty());
  EXPECT_STREQ(entries.back().name, "scalar");
  const KernelTable* best = nullptr;
  for (size_t i = 0; i < entries.size(); ++i) {
    const KernelTable* t = entries[i].get();
    if (t != nullptr) {
      EXPECT_STREQ(t->isa, entries[i].name);
      if (best == nullptr) best = t;
    }
    const KernelTable* expected = nullptr;
    for (size_t j = i; j < entries.size() && expected == nullptr; ++j) expected = entries[j].get();
    EXPECT_EQ(&ChooseKernelTable(entries[i].name), expected) << entries[i].name;
  }
  EXPECT_EQ(&ChooseKernelTable("scalar"), &RefKernelTable());
  EXPECT_EQ(&ChooseKernelTable(""), best);
  EXPECT_EQ(&ChooseKernelTable("no-such-isa"), best);
}

// Every kernel names an activation format with a row size for its columns.
TEST(KernelsTest, EveryMatMulKernelHasAnActivationFormat) {
  for (const KernelTable* t : AvailableTables()) {
    for (DType d : kFormats) {
      const MatMulKernel* k = t->FindMatMul(d);
      ASSERT_NE(k, nullptr) << t->isa << " " << DTypeName(d);
      ASSERT_NE(k->act, nullptr) << t->isa << " " << DTypeName(d);
      EXPECT_GT(k->act->row_bytes(4096), 0) << t->isa << " " << k->act->name;
      EXPECT_TRUE((k->act->quantize_row != nullptr) != (k->act->prepare != nullptr))
          << t->isa << " " << k->act->name << ": quantize_row or prepare, not both";
    }
  }
}

// SelectKernelTable makes its choice the table the kernels.h entry points
// use (tools/main.cc passes TERN_ISA; nothing in kernels/ reads it).
TEST(KernelsTest, SelectKernelTableSetsTheActiveTable) {
  const KernelTable& best = ChooseKernelTable("");
  EXPECT_EQ(&SelectKernelTable("scalar"), &RefKernelTable());
  EXPECT_STREQ(ActiveIsa(), "scalar");
  const int64_t rows = 33, cols = 256, tokens = 3;
  const auto w = RandomWeights(DType::kQ4_0, rows, cols, 3);
  const auto x = RandomActivations(tokens * cols, 4);
  const WeightView view{DType::kQ4_0, w.data(), rows, cols};
  std::vector<float> active(tokens * rows), ref(tokens * rows);
  MatMul(view, x.data(), tokens, active.data(), nullptr, nullptr);
  MatMulWith(RefKernelTable(), view, x.data(), tokens, ref.data(), nullptr, nullptr);
  EXPECT_EQ(0, std::memcmp(active.data(), ref.data(), ref.size() * sizeof(float)));
  // A name no table has is reported and ignored: the best table.
  EXPECT_EQ(&SelectKernelTable("no-such-isa"), &best);
  EXPECT_EQ(&ActiveKernelTable(), &best);
  SelectKernelTable("");  // the default again, for the tests that follow
  EXPECT_EQ(&ActiveKernelTable(), &best);
}

// The layout a model uses (UsePanel16): the table's tiles for every type
// it packs, except the types whose faster layout depends on the CPU (the
// AVX2 K-quants), which follow the choice (TERN_WEIGHT_LAYOUT) or, by
// default, a timing of both layouts.
TEST(WeightLayoutTest, TimedTypesFollowTheChoiceOthersKeepTheirTiles) {
  const KernelTable* avx2 = Avx2KernelTable();
  if (avx2 == nullptr) GTEST_SKIP() << "no AVX2 on this CPU";
  struct Restore {
    ~Restore() {
      SetWeightLayoutChoice(WeightLayoutChoice::kTimed);
      SelectKernelTable("");
    }
  } restore;
  SelectKernelTable("avx2");
  for (DType d : {DType::kQ4_0, DType::kQ8_0, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K}) {
    ASSERT_TRUE(avx2->matmul[(int)d].panel16_timed) << DTypeName(d);
    SetWeightLayoutChoice(WeightLayoutChoice::kTiles);
    EXPECT_TRUE(UsePanel16(d)) << DTypeName(d);
    SetWeightLayoutChoice(WeightLayoutChoice::kRows);
    EXPECT_FALSE(UsePanel16(d)) << DTypeName(d);
  }
  // The AVX-512 VNNI table times its Q4_K and Q5_K tiles (their decode
  // leans on a software prefetch measured on one CPU); its Q4_0 / Q8_0
  // tiles are kept.
  if (const KernelTable* avx512 = Avx512VnniKernelTable(); avx512 != nullptr) {
    SelectKernelTable("avx512vnni");
    for (DType d : {DType::kQ4_K, DType::kQ5_K}) {
      ASSERT_TRUE(avx512->matmul[(int)d].panel16_timed) << DTypeName(d);
      SetWeightLayoutChoice(WeightLayoutChoice::kRows);
      EXPECT_FALSE(UsePanel16(d)) << DTypeName(d);
    }
    for (DType d : {DType::kQ4_0, DType::kQ8_0}) {
      EXPECT_FALSE(avx512->matmul[(int)d].panel16_timed) << DTypeName(d);
      EXPECT_TRUE(UsePanel16(d)) << DTypeName(d);
    }
    SetWeightLayoutChoice(WeightLayoutChoice::kTimed);
    SelectKernelTable("avx2");
  }
  // Untimed: F16 keeps its tiles (its rows would change results).
  ASSERT_FALSE(avx2->matmul[(int)DType::kF16].panel16_timed);
  EXPECT_TRUE(UsePanel16(DType::kF16));
  // The timing measures both layouts.
  const Panel16Timing t = TimePanel16(*avx2, DType::kQ6_K, 8ll << 20);
  EXPECT_GT(t.rows_gbs, 0);
  EXPECT_GT(t.tiles_gbs, 0);
  EXPECT_GT(t.seconds, 0);
  SetWeightLayoutChoice(WeightLayoutChoice::kTimed);
  const bool timed = UsePanel16(DType::kQ6_K);
  EXPECT_EQ(UsePanel16(DType::kQ6_K), timed);  // timed once, then kept
}

// The kernels keep nothing between calls: one Workspace reused by the calls
// of every table, format, token count and thread count (buffers grown by
// big calls, then reused by small ones) gives what a fresh Workspace gives,
// bitwise.
TEST(WorkspaceTest, ReusedWorkspaceEqualsFreshBitwise) {
  ThreadPool pool(3);
  Workspace shared;
  for (const KernelTable* table : AvailableTables()) {
    SCOPED_TRACE(table->isa);
    for (DType t : kFormats) {
      const int64_t cols = IsKQuant(t) ? 512 : 480, rows = 67;
      const auto w = RandomWeights(t, rows, cols, 31);
      const WeightView view{t, w.data(), rows, cols};
      for (int64_t tokens : {40, 1, 17, 3}) {
        const auto x = RandomActivations(tokens * cols, 5 + (uint32_t)tokens);
        for (ThreadPool* p : {&pool, (ThreadPool*)nullptr}) {
          std::vector<float> fresh(tokens * rows), reused(tokens * rows, NAN);
          MatMulWith(*table, view, x.data(), tokens, fresh.data(), p, nullptr);
          MatMulWith(*table, view, x.data(), tokens, reused.data(), p, &shared);
          ASSERT_EQ(0, std::memcmp(fresh.data(), reused.data(), fresh.size() * sizeof(float)))
              << DTypeName(t) << " tokens=" << tokens << (p != nullptr ? " 3 threads" : "");
        }
      }
    }
  }
  EXPECT_EQ(shared.num_slots(), 3);  // one per slot of the largest pool
  EXPECT_GT(shared.BytesHeld(), 0);
}

// The same for attention (the active table's attend_group and the generic
// path that soft-capping takes), over KV dtypes, head shapes, prompt chunks
// and decode.
TEST(WorkspaceTest, AttentionWithReusedWorkspaceEqualsFreshBitwise) {
  ThreadPool pool(2);
  Workspace shared;
  struct Shape {
    int n_head, n_head_kv, head_dim;
  };
  const int ctx = 130, block_size = 16;
  for (const KvDtypes& dt : kKvDtypes) {
    SCOPED_TRACE(KvName(dt));
    for (const Shape& sh : {Shape{8, 2, 64}, Shape{4, 4, 128}, Shape{16, 1, 96}}) {
      const int slot_elems = sh.n_head_kv * sh.head_dim;
      if (!FitsBlocks(dt, slot_elems)) continue;
      const PagedKv kv = MakePagedKv(dt.k, dt.v, ctx, slot_elems, block_size, 17);
      for (int nq : {5, 1}) {
        std::vector<int32_t> positions(nq);
        for (int i = 0; i < nq; ++i) positions[i] = ctx - nq + i;
        const auto q = RandomActivations((int64_t)nq * sh.n_head * sh.head_dim, 8 + nq);
        const AttentionSeq seq{q.data(), nullptr, positions.data(), nq, kv.table.data()};
        for (float softcap : {0.0f, 30.0f}) {
          std::vector<float> fresh(q.size(), NAN), reused(q.size(), NAN);
          AttentionSeq a = seq, b = seq;
          a.out = fresh.data();
          b.out = reused.data();
          const float scale = 1.0f / std::sqrt((float)sh.head_dim);
          AttentionBatch(std::span<const AttentionSeq>(&a, 1), sh.n_head, sh.n_head_kv,
                         sh.head_dim, scale, 0, kv.view, &pool, nullptr, softcap);
          AttentionBatch(std::span<const AttentionSeq>(&b, 1), sh.n_head, sh.n_head_kv,
                         sh.head_dim, scale, 0, kv.view, &pool, &shared, softcap);
          ASSERT_EQ(0, std::memcmp(fresh.data(), reused.data(), fresh.size() * sizeof(float)))
              << "heads " << sh.n_head << "/" << sh.n_head_kv << " hd " << sh.head_dim
              << " queries " << nq << " softcap " << softcap;
        }
      }
    }
  }
  EXPECT_GT(shared.BytesHeld(), 0);
}

}  // namespace
}  // namespace tern::kernels
