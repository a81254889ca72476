// End-to-end tests of `tern quantize`: presets and fallbacks on the real test
// models, an exact F32 round trip, overrides, an importance file, and errors;
// the checks that run before any tensor is converted (imatrix, requantize, in
// place, output folder) show it by printing no "[i/N]" tensor line.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "base/paths.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "quant/quant.h"

namespace tern {
namespace {

namespace fs = std::filesystem;
using gguf::GgufFile;
using gguf::TensorInfo;

struct QuantizeRun {
  int exit_code = -1;
  std::string out, err;
};

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string TernBinary() {
  const char* env = std::getenv("TERN_BINARY");
  return env ? env : "";
}

class QuantizeCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (TernBinary().empty() || !FileExists(TernBinary())) {
      GTEST_SKIP() << "TERN_BINARY not set (run through ctest)";
    }
    if (!FileExists(DefaultModelPath())) GTEST_SKIP() << "test models not found in " << ModelsDir();
    dir_ = fs::temp_directory_path() /
           ("tern_quantize_test_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  // Runs `tern quantize ARGS`, capturing stdout and stderr.
  QuantizeRun Quantize(const std::string& args) const {
    const std::string out = Path("stdout.txt"), err = Path("stderr.txt");
    const std::string cmd = "'" + TernBinary() + "' quantize " + args + " >'" + out + "' 2>'" + err + "'";
    const int status = std::system(cmd.c_str());
    QuantizeRun run;
    run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    run.out = ReadAll(out);
    run.err = ReadAll(err);
    return run;
  }

  static std::unique_ptr<GgufFile> Open(const std::string& path) {
    auto file = GgufFile::Open(path);
    EXPECT_TRUE(file.ok()) << file.status().ToString();
    return file.ok() ? std::move(file).value() : nullptr;
  }

  static DType TypeOf(const GgufFile& file, const std::string& tensor) {
    const TensorInfo* t = file.FindTensor(tensor);
    EXPECT_NE(t, nullptr) << tensor;
    return t ? t->dtype : DType::kI8;
  }

  fs::path dir_;
};

std::string Quoted(const std::string& s) { return "'" + s + "'"; }
std::string Model(const std::string& name) { return Quoted(ModelsDir() + "/" + name); }

// True when stderr shows a tensor was worked on ("[1/48] ...").
bool ConvertedAnyTensor(const QuantizeRun& run) { return run.err.find("[1/") != std::string::npos; }

// Number of files in dir.
size_t NumFiles(const fs::path& dir) {
  return (size_t)std::distance(fs::directory_iterator(dir), fs::directory_iterator());
}

TEST_F(QuantizeCliTest, StoriesToQ8_0KeepsMetadataAndFallsBackFfnDownToF16) {
  const QuantizeRun run = Quantize(Model("stories260K.gguf") + " " + Quoted(Path("q8.gguf")) + " Q8_0");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto in = Open(DefaultModelPath());
  auto out = Open(Path("q8.gguf"));
  ASSERT_TRUE(in && out);
  EXPECT_EQ(out->GetInt("general.file_type"), 7);
  for (const auto& [key, value] : in->metadata()) {
    EXPECT_NE(out->Find(key), nullptr) << key;
  }
  EXPECT_EQ(out->GetStringArray("tokenizer.ggml.tokens"), in->GetStringArray("tokenizer.ggml.tokens"));
  ASSERT_EQ(out->tensors().size(), in->tensors().size());
  EXPECT_EQ(TypeOf(*out, "blk.0.attn_q.weight"), DType::kQ8_0);
  EXPECT_EQ(TypeOf(*out, "output.weight"), DType::kQ8_0);
  EXPECT_EQ(TypeOf(*out, "blk.0.attn_norm.weight"), DType::kF32);
  for (int layer = 0; layer < 5; ++layer) {
    EXPECT_EQ(TypeOf(*out, "blk." + std::to_string(layer) + ".ffn_down.weight"), DType::kF16);
  }
  EXPECT_NE(run.out.find("fallback (Q8_0 -> F16, rows of 172"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("blk.4.ffn_down.weight"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("bits per weight"), std::string::npos) << run.out;
  EXPECT_NE(run.err.find("[48/48]"), std::string::npos) << run.err;
}

TEST_F(QuantizeCliTest, StoriesToQ4_K_MFallsBackToBlocksThatFit) {
  const QuantizeRun run = Quantize(Model("stories260K.gguf") + " " + Quoted(Path("q4km.gguf")) + " q4_k_m");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto out = Open(Path("q4km.gguf"));
  ASSERT_TRUE(out);
  EXPECT_EQ(out->GetInt("general.file_type"), 15);
  // Rows of 64 fit no K-quant: Q4_K -> Q5_0, Q6_K -> Q8_0; rows of 172 -> F16.
  EXPECT_EQ(TypeOf(*out, "blk.1.attn_q.weight"), DType::kQ5_0);
  EXPECT_EQ(TypeOf(*out, "blk.4.attn_v.weight"), DType::kQ8_0);   // _M: last eighth
  EXPECT_EQ(TypeOf(*out, "blk.2.attn_v.weight"), DType::kQ8_0);   // _M: every third
  EXPECT_EQ(TypeOf(*out, "blk.1.attn_v.weight"), DType::kQ5_0);
  EXPECT_EQ(TypeOf(*out, "token_embd.weight"), DType::kQ5_0);
  EXPECT_EQ(TypeOf(*out, "output.weight"), DType::kQ8_0);
  EXPECT_EQ(TypeOf(*out, "blk.1.ffn_down.weight"), DType::kF16);
  EXPECT_EQ(TypeOf(*out, "output_norm.weight"), DType::kF32);
  EXPECT_NE(run.out.find("Q4_K -> F16, rows of 172 do not fit blocks of 256 or 32"), std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("blk.1.ffn_down.weight"), std::string::npos);
}

// Each preset's tensor-type mix equals that of the file of the same name in
// ../shared/models/quantized, made from the same model by another GGUF
// quantizer: the K-quant recipes on tiny-k (rows of 256; 4 layers, GQA 4)
// and the 32-block presets with their fallbacks on stories260K (rows of 64
// and 172).
TEST_F(QuantizeCliTest, PresetsGiveTheTensorTypeMixOfFilesOfTheSameName) {
  struct Case {
    const char* source;
    const char* preset;
  };
  const Case cases[] = {
      {"quantized/tiny-k-F32.gguf", "Q2_K"},   {"quantized/tiny-k-F32.gguf", "Q3_K_M"},
      {"quantized/tiny-k-F32.gguf", "Q4_K_S"}, {"quantized/tiny-k-F32.gguf", "Q4_K_M"},
      {"quantized/tiny-k-F32.gguf", "Q5_K_M"}, {"quantized/tiny-k-F32.gguf", "Q6_K"},
      {"quantized/tiny-k-F32.gguf", "Q8_0"},   {"quantized/tiny-k-F32.gguf", "Q4_0"},
      {"stories260K.gguf", "Q4_0"},            {"stories260K.gguf", "Q4_1"},
      {"stories260K.gguf", "Q5_0"},            {"stories260K.gguf", "Q5_1"},
      {"stories260K.gguf", "Q8_0"},            {"stories260K.gguf", "F16"},
  };
  int compared = 0;
  for (const Case& c : cases) {
    const std::string source = ModelsDir() + "/" + c.source;
    std::string stem = c.source;
    stem = stem.substr(stem.rfind('/') + 1);
    stem = stem.substr(0, stem.find(stem.find("tiny-k") == 0 ? "-F32" : ".gguf"));
    const std::string reference = ModelsDir() + "/quantized/" + stem + "-" + c.preset + ".gguf";
    if (!FileExists(source) || !FileExists(reference)) {
      ADD_FAILURE() << "test data missing: " << source << " or " << reference;
      continue;
    }
    const std::string out = Path(std::string(c.preset) + ".gguf");
    const QuantizeRun run = Quantize(Quoted(source) + " " + Quoted(out) + " " + c.preset);
    ASSERT_EQ(run.exit_code, 0) << c.preset << ": " << run.err;
    auto mine = Open(out);
    auto theirs = Open(reference);
    ASSERT_TRUE(mine && theirs);
    ASSERT_EQ(mine->tensors().size(), theirs->tensors().size()) << reference;
    for (const TensorInfo& t : theirs->tensors()) {
      EXPECT_EQ(DTypeName(TypeOf(*mine, t.name)), DTypeName(t.dtype))
          << c.preset << " from " << c.source << ": " << t.name;
    }
    ++compared;
    fs::remove(out);
  }
  EXPECT_EQ(compared, (int)(sizeof(cases) / sizeof(cases[0])));
}

TEST_F(QuantizeCliTest, PureAndTensorTypeOverrides) {
  const std::string in = Model("quantized/tiny-k-F32.gguf");
  if (!FileExists(ModelsDir() + "/quantized/tiny-k-F32.gguf")) GTEST_SKIP();
  QuantizeRun run = Quantize(in + " " + Quoted(Path("pure.gguf")) + " Q4_K_M --pure");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto pure = Open(Path("pure.gguf"));
  ASSERT_TRUE(pure);
  for (const TensorInfo& t : pure->tensors()) {
    EXPECT_EQ(t.dtype, t.shape.size() == 2 ? DType::kQ4_K : DType::kF32) << t.name;
  }
  run = Quantize(in + " " + Quoted(Path("over.gguf")) +
                 " Q4_0 --tensor-type attn_v=q8_0 --tensor-type 'blk.0.*=f16'");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto over = Open(Path("over.gguf"));
  ASSERT_TRUE(over);
  EXPECT_EQ(TypeOf(*over, "blk.2.attn_v.weight"), DType::kQ8_0);
  EXPECT_EQ(TypeOf(*over, "blk.0.attn_v.weight"), DType::kQ8_0);  // first match wins
  EXPECT_EQ(TypeOf(*over, "blk.0.attn_q.weight"), DType::kF16);
  EXPECT_EQ(TypeOf(*over, "blk.1.attn_q.weight"), DType::kQ4_0);
  EXPECT_EQ(TypeOf(*over, "output.weight"), DType::kQ6_K);
  EXPECT_EQ(TypeOf(*over, "blk.0.attn_norm.weight"), DType::kF32);
}

TEST_F(QuantizeCliTest, F32OfAQ4_K_MFileEqualsDequantizeRowBitForBit) {
  const std::string src = ModelsDir() + "/quantized/tiny-k-Q4_K_M.gguf";
  if (!FileExists(src)) GTEST_SKIP() << src << " not found";
  const QuantizeRun run = Quantize(Quoted(src) + " " + Quoted(Path("f32.gguf")) + " F32");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto in = Open(src);
  auto out = Open(Path("f32.gguf"));
  ASSERT_TRUE(in && out);
  EXPECT_EQ(out->GetInt("general.file_type"), 0);
  int num_quantized = 0;
  for (const TensorInfo& t : in->tensors()) {
    const TensorInfo* o = out->FindTensor(t.name);
    ASSERT_NE(o, nullptr) << t.name;
    ASSERT_EQ(o->dtype, DType::kF32) << t.name;
    std::vector<float> want(t.NumElements());
    const int64_t row = t.RowLength();
    for (int64_t r = 0; r < t.NumRows(); ++r) {
      quant::DequantizeRow(t.dtype, t.data + r * RowBytes(t.dtype, row), want.data() + r * row, row);
    }
    ASSERT_EQ(o->num_bytes, want.size() * sizeof(float)) << t.name;
    EXPECT_EQ(0, std::memcmp(o->data, want.data(), o->num_bytes)) << t.name;
    if (t.dtype != DType::kF32) ++num_quantized;
  }
  EXPECT_GT(num_quantized, 0);
}

TEST_F(QuantizeCliTest, ImatrixImportanceChangesOnlyItsTensor) {
  const std::string src = ModelsDir() + "/quantized/tiny-k-F32.gguf";
  if (!FileExists(src)) GTEST_SKIP() << src << " not found";
  auto in = Open(src);
  ASSERT_TRUE(in);
  const std::string name = "blk.1.attn_q.weight";
  const TensorInfo* t = in->FindTensor(name);
  ASSERT_NE(t, nullptr);
  std::vector<float> importance(t->RowLength(), 1.0f);
  for (size_t i = 0; i < importance.size(); i += 4) importance[i] = 50.0f;
  gguf::GgufWriter writer;
  ASSERT_TRUE(writer.AddTensor(name + ".imatrix", DType::kF32, {(int64_t)importance.size()},
                               importance.data(), importance.size() * sizeof(float)).ok());
  ASSERT_TRUE(writer.WriteFile(Path("imatrix.gguf")).ok());

  ASSERT_EQ(Quantize(Quoted(src) + " " + Quoted(Path("plain.gguf")) + " Q4_K_S").exit_code, 0);
  const QuantizeRun run = Quantize(Quoted(src) + " " + Quoted(Path("weighted.gguf")) +
                                   " Q4_K_S --imatrix " + Quoted(Path("imatrix.gguf")));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto plain = Open(Path("plain.gguf"));
  auto weighted = Open(Path("weighted.gguf"));
  ASSERT_TRUE(plain && weighted);
  for (const TensorInfo& p : plain->tensors()) {
    const TensorInfo* w = weighted->FindTensor(p.name);
    ASSERT_NE(w, nullptr);
    const bool same = p.num_bytes == w->num_bytes && std::memcmp(p.data, w->data, p.num_bytes) == 0;
    EXPECT_EQ(same, p.name != name) << p.name;
  }
  // The important columns lose less.
  auto column_error = [&](const TensorInfo& q) {
    const int64_t row = q.RowLength();
    std::vector<float> x(row), y(row);
    double err = 0;
    for (int64_t r = 0; r < q.NumRows(); ++r) {
      quant::DequantizeRow(DType::kF32, t->data + r * row * 4, x.data(), row);
      quant::DequantizeRow(q.dtype, q.data + r * RowBytes(q.dtype, row), y.data(), row);
      for (int64_t i = 0; i < row; i += 4) err += (x[i] - y[i]) * (x[i] - y[i]);
    }
    return err;
  };
  EXPECT_LT(column_error(*weighted->FindTensor(name)), column_error(*plain->FindTensor(name)));

  // A vector of the wrong length is an error naming the tensor.
  gguf::GgufWriter bad;
  ASSERT_TRUE(bad.AddTensor(name + ".imatrix", DType::kF32, {3}, importance.data(), 12).ok());
  ASSERT_TRUE(bad.WriteFile(Path("bad.gguf")).ok());
  const QuantizeRun fail = Quantize(Quoted(src) + " " + Quoted(Path("x.gguf")) + " Q4_K_S --imatrix " +
                                    Quoted(Path("bad.gguf")));
  EXPECT_EQ(fail.exit_code, 1);
  EXPECT_NE(fail.err.find(name + ".imatrix"), std::string::npos) << fail.err;
}

TEST_F(QuantizeCliTest, BadInputsExitOneWithOneLine) {
  QuantizeRun run = Quantize(Quoted(Path("missing.gguf")) + " " + Quoted(Path("x.gguf")) + " Q4_0");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("missing.gguf"), std::string::npos) << run.err;
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;

  run = Quantize(Model("stories260K.gguf") + " " + Quoted(Path("x.gguf")) + " Q9_9");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("unknown type 'Q9_9'"), std::string::npos) << run.err;
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;

  run = Quantize(Model("stories260K.gguf") + " " + Quoted(Path("x.gguf")) + " Q4_0 --tensor-type attn_v");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_FALSE(fs::exists(Path("x.gguf")));
}

TEST_F(QuantizeCliTest, ImatrixThatIsAModelFileIsRejectedBeforeAnyWork) {
  const QuantizeRun run = Quantize(Model("stories260K.gguf") + " " + Quoted(Path("x.gguf")) +
                                   " Q4_0 --imatrix " + Model("stories260K.gguf"));
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("imatrix " + ModelsDir() + "/stories260K.gguf: this is a model GGUF "
                         "(architecture llama)"),
            std::string::npos) << run.err;
  EXPECT_NE(run.err.find("tern imatrix"), std::string::npos) << run.err;
  EXPECT_FALSE(ConvertedAnyTensor(run)) << run.err;
  EXPECT_FALSE(fs::exists(Path("x.gguf")));
}

TEST_F(QuantizeCliTest, ImatrixForAnotherModelIsRejectedNamingTheTensorAndSizes) {
  auto model = Open(DefaultModelPath());
  ASSERT_TRUE(model);
  const TensorInfo* q = model->FindTensor("blk.1.attn_q.weight");
  ASSERT_NE(q, nullptr);
  const std::vector<float> ones(q->RowLength() + 5, 1.0f);

  gguf::GgufWriter unknown;  // a layer stories260K does not have
  ASSERT_TRUE(unknown.AddTensor("blk.40.attn_q.weight.imatrix", DType::kF32, {q->RowLength()},
                                ones.data(), q->RowLength() * sizeof(float)).ok());
  ASSERT_TRUE(unknown.WriteFile(Path("unknown.gguf")).ok());
  QuantizeRun run = Quantize(Model("stories260K.gguf") + " " + Quoted(Path("x.gguf")) +
                             " Q4_0 --imatrix " + Quoted(Path("unknown.gguf")));
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("entry 'blk.40.attn_q.weight.imatrix' names no tensor of"),
            std::string::npos) << run.err;
  EXPECT_FALSE(ConvertedAnyTensor(run)) << run.err;

