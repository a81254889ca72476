#include "gguf/gguf_file.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include "base/paths.h"
#include "gguf/gguf_test_bytes.h"

namespace tern::gguf {
namespace {

namespace fs = std::filesystem;

std::string ModelPath(const std::string& rel) { return ModelsDir() + "/" + rel; }

#define SKIP_IF_MISSING(path) \
  if (!FileExists(path)) GTEST_SKIP() << "test model missing: " << (path)

// Every .gguf file of the models folder's `subdir`, opened, by name (a file
// that does not open is a test failure and left out).
std::vector<std::unique_ptr<GgufFile>> OpenEveryGgufIn(const std::string& subdir) {
  std::vector<std::string> paths;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(ModelPath(subdir), ec)) {
    if (e.path().extension() == ".gguf") paths.push_back(e.path().string());
  }
  std::sort(paths.begin(), paths.end());
  std::vector<std::unique_ptr<GgufFile>> files;
  for (const std::string& path : paths) {
    auto f = GgufFile::Open(path);
    EXPECT_TRUE(f.ok()) << f.status().message();
    if (f.ok()) files.push_back(std::move(*f));
  }
  return files;
}

void ExpectTensorsInsideFile(const GgufFile& f) {
  const std::span<const uint8_t> bytes = f.bytes();
  for (const TensorInfo& t : f.tensors()) {
    EXPECT_GE(t.data, bytes.data()) << t.name;
    EXPECT_LE(t.data + t.num_bytes, bytes.data() + bytes.size()) << t.name;
    EXPECT_EQ(t.offset % f.alignment(), 0u) << t.name;
    EXPECT_EQ(static_cast<int64_t>(t.num_bytes), t.NumRows() * RowBytes(t.dtype, t.shape[0])) << t.name;
  }
}

// Each integer key holds its value.
void ExpectInts(const GgufFile& f,
                std::initializer_list<std::pair<const char*, int64_t>> key_values) {
  for (const auto& [key, value] : key_values) EXPECT_EQ(f.GetInt(key), value) << key;
}

TEST(GgufFileTest, OpensStories260KWithKnownMetadata) {
  const std::string path = DefaultModelPath();
  SKIP_IF_MISSING(path);
  auto f = GgufFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ((*f)->version(), 3u);
  EXPECT_EQ((*f)->file_size(), 1185376u);
  EXPECT_EQ((*f)->alignment(), 32u);
  EXPECT_EQ((*f)->tensors().size(), 48u);
  EXPECT_EQ((*f)->metadata().size(), 19u);
  EXPECT_EQ((*f)->GetString("general.architecture"), "llama");
  ExpectInts(**f, {{"llama.block_count", 5},
                   {"llama.embedding_length", 64},
                   {"llama.attention.head_count", 8},
                   {"llama.attention.head_count_kv", 4},
                   {"llama.feed_forward_length", 172},
                   {"llama.context_length", 2048},
                   {"tokenizer.ggml.bos_token_id", 1},
                   {"tokenizer.ggml.eos_token_id", 2},
                   {"tokenizer.ggml.seperator_token_id", 0xFFFFFFFFll}});
  EXPECT_NEAR((*f)->GetFloat("llama.attention.layer_norm_rms_epsilon").value_or(0), 1e-5, 1e-9);
  EXPECT_EQ((*f)->GetString("tokenizer.ggml.model"), "llama");
  EXPECT_FALSE((*f)->Find("tokenizer.ggml.pre"));

  auto tokens = (*f)->GetStringArray("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens);
  ASSERT_EQ(tokens->size(), 512u);
  EXPECT_EQ((*tokens)[3], "<0x00>");
  EXPECT_EQ((*tokens)[258], "<0xFF>");
  EXPECT_EQ((*f)->GetFloatArray("tokenizer.ggml.scores")->size(), 512u);
  EXPECT_EQ((*f)->GetIntArray("tokenizer.ggml.token_type")->size(), 512u);
}

TEST(GgufFileTest, Stories260KTensorsHaveShapesBytesAndData) {
  const std::string path = DefaultModelPath();
  SKIP_IF_MISSING(path);
  auto f = GgufFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().message();
  int64_t params = 0;
  for (const TensorInfo& t : (*f)->tensors()) {
    EXPECT_EQ(t.dtype, DType::kF32) << t.name;
    params += t.NumElements();
  }
  EXPECT_EQ(params, 292800);
  ExpectTensorsInsideFile(**f);

  const TensorInfo* emb = (*f)->FindTensor("token_embd.weight");
  const TensorInfo* out = (*f)->FindTensor("output.weight");
  ASSERT_TRUE(emb && out);
  EXPECT_EQ(emb->shape, (std::vector<int64_t>{64, 512}));
  EXPECT_EQ(emb->num_bytes, 64u * 512 * 4);
  EXPECT_EQ(emb->RowLength(), 64);
  EXPECT_EQ(emb->NumRows(), 512);
  // The README says output.weight is stored byte-identical to token_embd.
  ASSERT_EQ(emb->num_bytes, out->num_bytes);
  EXPECT_EQ(std::memcmp(emb->data, out->data, emb->num_bytes), 0);
  EXPECT_NE(emb->data, out->data);
  const TensorInfo* ffn_down = (*f)->FindTensor("blk.0.ffn_down.weight");
  ASSERT_TRUE(ffn_down);
  EXPECT_EQ(ffn_down->shape, (std::vector<int64_t>{172, 64}));
  EXPECT_EQ((*f)->FindTensor("no.such.tensor"), nullptr);
}

TEST(GgufFileTest, FromBufferMatchesOpen) {
  const std::string path = DefaultModelPath();
  SKIP_IF_MISSING(path);
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto a = GgufFile::Open(path);
  auto b = GgufFile::FromBuffer(bytes, "copy");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ((*b)->path(), "copy");
  EXPECT_EQ((*a)->metadata(), (*b)->metadata());
  ASSERT_EQ((*a)->tensors().size(), (*b)->tensors().size());
  EXPECT_EQ(reinterpret_cast<uintptr_t>((*b)->bytes().data()) % 64, 0u);
  for (size_t i = 0; i < (*a)->tensors().size(); ++i) {
    const TensorInfo& ta = (*a)->tensors()[i];
    const TensorInfo& tb = (*b)->tensors()[i];
    EXPECT_EQ(ta.name, tb.name);
    EXPECT_EQ(ta.shape, tb.shape);
    EXPECT_EQ(std::memcmp(ta.data, tb.data, ta.num_bytes), 0);
  }
}

TEST(GgufFileTest, OpensLlama2TinyRandomWithF16Tensors) {
  const std::string path = ModelPath("llama-2-tiny-random.gguf");
  SKIP_IF_MISSING(path);
  auto f = GgufFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ((*f)->version(), 3u);
  EXPECT_EQ((*f)->tensors().size(), 12u);
  EXPECT_EQ((*f)->metadata().size(), 18u);
  EXPECT_EQ((*f)->GetString("general.name"), "LLaMA v2");
  ExpectInts(**f, {{"general.file_type", 1}, {"llama.embedding_length", 8}});
  EXPECT_EQ((*f)->GetStringArray("tokenizer.ggml.tokens")->size(), 32000u);
  bool has_f16 = false;
  for (const TensorInfo& t : (*f)->tensors()) has_f16 |= t.dtype == DType::kF16;
  EXPECT_TRUE(has_f16);
  ExpectTensorsInsideFile(**f);
}

TEST(GgufFileTest, OpensEveryVocabFileWithNoTensors) {
  const auto files = OpenEveryGgufIn("vocab");
  if (files.empty()) GTEST_SKIP() << "no vocab/*.gguf under " << ModelsDir();
  for (const auto& f : files) {
    const std::string& path = f->path();
    EXPECT_EQ(f->version(), 3u) << path;
    EXPECT_TRUE(f->tensors().empty()) << path;
    auto tokens = f->GetStringArray("tokenizer.ggml.tokens");
    ASSERT_TRUE(tokens) << path;
    EXPECT_GT(tokens->size(), 30000u) << path;
    EXPECT_TRUE(f->GetString("general.architecture")) << path;
  }
}

TEST(GgufFileTest, OpensEveryQuantizedFile) {
  const auto files = OpenEveryGgufIn("quantized");
  if (files.empty()) GTEST_SKIP() << "no quantized/*.gguf under " << ModelsDir();
  for (const auto& f : files) {
    const std::string& path = f->path();
    EXPECT_FALSE(f->tensors().empty()) << path;
    ExpectTensorsInsideFile(*f);
    const bool is_stories = path.find("stories260K-") != std::string::npos;
    if (is_stories) {
      EXPECT_EQ(f->tensors().size(), 48u) << path;
      int64_t params = 0;
      for (const TensorInfo& t : f->tensors()) params += t.NumElements();
      EXPECT_EQ(params, 292800) << path;
    }
  }
}

TEST(GgufFileTest, QuantizedFilesHoldTheirFormats) {
  const std::string q4k = ModelPath("quantized/tiny-k-Q4_K_M.gguf");
  const std::string q80 = ModelPath("quantized/stories260K-Q8_0.gguf");
  SKIP_IF_MISSING(q4k);
  SKIP_IF_MISSING(q80);
  auto count = [](const GgufFile& f, DType d) {
    return std::count_if(f.tensors().begin(), f.tensors().end(),
                         [d](const TensorInfo& t) { return t.dtype == d; });
  };
  auto a = GgufFile::Open(q4k);
  auto b = GgufFile::Open(q80);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_GT(count(**a, DType::kQ4_K), 0);
  EXPECT_GT(count(**a, DType::kQ6_K), 0);
  EXPECT_GT(count(**b, DType::kQ8_0), 0);
  // ffn_down rows of 172 do not fit blocks of 32: kept at F16.
  EXPECT_EQ((*b)->FindTensor("blk.0.ffn_down.weight")->dtype, DType::kF16);
}

TEST(GgufFileTest, GettersConvertNumericTypes) {
  testing::TinyFile tiny;
  auto f = GgufFile::FromBuffer(tiny.bytes(), "tiny");
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ((*f)->GetInt("general.alignment"), 32);      // uint32 -> int
  EXPECT_EQ((*f)->GetFloat("general.alignment"), 32.0);  // uint32 -> double
  EXPECT_EQ((*f)->GetBool("general.alignment"), true);
  EXPECT_EQ((*f)->GetString("general.name"), "tiny");
  EXPECT_FALSE((*f)->GetInt("general.name"));        // string is not a number
  EXPECT_FALSE((*f)->GetString("general.alignment"));
  EXPECT_FALSE((*f)->GetInt("missing.key"));
  EXPECT_EQ((*f)->GetFloatArray("tokenizer.ggml.scores"), (std::vector<float>{0.5f, -1.0f, 2.0f}));
  EXPECT_FALSE((*f)->GetStringArray("tokenizer.ggml.scores"));
  EXPECT_FALSE((*f)->GetIntArray("tokenizer.ggml.scores"));  // floats are not ints
  EXPECT_EQ((*f)->metadata()[0].first, "general.alignment");
  EXPECT_EQ((*f)->metadata()[2].first, "tokenizer.ggml.scores");
}

TEST(GgufValueTest, ConvertsWhereLossless) {
  EXPECT_EQ(Value::Uint32(7).AsInt(), 7);
  EXPECT_EQ(Value::Int32(-7).AsInt(), -7);
  EXPECT_EQ(Value::Uint64(~0ull).AsInt(), std::nullopt);  // does not fit int64
  EXPECT_EQ(Value::Uint64(~0ull).AsFloat(), 18446744073709551615.0);
  EXPECT_EQ(Value::Float32(1.5f).AsFloat(), 1.5);
  EXPECT_EQ(Value::Float32(1.5f).AsInt(), std::nullopt);
  EXPECT_EQ(Value::Bool(true).AsInt(), 1);
  EXPECT_EQ(Value::Bool(true).AsFloat(), std::nullopt);
  EXPECT_EQ(Value::Int8(-1).AsBool(), true);
  EXPECT_EQ(Value::String("x").AsBool(), std::nullopt);
  EXPECT_EQ(*Value::String("x").AsString(), "x");
  EXPECT_EQ(Value::Int64(3).AsString(), nullptr);
  EXPECT_STREQ(ValueTypeName(ValueType::kFloat64), "float64");
}

TEST(GgufFileTest, OpenReportsMissingFileAsNotFound) {
  auto f = GgufFile::Open("/nonexistent/dir/model.gguf");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kNotFound);
  EXPECT_NE(f.status().message().find("/nonexistent/dir/model.gguf"), std::string::npos);
}

TEST(GgufFileTest, OpenRejectsDirectoryAndEmptyFile) {
  EXPECT_FALSE(GgufFile::Open("/tmp").ok());
  const std::string empty = (fs::temp_directory_path() / "tern_gguf_empty_test.gguf").string();
  { std::ofstream(empty, std::ios::binary); }
  auto f = GgufFile::Open(empty);
  fs::remove(empty);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(f.status().message().find("not a GGUF file"), std::string::npos);
}

}  // namespace
}  // namespace tern::gguf
