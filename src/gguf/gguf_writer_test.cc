#include "gguf/gguf_writer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <random>

#include "base/paths.h"

namespace tern::gguf {
namespace {

namespace fs = std::filesystem;

// A fresh directory under the system temp dir, removed at the end of a test.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "tern_gguf_writer_XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data()) ? tmpl : "";
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  std::string File(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::vector<uint8_t> RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> out(n);
  for (uint8_t& b : out) b = static_cast<uint8_t>(rng());
  return out;
}

std::vector<std::pair<std::string, Value>> EveryValueType() {
  using VT = ValueType;
  return {
      {"t.uint8", Value::Uint8(200)},
      {"t.int8", Value::Int8(-100)},
      {"t.uint16", Value::Uint16(60000)},
      {"t.int16", Value::Int16(-30000)},
      {"t.uint32", Value::Uint32(4000000000u)},
      {"t.int32", Value::Int32(-2000000000)},
      {"t.float32", Value::Float32(3.25f)},
      {"t.bool", Value::Bool(true)},
      {"t.string", Value::String("héllo\nworld")},
      {"t.empty_string", Value::String("")},
      {"t.uint64", Value::Uint64(~0ull)},
      {"t.int64", Value::Int64(-(1ll << 62))},
      {"t.float64", Value::Float64(-1e300)},
      {"t.array_u8", Value::Array(VT::kUint8, {Value::Uint8(1), Value::Uint8(2)})},
      {"t.array_f32", Value::Array(VT::kFloat32, {Value::Float32(0.5f), Value::Float32(-2)})},
      {"t.array_str", Value::Array(VT::kString, {Value::String("a"), Value::String("")})},
      {"t.array_bool", Value::Array(VT::kBool, {Value::Bool(false), Value::Bool(true)})},
      {"t.array_empty", Value::Array(VT::kInt64, {})},
      {"t.nested",
       Value::Array(VT::kArray,
                    {Value::Array(VT::kString, {Value::String("x"), Value::String("yz")}),
                     Value::Array(VT::kInt32, {Value::Int32(-5)}),
                     Value::Array(VT::kArray, {Value::Array(VT::kFloat64, {Value::Float64(2.5)})})})},
  };
}

TEST(GgufWriterTest, RoundTripsEveryValueTypeAndTensorsOfSeveralDtypes) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  GgufWriter w;
  const auto kv = EveryValueType();
  for (const auto& [k, v] : kv) w.SetValue(k, v);

  struct Spec {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
  };
  const std::vector<Spec> specs = {
      {"f32", DType::kF32, {3, 5}},        {"f16", DType::kF16, {7}},
      {"q8_0", DType::kQ8_0, {64, 3}},     {"q4_k", DType::kQ4_K, {256, 2, 2}},
      {"i32", DType::kI32, {1, 1, 1, 5}},  {"bf16", DType::kBF16, {33, 1}},
  };
  std::vector<std::vector<uint8_t>> datas;
  for (size_t i = 0; i < specs.size(); ++i) {
    const Spec& s = specs[i];
    int64_t rows = 1;
    for (size_t d = 1; d < s.shape.size(); ++d) rows *= s.shape[d];
    datas.push_back(RandomBytes(rows * RowBytes(s.dtype, s.shape[0]), i + 1));
    ASSERT_TRUE(w.AddTensor(s.name, s.dtype, s.shape, datas.back().data(), datas.back().size()).ok());
  }
  const std::string path = dir.File("all.gguf");
  const Status st = w.WriteFile(path);
  ASSERT_TRUE(st.ok()) << st.message();