  gguf::GgufWriter wide;  // 5 columns too many
  ASSERT_TRUE(wide.AddTensor("blk.1.attn_q.weight.imatrix", DType::kF32, {(int64_t)ones.size()},
                             ones.data(), ones.size() * sizeof(float)).ok());
  ASSERT_TRUE(wide.WriteFile(Path("wide.gguf")).ok());
  run = Quantize(Model("stories260K.gguf") + " " + Quoted(Path("x.gguf")) + " Q4_0 --imatrix " +
                 Quoted(Path("wide.gguf")));
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("entry 'blk.1.attn_q.weight.imatrix' has " + std::to_string(ones.size()) +
                         " columns, but tensor 'blk.1.attn_q.weight' of " + ModelsDir() +
                         "/stories260K.gguf has rows of " + std::to_string(q->RowLength())),
            std::string::npos) << run.err;
  EXPECT_FALSE(ConvertedAnyTensor(run)) << run.err;
  EXPECT_FALSE(fs::exists(Path("x.gguf")));
}

TEST_F(QuantizeCliTest, ImatrixUseIsReportedPerTensorAndInTheSummary) {
  const std::string src = ModelsDir() + "/quantized/tiny-k-F32.gguf";
  if (!FileExists(src)) GTEST_SKIP() << src << " not found";
  auto in = Open(src);
  ASSERT_TRUE(in);
  const std::string name = "blk.1.attn_q.weight";
  const std::vector<float> importance(in->FindTensor(name)->RowLength(), 2.0f);
  gguf::GgufWriter writer;
  ASSERT_TRUE(writer.AddTensor(name + ".imatrix", DType::kF32, {(int64_t)importance.size()},
                               importance.data(), importance.size() * sizeof(float)).ok());
  ASSERT_TRUE(writer.WriteFile(Path("one.imatrix.gguf")).ok());
  const QuantizeRun run = Quantize(Quoted(src) + " " + Quoted(Path("out.gguf")) +
                                   " Q4_K_M --imatrix " + Quoted(Path("one.imatrix.gguf")));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto out = Open(Path("out.gguf"));
  ASSERT_TRUE(out);
  // Every converted weight in a format that takes importance, but one, lacks an entry.
  std::vector<std::string> takers;
  for (const TensorInfo& t : out->tensors()) {
    if (t.shape.size() == 2 && quant::UsesImportance(t.dtype)) takers.push_back(t.name);
  }
  ASSERT_GT(takers.size(), 2u);
  auto line_of = [&](const std::string& tensor) {
    const size_t at = run.err.find(" " + tensor + " ");
    return at == std::string::npos ? std::string()
                                   : run.err.substr(at, run.err.find('\n', at) - at);
  };
  EXPECT_NE(line_of(name).find("F32 -> Q4_K, imatrix used"), std::string::npos) << run.err;
  std::string no_entry;
  for (const std::string& t : takers) {
    if (t == name) continue;
    EXPECT_NE(line_of(t).find("no imatrix entry"), std::string::npos) << t << "\n" << run.err;
    no_entry += " " + t;
  }
  EXPECT_NE(line_of("blk.3.attn_v.weight").find("Q6_K"), std::string::npos);
  EXPECT_EQ(line_of("blk.0.attn_norm.weight").find("imatrix"), std::string::npos) << run.err;
  EXPECT_NE(run.out.find("imatrix " + Path("one.imatrix.gguf") + ": used for 1 of " +
                         std::to_string(takers.size()) + " tensors; no entry:" + no_entry + "\n"),
            std::string::npos) << run.out;
}

