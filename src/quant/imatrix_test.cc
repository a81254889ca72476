// ImatrixAccumulator: exact per-column sums of squares and token counts from
// synthetic MatMul inputs, mismatched shapes rejected, and a save/load round
// trip through a GGUF file.
#include "quant/imatrix.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <unistd.h>
#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"

namespace tern::quant {
namespace {

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("tern_imatrix_test_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

TEST(ImatrixAccumulatorTest, SumsSquaresPerColumnAndCountsTokens) {
  ImatrixAccumulator acc;
  // 2 tokens x 3 columns, then 1 more token.
  const float a[] = {1, 2, 3,
                     -4, 0, 0.5f};
  const float b[] = {2, -2, 1};
  ASSERT_TRUE(acc.Add("blk.0.attn_q.weight", a, 2, 3).ok());
  ASSERT_TRUE(acc.Add("blk.0.attn_q.weight", b, 1, 3).ok());
  EXPECT_EQ(acc.NumTokens("blk.0.attn_q.weight"), 3);
  const std::vector<double> sums = acc.SumOfSquares("blk.0.attn_q.weight");
  ASSERT_EQ(sums.size(), 3u);
  EXPECT_EQ(sums[0], 1.0 + 16.0 + 4.0);
  EXPECT_EQ(sums[1], 4.0 + 0.0 + 4.0);
  EXPECT_EQ(sums[2], 9.0 + 0.25 + 1.0);
  const std::vector<float> mean = acc.MeanOfSquares("blk.0.attn_q.weight");
  EXPECT_FLOAT_EQ(mean[0], 7.0f);
  EXPECT_FLOAT_EQ(mean[1], 8.0f / 3.0f);
  EXPECT_FLOAT_EQ(mean[2], 10.25f / 3.0f);
}

TEST(ImatrixAccumulatorTest, ManyTokensSumExactlyAcrossFlushes) {
  ImatrixAccumulator acc;
  const int64_t tokens = 1000, cols = 5;
  std::vector<float> x(tokens * cols);
  double want[5] = {};
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t c = 0; c < cols; ++c) {
      const float v = (float)((t * 7 + c * 3) % 11) - 5.0f;  // small integers: exact sums
      x[t * cols + c] = v;
      want[c] += (double)v * v;
    }
  }
  ASSERT_TRUE(acc.Add("w", x.data(), 300, cols).ok());
  ASSERT_TRUE(acc.Add("w", x.data() + 300 * cols, tokens - 300, cols).ok());
  const std::vector<double> sums = acc.SumOfSquares("w");
  for (int64_t c = 0; c < cols; ++c) EXPECT_EQ(sums[c], want[c]) << "column " << c;
  EXPECT_EQ(acc.NumTokens("w"), tokens);
}

TEST(ImatrixAccumulatorTest, KeepsWeightsApartInFirstSeenOrder) {
  ImatrixAccumulator acc;
  const float x[] = {1, 1, 1, 1};
  ASSERT_TRUE(acc.Add("blk.0.ffn_up.weight", x, 1, 4).ok());
  ASSERT_TRUE(acc.Add("blk.0.attn_k.weight", x, 2, 2).ok());
  ASSERT_TRUE(acc.Add("blk.0.ffn_up.weight", x, 1, 4).ok());
  EXPECT_EQ(acc.num_weights(), 2);
  EXPECT_EQ(acc.Names(), (std::vector<std::string>{"blk.0.ffn_up.weight", "blk.0.attn_k.weight"}));
  EXPECT_EQ(acc.NumTokens("blk.0.ffn_up.weight"), 2);
  EXPECT_EQ(acc.NumTokens("blk.0.attn_k.weight"), 2);
  EXPECT_EQ(acc.NumTokens("unseen"), 0);
  EXPECT_TRUE(acc.SumOfSquares("unseen").empty());
}

TEST(ImatrixAccumulatorTest, RejectsChangedColumnCountAndBadShapes) {
  ImatrixAccumulator acc;
  const float x[] = {1, 2, 3, 4};
  ASSERT_TRUE(acc.Add("w", x, 1, 4).ok());
  const Status st = acc.Add("w", x, 2, 2);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("'w'"), std::string::npos) << st.message();
  EXPECT_EQ(acc.NumTokens("w"), 1);  // nothing added by the failed call
  EXPECT_FALSE(acc.Add("v", x, -1, 4).ok());
  EXPECT_FALSE(acc.Add("v", x, 1, 0).ok());
  EXPECT_FALSE(acc.Add("v", nullptr, 1, 4).ok());
  EXPECT_EQ(acc.num_weights(), 1);
}

