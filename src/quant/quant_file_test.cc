// Files quantized by another GGUF tool (../shared/models/quantized): every
// tensor dequantizes, stays close to the F32 original it was made from, and
// requantizing the legacy formats reproduces the stored bytes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "base/paths.h"
#include "gguf/gguf_file.h"
#include "quant/quant.h"

namespace tern::quant {
namespace {

using gguf::GgufFile;
using gguf::TensorInfo;

std::string QuantizedDir() { return ModelsDir() + "/quantized"; }

std::vector<float> DequantizeTensor(const TensorInfo& t) {
  const int64_t row = t.RowLength(), rows = t.NumRows();
  std::vector<float> out(row * rows);
  const int64_t row_bytes = RowBytes(t.dtype, row);
  for (int64_t r = 0; r < rows; ++r) {
    DequantizeRow(t.dtype, t.data + r * row_bytes, out.data() + r * row, row);
  }
  return out;
}

std::unique_ptr<GgufFile> OpenOrNull(const std::string& path) {
  auto file = GgufFile::Open(path);
  return file.ok() ? std::move(file).value() : nullptr;
}

// Relative RMSE of a quantized file's tensors against the original, by the
// worst tensor of each dtype.
std::map<DType, double> WorstRelativeRmse(const GgufFile& quantized, const GgufFile& original) {
  std::map<DType, double> worst;
  for (const TensorInfo& t : quantized.tensors()) {
    const TensorInfo* ref = original.FindTensor(t.name);
    if (!ref || ref->dtype != DType::kF32) continue;
    const std::vector<float> got = DequantizeTensor(t);
    const std::vector<float> want = DequantizeTensor(*ref);
    if (got.size() != want.size()) continue;
    double err = 0, energy = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      err += (double)(got[i] - want[i]) * (got[i] - want[i]);
      energy += (double)want[i] * want[i];
    }
    const double rel = energy > 0 ? std::sqrt(err / energy) : std::sqrt(err);
    worst[t.dtype] = std::max(worst[t.dtype], rel);
  }
  return worst;
}

// Generous per-format bounds of RMSE / RMS for random-like weights; a wrong
// bit layout gives errors of order 1.
double RelativeBound(DType t) {
  switch (t) {
    case DType::kF32: return 0;
    case DType::kF16: return 1e-3;
    case DType::kQ8_0: return 0.01;
    case DType::kQ6_K: return 0.03;
    case DType::kQ5_0: case DType::kQ5_1: case DType::kQ5_K: return 0.06;
    case DType::kQ4_0: case DType::kQ4_1: case DType::kQ4_K: return 0.12;
    case DType::kQ3_K: return 0.25;
    case DType::kQ2_K: return 0.45;
    default: return 1.0;
  }
}

TEST(QuantFileTest, EveryQuantizedFileDequantizesCloseToItsOriginal) {
  const std::string dir = QuantizedDir();
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << "test models not found in " << dir;
  auto tiny_k = OpenOrNull(dir + "/tiny-k-F32.gguf");
  auto stories = OpenOrNull(DefaultModelPath());
  int num_files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (entry.path().extension() != ".gguf") continue;
    auto file = GgufFile::Open(entry.path().string());
    ASSERT_TRUE(file.ok()) << name << ": " << file.status().ToString();
    for (const TensorInfo& t : (*file)->tensors()) {
      ASSERT_TRUE(CanDequantize(t.dtype)) << name << " " << t.name << " " << DTypeName(t.dtype);
      const std::vector<float> values = DequantizeTensor(t);
      for (float v : values) ASSERT_TRUE(std::isfinite(v)) << name << " " << t.name;
    }
    const GgufFile* original = name.rfind("tiny-k", 0) == 0 ? tiny_k.get() : stories.get();
    if (!original) continue;
    for (const auto& [dtype, rel] : WorstRelativeRmse(**file, *original)) {
      EXPECT_LE(rel, RelativeBound(dtype)) << name << " " << DTypeName(dtype);
    }
    ++num_files;
  }
  EXPECT_GE(num_files, 1);
}

// Requantizes every tensor of dtype t in the file from its dequantized
// values; returns the number of tensors checked (all must match exactly).
int ExpectRequantizeReproducesBytes(const GgufFile& file, DType t) {
  int checked = 0;
  for (const TensorInfo& info : file.tensors()) {
    if (info.dtype != t) continue;
    const std::vector<float> values = DequantizeTensor(info);
    std::vector<uint8_t> bytes(info.num_bytes);
    const int64_t row = info.RowLength();
    const int64_t row_bytes = RowBytes(t, row);
    for (int64_t r = 0; r < info.NumRows(); ++r) {
      QuantizeRow(t, values.data() + r * row, bytes.data() + r * row_bytes, row);
    }
    EXPECT_EQ(0, std::memcmp(bytes.data(), info.data, info.num_bytes))
        << file.path() << " " << info.name;
    ++checked;
  }
  return checked;
}

