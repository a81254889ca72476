// The flag parser shared by every command: "did you mean", other tools'
// spellings (tools/flag_aliases.h), '_' for '-', the model as a lone
// argument, and `tern --version`. In-process tests of ArgParser on a flag set
// of their own, then the same behaviours through the binary.
#include <gtest/gtest.h>

#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "base/env_settings.h"
#include "base/paths.h"
#include "kernels/kernel_table.h"
#include "kernels/kernels.h"
#include "tests/cli_util.h"
#include "tools/arg_parser.h"

namespace tern {
namespace {

using testing::CountLines;
using testing::RunTern;
using testing::ShellQuote;

// ---- ArgParser in-process -------------------------------------------------------

// Parses a space-separated command line.
Status ParseLine(ArgParser& p, const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  return p.Parse((int)argv.size(), argv.data());
}

// A command with flags of its own, none of them tern's real set.
struct Toy {
  std::string model;
  double temp = 1;
  int max_len = 0;
  int top_k = 0;
  double top_p = 1;
  bool fast = false;
  ArgParser parser{"toy", "a toy command"};
  Toy() {
    parser.AddString("-m,--model", "PATH", &model, "model");
    parser.SetLonePositionalFlag("-m");
    parser.AddDouble("--temp", "T", &temp, "temperature");
    parser.AddInt("--max-model-len", "N", &max_len, "length");
    parser.AddInt("--top-k", "K", &top_k, "top-k");
    parser.AddDouble("--top-p", "P", &top_p, "top-p");
    parser.AddFlag("--go-fast", &fast, "fast");
  }
};

TEST(ArgParserTest, EditDistanceCountsTranspositionsAsOne) {
  EXPECT_EQ(EditDistance("temp", "temp"), 0);
  EXPECT_EQ(EditDistance("temprature", "temperature"), 1);
  EXPECT_EQ(EditDistance("tmep", "temp"), 1);
  EXPECT_EQ(EditDistance("", "abc"), 3);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3);
}

TEST(ArgParserTest, UnknownFlagSuggestsTheClosest) {
  Toy t;
  Status st = ParseLine(t.parser, "--go-fats");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "unknown flag '--go-fats'; did you mean --go-fast?");
  // A prefix of two flags names both.
  st = ParseLine(t.parser, "--top 3");
  EXPECT_EQ(st.message(), "unknown flag '--top'; did you mean --top-k or --top-p?");
  // A misspelt alias points to the command's own flag.
  st = ParseLine(t.parser, "--temprature 0.5");
  EXPECT_EQ(st.message(), "unknown flag '--temprature'; did you mean --temp?");
  // Nothing close: no guess.
  st = ParseLine(t.parser, "--zzzzzz");
  EXPECT_EQ(st.message(), "unknown flag '--zzzzzz'");
}

TEST(ArgParserTest, UnderscoresReadAsDashes) {
  Toy t;
  ASSERT_TRUE(ParseLine(t.parser, "--max_model_len 77 --go_fast --top_p=0.5").ok());
  EXPECT_EQ(t.max_len, 77);
  EXPECT_TRUE(t.fast);
  EXPECT_EQ(t.top_p, 0.5);
}

TEST(ArgParserTest, AliasesOfTheSameFlagAreAccepted) {
  Toy t;
  ASSERT_TRUE(ParseLine(t.parser, "--temperature 0.25").ok());
  EXPECT_EQ(t.temp, 0.25);
  Toy u;
  Status st = ParseLine(u.parser, "--temperature=0.5");
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(u.temp, 0.5);
}

TEST(ArgParserTest, SimilarFlagIsPointedTo) {
  Toy t;
  Status st = ParseLine(t.parser, "--ctx-size 2048");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("did you mean --max-model-len?"), std::string::npos) << st.message();
  EXPECT_EQ(t.max_len, 0);
}

TEST(ArgParserTest, GpuFlagsAreIgnoredWithAWarning) {
  Toy t;
  ASSERT_TRUE(ParseLine(t.parser, "-ngl 99 --n_gpu_layers=5 --temp 0.5").ok());
  EXPECT_EQ(t.temp, 0.5);  // 99 was taken as -ngl's value, not a positional
  EXPECT_TRUE(t.model.empty());
  ASSERT_EQ(t.parser.warnings().size(), 2u);
  EXPECT_EQ(t.parser.warnings()[0], "-ngl: tern runs on the CPU; this flag has no effect here");
}

