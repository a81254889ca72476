// End-to-end tests of `tern perplexity`.
#include <gtest/gtest.h>

#include <cstdio>

#include "base/paths.h"
#include "tests/cli_util.h"

namespace tern {
namespace {

using testing::RunTern;
using testing::ShellQuote;

#define SKIP_WITHOUT_DATA()                                                          \
  if (testing::TernBinary().empty()) GTEST_SKIP() << "TERN_BINARY not set";          \
  if (!FileExists(DefaultModelPath()) || !FileExists(TextPath()))                    \
  GTEST_SKIP() << "stories260K.gguf or tinystories_sample.txt missing"

std::string TextPath() { return ModelsDir() + "/text/tinystories_sample.txt"; }

double ParsePpl(const std::string& out) {
  double ppl = 0, err = 0;
  const size_t at = out.find("ppl = ");
  if (at == std::string::npos) return 0;
  std::sscanf(out.c_str() + at, "ppl = %lf +/- %lf", &ppl, &err);
  return ppl;
}

std::string Args() {
  return "perplexity -m " + ShellQuote(DefaultModelPath()) + " -f " + ShellQuote(TextPath()) +
         " --ctx 128";
}

// Reference (llama.cpp's perplexity tool, f16 KV): 6.8464 +/- 0.74230.
TEST(PerplexityCliTest, Stories260KMatchesReferenceWithF16Kv) {
  SKIP_WITHOUT_DATA();
  const testing::CliResult r = RunTern(Args() + " --kv-cache-dtype f16");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Measured: "ppl = 6.8464 +/- 0.74229".
  EXPECT_EQ(r.out.rfind("ppl = ", 0), 0u) << r.out;
  EXPECT_NEAR(ParsePpl(r.out), 6.8464, 0.0005) << r.out;
  EXPECT_NE(r.err.find("14 chunks"), std::string::npos) << r.err;
}

TEST(PerplexityCliTest, SaveThenCompareAgainstItselfGivesZeroKl) {
  SKIP_WITHOUT_DATA();
  testing::TempDir dir;
  const std::string base = dir.File("base.lp");
  const testing::CliResult a = RunTern(Args() + " --save-logits " + ShellQuote(base));
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_NEAR(ParsePpl(a.out), 6.8464, 0.005);
  const testing::CliResult b = RunTern(Args() + " --kl-base " + ShellQuote(base));
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_EQ(ParsePpl(b.out), ParsePpl(a.out));
  EXPECT_NE(b.out.find("kl mean = 0.000000"), std::string::npos) << b.out;
  EXPECT_NE(b.out.find("top-1 agreement = 100.00%"), std::string::npos) << b.out;
  EXPECT_NE(b.out.find("delta ppl = +0.0000"), std::string::npos) << b.out;
}

// What a run prints on stderr once it evaluates a window (log mode: stderr
// is a file here).
bool EvaluatedAnyChunk(const testing::CliResult& r) {
  return r.err.find("perplexity: 1/") != std::string::npos ||
         r.err.find("chunks (") != std::string::npos;
}

TEST(PerplexityCliTest, KlBaseFromAnotherContextIsRefusedBeforeTheModelLoads) {
  SKIP_WITHOUT_DATA();
  testing::TempDir dir;
  const std::string base = dir.File("base.lp");
  ASSERT_EQ(RunTern(Args() + " --save-logits " + ShellQuote(base)).exit_code, 0);
  const testing::CliResult r =
      RunTern("perplexity -m " + ShellQuote(DefaultModelPath()) + " -f " +
              ShellQuote(TextPath()) + " --ctx 64 --kl-base " + ShellQuote(base));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("cannot compare with " + base + ": it was saved with --ctx 128, this run "
                       "has --ctx 64"),
            std::string::npos) << r.err;
  EXPECT_EQ(testing::CountLines(r.err), 1) << r.err;  // not even the tokenized-text line
}

TEST(PerplexityCliTest, KlBaseOnAnotherTextFailsBeforeAnyChunkIsEvaluated) {
  SKIP_WITHOUT_DATA();
  const std::string novel = testing::ReadFileBytes(ModelsDir() + "/text/war-and-peace.txt");
  if (novel.size() < 120000) GTEST_SKIP() << "text/war-and-peace.txt not found";
  testing::TempDir dir;
  const std::string other = dir.File("other.txt");
  ASSERT_TRUE(testing::WriteFileBytes(other, novel.substr(100000, 20000)));
  const std::string base = dir.File("base.lp");
  ASSERT_EQ(RunTern(Args() + " --chunks 2 --save-logits " + ShellQuote(base)).exit_code, 0);

  const std::string model = ShellQuote(DefaultModelPath());
  testing::CliResult r = RunTern("perplexity -m " + model + " -f " + ShellQuote(other) +
                                 " --ctx 128 --chunks 2 --kl-base " + ShellQuote(base));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("cannot compare with " + base + ": token ids differ from the base run at "
                       "scored position "),
            std::string::npos) << r.err;
  EXPECT_FALSE(EvaluatedAnyChunk(r)) << r.err;
  EXPECT_EQ(r.out, "");

  // The same text with another --chunks scores another number of positions.
  r = RunTern(Args() + " --chunks 3 --kl-base " + ShellQuote(base));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("the base run scored 126 positions, this run would score 189"),
            std::string::npos) << r.err;
  EXPECT_FALSE(EvaluatedAnyChunk(r)) << r.err;
}

TEST(PerplexityCliTest, UnwritableSaveLogitsAndMissingTextFailBeforeTheModelLoads) {
  SKIP_WITHOUT_DATA();
  testing::TempDir dir;
  testing::CliResult r = RunTern(Args() + " --save-logits " + ShellQuote(dir.File("no/base.lp")));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--save-logits " + dir.File("no/base.lp") + ": folder " + dir.File("no") +
                       " does not exist"),
            std::string::npos) << r.err;
  EXPECT_EQ(testing::CountLines(r.err), 1) << r.err;

  r = RunTern("perplexity -m " + ShellQuote(DefaultModelPath()) + " -f " +
              ShellQuote(dir.File("missing.txt")));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("text file " + dir.File("missing.txt")), std::string::npos) << r.err;
  EXPECT_EQ(testing::CountLines(r.err), 1) << r.err;
}

TEST(PerplexityCliTest, ProgressInALogIsPlainLines) {
  SKIP_WITHOUT_DATA();
  const testing::CliResult r = RunTern(Args());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find('\r'), std::string::npos) << r.err;
  // 14 windows: a line at each 10% step crossed (chunks 2, 3, 5, 6, 7, 9, 10,
  // 12, 13) and the final one.
  EXPECT_NE(r.err.find("perplexity: 2/14 chunks (14%), ppl "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("perplexity: 14/14 chunks (100%), ppl "), std::string::npos) << r.err;
  size_t num_lines = 0;
  for (size_t at = 0; (at = r.err.find("perplexity: ", at)) != std::string::npos; ++at) ++num_lines;
  EXPECT_GE(num_lines, 10u) << r.err;
  EXPECT_LE(num_lines, 15u) << r.err;  // plus any 5 s line on a slow machine
}

TEST(PerplexityCliTest, TooShortTextIsAnError) {
  SKIP_WITHOUT_DATA();
  const testing::CliResult r = RunTern("perplexity -m " + ShellQuote(DefaultModelPath()) +
                                       " -f " + ShellQuote(TextPath()) + " --ctx 2048");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("needs at least 4096"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace tern