TEST(QuantFileTest, RequantizingLegacyFormatsReproducesTheirBytes) {
  const std::string dir = QuantizedDir();
  const std::pair<const char*, DType> cases[] = {
      {"stories260K-Q8_0.gguf", DType::kQ8_0}, {"stories260K-Q4_0.gguf", DType::kQ4_0},
      {"stories260K-Q4_1.gguf", DType::kQ4_1}, {"stories260K-Q5_0.gguf", DType::kQ5_0},
      {"stories260K-Q5_1.gguf", DType::kQ5_1}, {"tiny-k-Q8_0.gguf", DType::kQ8_0},
      {"tiny-k-Q4_0.gguf", DType::kQ4_0},
  };
  int num_checked = 0;
  for (const auto& [name, dtype] : cases) {
    auto file = OpenOrNull(dir + "/" + name);
    if (!file) continue;
    const int n = ExpectRequantizeReproducesBytes(*file, dtype);
    EXPECT_GT(n, 0) << name;
    num_checked += n;
  }
  if (num_checked == 0) GTEST_SKIP() << "quantized test models not found in " << dir;
}

// Relative RMSE against the F32 original of the values approx(t, x) gives
// for each quantized tensor t of the reference file (x: the original's
// values), by dtype.
template <class Approx>
std::map<DType, double> RelativeRmse(const GgufFile& reference, const GgufFile& original,
                                     Approx approx) {
  std::map<DType, double> err, energy;
  for (const TensorInfo& t : reference.tensors()) {
    const TensorInfo* src = original.FindTensor(t.name);
    if (!src || t.dtype == DType::kF32 || t.dtype == DType::kF16) continue;
    const std::vector<float> x = DequantizeTensor(*src);
    const std::vector<float> y = approx(t, x);
    for (size_t i = 0; i < x.size(); ++i) {
      const double v = x[i];
      err[t.dtype] += (y[i] - v) * (y[i] - v);
      energy[t.dtype] += v * v;
    }
  }
  std::map<DType, double> rel;
  for (const auto& [dtype, e] : err) rel[dtype] = std::sqrt(e / energy[dtype]);
  return rel;
}

// x quantized to t's dtype by this module and back.
std::vector<float> OwnRoundTrip(const TensorInfo& t, const std::vector<float>& x) {
  const int64_t row = t.RowLength();
  std::vector<uint8_t> bytes(RowBytes(t.dtype, row));
  std::vector<float> y(x.size());
  for (int64_t r = 0; r < t.NumRows(); ++r) {
    QuantizeRow(t.dtype, x.data() + r * row, bytes.data(), row);
    DequantizeRow(t.dtype, bytes.data(), y.data() + r * row, row);
  }
  return y;
}

// The reference tool's values: the tensor as stored.
std::vector<float> ReferenceValues(const TensorInfo& t, const std::vector<float>&) {
  return DequantizeTensor(t);
}

TEST(QuantFileTest, OwnKQuantErrorIsCloseToTheReferenceTool) {
  const std::string dir = QuantizedDir();
  auto original = OpenOrNull(dir + "/tiny-k-F32.gguf");
  auto reference = OpenOrNull(dir + "/tiny-k-Q2_K.gguf");  // Q2_K, Q3_K, Q4_K, Q6_K
  auto reference5 = OpenOrNull(dir + "/tiny-k-Q5_K_M.gguf");  // Q5_K, Q6_K
  if (!original || !reference || !reference5) GTEST_SKIP() << "tiny-k files not found in " << dir;
  for (const GgufFile* file : {reference.get(), reference5.get()}) {
    const auto ours = RelativeRmse(*file, *original, OwnRoundTrip);
    const auto theirs = RelativeRmse(*file, *original, ReferenceValues);
    for (const auto& [dtype, rel] : ours) {
      std::printf("%s %s: ours %.5f, reference tool %.5f\n", file->path().c_str(),
                  DTypeName(dtype), rel, theirs.at(dtype));
      EXPECT_LE(rel, theirs.at(dtype)) << DTypeName(dtype);
    }
  }
}

}  // namespace
}  // namespace tern::quant
