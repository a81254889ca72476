#include "gguf/weight_summary.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <vector>

#include "gguf/gguf_test_bytes.h"
#include "gguf/gguf_writer.h"

namespace tern::gguf {
namespace {

TEST(WeightSummaryTest, MainTypeHoldsMostMatrixBytesAndParamsCountEveryTensor) {
  // tok F32 [8, 2] = 64 bytes, w Q8_0 [32, 4] = 136 bytes, norm F32 [32]
  // (1-D: counted in params and bytes, not for the main type).
  GgufWriter w;
  std::vector<uint8_t> tok(64, 0), q(136, 0), norm(128, 0);
  ASSERT_TRUE(w.AddTensor("tok", DType::kF32, {8, 2}, tok.data(), tok.size()).ok());
  ASSERT_TRUE(w.AddTensor("w", DType::kQ8_0, {32, 4}, q.data(), q.size()).ok());
  ASSERT_TRUE(w.AddTensor("norm", DType::kF32, {32}, norm.data(), norm.size()).ok());
  std::string path = (std::filesystem::temp_directory_path() /
                      ("tern_weight_summary_" + std::to_string(::getpid()) + ".gguf"))
                         .string();
  ASSERT_TRUE(w.WriteFile(path).ok());
  auto file = GgufFile::Open(path);
  std::filesystem::remove(path);
  ASSERT_TRUE(file.ok()) << file.status().message();
  const WeightSummary s = SummarizeWeights(**file);
  EXPECT_TRUE(s.has_matrices);
  EXPECT_EQ(s.main_dtype, DType::kQ8_0);
  EXPECT_EQ(s.MainTypeName(), DTypeName(DType::kQ8_0));
  EXPECT_EQ(s.num_params, 16 + 128 + 32);
  EXPECT_EQ(s.num_bytes, 64 + 136 + 128);
}

TEST(WeightSummaryTest, TinyFileAndCounts) {
  testing::TinyFile t;  // a: F32 [4, 2], b: Q8_0 [32] (1-D)
  auto file = GgufFile::FromBuffer(t.bytes());
  ASSERT_TRUE(file.ok()) << file.status().message();
  const WeightSummary s = SummarizeWeights(**file);
  EXPECT_EQ(s.main_dtype, DType::kF32);
  EXPECT_EQ(s.num_params, 8 + 32);
  EXPECT_EQ(HumanCount(999), "999");
  EXPECT_EQ(HumanCount(1234), "1.2K");
  EXPECT_EQ(HumanCount(292000000), "292.00M");
  EXPECT_EQ(HumanCount(6738415616), "6.74B");
}

}  // namespace
}  // namespace tern::gguf