TEST(ImatrixAccumulatorTest, ZeroTokensGiveZeroMeans) {
  ImatrixAccumulator acc;
  ASSERT_TRUE(acc.Add("w", nullptr, 0, 3).ok());
  EXPECT_EQ(acc.MeanOfSquares("w"), (std::vector<float>{0, 0, 0}));
}

TEST(ImatrixAccumulatorTest, SaveLoadRoundTripKeepsMeansAndMetadata) {
  ImatrixAccumulator acc;
  const float q[] = {1, -2, 3, 0.5f, 4, -1};  // 3 tokens x 2 columns
  const float down[] = {0.25f, 1, 2, -3, 5};  // 1 token x 5 columns
  ASSERT_TRUE(acc.Add("blk.0.attn_q.weight", q, 3, 2).ok());
  ASSERT_TRUE(acc.Add("blk.0.ffn_down.weight", down, 1, 5).ok());
  const std::string path = TempPath("roundtrip.gguf");
  ASSERT_TRUE(acc.Save(path, "calib.txt", 7).ok());

  StatusOr<Imatrix> loaded = LoadImatrix(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  EXPECT_EQ(loaded->dataset, "calib.txt");
  EXPECT_EQ(loaded->num_chunks, 7);
  ASSERT_EQ(loaded->importance.size(), 2u);
  const std::vector<float>* iq = loaded->Find("blk.0.attn_q.weight");
  ASSERT_NE(iq, nullptr);
  EXPECT_EQ(*iq, acc.MeanOfSquares("blk.0.attn_q.weight"));
  EXPECT_FLOAT_EQ((*iq)[0], (1 + 9 + 16) / 3.0f);
  const std::vector<float>* id = loaded->Find("blk.0.ffn_down.weight");
  ASSERT_NE(id, nullptr);
  EXPECT_EQ(*id, (std::vector<float>{0.0625f, 1, 4, 9, 25}));
  EXPECT_EQ(loaded->Find("blk.1.attn_q.weight"), nullptr);

  // The raw file is what `tern quantize --imatrix` reads.
  auto file = gguf::GgufFile::Open(path);
  ASSERT_TRUE(file.ok());
  const gguf::TensorInfo* t = (*file)->FindTensor("blk.0.ffn_down.weight.imatrix");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->dtype, DType::kF32);
  EXPECT_EQ(t->shape, (std::vector<int64_t>{5}));
  EXPECT_EQ((*file)->GetString("general.type").value_or(""), "imatrix");
  std::remove(path.c_str());
}

TEST(ImatrixAccumulatorTest, SaveWithoutObservationsFails) {
  ImatrixAccumulator acc;
  const Status st = acc.Save(TempPath("empty.gguf"), "x", 0);
  EXPECT_FALSE(st.ok());
}

TEST(LoadImatrixTest, RejectsWrongTypeNegativeValuesAndMissingTensors) {
  const std::string path = TempPath("bad.gguf");
  {
    gguf::GgufWriter w;
    const uint16_t half[2] = {0x3C00, 0x3C00};
    ASSERT_TRUE(w.AddTensor("w.imatrix", DType::kF16, {2}, half, sizeof(half)).ok());
    ASSERT_TRUE(w.WriteFile(path).ok());
    const StatusOr<Imatrix> im = LoadImatrix(path);
    ASSERT_FALSE(im.ok());
    EXPECT_NE(im.status().message().find("w.imatrix"), std::string::npos);
  }
  {
    gguf::GgufWriter w;
    const float v[2] = {1.0f, -1.0f};
    ASSERT_TRUE(w.AddTensor("w.imatrix", DType::kF32, {2}, v, sizeof(v)).ok());
    ASSERT_TRUE(w.WriteFile(path).ok());
    const StatusOr<Imatrix> im = LoadImatrix(path);
    ASSERT_FALSE(im.ok());
    EXPECT_NE(im.status().message().find("column 1"), std::string::npos) << im.status().message();
  }
  {
    gguf::GgufWriter w;
    const float v[2] = {1.0f, 2.0f};
    ASSERT_TRUE(w.AddTensor("w.weight", DType::kF32, {2}, v, sizeof(v)).ok());
    ASSERT_TRUE(w.WriteFile(path).ok());
    EXPECT_FALSE(LoadImatrix(path).ok());
  }
  EXPECT_FALSE(LoadImatrix(TempPath("does_not_exist.gguf")).ok());
  std::remove(path.c_str());
}

