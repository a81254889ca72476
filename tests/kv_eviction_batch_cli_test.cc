// `tern batch --kv-eviction streaming`: a request longer than --max-model-len
// completes (finish_reason "length" at its max_tokens) with its dropped
// context in "evicted_tokens" and the summary's "kv_evicted_tokens", while
// the KV it holds stays within max_model_len; without the flag the same
// input is refused before anything runs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "base/paths.h"
#include "tests/cli_util.h"

namespace tern::testing {
namespace {

using nlohmann::json;

TEST(KvEvictionBatchCliTest, LongRequestCompletesWithStreamingEvictionAndIsRefusedWithout) {
  SKIP_WITHOUT_MODEL();
  TempDir dir;
  const std::string in = dir.File("in.jsonl"), out = dir.File("out.jsonl"),
                    summary = dir.File("summary.json");
  ASSERT_TRUE(WriteFileBytes(in, "{\"prompt\": \"Once upon a time\", \"max_tokens\": 300, "
                                 "\"temperature\": 0, \"ignore_eos\": true}\n"));
  const std::string common = "batch -m " + DefaultModelPath() + " -i " + in + " -o " +
                             out + " --summary-json " + summary +
                             " --max-model-len 64 --kv-cache-memory 4MiB -t 1";
  CliResult r = RunTern(common);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, ::testing::HasSubstr("exceeds max_model_len 64"));

  r = RunTern(common + " --kv-eviction streaming --kv-sink-tokens 4 --kv-window 24");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, ::testing::HasSubstr("streaming KV eviction"));
  const json line = json::parse(ReadFileBytes(out), nullptr, false);
  ASSERT_FALSE(line.is_discarded()) << ReadFileBytes(out);
  EXPECT_EQ(line["finish_reason"], "length");
  EXPECT_EQ(line["token_ids"].size(), 300u);
  const int evicted = line.value("evicted_tokens", 0);
  const int prompt = line["prompt_tokens"].get<int>();
  // prompt + 299 tokens computed, at most 64 in the KV, dropped in blocks of 16.
  EXPECT_GE(evicted, prompt + 299 - 64);
  EXPECT_EQ(evicted % 16, 0);
  const json s = json::parse(ReadFileBytes(summary), nullptr, false);
  ASSERT_FALSE(s.is_discarded());
  EXPECT_EQ(s["kv_evicted_tokens"].get<int>(), evicted);

  r = RunTern(common + " --kv-eviction sometimes");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, ::testing::HasSubstr("--kv-eviction must be none or streaming"));
  r = RunTern(common + " --kv-eviction streaming --kv-window 60");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, ::testing::HasSubstr("--kv-window 60"));
}

}  // namespace
}  // namespace tern::testing
