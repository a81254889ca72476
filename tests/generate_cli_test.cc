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
  // The golden ids were made with an f32 KV cache (the default is f16).
  const testing::CliResult r =
      RunTern("generate " + Model() + " -p '' --temp 0 -n 200 --ids --kv-cache-dtype f32");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string golden =
      testing::ReadFileBytes(ModelsDir() + "/golden/stories260K.greedy200.ids");
  EXPECT_EQ(ParseIds(r.out), ParseIds(golden));
  EXPECT_EQ(ParseIds(r.out).size(), 200u);
}

TEST(GenerateCliTest, GreedyTextFromBosMatchesGoldenBytes) {
  SKIP_WITHOUT_MODEL();
  const testing::CliResult r =
      RunTern("generate " + Model() + " --temp 0 -n 200 --kv-cache-dtype f32");
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

TEST(GenerateCliTest, DefaultF16KvCacheGivesTheSameGreedyIds) {
  SKIP_WITHOUT_MODEL();
  const testing::CliResult r = RunTern("generate " + Model() + " --temp 0 -n 200 --ids");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("KV f16"), std::string::npos) << r.err;
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
  // 1 prompt token (BOS) + 15 generated tokens = the context of 16, the
  // engine's max_model_len (prompt + output, as the server counts it).
  EXPECT_EQ(ParseIds(r.out).size(), 15u);
  EXPECT_NE(r.err.find("context full"), std::string::npos) << r.err;
  // -n that fits exactly ends the run by -n, not by the context.
  const testing::CliResult exact =
      RunTern("generate " + Model() + " --temp 0 -n 15 --ids --ignore-eos --ctx 16");
  ASSERT_EQ(exact.exit_code, 0) << exact.err;
  EXPECT_EQ(exact.out, r.out);
  EXPECT_EQ(exact.err.find("context full"), std::string::npos) << exact.err;
}

TEST(GenerateCliTest, PromptThatFillsTheContextIsAnError) {
  SKIP_WITHOUT_MODEL();
  // BOS + 4 tokens: nothing left of a 5-token context.
  const testing::CliResult r =
      RunTern("generate " + Model() + " --ctx 5 -p 'Once upon a time'");
  ExpectOneLineError(r, "fills the context of 5 tokens");
}

TEST(GenerateCliTest, SameIdsAsTheSameRequestThroughBatch) {
  SKIP_WITHOUT_MODEL();
  // One engine behind both: sampled (seeded) ids agree token for token.
  const testing::CliResult gen = RunTern(
      "generate " + Model() + " -p 'Once upon a time' -n 40 --ids --temp 0.8 --seed 11");
  ASSERT_EQ(gen.exit_code, 0) << gen.err;
  testing::TempDir dir;
  ASSERT_TRUE(testing::WriteFileBytes(
      dir.File("in.jsonl"), "{\"prompt\": \"Once upon a time\", \"max_tokens\": 40, "
                            "\"temperature\": 0.8, \"seed\": 11}\n"));
  const testing::CliResult batch = RunTern("batch " + Model() + " -i " +
                                           ShellQuote(dir.File("in.jsonl")) + " -o " +
                                           ShellQuote(dir.File("out.jsonl")));
  ASSERT_EQ(batch.exit_code, 0) << batch.err;
  const std::string out = testing::ReadFileBytes(dir.File("out.jsonl"));
  const size_t at = out.find("\"token_ids\":[");
  ASSERT_NE(at, std::string::npos) << out;
  std::string ids = out.substr(at + 13, out.find(']', at) - at - 13);
  for (char& c : ids) c = c == ',' ? ' ' : c;
  EXPECT_EQ(ParseIds(gen.out), ParseIds(ids));
}

TEST(GenerateCliTest, PromptLongerThanContextIsAnError) {
  SKIP_WITHOUT_MODEL();
  const testing::CliResult r = RunTern(
      "generate " + Model() + " --ctx 8 -p 'Once upon a time there was a little girl named Lily'");
  ExpectOneLineError(r, "longer than the context of 8 tokens");
}

TEST(GenerateCliTest, WithoutNRunsToEndOfTextOrContext) {
  SKIP_WITHOUT_MODEL();
  // Default -n is -1: with --ignore-eos only the context (-c 40) ends it,
  // after 39 tokens past the BOS.
  const testing::CliResult r =
      RunTern("generate " + Model() + " --temp 0 --ids --ignore-eos -c 40");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ParseIds(r.out).size(), 39u);
  EXPECT_NE(r.err.find("context full"), std::string::npos) << r.err;
  const testing::CliResult minus_one =
      RunTern("generate " + Model() + " --temp 0 --ids --ignore-eos -c 40 -n -1");
  EXPECT_EQ(minus_one.out, r.out);
}

TEST(GenerateCliTest, StopStringCutsTheOutput) {
  SKIP_WITHOUT_MODEL();
  const std::string args = "generate " + Model() + " -p 'Once upon a time' --temp 0 -n 30";
  const testing::CliResult full = RunTern(args);
  ASSERT_EQ(full.exit_code, 0) << full.err;
  const size_t at = full.out.find(" girl");
  ASSERT_NE(at, std::string::npos) << full.out;
  const testing::CliResult cut = RunTern(args + " --stop ' girl' --stop 'no such text'");
  ASSERT_EQ(cut.exit_code, 0) << cut.err;
  EXPECT_EQ(cut.out, full.out.substr(0, at));
  EXPECT_NE(cut.err.find("stopped: --stop string"), std::string::npos) << cut.err;
  // A stop string that never appears changes nothing.
  const testing::CliResult none = RunTern(args + " --stop 'no such text'");
  EXPECT_EQ(none.out, full.out);
}

