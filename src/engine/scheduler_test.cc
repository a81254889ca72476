#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <map>
#include <numeric>

#include "engine/engine_core.h"
#include "engine/fake_model_runner.h"

namespace tern {
namespace {

using Ids = std::vector<int32_t>;
constexpr int32_t kVocab = 64;

Ids Range(int32_t begin, int32_t n) {
  Ids v(n);
  std::iota(v.begin(), v.end(), begin);
  return v;
}

struct Harness {
  Harness(SchedulerConfig config, int32_t num_blocks, int32_t block_size, bool caching) {
    auto sched = std::make_unique<Scheduler>(
        config, std::make_unique<KvCacheManager>(num_blocks, block_size, caching));
    scheduler = sched.get();
    auto fake = std::make_unique<FakeModelRunner>(num_blocks, block_size, kVocab);
    runner = fake.get();
    core = std::make_unique<EngineCore>(std::move(sched), std::move(fake));
  }

  void Add(const std::string& id, Ids prompt, int32_t max_tokens, uint64_t seed = 1,
           std::string salt = "") {
    SamplingParams p;
    p.max_tokens = max_tokens;
    p.seed = seed;
    p.ignore_eos = true;
    Add(id, std::move(prompt), p, std::move(salt));
  }
  void Add(const std::string& id, Ids prompt, SamplingParams p, std::string salt = "") {
    core->AddRequest(std::make_unique<Request>(id, std::move(prompt), p, std::move(salt),
                                               Clock::now()));
    scheduler->CheckInvariants();
  }