TEST_F(QuantizeCliTest, QuantizedInputNeedsAllowRequantize) {
  const std::string src = ModelsDir() + "/quantized/tiny-k-Q4_K_M.gguf";
  if (!FileExists(src)) GTEST_SKIP() << src << " not found";
  QuantizeRun run = Quantize(Quoted(src) + " " + Quoted(Path("q4_0.gguf")) + " Q4_0");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find(src + " holds already-quantized weights"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("second rounding error"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("pass --allow-requantize"), std::string::npos) << run.err;
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
  EXPECT_FALSE(ConvertedAnyTensor(run)) << run.err;
  EXPECT_FALSE(fs::exists(Path("q4_0.gguf")));

  run = Quantize(Quoted(src) + " " + Quoted(Path("q4_0.gguf")) + " Q4_0 --allow-requantize");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("requantized (--allow-requantize): "), std::string::npos) << run.out;
  auto out = Open(Path("q4_0.gguf"));
  ASSERT_TRUE(out);
  EXPECT_EQ(TypeOf(*out, "blk.1.attn_q.weight"), DType::kQ4_0);

  // Our own Q4_0 file to Q4_0 again copies every tensor unchanged, and
  // dequantizing to F16 rounds nothing twice: neither needs the flag.
  run = Quantize(Quoted(Path("q4_0.gguf")) + " " + Quoted(Path("again.gguf")) + " Q4_0");
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out.find("requantized"), std::string::npos) << run.out;
  auto again = Open(Path("again.gguf"));
  ASSERT_TRUE(again);
  for (const TensorInfo& t : out->tensors()) {
    const TensorInfo* a = again->FindTensor(t.name);
    ASSERT_NE(a, nullptr) << t.name;
    EXPECT_EQ(a->dtype, t.dtype) << t.name;
    EXPECT_TRUE(a->num_bytes == t.num_bytes && std::memcmp(a->data, t.data, t.num_bytes) == 0)
        << t.name;
  }
  run = Quantize(Quoted(src) + " " + Quoted(Path("f16.gguf")) + " F16");
  EXPECT_EQ(run.exit_code, 0) << run.err;
}

