// Scheduler with streaming KV eviction (fake runner): every scheduled chunk
// stays within max_model_len KV positions, the scheduler's and the KV
// manager's invariants hold every step through evictions and preemptions,
// and requests run to max_tokens past max_model_len.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "engine/fake_model_runner.h"
#include "engine/scheduler.h"

namespace tern {
namespace {

TEST(StreamingEvictionSchedulerTest, ChunksStayWithinMaxModelLenThroughEvictionsAndPreemptions) {
  constexpr int32_t kBlockSize = 4, kMaxLen = 24, kBlocks = 14;
  SchedulerConfig config;
  config.max_model_len = kMaxLen;
  config.max_num_seqs = 4;
  auto kv = std::make_unique<KvCacheManager>(kBlocks, kBlockSize, /*enable_prefix_caching=*/true);
  kv->SetStreamingEviction(/*sink_tokens=*/4, /*window_tokens=*/8, kMaxLen);
  config.max_num_batched_tokens = kv->MaxStreamingChunk();  // as the engine sets it
  Scheduler scheduler(config, std::move(kv));
  FakeModelRunner runner(kBlocks, kBlockSize, 97);
  std::vector<int32_t> shared_prompt;
  for (int i = 0; i < 40; ++i) shared_prompt.push_back(3 + i % 11);
  for (int i = 0; i < 4; ++i) {
    SamplingParams p;
    p.max_tokens = 80;
    p.seed = (uint64_t)i + 1;
    p.ignore_eos = true;
    // Prompts of 40 tokens (longer than max_model_len), two of them equal.
    std::vector<int32_t> prompt = shared_prompt;
    if (i >= 2) prompt[39] = 50 + i;
    scheduler.AddRequest(std::make_unique<Request>("r" + std::to_string(i), prompt, p, "",
                                                   Clock::now()));
  }
  std::map<std::string, int32_t> generated;
  size_t num_moves = 0;
  for (int step = 0; step < 5000 && scheduler.HasWork(); ++step) {
    SchedulerOutput out = scheduler.Schedule(Clock::now());
    num_moves += out.kv_moves.size();
    for (const ScheduledSequence& s : out.sequences) {
      ASSERT_LE(s.start_position + (int32_t)s.token_ids.size(), kMaxLen) << s.request_id;
      ASSERT_GE((int32_t)s.block_table.size() * kBlockSize,
                s.start_position + (int32_t)s.token_ids.size());
    }
    ModelRunnerOutput result = runner.Execute(out);
    for (const RequestDelta& d : scheduler.UpdateFromOutput(out, result, Clock::now())) {
      generated[d.request_id] += (int32_t)d.output.new_token_ids.size();
      if (d.output.finished) {
        EXPECT_EQ(d.output.finish_reason, FinishReason::kLength);
        EXPECT_GE(d.output.metrics.evicted_tokens, 40 + 79 - kMaxLen) << d.request_id;
      }
    }
    scheduler.CheckInvariants();
  }
  ASSERT_FALSE(scheduler.HasWork());
  for (int i = 0; i < 4; ++i) EXPECT_EQ(generated["r" + std::to_string(i)], 80);
  EXPECT_GT(num_moves, 0u);
  EXPECT_GT(scheduler.stats().num_preemptions_total, 0u);
  EXPECT_EQ(scheduler.kv().num_free_blocks(), kBlocks);
}

}  // namespace
}  // namespace tern