TEST(ArgParserTest, LoneArgumentIsTheModel) {
  Toy t;
  ASSERT_TRUE(ParseLine(t.parser, "a.gguf --temp 0").ok());
  EXPECT_EQ(t.model, "a.gguf");
  Toy both;
  Status st = ParseLine(both.parser, "a.gguf -m b.gguf");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("both -m/--model and the argument 'a.gguf' given"), std::string::npos)
      << st.message();
  Toy two;
  st = ParseLine(two.parser, "a.gguf b.gguf");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("unexpected argument 'b.gguf'"), std::string::npos) << st.message();
  EXPECT_NE(Toy().parser.Help().find("the same as -m/--model PATH"), std::string::npos);
}

TEST(ArgParserTest, OwnPositionalsWinOverTheLoneModel) {
  std::string model;
  std::vector<std::string> ids;
  ArgParser p("toy", "toy");
  p.AddString("-m,--model", "PATH", &model, "model");
  p.SetLonePositionalFlag("-m");
  p.SetPositional("ID", &ids, "ids");
  ASSERT_TRUE(ParseLine(p, "-m x.gguf 1 2").ok());
  EXPECT_EQ(model, "x.gguf");
  EXPECT_EQ(ids, (std::vector<std::string>{"1", "2"}));
}

// ---- through the binary ------------------------------------------------------------

std::string Model() { return ShellQuote(DefaultModelPath()); }

void ExpectOneLineError(const testing::CliResult& r, const std::string& prefix,
                        const std::string& needle) {
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(CountLines(r.err), 1) << r.err;
  EXPECT_EQ(r.err.rfind(prefix, 0), 0u) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
}

TEST(FlagsCliTest, DidYouMeanInEveryCommand) {
  SKIP_WITHOUT_BINARY();
  ExpectOneLineError(RunTern("generate --temprature 0.5"), "tern generate: ",
                     "unknown flag '--temprature'; did you mean --temp?");
  ExpectOneLineError(RunTern("serve --max-num-seq 4"), "tern serve: ",
                     "did you mean --max-num-seqs?");
  ExpectOneLineError(RunTern("batch --kv-cache-dtpye f32"), "tern batch: ",
                     "did you mean --kv-cache-dtype?");
  ExpectOneLineError(RunTern("quantize --imatrx f"), "tern quantize: ", "did you mean --imatrix?");
  ExpectOneLineError(RunTern("serve --version"), "tern serve: ", "'tern --version'");
  const testing::CliResult r = RunTern("genrate");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("unknown command 'genrate'; did you mean generate?"), std::string::npos)
      << r.err;
}

TEST(FlagsCliTest, ServePointsFromContextSizeToMaxModelLen) {
  SKIP_WITHOUT_BINARY();
  ExpectOneLineError(RunTern("serve --ctx-size 2048"), "tern serve: ",
                     "unknown flag '--ctx-size'; did you mean --max-model-len? (the longest prompt "
                     "+ output of one request)");
}

TEST(FlagsCliTest, UnderscoreSpellingsAreTheDashedFlags) {
  SKIP_WITHOUT_BINARY();
  // kv-calc prints what its flags say: 2 x layers x kv heads x head dim x 2
  // bytes per token.
  const testing::CliResult dashed =
      RunTern("kv-calc --layers 3 --kv-heads 2 --head-dim 16 --seq-len 100");
  const testing::CliResult under =
      RunTern("kv-calc --layers 3 --kv_heads 2 --head_dim=16 --seq_len 100");
  ASSERT_EQ(dashed.exit_code, 0) << dashed.err;
  ASSERT_EQ(under.exit_code, 0) << under.err;
  EXPECT_EQ(dashed.out, under.out);
  // serve: --api_key is --api-key (the model check comes after the flags).
  ExpectOneLineError(RunTern("serve -m /nonexistent/m.gguf --api_key k --max_model_len 64"),
                     "tern serve: ", "model file not found: /nonexistent/m.gguf");
}

