// End-to-end tests of `tern inspect`.
#include <gtest/gtest.h>

#include "base/paths.h"
#include "tests/cli_util.h"

namespace tern {
namespace {

using testing::CountLines;
using testing::RunTern;
using testing::ShellQuote;

// A failing inspect: exit 1, nothing on stdout, one "tern inspect: " line.
void ExpectOneLineError(const testing::CliResult& r, const std::string& needle) {
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(CountLines(r.err), 1) << r.err;
  EXPECT_EQ(r.err.rfind("tern inspect: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST(InspectCliTest, PrintsStories260KSummary) {
  SKIP_WITHOUT_BINARY();
  const std::string model = DefaultModelPath();
  if (!FileExists(model)) GTEST_SKIP() << "test model missing: " << model;
  const testing::CliResult r = RunTern("inspect " + ShellQuote(model));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  EXPECT_NE(r.out.find("version 3"), std::string::npos);
  EXPECT_NE(r.out.find("tensors:     48\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("292800"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[string x 512]"), std::string::npos);
  EXPECT_NE(r.out.find("blk.4.ffn_down.weight"), std::string::npos);
  EXPECT_NE(r.out.find("[172, 64]"), std::string::npos);
  // 2 x 5 layers x 4 KV heads x 8 head dim x 2 bytes.
  EXPECT_NE(r.out.find("640 bytes per token"), std::string::npos) << r.out;
}

TEST(InspectCliTest, AllPrintsEveryArrayItem) {
  SKIP_WITHOUT_BINARY();
  const std::string model = DefaultModelPath();
  if (!FileExists(model)) GTEST_SKIP() << "test model missing: " << model;
  const testing::CliResult brief = RunTern("inspect " + ShellQuote(model));
  const testing::CliResult all = RunTern("inspect --all " + ShellQuote(model));
  ASSERT_EQ(all.exit_code, 0) << all.err;
  EXPECT_EQ(brief.out.find("\"<0xFF>\""), std::string::npos);
  EXPECT_NE(all.out.find("\"<0xFF>\""), std::string::npos);
}

TEST(InspectCliTest, MissingFileIsOneLineError) {
  SKIP_WITHOUT_BINARY();
  ExpectOneLineError(RunTern("inspect /nonexistent/model.gguf"), "/nonexistent/model.gguf");
}

TEST(InspectCliTest, NonGgufFileIsOneLineError) {
  SKIP_WITHOUT_BINARY();
  testing::TempDir dir;
  const std::string path = dir.File("notes.gguf");
  ASSERT_TRUE(testing::WriteFileBytes(path, "this is plain text, not a model\n"));
  ExpectOneLineError(RunTern("inspect " + ShellQuote(path)), "not a GGUF file");
}

TEST(InspectCliTest, TruncatedGgufIsOneLineError) {
  SKIP_WITHOUT_BINARY();
  const std::string model = DefaultModelPath();
  if (!FileExists(model)) GTEST_SKIP() << "test model missing: " << model;
  testing::TempDir dir;
  const std::string path = dir.File("truncated.gguf");
  ASSERT_TRUE(testing::WriteFileBytes(path, testing::ReadFileBytes(model).substr(0, 1000)));
  ExpectOneLineError(RunTern("inspect " + ShellQuote(path)), "truncated.gguf");
}

TEST(InspectCliTest, MissingModelArgumentIsOneLineError) {
  SKIP_WITHOUT_BINARY();
  ExpectOneLineError(RunTern("inspect"), "MODEL");
}

TEST(InspectCliTest, ModelFlagIsTheSameAsTheArgument) {
  SKIP_WITHOUT_BINARY();
  const std::string model = DefaultModelPath();
  if (!FileExists(model)) GTEST_SKIP() << "test model missing: " << model;
  const testing::CliResult positional = RunTern("inspect " + ShellQuote(model));
  const testing::CliResult flag = RunTern("inspect -m " + ShellQuote(model));
  const testing::CliResult long_flag = RunTern("inspect --all --model=" + ShellQuote(model));
  const testing::CliResult long_positional = RunTern("inspect --all " + ShellQuote(model));
  ASSERT_EQ(flag.exit_code, 0) << flag.err;
  ASSERT_EQ(long_flag.exit_code, 0) << long_flag.err;
  EXPECT_FALSE(flag.out.empty());
  EXPECT_EQ(flag.out, positional.out);
  EXPECT_EQ(long_flag.out, long_positional.out);
}

TEST(InspectCliTest, ModelFlagAndArgumentTogetherIsOneLineError) {
  SKIP_WITHOUT_BINARY();
  ExpectOneLineError(RunTern("inspect -m /nonexistent/a.gguf /nonexistent/b.gguf"),
                     "both -m/--model and the argument '/nonexistent/b.gguf' given");
  ExpectOneLineError(RunTern("inspect -m /nonexistent/a.gguf"), "/nonexistent/a.gguf");
}

}  // namespace
}  // namespace tern