  auto f = GgufFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ((*f)->version(), 3u);
  EXPECT_EQ((*f)->metadata(), kv);  // same values, same order
  ASSERT_EQ((*f)->tensors().size(), specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    const TensorInfo& t = (*f)->tensors()[i];
    EXPECT_EQ(t.name, specs[i].name);
    EXPECT_EQ(t.dtype, specs[i].dtype);
    EXPECT_EQ(t.shape, specs[i].shape);
    EXPECT_EQ(t.offset % 32, 0u);
    ASSERT_EQ(t.num_bytes, datas[i].size());
    EXPECT_EQ(std::memcmp(t.data, datas[i].data(), t.num_bytes), 0) << t.name;
  }
  EXPECT_EQ((*f)->file_size() % 32, 0u);  // data padded
  EXPECT_EQ((*f)->GetInt("t.uint32"), 4000000000ll);
  EXPECT_EQ((*f)->Find("t.nested")->array[2].array[0].array[0].f, 2.5);
}

TEST(GgufWriterTest, UsesGeneralAlignment) {
  TempDir dir;
  GgufWriter w;
  w.SetValue("general.alignment", Value::Uint32(256));
  const std::vector<uint8_t> a(4 * 3, 1), b(2 * 5, 2);
  ASSERT_TRUE(w.AddTensor("a", DType::kF32, {3}, a.data(), a.size()).ok());
  ASSERT_TRUE(w.AddTensor("b", DType::kF16, {5}, b.data(), b.size()).ok());
  ASSERT_TRUE(w.WriteFile(dir.File("x.gguf")).ok());
  auto f = GgufFile::Open(dir.File("x.gguf"));
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ((*f)->alignment(), 256u);
  EXPECT_EQ((*f)->data_offset() % 256, 0u);
  EXPECT_EQ((*f)->FindTensor("b")->offset, 256u);
  EXPECT_EQ((*f)->FindTensor("b")->data[9], 2);

  GgufWriter bad;
  bad.SetValue("general.alignment", Value::Uint32(24));
  EXPECT_FALSE(bad.WriteFile(dir.File("bad.gguf")).ok());
  EXPECT_FALSE(FileExists(dir.File("bad.gguf")));
}

TEST(GgufWriterTest, SetValueReplacesKeepingPosition) {
  TempDir dir;
  GgufWriter w;
  w.SetValue("a", Value::Uint32(1));
  w.SetValue("b", Value::Uint32(2));
  w.SetValue("a", Value::String("one"));
  ASSERT_TRUE(w.WriteFile(dir.File("kv.gguf")).ok());
  auto f = GgufFile::Open(dir.File("kv.gguf"));
  ASSERT_TRUE(f.ok()) << f.status().message();
  ASSERT_EQ((*f)->metadata().size(), 2u);
  EXPECT_EQ((*f)->metadata()[0].first, "a");
  EXPECT_EQ((*f)->GetString("a"), "one");
  EXPECT_TRUE((*f)->tensors().empty());
}

TEST(GgufWriterTest, RewritesStories260KToSameMetadataAndTensors) {
  const std::string src = DefaultModelPath();
  if (!FileExists(src)) GTEST_SKIP() << "test model missing: " << src;
  auto in = GgufFile::Open(src);
  ASSERT_TRUE(in.ok()) << in.status().message();
  GgufWriter w;
  w.CopyMetadataFrom(**in);
  for (const TensorInfo& t : (*in)->tensors()) {
    ASSERT_TRUE(w.AddTensor(t.name, t.dtype, t.shape, t.data, t.num_bytes).ok());
  }
  TempDir dir;
  ASSERT_TRUE(w.WriteFile(dir.File("copy.gguf")).ok());
  auto out = GgufFile::Open(dir.File("copy.gguf"));
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ((*out)->metadata(), (*in)->metadata());
  ASSERT_EQ((*out)->tensors().size(), (*in)->tensors().size());
  for (size_t i = 0; i < (*in)->tensors().size(); ++i) {
    const TensorInfo& a = (*in)->tensors()[i];
    const TensorInfo& b = (*out)->tensors()[i];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.shape, b.shape);
    ASSERT_EQ(a.num_bytes, b.num_bytes);
    EXPECT_EQ(std::memcmp(a.data, b.data, a.num_bytes), 0) << a.name;
  }
  // The source is packed the same way (tensors in order, 32-byte aligned),
  // so the rewrite is byte-identical.
  const std::span<const uint8_t> a = (*in)->bytes(), b = (*out)->bytes();
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size()), 0);
}

TEST(GgufWriterTest, AddTensorRejectsInconsistentInput) {
  GgufWriter w;
  const std::vector<uint8_t> data(1024, 0);
  EXPECT_FALSE(w.AddTensor("x", DType::kF32, {4}, data.data(), 15).ok());      // wrong bytes
  EXPECT_FALSE(w.AddTensor("x", DType::kQ4_0, {31}, data.data(), 18).ok());    // partial block
  EXPECT_FALSE(w.AddTensor("x", DType::kF32, {}, data.data(), 4).ok());        // no dims
  EXPECT_FALSE(w.AddTensor("x", DType::kF32, {1, 1, 1, 1, 1}, data.data(), 4).ok());
  EXPECT_FALSE(w.AddTensor("x", DType::kF32, {0}, data.data(), 0).ok());
  EXPECT_FALSE(w.AddTensor("x", static_cast<DType>(99), {4}, data.data(), 16).ok());
  EXPECT_FALSE(w.AddTensor("x", DType::kF32, {4}, nullptr, 16).ok());
  const Status ok = w.AddTensor("x", DType::kQ4_0, {64}, data.data(), 36);
  EXPECT_TRUE(ok.ok()) << ok.message();
  const Status dup = w.AddTensor("x", DType::kF32, {4}, data.data(), 16);
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.message().find("'x'"), std::string::npos) << dup.message();
}

TEST(GgufWriterTest, RejectsMixedArraysAndUnwritablePaths) {
  TempDir dir;
  GgufWriter mixed;
  mixed.SetValue("k", Value::Array(ValueType::kUint32, {Value::Uint32(1), Value::String("x")}));
  const Status st = mixed.WriteFile(dir.File("m.gguf"));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("key 'k'"), std::string::npos) << st.message();
  EXPECT_TRUE(fs::is_empty(dir.path()));  // no temp file left behind

  GgufWriter w;
  const Status bad = w.WriteFile(dir.File("no/such/dir/x.gguf"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("no/such/dir/x.gguf"), std::string::npos) << bad.message();
}

}  // namespace
}  // namespace tern::gguf