TEST(FlagsCliTest, ServeTakesTheModelAsItsArgument) {
  SKIP_WITHOUT_BINARY();
  ExpectOneLineError(RunTern("serve /nonexistent/m.gguf --port 0"), "tern serve: ",
                     "model file not found: /nonexistent/m.gguf");
  ExpectOneLineError(RunTern("serve -m /nonexistent/a.gguf /nonexistent/b.gguf"), "tern serve: ",
                     "both -m/--model and the argument '/nonexistent/b.gguf' given");
  ExpectOneLineError(RunTern("serve /nonexistent/a.gguf /nonexistent/b.gguf"), "tern serve: ",
                     "unexpected argument '/nonexistent/b.gguf'");
  const testing::CliResult help = RunTern("serve --help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("the same as -m/--model PATH"), std::string::npos) << help.out;
}

TEST(FlagsCliTest, ServeRejectsABadMetricsPrefixBeforeLoading) {
  SKIP_WITHOUT_BINARY();
  // Checked with the flags, before the model file.
  ExpectOneLineError(RunTern("serve -m /nonexistent/m.gguf --metrics-prefix vllm:"), "tern serve: ",
                     "--metrics-prefix: 'vllm:' is not a metric namespace");
  ExpectOneLineError(RunTern("serve -m /nonexistent/m.gguf --metrics-prefix ''"), "tern serve: ",
                     "--metrics-prefix: '' is not a metric namespace");
  ExpectOneLineError(RunTern("serve -m /nonexistent/m.gguf --metrics-prefix vllm"), "tern serve: ",
                     "model file not found: /nonexistent/m.gguf");
}

TEST(FlagsCliTest, GenerateTakesTheModelAsItsArgumentAndForeignSpellings) {
  SKIP_WITHOUT_MODEL();
  const std::string common = " -p 'Once upon a time' --temp 0 --ignore-eos --ids -t 1";
  const testing::CliResult flag = RunTern("generate -m " + Model() + common + " -n 6");
  ASSERT_EQ(flag.exit_code, 0) << flag.err;
  ASSERT_FALSE(flag.out.empty());
  // Positional model, --max-tokens for -n, a GPU flag ignored with a warning.
  const testing::CliResult lone = RunTern("generate " + Model() + common + " --max-tokens 6 -ngl 99");
  ASSERT_EQ(lone.exit_code, 0) << lone.err;
  EXPECT_EQ(lone.out, flag.out);
  EXPECT_NE(lone.err.find("tern generate: warning: -ngl: tern runs on the CPU; this flag has no "
                          "effect here"),
            std::string::npos)
      << lone.err;
  // --ctx-size is -c: a 2-token context cannot hold the prompt.
  const testing::CliResult ctx = RunTern("generate " + Model() + common + " --ctx-size 2");
  EXPECT_EQ(ctx.exit_code, 1);
  EXPECT_NE(ctx.err.find("longer than the context of 2 tokens"), std::string::npos) << ctx.err;
  ExpectOneLineError(RunTern("generate -m " + Model() + " " + Model() + common), "tern generate: ",
                     "both -m/--model and the argument");
}

TEST(FlagsCliTest, VersionNamesBuildAndKernels) {
  SKIP_WITHOUT_BINARY();
  const testing::CliResult r = RunTern("--version");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(std::regex_search(r.out, std::regex("^tern [0-9]+\\.[0-9]+\\.[0-9]+\n"))) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex("\ncommit: +([0-9a-f]{12}|unknown)\n"))) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex("\nbuild: +[A-Za-z]+, [A-Za-z]+ [0-9.]+, C\\+\\+20\n")))
      << r.out;
  EXPECT_NE(r.out.find("kernels:   amx avx512vnni avx2 portable scalar (compiled in)\n"), std::string::npos)
      << r.out;
  // The table the binary reports is the one this CPU and TERN_ISA choose
  // (the binary applies TERN_ISA at start-up; this test process does not).
  EXPECT_NE(r.out.find(std::string("\nactive:    ") +
                       kernels::ChooseKernelTable(EnvSettings::FromProcess().isa).isa),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find(" portable scalar\nactive:"), std::string::npos) << r.out;  // every CPU runs these
  EXPECT_EQ(RunTern("-V").out, r.out);
  EXPECT_EQ(RunTern("version").out, r.out);
  const testing::CliResult usage = RunTern("--help");
  EXPECT_NE(usage.out.find("tern --version"), std::string::npos) << usage.out;
}

}  // namespace
}  // namespace tern
