// End-to-end tests of -t/--threads, which every command registers through
// AddThreadsFlag: bad counts are rejected, counts above the cores warn, and
// the output does not depend on the count.
#include <gtest/gtest.h>

#include <string>

#include "base/cpu_cores.h"
#include "base/paths.h"
#include "tests/cli_util.h"

namespace tern {
namespace {

using testing::CountLines;
using testing::RunTern;
using testing::ShellQuote;

std::string Model() { return "-m " + ShellQuote(DefaultModelPath()); }

std::string Warning(int threads) {
  return "tern: -t " + std::to_string(threads) + " is more than the " +
         std::to_string(AvailableCores()) +
         " cores available to this process; threads will share cores\n";
}

// Every command that takes -t rejects a count below 1 (or absurdly high)
// in one line that names the flag, before it looks at anything else.
TEST(ThreadsCliTest, ZeroNegativeAndHugeCountsAreRejectedByEveryCommand) {
  SKIP_WITHOUT_BINARY();
  for (const char* command : {"generate", "serve", "batch", "bench", "bench kernels",
                              "perplexity", "quantize", "imatrix", "eval-quant", "model synth"}) {
    for (const char* value : {"0", "-2", "100000"}) {
      const testing::CliResult r =
          RunTern(std::string(command) + " -t " + value);
      EXPECT_EQ(r.exit_code, 1) << command << " -t " << value << ": " << r.err;
      EXPECT_EQ(CountLines(r.err), 1) << command << " -t " << value << ": " << r.err;
      EXPECT_EQ(r.err.rfind("tern " + std::string(command) + ": -t/--threads must be between 1 and", 0), 0u)
          << r.err;
      EXPECT_NE(r.err.find(std::string("got ") + value), std::string::npos) << r.err;
      EXPECT_TRUE(r.out.empty()) << r.out;
    }
  }
}

TEST(ThreadsCliTest, LongFormAndEqualsFormAreCheckedToo) {
  SKIP_WITHOUT_BINARY();
  testing::CliResult r = RunTern("generate --threads=0");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("-t/--threads must be between 1 and"), std::string::npos) << r.err;
  r = RunTern("generate --threads abc");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("expects an integer, got 'abc'"), std::string::npos) << r.err;
}

TEST(ThreadsCliTest, HelpSaysTheDefault) {
  SKIP_WITHOUT_BINARY();
  const testing::CliResult r = RunTern("generate --help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("default: the cores available to this process, here " +
                       std::to_string(AvailableCores())),
            std::string::npos)
      << r.out;
}

// More threads than cores: one warning line, and the same greedy tokens as
// one thread and as the default.
TEST(ThreadsCliTest, MoreThreadsThanCoresWarnsOnceAndGivesTheSameTokens) {
  SKIP_WITHOUT_MODEL();
  const std::string args = "generate " + Model() + " -p 'Once upon a time' --temp 0 -n 24 --ids";
  const testing::CliResult one = RunTern(args + " -t 1");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_EQ(one.err.find("threads will share cores"), std::string::npos) << one.err;
  const testing::CliResult by_default = RunTern(args);
  ASSERT_EQ(by_default.exit_code, 0) << by_default.err;
  EXPECT_EQ(by_default.err.find("threads will share cores"), std::string::npos) << by_default.err;
  EXPECT_EQ(by_default.out, one.out);
  for (int factor : {2, 4}) {
    const int threads = AvailableCores() * factor;
    const testing::CliResult many = RunTern(args + " -t " + std::to_string(threads));
    ASSERT_EQ(many.exit_code, 0) << many.err;
    EXPECT_EQ(many.out, one.out) << "-t " << threads;
    const size_t at = many.err.find(Warning(threads));
    EXPECT_NE(at, std::string::npos) << many.err;
    EXPECT_EQ(many.err.find("threads will share cores", at + Warning(threads).size()), std::string::npos) << many.err;
  }
}

}  // namespace
}  // namespace tern
