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

TEST(PerplexityCliTest, KlBaseFromAnotherContextIsRefused) {
  SKIP_WITHOUT_DATA();
  testing::TempDir dir;
  const std::string base = dir.File("base.lp");
  ASSERT_EQ(RunTern(Args() + " --save-logits " + ShellQuote(base)).exit_code, 0);
  const testing::CliResult r =
      RunTern("perplexity -m " + ShellQuote(DefaultModelPath()) + " -f " +
              ShellQuote(TextPath()) + " --ctx 64 --kl-base " + ShellQuote(base));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("cannot compare"), std::string::npos) << r.err;
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
