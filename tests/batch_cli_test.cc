// End-to-end tests of `tern batch` on stories260K.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "base/paths.h"
#include "tests/cli_util.h"

namespace tern {
namespace {

using json = nlohmann::json;
using tern::testing::CountLines;
using tern::testing::ReadFileBytes;
using tern::testing::RunTern;
using tern::testing::ShellQuote;
using tern::testing::TempDir;
using tern::testing::WriteFileBytes;

class BatchCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (tern::testing::TernBinary().empty()) GTEST_SKIP() << "TERN_BINARY not set (run through ctest)";
    if (!FileExists(DefaultModelPath())) GTEST_SKIP() << "test model missing: " << DefaultModelPath();
  }
  std::string Args(const std::string& input, const std::string& extra = "") {
    return "batch -m " + ShellQuote(DefaultModelPath()) + " -t 1 --kv-cache-memory 16MiB -i " +
           ShellQuote(dir.File(input)) + " -o " + ShellQuote(dir.File("out.jsonl")) + " " + extra;
  }
  std::vector<json> Output() {
    std::vector<json> lines;
    std::istringstream in(ReadFileBytes(dir.File("out.jsonl")));
    std::string line;
    while (std::getline(in, line)) lines.push_back(json::parse(line));
    return lines;
  }
  TempDir dir;
};

TEST_F(BatchCliTest, WritesOneLinePerRequestInInputOrder) {
  std::string input;
  for (int i = 0; i < 12; ++i) {
    input += "{\"id\": \"r" + std::to_string(i) +
             "\", \"prompt\": \"Once upon a time\", \"max_tokens\": " + std::to_string(4 + i) +
             ", \"temperature\": 0, \"ignore_eos\": true}\n";
  }
  input += "\n{\"prompt\": [1, 403, 407], \"max_tokens\": 3, \"temperature\": 0}\n";
  ASSERT_TRUE(WriteFileBytes(dir.File("in.jsonl"), input));
  auto r = RunTern(Args("in.jsonl", "--summary-json " + ShellQuote(dir.File("summary.json"))));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("KV cache: "), std::string::npos) << r.err;
  std::vector<json> out = Output();
  ASSERT_EQ(out.size(), 13u);
  for (int i = 0; i < 12; ++i) {
    EXPECT_EQ(out[i]["id"], "r" + std::to_string(i));
    EXPECT_EQ(out[i]["token_ids"].size(), (size_t)(4 + i));
    EXPECT_EQ(out[i]["finish_reason"], "length");
    EXPECT_TRUE(out[i]["timings"].contains("ttft_ms"));
    // Greedy: every request continues the same prompt the same way.
    const auto& a = out[i]["token_ids"];
    const auto& b = out[11]["token_ids"];
    EXPECT_TRUE(std::equal(a.begin(), a.end(), b.begin()));
  }
  EXPECT_EQ(out[0]["text"].get<std::string>().rfind(out[1]["text"].get<std::string>().substr(0, 3), 0), 0u);
  EXPECT_EQ(out[12]["id"], "line-14");
  EXPECT_EQ(out[12]["prompt_tokens"], 3);
  // Golden greedy continuation of BOS: 403 407 261 378 ...
  EXPECT_EQ(out[12]["token_ids"], json({261, 378, 432}));
  // Shared prompts hit the prefix cache after the first request.
  json summary = json::parse(ReadFileBytes(dir.File("summary.json")));
  for (const char* key : {"requests_per_s", "output_tokens_per_s", "ttft_ms", "tpot_ms", "itl_ms",
                          "peak_kv_usage", "num_preemptions", "prefix_cache_hit_rate"}) {
    EXPECT_TRUE(summary.contains(key)) << key;
  }
  EXPECT_TRUE(summary["ttft_ms"].contains("p99"));
  EXPECT_GT(summary["peak_kv_usage"].get<double>(), 0.0);
}

