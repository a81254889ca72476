// The commands that write model-sized outputs (quantize, model synth,
// imatrix) never leave a partial file: under a file-size limit (as a full
// disk would fail them) they exit non-zero naming the cause, an existing
// output keeps its old bytes, and no temp file is left beside it. Each also
// refuses to write over its input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "base/paths.h"
#include "tests/cli_util.h"

namespace tern {
namespace {

using testing::CliResult;
using testing::ReadFileBytes;
using testing::RunTern;
using testing::ShellQuote;
using testing::TempDir;
using testing::WriteFileBytes;

std::string TextPath() { return ModelsDir() + "/text/tinystories_sample.txt"; }

// Runs tern under `ulimit -f 1` (512 or 1024 bytes per file). stderr goes to
// a pipe (not subject to the limit) so the error message comes back whole.
CliResult RunWithFileSizeLimit(const std::string& args) {
  CliResult r;
  const std::string cmd = "ulimit -f 1 && exec " + ShellQuote(testing::TernBinary()) + " " + args +
                          " 2>&1 >/dev/null";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.err.append(buf, n);
  const int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

std::vector<std::string> Entries(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

class WriteSafetyCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_MODEL();
    ASSERT_FALSE(dir_.path().empty());
    out_dir_ = dir_.File("out");
    std::filesystem::create_directories(out_dir_);
  }

  // args_for(out) under the limit: once over an existing output, once with
  // none; both fail, and the folder holds exactly what it held before.
  void ExpectNoPartialOutput(const std::function<std::string(const std::string&)>& args_for) {
    const std::string out = out_dir_ + "/result.gguf";
    const std::string old_bytes = "previous output, must survive\n";
    ASSERT_TRUE(WriteFileBytes(out, old_bytes));
    CliResult r = RunWithFileSizeLimit(args_for(out));
    EXPECT_NE(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("File too large"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(out), std::string::npos) << r.err;
    EXPECT_EQ(ReadFileBytes(out), old_bytes);
    EXPECT_EQ(Entries(out_dir_), std::vector<std::string>{"result.gguf"});

    std::filesystem::remove(out);
    r = RunWithFileSizeLimit(args_for(out));
    EXPECT_NE(r.exit_code, 0) << r.err;
    EXPECT_TRUE(Entries(out_dir_).empty()) << r.err;

    // Without the limit the same command succeeds: the failure above was the
    // limit, not the arguments.
    r = RunTern(args_for(out));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(Entries(out_dir_), std::vector<std::string>{"result.gguf"});
  }

  TempDir dir_;
  std::string out_dir_;
};

TEST_F(WriteSafetyCliTest, QuantizeLeavesNoPartialOutput) {
  ExpectNoPartialOutput([](const std::string& out) {
    return "quantize " + ShellQuote(DefaultModelPath()) + " " + ShellQuote(out) + " Q8_0";
  });
}

TEST_F(WriteSafetyCliTest, ModelSynthLeavesNoPartialOutput) {
  ExpectNoPartialOutput([](const std::string& out) {
    return "model synth --preset tiny --type q4_0 -t 1 -o " + ShellQuote(out);
  });
}

TEST_F(WriteSafetyCliTest, ImatrixLeavesNoPartialOutput) {
  if (!FileExists(TextPath())) GTEST_SKIP() << TextPath() << " missing";
  ExpectNoPartialOutput([](const std::string& out) {
    return "imatrix -m " + ShellQuote(DefaultModelPath()) + " -f " + ShellQuote(TextPath()) +
           " -o " + ShellQuote(out) + " --ctx 128 --chunks 2 -t 1";
  });
}

TEST_F(WriteSafetyCliTest, ModelSynthAndImatrixRefuseToOverwriteTheirInput) {
  const std::string model = dir_.File("model.gguf");
  std::filesystem::copy_file(DefaultModelPath(), model);
  const std::string before = ReadFileBytes(model);
  CliResult r = RunTern("model synth --preset tiny --vocab-from " + ShellQuote(model) + " -o " +
                        ShellQuote(model));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("is the --vocab-from input"), std::string::npos) << r.err;
  if (FileExists(TextPath())) {
    r = RunTern("imatrix -m " + ShellQuote(model) + " -f " + ShellQuote(TextPath()) + " -o " +
                ShellQuote(model));
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("is the model file"), std::string::npos) << r.err;
  }
  EXPECT_EQ(ReadFileBytes(model), before);
}

}  // namespace
}  // namespace tern
