// `tern generate --kv-eviction streaming`: generation goes on past the
// context with a bounded KV (attention sinks + recent window), says how many
// tokens were evicted; without it generation stops when the context is full.
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
  // 5 prompt tokens + 599 appended outputs (the last is only printed): the
  // first eviction comes at 64 tokens and keeps 28, each one frees 36, so 15
  // of them fit in 604 tokens.
  EXPECT_THAT(r.err, HasSubstr("context: 540 tokens evicted (streaming: 4 sink tokens + 24 recent kept)"));
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
  EXPECT_THAT(r.err, HasSubstr("--kv-sink-tokens 4 + --kv-window 64 must be below the context of 64"));
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