// The step log: TERN_STEP_LOG is read once at start-up into the engine's
// config; --step-log wins over it. One JSON line per engine step.
TEST_F(BatchCliTest, StepLogFromTheEnvironmentOrTheFlagWhichWins) {
  ASSERT_TRUE(WriteFileBytes(dir.File("in.jsonl"),
                             "{\"prompt\": \"Once upon a time\", \"max_tokens\": 5, \"temperature\": 0}\n"));
  auto lines = [&](const std::string& name) {
    std::istringstream in(ReadFileBytes(dir.File(name)));
    int n = 0;
    for (std::string line; std::getline(in, line);) {
      EXPECT_NE(line.find("\"scheduled_tokens\":"), std::string::npos) << line;
      ++n;
    }
    return n;
  };
  ASSERT_EQ(setenv("TERN_STEP_LOG", dir.File("env.jsonl").c_str(), 1), 0);
  auto r = RunTern(Args("in.jsonl"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("settings from the environment: TERN_STEP_LOG="), std::string::npos) << r.err;
  const int env_lines = lines("env.jsonl");
  EXPECT_GE(env_lines, 5);  // a prefill step, then a step per further token
  r = RunTern(Args("in.jsonl", "--step-log " + ShellQuote(dir.File("flag.jsonl"))));
  unsetenv("TERN_STEP_LOG");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(lines("flag.jsonl"), env_lines);
  EXPECT_EQ(lines("env.jsonl"), env_lines) << "the flag wins: nothing more in the environment's file";
}

TEST_F(BatchCliTest, StopStringCutsTheTextAndReportsStop) {
  // Find the greedy text first, then stop on a word inside it.
  ASSERT_TRUE(WriteFileBytes(dir.File("a.jsonl"),
                             "{\"prompt\": \"Once upon a time\", \"max_tokens\": 40, "
                             "\"temperature\": 0, \"ignore_eos\": true}\n"));
  auto r = RunTern(Args("a.jsonl"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string text = Output()[0]["text"];
  ASSERT_GT(text.size(), 20u) << text;
  const std::string stop = text.substr(10, 4);
  json line = {{"prompt", "Once upon a time"}, {"max_tokens", 40}, {"temperature", 0},
               {"ignore_eos", true}, {"stop", json::array({"zzzz", stop})}};
  ASSERT_TRUE(WriteFileBytes(dir.File("b.jsonl"), line.dump() + "\n"));
  r = RunTern(Args("b.jsonl"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json out = Output()[0];
  EXPECT_EQ(out["finish_reason"], "stop");
  EXPECT_EQ(out["text"], text.substr(0, text.find(stop)));
  EXPECT_LT(out["token_ids"].size(), 40u);
}

TEST_F(BatchCliTest, BadLineIsAnErrorNamingTheLine) {
  struct Case {
    std::string second_line;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {"{\"prompt\": \"hi\"", "line 2: invalid JSON"},
      {"{\"prompt\": 5}", "line 2: 'prompt' must be a string or an array"},
      {"{\"prompt\": \"hi\", \"max_tokens\": \"ten\"}", "line 2: 'max_tokens' must be an integer"},
      {"{\"prompt\": \"hi\", \"temprature\": 0}", "line 2: unknown field 'temprature'"},
      {"{\"prompt\": \"hi\", \"max_tokens\": 100000}", "exceeds max_model_len"},
      {"{\"prompt\": [1, 99999]}", "line 2: prompt token id 99999"},
      {"{\"id\": \"a\", \"prompt\": \"x\"}", "line 2: duplicate id 'a'"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.second_line);
    ASSERT_TRUE(WriteFileBytes(dir.File("bad.jsonl"), "{\"id\": \"a\", \"prompt\": \"ok\"}\n" +
                                                         c.second_line + "\n"));
    auto r = RunTern(Args("bad.jsonl"));
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("tern batch: "), 0u) << r.err;
  }
}

TEST_F(BatchCliTest, SeededSamplingIsReproducibleAndTinyKvStillCompletes) {
  std::string input;
  for (int i = 0; i < 8; ++i) {
    input += "{\"prompt\": \"The cat\", \"max_tokens\": 60, \"temperature\": 0.8, \"top_p\": 0.9, "
             "\"seed\": " + std::to_string(i) + ", \"ignore_eos\": true}\n";
  }
  ASSERT_TRUE(WriteFileBytes(dir.File("s.jsonl"), input));
  auto r = RunTern(Args("s.jsonl"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<json> first = Output();
  // A KV budget of 2 sequences of max_model_len 128 forces preemption.
  r = RunTern(Args("s.jsonl", "--max-model-len 128 --block-size 4 --kv-cache-memory 163840 "
                              "--max-num-batched-tokens 7 --summary-json " +
                                  ShellQuote(dir.File("sum.json"))));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<json> second = Output();
  ASSERT_EQ(first.size(), 8u);
  ASSERT_EQ(second.size(), 8u);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(first[i]["token_ids"], second[i]["token_ids"]) << i;
  EXPECT_NE(first[0]["token_ids"], first[1]["token_ids"]);
  json summary = json::parse(ReadFileBytes(dir.File("sum.json")));
  EXPECT_GT(summary["num_preemptions"].get<uint64_t>(), 0u);
}

TEST_F(BatchCliTest, InvalidUtf8TextIsWrittenNotACrash) {
  // A prompt ending in the lone byte token <0xE2> (id 3 + 0xE2 in the
  // stories260K vocab): the output text starts with an incomplete UTF-8
  // sequence, which must come out as U+FFFD, with the exact ids kept.
  ASSERT_TRUE(WriteFileBytes(dir.File("u.jsonl"),
                             "{\"prompt\": [1, 229], \"max_tokens\": 3, \"temperature\": 0, "
                             "\"ignore_eos\": true}\n"));
  auto r = RunTern(Args("u.jsonl"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<json> out = Output();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0]["token_ids"].size(), 3u);
  EXPECT_EQ(out[0]["finish_reason"], "length");
}

TEST_F(BatchCliTest, FileWideFlagsFillOnlyTheFieldsALineLeavesOut) {
  // "plain" leaves every sampling field out; "own" sets them all.
  const std::string input =
      "{\"id\": \"plain\", \"prompt\": \"Once upon a time\", \"ignore_eos\": true}\n"
      "{\"id\": \"own\", \"prompt\": \"Once upon a time\", \"ignore_eos\": true, "
      "\"max_tokens\": 9, \"temperature\": 1.0, \"top_k\": 0, \"top_p\": 1, \"min_p\": 0, "
      "\"seed\": 3}\n"
      "{\"id\": \"greedy\", \"prompt\": \"Once upon a time\", \"ignore_eos\": true, "
      "\"max_tokens\": 5, \"temperature\": 0}\n";
  ASSERT_TRUE(WriteFileBytes(dir.File("in.jsonl"), input));
  // No flags: the table's max_tokens (16).
  auto r = RunTern(Args("in.jsonl"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<json> table = Output();
  ASSERT_EQ(table.size(), 3u);
  EXPECT_EQ(table[0]["token_ids"].size(), 16u);
  EXPECT_EQ(table[1]["token_ids"].size(), 9u);
  // File-wide flags: "plain" is greedy with 5 tokens, "own" is unchanged.
  r = RunTern(Args("in.jsonl", "--max-tokens 5 --temp 0 --top-k 3 --top-p 0.5 --min-p 0.2 --seed 11"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<json> flagged = Output();
  ASSERT_EQ(flagged.size(), 3u);
  EXPECT_EQ(flagged[0]["token_ids"].size(), 5u);
  EXPECT_EQ(flagged[0]["token_ids"], flagged[2]["token_ids"]);
  EXPECT_EQ(flagged[1]["token_ids"], table[1]["token_ids"]);
}

TEST_F(BatchCliTest, FileWideSeedAndTemperatureEqualTheLineFields) {
  const std::string fields =
      "{\"prompt\": \"The cat\", \"ignore_eos\": true, \"max_tokens\": 12, "
      "\"temperature\": 0.9, \"seed\": 5}\n";
  const std::string bare = "{\"prompt\": \"The cat\", \"ignore_eos\": true}\n";
  ASSERT_TRUE(WriteFileBytes(dir.File("fields.jsonl"), fields));
  ASSERT_TRUE(WriteFileBytes(dir.File("bare.jsonl"), bare + bare));
  auto r = RunTern(Args("fields.jsonl"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json expected = Output()[0]["token_ids"];
  ASSERT_EQ(expected.size(), 12u);
  r = RunTern(Args("bare.jsonl", "--max-tokens 12 --temperature 0.9 --seed 5"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<json> out = Output();
  ASSERT_EQ(out.size(), 2u);
  // Every line without a seed gets the file-wide one.
  EXPECT_EQ(out[0]["token_ids"], expected);
  EXPECT_EQ(out[1]["token_ids"], expected);
}

// Mistakes in flags, paths and lines show before the model loads: the model
// path here does not exist, and the error is still about the input.
TEST(BatchCliChecksTest, InputAndFlagErrorsComeBeforeTheModelLoads) {
  if (tern::testing::TernBinary().empty()) GTEST_SKIP() << "TERN_BINARY not set (run through ctest)";
  TempDir dir;
  ASSERT_TRUE(WriteFileBytes(dir.File("ok.jsonl"), "{\"prompt\": \"hi\"}\n"));
  ASSERT_TRUE(WriteFileBytes(dir.File("bad.jsonl"), "{\"prompt\": \"hi\"}\n{\"prompt\": 1.5}\n"));
  const std::string model = "-m /nonexistent/model.gguf ";
  const std::string out = " -o " + ShellQuote(dir.File("out.jsonl"));
  struct Case {
    std::string args;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {"-i /nonexistent/in.jsonl" + out, "input /nonexistent/in.jsonl: No such file or directory"},
      {"-i " + ShellQuote(dir.path()) + out, "is a folder, not a file"},
      {"-i " + ShellQuote(dir.File("ok.jsonl")) + " -o /nonexistent/dir/out.jsonl",
       "-o /nonexistent/dir/out.jsonl: folder /nonexistent/dir does not exist"},
      {"-i " + ShellQuote(dir.File("ok.jsonl")) + " -o " + ShellQuote(dir.File("ok.jsonl")),
       "is the input file"},
      {"-i " + ShellQuote(dir.File("ok.jsonl")) + out + " --summary-json /nonexistent/dir/s.json",
       "--summary-json /nonexistent/dir/s.json: folder /nonexistent/dir does not exist"},
      {"-i " + ShellQuote(dir.File("bad.jsonl")) + out, "line 2: 'prompt' must be a string or an array"},
      {"-i " + ShellQuote(dir.File("ok.jsonl")) + out + " --top-p 0", "--top-p must be in (0, 1]"},
      {"-i " + ShellQuote(dir.File("ok.jsonl")) + out + " --max-tokens 0", "--max-tokens must be >= 1"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    auto r = RunTern("batch " + model + c.args);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(CountLines(r.err), 1) << r.err;
    EXPECT_EQ(r.err.rfind("tern batch: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("model.gguf"), std::string::npos) << r.err;
  }
  // With a good input, the model is what fails.
  auto r = RunTern("batch " + model + "-i " + ShellQuote(dir.File("ok.jsonl")) + out);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("/nonexistent/model.gguf"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace tern
