// End-to-end tests of `tern generate`.
#include <gtest/gtest.h>

#include <sstream>
#include <vector>

#include "base/paths.h"
#include "tests/cli_util.h"

namespace tern {
namespace {

using testing::CountLines;
using testing::RunTern;
using testing::ShellQuote;

#define SKIP_WITHOUT_BINARY() \
  if (testing::TernBinary().empty()) GTEST_SKIP() << "TERN_BINARY not set (run through ctest)"

#define SKIP_WITHOUT_MODEL()                                                 \
  SKIP_WITHOUT_BINARY();                                                     \
  if (!FileExists(DefaultModelPath()))                                       \
  GTEST_SKIP() << "test model missing: " << DefaultModelPath()

std::vector<int> ParseIds(const std::string& text) {
  std::istringstream in(text);
  std::vector<int> ids;
  int id;
  while (in >> id) ids.push_back(id);
  return ids;
}

std::string Model() { return "-m " + ShellQuote(DefaultModelPath()); }

void ExpectOneLineError(const testing::CliResult& r, const std::string& needle) {
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(CountLines(r.err), 1) << r.err;
  EXPECT_EQ(r.err.rfind("tern generate: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST(GenerateCliTest, GreedyIdsFromBosMatchGolden) {
  SKIP_WITHOUT_MODEL();
  const testing::CliResult r = RunTern("generate " + Model() + " -p '' --temp 0 -n 200 --ids");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string golden =
      testing::ReadFileBytes(ModelsDir() + "/golden/stories260K.greedy200.ids");
  EXPECT_EQ(ParseIds(r.out), ParseIds(golden));
  EXPECT_EQ(ParseIds(r.out).size(), 200u);
}

TEST(GenerateCliTest, GreedyTextFromBosMatchesGoldenBytes) {
  SKIP_WITHOUT_MODEL();
  const testing::CliResult r = RunTern("generate " + Model() + " --temp 0 -n 200");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, testing::ReadFileBytes(ModelsDir() + "/golden/stories260K.greedy200.txt"));
}

TEST(GenerateCliTest, ContinuesOnceUponATime) {
  SKIP_WITHOUT_MODEL();
  const testing::CliResult r =
      RunTern("generate " + Model() + " -p 'Once upon a time' --temp 0 -n 30");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind(", there was a little girl named Lily", 0), 0u) << r.out;
  // Timings go to stderr, never stdout.
  EXPECT_NE(r.err.find("tok/s"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("TTFT"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("TPOT"), std::string::npos) << r.err;
}

TEST(GenerateCliTest, F16KvCacheGivesTheSameGreedyIds) {
  SKIP_WITHOUT_MODEL();
  const testing::CliResult r =
      RunTern("generate " + Model() + " --temp 0 -n 200 --ids --kv-cache-dtype f16");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ParseIds(r.out),
            ParseIds(testing::ReadFileBytes(ModelsDir() + "/golden/stories260K.greedy200.ids")));
}

TEST(GenerateCliTest, SameSeedSameTextDifferentSeedDifferentText) {
  SKIP_WITHOUT_MODEL();
  const std::string args = "generate " + Model() + " -p 'Once upon a time' -n 40 --ids --temp 1";
  const testing::CliResult a = RunTern(args + " --seed 7");
  const testing::CliResult b = RunTern(args + " --seed 7");
  const testing::CliResult c = RunTern(args + " --seed 8");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.out, c.out);
  EXPECT_EQ(ParseIds(a.out).size(), 40u);
}

TEST(GenerateCliTest, IgnoreEosRunsToTheRequestedCount) {
  SKIP_WITHOUT_MODEL();
  const testing::CliResult r =
      RunTern("generate " + Model() + " --temp 0 -n 300 --ids --ignore-eos --ctx 512");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ParseIds(r.out).size(), 300u);
}

TEST(GenerateCliTest, StopsWhenTheContextIsFull) {
  SKIP_WITHOUT_MODEL();
  const testing::CliResult r =
      RunTern("generate " + Model() + " --temp 0 -n 100 --ids --ignore-eos --ctx 16");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // 1 prompt token (BOS) + 15 appended generated tokens fill 16 slots; the
  // 16th generated token comes from the last logits.
  EXPECT_EQ(ParseIds(r.out).size(), 16u);
  EXPECT_NE(r.err.find("context full"), std::string::npos) << r.err;
}

TEST(GenerateCliTest, PromptLongerThanContextIsAnError) {
  SKIP_WITHOUT_MODEL();
  const testing::CliResult r = RunTern(
      "generate " + Model() + " --ctx 8 -p 'Once upon a time there was a little girl named Lily'");
  ExpectOneLineError(r, "longer than the context of 8 tokens");
}

TEST(GenerateCliTest, MissingModelFileIsAnError) {
  SKIP_WITHOUT_BINARY();
  const testing::CliResult r = RunTern("generate -m /nonexistent/model.gguf -p hi");
  ExpectOneLineError(r, "/nonexistent/model.gguf");
}

TEST(GenerateCliTest, BadKvDtypeIsAnError) {
  SKIP_WITHOUT_BINARY();
  const testing::CliResult r = RunTern("generate -m x.gguf --kv-cache-dtype q9");
  ExpectOneLineError(r, "--kv-cache-dtype");
}

TEST(GenerateCliTest, UnknownFlagIsAnError) {
  SKIP_WITHOUT_BINARY();
  const testing::CliResult r = RunTern("generate --no-such-flag");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--no-such-flag"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace tern
