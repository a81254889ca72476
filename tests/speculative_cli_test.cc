// End-to-end tests of the speculative-decoding flags: `tern generate` and
// `tern batch` give the same greedy tokens with and without speculation and
// report acceptance; bad flag combinations are one-line errors.
#include <gtest/gtest.h>

#include <fstream>

#include "base/paths.h"
#include "tests/cli_util.h"

namespace tern {
namespace {

using testing::CountLines;
using testing::RunTern;
using testing::ShellQuote;

std::string Model() { return "-m " + ShellQuote(DefaultModelPath()); }

TEST(SpeculativeCliTest, GenerateNgramGreedyIdsEqualPlainAndReportAcceptance) {
  SKIP_WITHOUT_MODEL();
  const std::string args = "generate " + Model() + " -p 'Once upon a time' --temp 0 -n 120 --ids";
  const testing::CliResult plain = RunTern(args);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  for (const char* k : {"1", "4", "8"}) {
    const testing::CliResult spec =
        RunTern(args + " --speculative-method ngram --ngram-max 3 --num-speculative-tokens " + k);
    ASSERT_EQ(spec.exit_code, 0) << spec.err;
    EXPECT_EQ(spec.out, plain.out) << "k " << k;
    EXPECT_NE(spec.err.find("speculative: ngram, k " + std::string(k)), std::string::npos) << spec.err;
    EXPECT_NE(spec.err.find("acceptance "), std::string::npos) << spec.err;
    EXPECT_NE(spec.err.find("mean accepted length "), std::string::npos) << spec.err;
  }
}

TEST(SpeculativeCliTest, BatchRowsAndSummaryCarryAcceptance) {
  SKIP_WITHOUT_MODEL();
  const std::string dir = ::testing::TempDir();
  const std::string in = dir + "/spec_batch_in.jsonl", out = dir + "/spec_batch_out.jsonl",
                    summary = dir + "/spec_batch_summary.json";
  {
    std::ofstream f(in);
    f << "{\"prompt\":\"Once upon a time\",\"max_tokens\":60,\"temperature\":0}\n"
      << "{\"prompt\":\"Tom and Lily\",\"max_tokens\":60,\"temperature\":0}\n";
  }
  const testing::CliResult r =
      RunTern("batch " + Model() + " -i " + ShellQuote(in) + " -o " + ShellQuote(out) +
              " --summary-json " + ShellQuote(summary) + " --speculative-method ngram");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string rows = testing::ReadFileBytes(out);
  EXPECT_EQ(CountLines(rows), 2);
  EXPECT_NE(rows.find("\"speculative\":{\"acceptance_rate\":"), std::string::npos) << rows;
  EXPECT_NE(rows.find("\"mean_accepted_length\":"), std::string::npos) << rows;
  const std::string s = testing::ReadFileBytes(summary);
  EXPECT_NE(s.find("\"speculative\""), std::string::npos) << s;
  EXPECT_NE(s.find("\"acceptance_rate\""), std::string::npos) << s;
  EXPECT_NE(r.err.find("speculative decoding: ngram"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("mean accepted length"), std::string::npos) << r.err;
}

TEST(SpeculativeCliTest, BadFlagsAreOneLineErrors) {
  SKIP_WITHOUT_MODEL();
  struct Case {
    std::string args, needle;
  };
  const Case cases[] = {
      {"--ngram-max 3", "--ngram-max/--ngram-min need --speculative-method ngram"},
      {"--speculative-method ngram --num-speculative-tokens 0", "must be in [1, 64], got 0"},
      {"--speculative-method ngram --num-speculative-tokens 1000", "must be in [1, 64], got 1000"},
      {"--num-speculative-tokens 4", "--num-speculative-tokens needs"},
      {"--speculative-method draft", "needs --speculative-model"},
      {"--speculative-method magic", "must be draft or ngram"},
      {"--speculative-method ngram --ngram-min 5 --ngram-max 2", "1 <= min <= max"},
      {"--speculative-model /nonexistent/draft.gguf", "/nonexistent/draft.gguf"},
      {"--speculative-method ngram --speculative-adaptive maybe", "must be on or off"},
  };
  for (const Case& c : cases) {
    const testing::CliResult r = RunTern("generate " + Model() + " -p x -n 4 " + c.args);
    EXPECT_EQ(r.exit_code, 1) << c.args << ": " << r.err;
    EXPECT_EQ(CountLines(r.err), 1) << c.args << ": " << r.err;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << c.args << ": " << r.err;
    const testing::CliResult b = RunTern("batch " + Model() + " -i /dev/null -o /dev/null " + c.args);
    EXPECT_NE(b.exit_code, 0) << c.args;
    EXPECT_NE(b.err.find(c.needle), std::string::npos) << c.args << ": " << b.err;
  }
}

}  // namespace
}  // namespace tern