TEST_F(QuantizeCliTest, InPlaceIsRefusedAlsoThroughALink) {
  const std::string in = Path("in.gguf");
  fs::copy_file(DefaultModelPath(), in);
  const std::string before = ReadAll(in);
  fs::create_symlink(in, Path("link.gguf"));
  for (const std::string& out : {in, Path("link.gguf")}) {
    const QuantizeRun run = Quantize(Quoted(in) + " " + Quoted(out) + " Q8_0");
    EXPECT_EQ(run.exit_code, 1);
    EXPECT_NE(run.err.find("output " + out + " is the input file"), std::string::npos) << run.err;
    EXPECT_NE(run.err.find("never writes in place"), std::string::npos) << run.err;
    EXPECT_FALSE(ConvertedAnyTensor(run)) << run.err;
  }
  EXPECT_EQ(ReadAll(in), before);
  EXPECT_EQ(NumFiles(dir_), 4u);  // in.gguf, link.gguf, stdout.txt, stderr.txt
}

TEST_F(QuantizeCliTest, UnwritableOutputFolderFailsBeforeAnyTensor) {
  QuantizeRun run = Quantize(Model("stories260K.gguf") + " " + Quoted(Path("nope/out.gguf")) + " Q8_0");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("output " + Path("nope/out.gguf") + ": folder " + Path("nope") +
                         " does not exist"),
            std::string::npos) << run.err;
  EXPECT_FALSE(ConvertedAnyTensor(run)) << run.err;

  std::ofstream(Path("plain_file")) << "x";
  run = Quantize(Model("stories260K.gguf") + " " + Quoted(Path("plain_file/out.gguf")) + " Q8_0");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("is not a folder"), std::string::npos) << run.err;
  EXPECT_FALSE(ConvertedAnyTensor(run)) << run.err;

  if (::geteuid() != 0) {  // root writes into read-only folders
    fs::create_directories(Path("ro"));
    fs::permissions(Path("ro"), fs::perms::owner_read | fs::perms::owner_exec);
    run = Quantize(Model("stories260K.gguf") + " " + Quoted(Path("ro/out.gguf")) + " Q8_0");
    fs::permissions(Path("ro"), fs::perms::owner_all);
    EXPECT_EQ(run.exit_code, 1);
    EXPECT_NE(run.err.find("cannot create a file in folder"), std::string::npos) << run.err;
    EXPECT_FALSE(ConvertedAnyTensor(run)) << run.err;
    EXPECT_EQ(NumFiles(Path("ro")), 0u);
  }
}

TEST_F(QuantizeCliTest, SuccessLeavesOnlyTheOutputFile) {
  const QuantizeRun run = Quantize(Model("stories260K.gguf") + " " + Quoted(Path("q8.gguf")) + " Q8_0");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(NumFiles(dir_), 3u);  // q8.gguf, stdout.txt, stderr.txt: no temp file left
  EXPECT_EQ(run.err.find('\r'), std::string::npos);
}

}  // namespace
}  // namespace tern
