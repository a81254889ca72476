// `tern generate --kv-eviction streaming`: generation goes on past the
// context with a bounded KV (the engine's streaming eviction: sink blocks +
// recent window), says how many tokens were evicted; without it generation
// stops when the context is full.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "tests/cli_util.h"

namespace tern::testing {
namespace {

using ::testing::HasSubstr;

TEST(StreamingCliTest, GeneratePastTheContextWithStreamingEviction) {
  SKIP_WITHOUT_MODEL();
  const std::string m = ModelsDir() + "/stories260K.gguf";
  CliResult r = RunTern("generate -m " + m +
                        " -p 'Once upon a time' -c 64 --ignore-eos -n 600 --temp 0 -t 1 "
                        "--kv-eviction streaming --kv-sink-tokens 4 --kv-window 24");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("generated: 600 tokens"));
  // 5 prompt tokens + 599 computed outputs (the last is only sampled) in a
  // KV of 64 positions, blocks of 16: the sinks are one block (4 rounded up),
  // and each eviction drops one block (16 tokens), which leaves 48 >= 16 + 24.
  // The first comes with token 65, then every 16 tokens: 34 of them by token
  // 604.
  EXPECT_THAT(r.err, HasSubstr("context: 544 tokens evicted (streaming: 16 sink tokens + 24 recent kept)"));
  EXPECT_GT(r.out.size(), 1000u);

  r = RunTern("generate -m " + m + " -p 'Once upon a time' -c 64 --ignore-eos -n 600 --temp 0 -t 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("(stopped: context full)"));
}

TEST(StreamingCliTest, BadEvictionFlagsAreNamed) {
  SKIP_WITHOUT_MODEL();
  const std::string m = ModelsDir() + "/stories260K.gguf";
  CliResult r = RunTern("generate -m " + m + " -p hi -c 64 --kv-eviction lru");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("--kv-eviction must be none or streaming, got 'lru'"));
  r = RunTern("generate -m " + m + " -p hi -c 64 --kv-eviction streaming --kv-window 64");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("--kv-sink-tokens 4 (16 as whole blocks of 16) + --kv-window 64 + "
                               "one block must fit max_model_len 64"));
}

TEST(StreamingCliTest, PromptLongerThanTheContextIsEvictedAsItPrefills) {
  SKIP_WITHOUT_MODEL();
  const std::string m = ModelsDir() + "/stories260K.gguf";
  std::string prompt;
  for (int i = 0; i < 8; ++i) prompt += "Once upon a time there was a little girl named Lily. ";
  CliResult r = RunTern("generate -m " + m + " -p " + ShellQuote(prompt) +
                        " -c 64 -n 20 --ignore-eos --temp 0 -t 1 --kv-eviction streaming");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("generated: 20 tokens"));
  EXPECT_THAT(r.err, ::testing::Not(HasSubstr("context: 0 tokens evicted")));
  // Without eviction the same prompt is refused.
  r = RunTern("generate -m " + m + " -p " + ShellQuote(prompt) + " -c 64 -n 20");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("longer than the context of 64 tokens"));
}

TEST(StreamingCliTest, PerplexityAsOneStreamWithSinks) {
  SKIP_WITHOUT_MODEL();
  const std::string m = ModelsDir() + "/stories260K.gguf";
  const std::string text = ModelsDir() + "/text/tinystories_sample.txt";
  const CliResult r = RunTern("perplexity -m " + m + " -f " + text +
                              " --ctx 128 --kv-eviction streaming --kv-sink-tokens 4 -t 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("ppl = "));
  EXPECT_THAT(r.err, HasSubstr("4 sink tokens + 64 recent kept at each eviction"));
}

}  // namespace
}  // namespace tern
