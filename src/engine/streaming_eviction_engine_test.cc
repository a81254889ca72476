// Streaming KV eviction through the engine (stories260K): a request longer
// than max_model_len completes with bounded KV and reports what it dropped;
// without eviction it is refused as before.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "base/paths.h"
#include "engine/engine.h"
#include "engine/engine_test_util.h"
#include "tokenizer/tokenizer.h"

namespace tern {
namespace {

using namespace engine_test;

EngineConfig StreamingConfig() {
  EngineConfig c;
  c.model_path = ModelPath();
  c.num_threads = 1;
  c.max_model_len = 64;
  c.block_size = 16;
  c.kv_cache_memory_bytes = 16 << 20;
  c.kv_eviction = KvEviction::kStreaming;
  c.kv_sink_tokens = 4;
  c.kv_window_tokens = 24;
  return c;
}

Outcome Drain(OutputChannel& ch) { return engine_test::Drain(ch, std::chrono::seconds(120)); }

class StreamingEvictionEngineTest : public StoriesModelTest {
 protected:  Ids Story(const Tokenizer& tok, size_t n) {
    std::ifstream in(ModelsDir() + "/text/tinystories_sample.txt");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    Ids all = tok.Encode(text, true, false);
    all.resize(std::min(all.size(), n));
    return all;
  }
};

TEST_F(StreamingEvictionEngineTest, RequestLongerThanTheKvCompletesWithBoundedKv) {
  auto engine = Engine::Create(StreamingConfig());
  ASSERT_TRUE(engine.ok()) << engine.status().message();
  auto ch = (*engine)->AddRequest(Greedy({1}, 400));  // 400 tokens through 64 positions
  ASSERT_TRUE(ch.ok()) << ch.status().message();
  const Outcome o = Drain(**ch);
  EXPECT_EQ(o.reason, FinishReason::kLength);
  EXPECT_EQ(o.tokens.size(), 400u);
  EXPECT_EQ(o.metrics.generated_tokens, 400);
  // 400 tokens computed (the last one sampled is never fed back), at most
  // 64 in the KV: at least 336 dropped, in whole blocks.
  EXPECT_GE(o.metrics.evicted_tokens, 400 - 64);
  EXPECT_EQ(o.metrics.evicted_tokens % 16, 0);
  const EngineStats stats = (*engine)->GetStats();
  EXPECT_EQ(stats.kv_evicted_tokens_total, (uint64_t)o.metrics.evicted_tokens);
  // Never more than max_model_len's blocks held.
  EXPECT_LE(stats.peak_kv_cache_usage * (double)stats.num_kv_blocks, 64.0 / 16 + 1e-9);
}

TEST_F(StreamingEvictionEngineTest, WithoutEvictionTheSameRequestIsRefused) {
  EngineConfig c = StreamingConfig();
  c.kv_eviction = KvEviction::kNone;
  auto engine = Engine::Create(c);
  ASSERT_TRUE(engine.ok()) << engine.status().message();
  auto ch = (*engine)->AddRequest(Greedy({1}, 400));
  ASSERT_FALSE(ch.ok());
  EXPECT_NE(ch.status().message().find("exceeds max_model_len 64"), std::string::npos)
      << ch.status().message();
  // Within the limit it finishes with "length" at max_model_len, nothing evicted.
  auto ok = (*engine)->AddRequest(Greedy({1}, 63));
  ASSERT_TRUE(ok.ok());
  const Outcome o = Drain(**ok);
  EXPECT_EQ(o.reason, FinishReason::kLength);
  EXPECT_EQ(o.metrics.evicted_tokens, 0);
  EXPECT_EQ((*engine)->GetStats().kv_evicted_tokens_total, 0u);
}

TEST_F(StreamingEvictionEngineTest, UntilTheFirstEvictionOutputEqualsFullAttention) {
  // Tokens before the KV first fills see the same context either way.
  EngineConfig full = StreamingConfig();
  full.kv_eviction = KvEviction::kNone;
  full.max_model_len = 256;
  auto a = Engine::Create(full);
  ASSERT_TRUE(a.ok()) << a.status().message();
  auto ch = (*a)->AddRequest(Greedy({1}, 200));
  ASSERT_TRUE(ch.ok());
  const Outcome reference = Drain(**ch);
  auto b = Engine::Create(StreamingConfig());
  ASSERT_TRUE(b.ok());
  ch = (*b)->AddRequest(Greedy({1}, 200));
  ASSERT_TRUE(ch.ok());
  const Outcome streamed = Drain(**ch);
  ASSERT_EQ(streamed.tokens.size(), 200u);
  // Positions 0..63 hold the BOS and the first 63 tokens; the 64th token is
  // sampled from position 63's logits, before any eviction.
  EXPECT_EQ(Ids(streamed.tokens.begin(), streamed.tokens.begin() + 64),
            Ids(reference.tokens.begin(), reference.tokens.begin() + 64));
  EXPECT_GT(streamed.metrics.evicted_tokens, 0);
}

TEST_F(StreamingEvictionEngineTest, LongPromptsAndSharedPrefixesGiveTheSameOutputWithOrWithoutCaching) {
  // Prompts longer than max_model_len (evicted while prefilling), two of
  // them sharing their start: with the prefix cache the second shares the
  // first's blocks and re-rotates copies; outputs equal the uncached run's.
  auto probe = Engine::Create(StreamingConfig());
  ASSERT_TRUE(probe.ok());
  const Ids story = Story((*probe)->tokenizer(), 150);
  ASSERT_EQ(story.size(), 150u);
  probe->reset();
  const std::vector<Ids> prompts = {story, Ids(story.begin(), story.begin() + 120),
                                    Ids(story.begin(), story.begin() + 30)};
  auto run = [&](bool caching) {
    EngineConfig c = StreamingConfig();
    c.enable_prefix_caching = caching;
    c.max_num_batched_tokens = 8;  // small chunks: evictions between them
    auto engine = Engine::Create(c);
    EXPECT_TRUE(engine.ok()) << engine.status().message();
    std::vector<Outcome> out;
    if (!engine.ok()) return out;
    // One at a time, so that the later ones find the first's cached blocks.
    for (const Ids& p : prompts) {
      auto ch = (*engine)->AddRequest(Greedy(p, 40));
      EXPECT_TRUE(ch.ok()) << ch.status().message();
      if (!ch.ok()) return out;
      out.push_back(Drain(**ch));
    }
    return out;
  };
  const std::vector<Outcome> cached = run(true), uncached = run(false);
  ASSERT_EQ(cached.size(), 3u);
  ASSERT_EQ(uncached.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(cached[i].tokens, uncached[i].tokens) << "prompt " << i;
    EXPECT_EQ(cached[i].tokens.size(), 40u);
    EXPECT_EQ(cached[i].metrics.evicted_tokens, uncached[i].metrics.evicted_tokens);
  }
  EXPECT_GT(cached[0].metrics.evicted_tokens, 150 - 64);
  EXPECT_GT(cached[1].metrics.cached_tokens, 0);
}

TEST_F(StreamingEvictionEngineTest, ManyLongRequestsInASmallPoolAllComplete) {
  // 6 requests of 300 tokens, a pool of a few max_model_len sequences:
  // evictions, preemptions and recomputation (evicting again) together.
  EngineConfig c = StreamingConfig();
  c.kv_cache_memory_bytes = 100 << 10;
  c.max_num_seqs = 6;
  auto engine = Engine::Create(c);
  ASSERT_TRUE(engine.ok()) << engine.status().message();
  std::vector<std::shared_ptr<OutputChannel>> channels;
  for (int i = 0; i < 6; ++i) {
    auto ch = (*engine)->AddRequest(Greedy({1, 100 + i}, 300));
    ASSERT_TRUE(ch.ok()) << ch.status().message();
    channels.push_back(*ch);
  }
  for (auto& ch : channels) {
    const Outcome o = Drain(*ch);
    EXPECT_EQ(o.reason, FinishReason::kLength);
    EXPECT_EQ(o.tokens.size(), 300u);
    EXPECT_GE(o.metrics.evicted_tokens, 301 - 64);
  }
  const EngineStats stats = (*engine)->GetStats();
  EXPECT_LT(stats.num_kv_blocks, 6 * 4);  // the six could not all hold 64 positions at once
  EXPECT_GT(stats.num_preemptions_total, 0u);
  EXPECT_GE(stats.kv_evicted_tokens_total, 6u * (301 - 64));
}

TEST_F(StreamingEvictionEngineTest, SinksAndWindowMustFitMaxModelLen) {
  EngineConfig c = StreamingConfig();
  c.kv_window_tokens = 60;
  auto engine = Engine::Create(c);
  ASSERT_FALSE(engine.ok());
  EXPECT_NE(engine.status().message().find("--kv-window 60"), std::string::npos)
      << engine.status().message();
  c = StreamingConfig();
  c.enable_chunked_prefill = false;
  EXPECT_FALSE(Engine::Create(c).ok());
  // Speculative decoding with streaming eviction is not built.
  c = StreamingConfig();
  c.speculative_method = SpecMethod::kNgram;
  c.num_speculative_tokens = 4;
  engine = Engine::Create(c);
  ASSERT_FALSE(engine.ok());
  EXPECT_NE(engine.status().message().find("--speculative-method"), std::string::npos)
      << engine.status().message();
}

}  // namespace
}  // namespace tern