TEST(GenerateCliTest, PromptFromFileAndStdinEqualsPromptFlag) {
  SKIP_WITHOUT_MODEL();
  const std::string prompt = "Once upon a time, there was a dog";
  const std::string args = "generate " + Model() + " --temp 0 -n 24 --ids";
  const testing::CliResult flag = RunTern(args + " -p " + ShellQuote(prompt));
  ASSERT_EQ(flag.exit_code, 0) << flag.err;
  ASSERT_EQ(ParseIds(flag.out).size(), 24u) << flag.out;
  testing::TempDir dir;
  ASSERT_TRUE(testing::WriteFileBytes(dir.File("prompt.txt"), prompt));
  const testing::CliResult file = RunTern(args + " -f " + ShellQuote(dir.File("prompt.txt")));
  ASSERT_EQ(file.exit_code, 0) << file.err;
  EXPECT_EQ(file.out, flag.out);
  const testing::CliResult stdin_prompt = RunTern(args + " -p -", prompt);
  ASSERT_EQ(stdin_prompt.exit_code, 0) << stdin_prompt.err;
  EXPECT_EQ(stdin_prompt.out, flag.out);
}

TEST(GenerateCliTest, ChatTemplateRendersOneUserTurn) {
  SKIP_WITHOUT_MODEL();
  const std::string args = "generate " + Model() + " --temp 0 -n 24 --ids";
  const testing::CliResult chat = RunTern(
      args + " --chat-template chatml --system 'You tell stories.' -p 'A story about a cat'");
  ASSERT_EQ(chat.exit_code, 0) << chat.err;
  EXPECT_FALSE(ParseIds(chat.out).empty()) << chat.out;
  // The same text written out by hand as a plain prompt gives the same tokens.
  testing::TempDir dir;
  ASSERT_TRUE(testing::WriteFileBytes(
      dir.File("rendered.txt"),
      "<|im_start|>system\nYou tell stories.<|im_end|>\n<|im_start|>user\nA story about a "
      "cat<|im_end|>\n<|im_start|>assistant\n"));
  const testing::CliResult plain = RunTern(args + " -f " + ShellQuote(dir.File("rendered.txt")));
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(chat.out, plain.out);
  auto prompt_tokens = [](const std::string& err) {
    const size_t at = err.find("prompt: ");
    return at == std::string::npos ? std::string() : err.substr(at, err.find(" tokens", at) - at);
  };
  EXPECT_FALSE(prompt_tokens(chat.err).empty()) << chat.err;
  EXPECT_EQ(prompt_tokens(chat.err), prompt_tokens(plain.err));
}

TEST(GenerateCliTest, SystemWithoutAnyTemplateIsAnError) {
  SKIP_WITHOUT_MODEL();
  // stories260K has no tokenizer.chat_template.
  const testing::CliResult r = RunTern("generate " + Model() + " --system hi -p hello");
  ExpectOneLineError(r, "--chat-template");
}

TEST(GenerateCliTest, ContextAboveTheTrainedOneIsRefused) {
  SKIP_WITHOUT_MODEL();
  const testing::CliResult r = RunTern("generate " + Model() + " -c 100000 -p hi");
  ExpectOneLineError(r, "-c 100000 exceeds the model's context length 2048");
}

TEST(GenerateCliTest, OutOfRangeNumbersNameTheirFlag) {
  SKIP_WITHOUT_BINARY();
  const std::pair<const char*, const char*> cases[] = {
      {"-n 0", "-n must be"},           {"-n -5", "-n must be"},
      {"-c 0", "-c must be"},           {"-c -3", "-c must be"},
      {"--temp -1", "--temp must be"},  {"--top-k -1", "--top-k must be"},
      {"--top-p 0", "--top-p must be"}, {"--top-p 1.5", "--top-p must be"},
      {"--min-p 2", "--min-p must be"}, {"--repeat-penalty 0", "--repeat-penalty must be"},
      {"--presence-penalty 3", "--presence-penalty must be"},
      {"--frequency-penalty -3", "--frequency-penalty must be"},
      {"--seed -2", "--seed must be"},  {"-t -2", "-t/--threads must be"},
      {"--stop ''", "--stop"},          {"--ids --stop x", "--ids"},
  };
  for (const auto& [flags, needle] : cases) {
    SCOPED_TRACE(flags);
    const testing::CliResult r = RunTern(std::string("generate -m x.gguf -p hi ") + flags);
    ExpectOneLineError(r, needle);
  }
}

TEST(GenerateCliTest, HelpStatesTheDefaults) {
  SKIP_WITHOUT_BINARY();
  const testing::CliResult r = RunTern("generate --help");
  ASSERT_EQ(r.exit_code, 0);
  for (const char* text : {"temperature (default 1;", "(default 0 = off)", "(default 1 = off)",
                           "default -1 = until end of text or context", "(default f16)",
                           "--temp 0.8 --top-k 40 --top-p 0.95 --min-p 0.05", "--stop",
                           "-f, --file", "--chat-template", "--system"}) {
    EXPECT_NE(r.out.find(text), std::string::npos) << text;
  }
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