// What LoadImatrix says about a file written with writer.
std::string LoadError(const gguf::GgufWriter& w, const std::string& name) {
  const std::string path = TempPath(name);
  EXPECT_TRUE(w.WriteFile(path).ok());
  const StatusOr<Imatrix> im = LoadImatrix(path);
  std::remove(path.c_str());
  return im.ok() ? std::string("(loaded)") : im.status().message();
}

TEST(LoadImatrixTest, SaysWhatAFileIsWhenItIsNotAnImatrix) {
  const float v[4] = {1, 2, 3, 4};
  {
    gguf::GgufWriter model;
    model.SetValue("general.architecture", gguf::Value::String("llama"));
    model.SetValue("general.type", gguf::Value::String("model"));
    ASSERT_TRUE(model.AddTensor("blk.0.attn_q.weight", DType::kF32, {2, 2}, v, sizeof(v)).ok());
    const std::string err = LoadError(model, "model.gguf");
    EXPECT_NE(err.find("tern_imatrix_test_"), std::string::npos) << err;  // names the file
    EXPECT_NE(err.find("a model GGUF (architecture llama) with 1 tensors, not an importance matrix"),
              std::string::npos) << err;
    EXPECT_NE(err.find("tern imatrix"), std::string::npos) << err;
  }
  {
    gguf::GgufWriter other;
    other.SetValue("general.type", gguf::Value::String("adapter"));
    ASSERT_TRUE(other.AddTensor("w.imatrix", DType::kF32, {4}, v, sizeof(v)).ok());
    EXPECT_NE(LoadError(other, "adapter.gguf").find("general.type 'adapter'"), std::string::npos);
  }
  {
    gguf::GgufWriter llama_cpp;
    llama_cpp.SetValue("general.type", gguf::Value::String("imatrix"));
    ASSERT_TRUE(llama_cpp.AddTensor("w.in_sum2", DType::kF32, {4}, v, sizeof(v)).ok());
    EXPECT_NE(LoadError(llama_cpp, "in_sum2.gguf").find("llama.cpp's GGUF imatrix format"),
              std::string::npos);
  }
  const std::string dat = TempPath("old.dat");
  {
    FILE* f = std::fopen(dat.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    const int32_t n = 1;
    std::fwrite(&n, 4, 1, f);
    std::fwrite(v, 4, 4, f);
    std::fclose(f);
  }
  const StatusOr<Imatrix> im = LoadImatrix(dat);
  std::remove(dat.c_str());
  ASSERT_FALSE(im.ok());
  EXPECT_NE(im.status().message().find("not a GGUF file"), std::string::npos) << im.status().message();
}

TEST(CheckImatrixFitsModelTest, NamesTheTensorAndBothSizes) {
  const std::string model_path = TempPath("fit_model.gguf");
  const float w[6] = {1, 2, 3, 4, 5, 6};
  gguf::GgufWriter mw;
  mw.SetValue("general.architecture", gguf::Value::String("llama"));
  ASSERT_TRUE(mw.AddTensor("blk.0.attn_q.weight", DType::kF32, {3, 2}, w, sizeof(w)).ok());
  ASSERT_TRUE(mw.AddTensor("blk.0.attn_norm.weight", DType::kF32, {3}, w, 12).ok());
  ASSERT_TRUE(mw.WriteFile(model_path).ok());
  auto model = gguf::GgufFile::Open(model_path);
  ASSERT_TRUE(model.ok());

  Imatrix im;
  im.path = "im.gguf";
  im.importance["blk.0.attn_q.weight"] = {1, 1, 1};  // rows of 3: fits
  EXPECT_TRUE(CheckImatrixFitsModel(im, **model, "m.gguf").ok());

  im.importance["blk.0.attn_q.weight"] = {1, 1};
  Status st = CheckImatrixFitsModel(im, **model, "m.gguf");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("imatrix im.gguf: entry 'blk.0.attn_q.weight.imatrix' has 2 columns, "
                              "but tensor 'blk.0.attn_q.weight' of m.gguf has rows of 3"),
            std::string::npos) << st.message();

  im.importance = {{"blk.7.ffn_up.weight", {1, 1, 1}}};
  st = CheckImatrixFitsModel(im, **model, "m.gguf");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("'blk.7.ffn_up.weight.imatrix' names no tensor of m.gguf"),
            std::string::npos) << st.message();

  im.importance = {{"blk.0.attn_norm.weight", {1, 1, 1}}};
  st = CheckImatrixFitsModel(im, **model, "m.gguf");
  EXPECT_NE(st.message().find("names a 1-D tensor"), std::string::npos) << st.message();
  std::remove(model_path.c_str());
}

}  // namespace
}  // namespace tern::quant