  // One step; records outputs. Returns the tokens scheduled per request.
  std::map<std::string, int32_t> Step() {
    std::map<std::string, int32_t> scheduled;
    SchedulerOutput out = scheduler->Schedule(Clock::now());
    for (const auto& s : out.sequences) scheduled[s.request_id] = (int32_t)s.token_ids.size();
    // The pieces of EngineCore::Step, to see what was scheduled.
    ModelRunnerOutput result = runner->Execute(out);
    for (RequestDelta& d : scheduler->UpdateFromOutput(out, result, Clock::now())) Record(d);
    scheduler->CheckInvariants();
    return scheduled;
  }
  void RunToEnd(int max_steps = 10000) {
    for (int i = 0; i < max_steps && scheduler->HasWork(); ++i) {
      for (RequestDelta& d : core->Step()) Record(d);
      scheduler->CheckInvariants();
    }
    ASSERT_FALSE(scheduler->HasWork());
  }
  void Record(RequestDelta& d) {
    Ids& o = outputs[d.request_id];
    o.insert(o.end(), d.output.new_token_ids.begin(), d.output.new_token_ids.end());
    if (d.output.finished) finished[d.request_id] = d.output;
  }
  Scheduler* scheduler = nullptr;
  FakeModelRunner* runner = nullptr;  // owned by core
  std::unique_ptr<EngineCore> core;
  std::map<std::string, Ids> outputs;
  std::map<std::string, RequestOutput> finished;
};

SchedulerConfig Config(int32_t budget = 512, int32_t max_model_len = 256) {
  SchedulerConfig c;
  c.max_num_batched_tokens = budget;
  c.max_model_len = max_model_len;
  return c;
}

std::unique_ptr<Harness> MakeManual(SchedulerConfig config, int32_t num_blocks,
                                    int32_t block_size, bool caching = false) {
  return std::make_unique<Harness>(config, num_blocks, block_size, caching);
}

// The output of one request run alone with plenty of KV.
Ids RunAlone(const Ids& prompt, const SamplingParams& p, int32_t block_size,
             int32_t max_model_len, const std::vector<int32_t>& eog = {}) {
  SchedulerConfig c = Config(512, max_model_len);
  c.eog_token_ids = eog;
  Harness h(c, (max_model_len + block_size - 1) / block_size + 1, block_size, false);
  h.Add("alone", prompt, p);
  h.RunToEnd();
  return h.outputs["alone"];
}

TEST(SchedulerTest, PrefillThenDecodesUntilMaxTokens) {
  auto h = MakeManual(Config(), 8, 4);
  h->Add("a", Range(10, 5), 3);
  EXPECT_EQ(h->Step(), (std::map<std::string, int32_t>{{"a", 5}}));
  EXPECT_EQ(h->Step(), (std::map<std::string, int32_t>{{"a", 1}}));
  EXPECT_EQ(h->Step(), (std::map<std::string, int32_t>{{"a", 1}}));
  ASSERT_TRUE(h->finished.count("a"));
  EXPECT_EQ(h->finished["a"].finish_reason, FinishReason::kLength);
  EXPECT_EQ(h->outputs["a"].size(), 3u);
  EXPECT_EQ(h->finished["a"].metrics.prompt_tokens, 5);
  EXPECT_EQ(h->finished["a"].metrics.generated_tokens, 3);
  EXPECT_EQ(h->finished["a"].metrics.itl_s.size(), 2u);
  EXPECT_EQ(h->scheduler->kv().num_free_blocks(), 8);
}

TEST(SchedulerTest, ChunksLongPromptUnderTheTokenBudget) {
  auto h = MakeManual(Config(4), 8, 4);
  h->Add("a", Range(10, 10), 2);
  EXPECT_EQ(h->Step()["a"], 4);
  EXPECT_TRUE(h->outputs["a"].empty());
  EXPECT_EQ(h->Step()["a"], 4);
  EXPECT_EQ(h->Step()["a"], 2);
  EXPECT_EQ(h->outputs["a"].size(), 1u);
  EXPECT_EQ(h->Step()["a"], 1);
  EXPECT_TRUE(h->finished.count("a"));
}

TEST(SchedulerTest, DecodesKeepRunningWhileALongPromptIsChunked) {
  auto h = MakeManual(Config(4), 16, 4);
  h->Add("a", Range(0, 2), 10);
  h->Step();  // a prefilled, now decoding
  h->Add("b", Range(50, 20), 2);
  // b may only take what a's decode leaves: 3 per step.
  auto s = h->Step();
  EXPECT_EQ(s["a"], 1);
  EXPECT_EQ(s["b"], 3);
  s = h->Step();
  EXPECT_EQ(s["a"], 1);
  EXPECT_EQ(s["b"], 3);
}

TEST(SchedulerTest, LimitsPartialPrefillsAtOnce) {
  SchedulerConfig c = Config(8);
  c.max_num_partial_prefills = 1;
  auto h = MakeManual(c, 32, 4);
  h->Add("a", Range(0, 20), 1);
  h->Add("b", Range(100, 20), 1);
  auto s = h->Step();
  EXPECT_EQ(s, (std::map<std::string, int32_t>{{"a", 8}}));
  s = h->Step();
  EXPECT_EQ(s, (std::map<std::string, int32_t>{{"a", 8}}));
  // a finishes its prompt (4 tokens); b may start its partial chunk.
  s = h->Step();
  EXPECT_EQ(s, (std::map<std::string, int32_t>{{"a", 4}, {"b", 4}}));

  c.max_num_partial_prefills = 2;
  auto h2 = MakeManual(c, 32, 4);
  h2->Add("a", Range(0, 20), 1);
  h2->Add("b", Range(100, 20), 1);
  // Two prompts advance together, each capped at half the budget.
  EXPECT_EQ(h2->Step(), (std::map<std::string, int32_t>{{"a", 4}, {"b", 4}}));
  EXPECT_EQ(h2->Step(), (std::map<std::string, int32_t>{{"a", 4}, {"b", 4}}));
}

TEST(SchedulerTest, WithoutChunkingAPromptIsScheduledWholeOrNotAtAll) {
  SchedulerConfig c = Config(4, 32);
  c.enable_chunked_prefill = false;
  auto h = MakeManual(c, 32, 4);
  EXPECT_EQ(h->scheduler->config().max_num_batched_tokens, 32);  // raised to max_model_len
  h->Add("a", Range(0, 20), 2);
  h->Add("b", Range(100, 12), 2);
  // 20 + 12 = 32 fits the raised budget exactly.
  EXPECT_EQ(h->Step(), (std::map<std::string, int32_t>{{"a", 20}, {"b", 12}}));
  h->Add("c", Range(200, 31), 1);
  // 2 decodes leave 30 < 31: c waits whole.
  EXPECT_EQ(h->Step(), (std::map<std::string, int32_t>{{"a", 1}, {"b", 1}}));
}

TEST(SchedulerTest, RespectsMaxNumSeqs) {
  SchedulerConfig c = Config();
  c.max_num_seqs = 2;
  auto h = MakeManual(c, 32, 4);
  h->Add("a", Range(0, 3), 2);
  h->Add("b", Range(10, 3), 2);
  h->Add("c", Range(20, 3), 2);
  EXPECT_EQ(h->Step().size(), 2u);
  EXPECT_EQ(h->scheduler->num_waiting(), 1);
}

TEST(SchedulerTest, PreemptsNewestAndResumesWithTheSameOutput) {
  // 4 blocks of 2 tokens: a and b cannot both grow to 6 tokens.
  const int32_t kBlocks = 4;
  auto h = MakeManual(Config(512, 10), kBlocks, 2);
  h->Add("a", Range(0, 4), 5, 7);
  h->Add("b", Range(30, 4), 5, 9);
  EXPECT_EQ(h->Step(), (std::map<std::string, int32_t>{{"a", 4}, {"b", 4}}));
  // a and b hold 2 blocks each. a's next token (position 4) needs a third
  // block: none is free, so b (newest) is preempted.
  auto s = h->Step();
  EXPECT_EQ(s, (std::map<std::string, int32_t>{{"a", 1}}));
  EXPECT_EQ(h->scheduler->stats().num_preemptions_total, 1u);
  for (int i = 0; i < 100 && h->scheduler->HasWork(); ++i) h->Step();
  ASSERT_EQ(h->finished.size(), 2u);
  EXPECT_EQ(h->finished["b"].metrics.num_preemptions, 1);
  SamplingParams p;
  p.max_tokens = 5;
  p.ignore_eos = true;
  p.seed = 7;
  EXPECT_EQ(h->outputs["a"], RunAlone(Range(0, 4), p, 2, 10));
  p.seed = 9;
  EXPECT_EQ(h->outputs["b"], RunAlone(Range(30, 4), p, 2, 10));
  EXPECT_EQ(h->scheduler->kv().num_free_blocks(), kBlocks);
}

TEST(SchedulerTest, AbortFreesBlocksAndReportsAbort) {
  auto h = MakeManual(Config(), 8, 4);
  h->Add("a", Range(0, 9), 100);
  h->Add("w", Range(0, 9), 100);
  h->Step();
  auto d = h->scheduler->FinishRequest("a", FinishReason::kAbort, Clock::now());
  ASSERT_TRUE(d.has_value());
  EXPECT_TRUE(d->output.finished);
  EXPECT_EQ(d->output.finish_reason, FinishReason::kAbort);
  h->scheduler->CheckInvariants();
  EXPECT_FALSE(h->scheduler->FinishRequest("a", FinishReason::kAbort, Clock::now()));
  ASSERT_TRUE(h->scheduler->FinishRequest("w", FinishReason::kStop, Clock::now()));
  h->scheduler->CheckInvariants();
  EXPECT_EQ(h->scheduler->kv().num_free_blocks(), 8);
  EXPECT_EQ(h->scheduler->stats().request_success_total.at("abort"), 1u);
  EXPECT_EQ(h->scheduler->stats().request_success_total.at("stop"), 1u);
}

TEST(SchedulerTest, StopsOnEogUnlessIgnored) {
  // Find the first token the fake produces, then declare it end-of-generation.
  SamplingParams p;
  p.max_tokens = 4;
  p.ignore_eos = true;
  const Ids alone = RunAlone(Range(0, 5), p, 4, 64);
  ASSERT_EQ(alone.size(), 4u);
  SchedulerConfig c = Config(512, 64);
  c.eog_token_ids = {alone[1]};
  auto h = MakeManual(c, 32, 4);
  SamplingParams stop_p = p;
  stop_p.ignore_eos = false;
  h->Add("eos", Range(0, 5), stop_p);
  h->Add("ignore", Range(0, 5), p);
  SamplingParams tok_p = p;
  tok_p.stop_token_ids = {alone[2]};
  h->Add("stop_id", Range(0, 5), tok_p);
  h->RunToEnd();
  EXPECT_EQ(h->outputs["eos"], Ids(alone.begin(), alone.begin() + 2));
  EXPECT_EQ(h->finished["eos"].finish_reason, FinishReason::kStop);
  EXPECT_EQ(h->outputs["ignore"], alone);
  EXPECT_EQ(h->finished["ignore"].finish_reason, FinishReason::kLength);
  EXPECT_EQ(h->outputs["stop_id"], Ids(alone.begin(), alone.begin() + 3));
  EXPECT_EQ(h->finished["stop_id"].finish_reason, FinishReason::kStop);
}

TEST(SchedulerTest, PrefixHitSkipsCachedBlocksAndKeepsTheOutput) {
  auto h = MakeManual(Config(), 16, 4, /*caching=*/true);
  const Ids prompt = Range(0, 10);
  h->Add("a", prompt, 2, 5);
  h->RunToEnd();
  h->Add("b", prompt, 2, 5);
  // 8 tokens cached: only 2 computed.
  EXPECT_EQ(h->Step()["b"], 2);
  h->RunToEnd();
  EXPECT_EQ(h->finished["b"].metrics.cached_tokens, 8);
  EXPECT_EQ(h->finished["a"].metrics.cached_tokens, 0);
  EXPECT_EQ(h->outputs["a"], h->outputs["b"]);
  EXPECT_EQ(h->scheduler->stats().prefix_cache_hits_total, 8u);
  EXPECT_EQ(h->scheduler->stats().prefix_cache_queries_total, 20u);
  // A different salt does not hit.
  h->Add("c", prompt, 2, 5, "tenant");
  EXPECT_EQ(h->Step()["c"], 10);
}

}  // namespace
}  // namespace tern
