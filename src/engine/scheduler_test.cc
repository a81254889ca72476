#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <map>
#include <numeric>

#include "engine/engine_core.h"
#include "engine/fake_model_runner.h"
#include "spec/proposer.h"

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
  Harness(SchedulerConfig config, int32_t num_blocks, int32_t block_size, bool caching,
          std::unique_ptr<Proposer> proposer = nullptr) {
    auto sched = std::make_unique<Scheduler>(
        config, std::make_unique<KvCacheManager>(num_blocks, block_size, caching));
    scheduler = sched.get();
    auto fake = std::make_unique<FakeModelRunner>(num_blocks, block_size, kVocab);
    runner = fake.get();
    core = std::make_unique<EngineCore>(std::move(sched), std::move(fake), std::move(proposer));
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

// Every prompt token counts 1 against the prefill cap, whatever its depth.
SchedulerConfig FlatCost(int32_t budget, int32_t max_model_len) {
  SchedulerConfig c = Config(budget, max_model_len);
  c.attention_cost_context_tokens = 0;
  return c;
}

// Starts num_decodes requests of a 2-token prompt and prefills them in one
// step, so that they decode from the next step on.
void StartDecodes(Harness& h, int num_decodes, int32_t max_tokens = 50) {
  for (int i = 0; i < num_decodes; ++i) {
    h.Add("d" + std::to_string(i), Range(i * 2, 2), max_tokens);
  }
  EXPECT_EQ(h.Step().size(), (size_t)num_decodes);
}

// Tokens scheduled for id in a step result (0 when not scheduled).
int32_t Got(const std::map<std::string, int32_t>& s, const std::string& id) {
  auto it = s.find(id);
  return it == s.end() ? 0 : it->second;
}

// A harness over 400 blocks of 4 where num_decodes requests decode and a
// prompt "long" of prompt_len tokens waits.
std::unique_ptr<Harness> DecodesAndALongPrompt(const SchedulerConfig& c, int num_decodes,
                                               int32_t prompt_len) {
  auto h = MakeManual(c, 400, 4);
  StartDecodes(*h, num_decodes);
  h->Add("long", Range(100, prompt_len), 1);
  return h;
}

TEST(SchedulerTest, CapsPrefillAtTheDecodeFloorWhileFewRequestsDecode) {
  auto h = DecodesAndALongPrompt(FlatCost(256, 512), 1, 100);
  // 1 decode: max(1, 8) = 8 prompt tokens per step, not 255.
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(h->Step(), (std::map<std::string, int32_t>{{"d0", 1}, {"long", 8}}));
  }
}

TEST(SchedulerTest, CapsPrefillAtTheNumberOfDecodes) {
  auto h = DecodesAndALongPrompt(FlatCost(256, 512), 12, 100);
  // 12 decodes: 12 prompt tokens per step; the decodes all keep running.
  for (int i = 0; i < 8; ++i) {
    auto s = h->Step();
    EXPECT_EQ(s.size(), 13u);
    EXPECT_EQ(Got(s, "long"), 12);
    for (int d = 0; d < 12; ++d) EXPECT_EQ(Got(s, "d" + std::to_string(d)), 1);
  }
  // 100 = 8 x 12 + 4: the last chunk finishes the prompt.
  EXPECT_EQ(Got(h->Step(), "long"), 4);
  EXPECT_EQ(h->outputs["long"].size(), 1u);
}

TEST(SchedulerTest, PrefillTakesTheWholeBudgetWhenNothingDecodes) {
  auto h = MakeManual(FlatCost(64, 512), 400, 4);
  h->Add("long", Range(100, 150), 3);
  EXPECT_EQ(h->Step()["long"], 64);
  EXPECT_EQ(h->Step()["long"], 64);
  EXPECT_EQ(h->Step()["long"], 22);
}

TEST(SchedulerTest, PrefillGetsTheWholeBudgetBackWhenTheDecodesFinish) {
  auto h = MakeManual(FlatCost(64, 512), 400, 4);
  StartDecodes(*h, 2, /*max_tokens=*/3);  // 1 token sampled at prefill, 2 decodes left
  h->Add("long", Range(100, 150), 1);
  EXPECT_EQ(h->Step(), (std::map<std::string, int32_t>{{"d0", 1}, {"d1", 1}, {"long", 8}}));
  EXPECT_EQ(h->Step(), (std::map<std::string, int32_t>{{"d0", 1}, {"d1", 1}, {"long", 8}}));
  ASSERT_EQ(h->finished.size(), 2u);
  EXPECT_EQ(h->Step(), (std::map<std::string, int32_t>{{"long", 64}}));
  EXPECT_EQ(h->Step(), (std::map<std::string, int32_t>{{"long", 64}}));
  EXPECT_EQ(h->Step(), (std::map<std::string, int32_t>{{"long", 6}}));
}

TEST(SchedulerTest, ConfiguredPrefillCapWhileDecodingReplacesTheAutomaticOne) {
  SchedulerConfig c = FlatCost(256, 512);
  c.max_prefill_tokens_while_decoding = 5;
  auto h = DecodesAndALongPrompt(c, 8, 12);
  EXPECT_EQ(Got(h->Step(), "long"), 5);
  EXPECT_EQ(Got(h->Step(), "long"), 5);
  EXPECT_EQ(Got(h->Step(), "long"), 2);

  // A cap at the budget turns the protection off: budget minus the decodes.
  c.max_prefill_tokens_while_decoding = 256;
  auto h2 = DecodesAndALongPrompt(c, 8, 400);
  EXPECT_EQ(Got(h2->Step(), "long"), 248);
}

TEST(SchedulerTest, PromptsAdmittedWhileDecodingShareOnePrefillCap) {
  auto h = MakeManual(FlatCost(256, 512), 400, 4);
  StartDecodes(*h, 1);
  h->Add("a", Range(100, 6), 3);
  h->Add("b", Range(200, 10), 3);
  // 8 prompt tokens in all: a whole (6), b a partial chunk (2).
  EXPECT_EQ(h->Step(),
            (std::map<std::string, int32_t>{{"d0", 1}, {"a", 6}, {"b", 2}}));
  // a decodes now too (2 decodes, still 8): b finishes with 8.
  EXPECT_EQ(h->Step(),
            (std::map<std::string, int32_t>{{"d0", 1}, {"a", 1}, {"b", 8}}));
}

TEST(SchedulerTest, PartialPrefillsSplitThePrefillCapWhileDecoding) {
  SchedulerConfig c = FlatCost(256, 512);
  c.max_num_partial_prefills = 2;
  auto h = MakeManual(c, 400, 4);
  StartDecodes(*h, 1);
  h->Add("a", Range(100, 40), 1);
  h->Add("b", Range(200, 40), 1);
  // 8 shared by 2 partial prefills: 4 each.
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(h->Step(),
              (std::map<std::string, int32_t>{{"d0", 1}, {"a", 4}, {"b", 4}}));
  }
}

TEST(SchedulerTest, WholePromptModeIgnoresThePrefillCap) {
  SchedulerConfig c = Config(4, 128);
  c.enable_chunked_prefill = false;
  auto h = MakeManual(c, 100, 4);
  StartDecodes(*h, 1);
  h->Add("long", Range(100, 60), 1);
  EXPECT_EQ(h->Step(), (std::map<std::string, int32_t>{{"d0", 1}, {"long", 60}}));
}

TEST(SchedulerTest, DeepPromptTokensCountMoreAgainstThePrefillCap) {
  SchedulerConfig c = Config(256, 4096);
  c.attention_cost_context_tokens = 512;
  auto h = MakeManual(c, 1400, 4);
  StartDecodes(*h, 1, /*max_tokens=*/2000);
  // The prompt starts at depth 0 (8 tokens); deeper chunks shrink:
  // 8 x 512 / (512 + 8) = 7, then 8 x 512 / (512 + 15) = 7, ...
  h->Add("long", Range(100, 3000), 1);
  EXPECT_EQ(Got(h->Step(), "long"), 8);
  EXPECT_EQ(Got(h->Step(), "long"), 7);
  EXPECT_EQ(Got(h->Step(), "long"), 7);
  int32_t computed = 22;
  while (computed < 1536) {
    const int32_t got = Got(h->Step(), "long");
    // Depth d: at most 8 x 512 / (512 + d) tokens, and at least 1.
    EXPECT_EQ(got, std::max<int32_t>(1, 8 * 512 / (512 + computed)));
    computed += got;
  }
  // At depth >= 1536 a chunk is at most 8 x 512 / 2048 = 2 tokens.
  EXPECT_LE(Got(h->Step(), "long"), 2);
}

TEST(SchedulerTest, DepthCostDoesNotApplyWhenNothingDecodes) {
  SchedulerConfig c = Config(256, 4096);
  c.attention_cost_context_tokens = 512;
  auto h = MakeManual(c, 1200, 4);
  h->Add("long", Range(100, 3000), 1);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(h->Step()["long"], 256);
}

TEST(SchedulerTest, DecodeProtectionKeepsEveryOutputEqualToItsSoloRun) {
  auto h = MakeManual(Config(64, 256), 200, 4);
  SamplingParams p;
  p.max_tokens = 20;
  p.ignore_eos = true;
  for (int i = 0; i < 3; ++i) {
    p.seed = 10 + i;
    h->Add("d" + std::to_string(i), Range(i * 3, 3), p);
  }
  h->Step();
  p.seed = 99;
  h->Add("long", Range(100, 150), p);
  h->RunToEnd();
  for (int i = 0; i < 3; ++i) {
    p.seed = 10 + i;
    EXPECT_EQ(h->outputs["d" + std::to_string(i)], RunAlone(Range(i * 3, 3), p, 4, 256));
  }
  p.seed = 99;
  EXPECT_EQ(h->outputs["long"], RunAlone(Range(100, 150), p, 4, 256));
}

// ---- goodput policy, on a fixed cost model ----------------------------------------

// 8 ms per step, 1 ms per token; sampling and attention free unless asked.
// The automatic target at 2.5x the decode step (the tests' arithmetic; the
// engine's default factor is kAutoTargetItlFactor).
SchedulerConfig Goodput(int32_t budget = 256, int32_t max_model_len = 1024) {
  SchedulerConfig c = Config(budget, max_model_len);
  c.policy = SchedulingPolicy::kGoodput;
  c.target_itl_factor = 2.5;
  c.fixed_step_cost = StepCostCoefficients{0.008, 0.0, 0.001, 0.0};
  return c;
}

void AddArrivedAt(Harness& h, const std::string& id, Ids prompt, int32_t max_tokens,
                  Clock::time_point arrival) {
  SamplingParams p;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  h.core->AddRequest(std::make_unique<Request>(id, std::move(prompt), p, "", arrival));
  h.scheduler->CheckInvariants();
}

TEST(SchedulerGoodputTest, FillsTheStepUpToTheAutomaticTarget) {
  auto h = DecodesAndALongPrompt(Goodput(), 4, 100);
  // Decode-only step: 8 + 4 = 12 ms; target 2.5 x 12 = 30 ms: 18 prompt tokens.
  for (int i = 0; i < 3; ++i) {
    auto s = h->Step();
    EXPECT_EQ(Got(s, "long"), 18);
    for (int d = 0; d < 4; ++d) EXPECT_EQ(Got(s, "d" + std::to_string(d)), 1);
  }
}

TEST(SchedulerGoodputTest, QueuePressureStretchesTheAutomaticTarget) {
  // 2 decodes (decode-only step 10 ms), 6 prompts waiting: pressure 3,
  // target 2.5 x 10 ms x 3 = 75 ms: 65 prompt tokens this step.
  auto h = MakeManual(Goodput(), 400, 4);
  StartDecodes(*h, 2);
  for (int i = 0; i < 6; ++i) h->Add("p" + std::to_string(i), Range(100 + 80 * i, 70), 1);
  SchedulerOutput out = h->scheduler->Schedule(Clock::now());
  EXPECT_NEAR(out.target_step_s, 0.075, 1e-9);
  EXPECT_EQ(out.num_scheduled_tokens, 2 + 65);
  // 12 prompts per decode: clamped at kMaxQueuePressure (4): 90 ms.
  auto h2 = MakeManual(Goodput(), 400, 4);
  StartDecodes(*h2, 1);
  for (int i = 0; i < 12; ++i) h2->Add("p" + std::to_string(i), Range(100 + 80 * i, 70), 1);
  out = h2->scheduler->Schedule(Clock::now());
  EXPECT_NEAR(out.target_step_s, 2.5 * 0.009 * kMaxQueuePressure, 1e-9);
  // Short new prompts (G4a) do not count: 12 of 10 tokens leave it at 22.5 ms.
  auto h4 = MakeManual(Goodput(), 400, 4);
  StartDecodes(*h4, 1);
  for (int i = 0; i < 12; ++i) h4->Add("p" + std::to_string(i), Range(100 + 20 * i, 10), 1);
  out = h4->scheduler->Schedule(Clock::now());
  EXPECT_NEAR(out.target_step_s, 2.5 * 0.009, 1e-9);
  // A fixed target is not stretched.
  SchedulerConfig c = Goodput();
  c.target_itl_s = 0.020;
  auto h3 = MakeManual(c, 400, 4);
  StartDecodes(*h3, 2);
  for (int i = 0; i < 6; ++i) h3->Add("p" + std::to_string(i), Range(100 + 40 * i, 30), 1);
  EXPECT_NEAR(h3->scheduler->Schedule(Clock::now()).target_step_s, 0.020, 1e-9);
}

TEST(SchedulerGoodputTest, AFixedTargetReplacesTheAutomaticOne) {
  SchedulerConfig c = Goodput();
  c.target_itl_s = 0.020;
  auto h = DecodesAndALongPrompt(c, 4, 100);
  // 20 ms - 12 ms = 8 tokens.
  EXPECT_EQ(Got(h->Step(), "long"), 8);
  // A target below the decode-only step still moves the prompt by 1 token.
  c.target_itl_s = 0.005;
  auto h2 = DecodesAndALongPrompt(c, 4, 100);
  EXPECT_EQ(Got(h2->Step(), "long"), 1);
}

TEST(SchedulerGoodputTest, NothingDecodingTakesTheWholeBudget) {
  auto h = MakeManual(Goodput(64), 400, 4);
  h->Add("a", Range(100, 150), 3);
  EXPECT_EQ(h->Step()["a"], 64);
  EXPECT_EQ(h->Step()["a"], 64);
  EXPECT_EQ(h->Step()["a"], 22);
}

TEST(SchedulerGoodputTest, ABurstOnAnIdleServerGetsItsFirstTokensGroupByGroup) {
  // Nothing decodes, 6 prompts of 30 tokens arrive together (budget 256 would
  // hold them all). The first goes whole (30 ms); more join while the step
  // stays within a 64-token step (64 ms): 2 prompts (the third, a short new
  // prompt, is not split: it waits); the next step follows G2 with their 2
  // decodes.
  auto h = MakeManual(Goodput(), 400, 4);
  for (int i = 0; i < 6; ++i) h->Add("p" + std::to_string(i), Range(100 + 40 * i, 30), 4);
  auto s = h->Step();
  EXPECT_EQ(s, (std::map<std::string, int32_t>{{"p0", 30}, {"p1", 30}}));
  EXPECT_EQ(h->outputs["p0"].size(), 1u);
  EXPECT_EQ(h->outputs["p1"].size(), 1u);
  // One long prompt alone still takes the whole budget (its TTFT is the
  // same either way).
  auto h2 = MakeManual(Goodput(), 400, 4);
  h2->Add("long", Range(100, 600), 1);
  EXPECT_EQ(h2->Step()["long"], 256);
}

TEST(SchedulerGoodputTest, ShortestPromptGoesFirstAndSeveralPromptsShareAStep) {
  auto h = DecodesAndALongPrompt(Goodput(), 3, 100);
  h->Add("short", Range(300, 6), 1);
  h->Add("mid", Range(400, 8), 1);
  // Decode-only 11 ms, target 27.5 ms (3 prompts, 3 decodes: no queue
  // pressure): 16 tokens; short (6) and mid (8) finish, long gets the rest.
  EXPECT_EQ(h->Step(), (std::map<std::string, int32_t>{{"d0", 1},
                                                       {"d1", 1},
                                                       {"d2", 1},
                                                       {"short", 6},
                                                       {"mid", 8},
                                                       {"long", 2}}));
  EXPECT_EQ(h->outputs["short"].size(), 1u);
  EXPECT_EQ(h->outputs["mid"].size(), 1u);
}

TEST(SchedulerGoodputTest, AgingLetsALongWaitingPromptGoFirst) {
  auto h = MakeManual(Goodput(), 400, 4);
  StartDecodes(*h, 2);
  // Waited 1000 s: its key is 100 ms - 0.5 x 1000 s, below the fresh shorter one's.
  AddArrivedAt(*h, "old", Range(100, 100), 1, Clock::now() - std::chrono::seconds(1000));
  h->Add("fresh", Range(300, 70), 1);
  EXPECT_EQ(h->Step(), (std::map<std::string, int32_t>{{"d0", 1}, {"d1", 1}, {"old", 15}}));
}

TEST(SchedulerGoodputTest, DeepPromptTokensGetSmallerChunks) {
  SchedulerConfig c = Goodput(512, 4096);
  c.fixed_step_cost = StepCostCoefficients{0.008, 0.0, 0.001, 0.001};  // 512 attended = 1 token
  auto h = MakeManual(c, 1200, 4);
  StartDecodes(*h, 1, /*max_tokens=*/500);
  h->Add("long", Range(100, 3000), 1);
  int32_t computed = 0;
  for (int i = 0; i < 200; ++i) {
    const int32_t got = Got(h->Step(), "long");
    // The chunk's marginal cost fits the slack and one more token would not.
    // Decode d0 (context ~3 + i) adds only a few attended positions.
    const auto cost = [&](int32_t n) {
      const StepShape s = StepShape::Chunk(computed, n, false);
      return 0.001 * n + 0.001 * (double)s.attended_positions / 512;
    };
    const double decode = 0.008 + 0.001 + 0.001 * (2.0 + i + 1) / 512;
    const double slack = 1.5 * decode;
    EXPECT_LE(cost(got), slack + 1e-12) << "step " << i;
    EXPECT_GT(cost(got + 1), slack - 1e-12) << "step " << i;
    computed += got;
  }
  // Deeper chunks shrink: the first was 13 tokens; at depth ~1200 a token
  // costs ~3.4 depth-0 tokens.
  EXPECT_GT(computed, 1000);
  const int32_t deep = Got(h->Step(), "long");
  EXPECT_GE(deep, 1);
  EXPECT_LE(deep, 5);
}

TEST(SchedulerGoodputTest, AFullPrefixHitGetsItsFirstTokenInTheNextStep) {
  auto h = MakeManual(Goodput(), 400, 4, /*caching=*/true);
  const Ids prompt = Range(500, 33);
  h->Add("warm", prompt, 1);
  h->RunToEnd();
  StartDecodes(*h, 4);
  h->Add("long", Range(100, 300), 1);
  h->Step();  // long is in progress, taking the whole slack
  h->Add("cached", prompt, 2);
  // 32 of 33 tokens cached: 1 token to compute, cheaper than long's rest.
  auto s = h->Step();
  EXPECT_EQ(Got(s, "cached"), 1);
  EXPECT_EQ(h->outputs["cached"].size(), 1u);
  EXPECT_EQ(Got(s, "long"), 17);
}

TEST(SchedulerGoodputTest, AFullPrefixHitGetsItsFirstTokenInTheNextStepBehindAnAgedPrompt) {
  // Under load the waiting prompts have aged, so that one of them sorts
  // before any fresh prompt and takes the whole slack; a full prefix hit is
  // a short new prompt and goes first all the same.
  auto h = MakeManual(Goodput(), 400, 4, /*caching=*/true);
  const Ids prompt = Range(500, 33);
  h->Add("warm", prompt, 1);
  h->RunToEnd();
  StartDecodes(*h, 4);
  AddArrivedAt(*h, "old", Range(100, 300), 1, Clock::now() - std::chrono::seconds(1000));
  EXPECT_EQ(Got(h->Step(), "old"), 18);  // target 30 ms, decodes 12 ms
  h->Add("cached", prompt, 2);
  auto s = h->Step();
  EXPECT_EQ(Got(s, "cached"), 1);
  EXPECT_EQ(h->outputs["cached"].size(), 1u);
  EXPECT_EQ(Got(s, "old"), 17);
}

TEST(SchedulerGoodputTest, AShortNewPromptGoesWholeBeyondTheSlackAndIsNeverSplit) {
  // 4 decodes: target 2.5 x 12 ms = 30 ms, 18 ms of slack. Two new prompts
  // of 30 tokens (short: at most kShortPromptTokens to compute) arrive while
  // a long one is in progress: the first short one goes whole beyond the
  // slack (its first token in this step), the second is not split but waits
  // for the next step, and the long one still advances by a token.
  auto h = DecodesAndALongPrompt(Goodput(), 4, 100);
  EXPECT_EQ(Got(h->Step(), "long"), 18);
  h->Add("a", Range(300, 30), 2);
  h->Add("b", Range(400, 30), 2);
  auto s = h->Step();
  EXPECT_EQ(Got(s, "a"), 30);
  EXPECT_EQ(Got(s, "b"), 0);
  EXPECT_EQ(Got(s, "long"), 1);
  EXPECT_EQ(h->outputs["a"].size(), 1u);
  s = h->Step();
  EXPECT_EQ(Got(s, "a"), 1);
  EXPECT_EQ(Got(s, "b"), 30);
  EXPECT_EQ(Got(s, "long"), 1);
  // A prompt of kShortPromptTokens + 1 tokens is not short: it gets the slack.
  auto h2 = DecodesAndALongPrompt(Goodput(), 4, kShortPromptTokens + 1);
  EXPECT_EQ(Got(h2->Step(), "long"), 18);
}

TEST(SchedulerGoodputTest, APromptInProgressHoldsThePartialPrefillSlot) {
  for (int32_t slots : {1, 2}) {
    SchedulerConfig c = Goodput();
    c.max_num_partial_prefills = slots;
    auto h = MakeManual(c, 400, 4);
    StartDecodes(*h, 3);
    h->Add("first", Range(100, 300), 1);
    EXPECT_EQ(Got(h->Step(), "first"), 16);  // in progress: 284 left
    h->Add("short", Range(500, 6), 1);
    h->Add("mid", Range(600, 200), 1);
    auto s = h->Step();
    EXPECT_EQ(Got(s, "short"), 6);
    if (slots == 1) {
      // mid (200 left) is shorter than first (284) but may not start a chunk.
      EXPECT_EQ(Got(s, "mid"), 0);
      EXPECT_EQ(Got(s, "first"), 10);
    } else {
      EXPECT_EQ(Got(s, "mid"), 10);
      EXPECT_EQ(Got(s, "first"), 0);
    }
  }
}

TEST(SchedulerGoodputTest, APromptThatFinishesFreesItsSlotInTheSameStep) {
  // 3 decodes, target 27.5 ms, 16 prompt tokens a step. "first" (68 tokens)
  // takes 16 a step, then finishes with 4: the other 12 tokens of that step
  // go to "next", although only one prompt may be in progress at a time.
  auto h = MakeManual(Goodput(), 400, 4);
  StartDecodes(*h, 3);
  h->Add("first", Range(100, 68), 1);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(Got(h->Step(), "first"), 16);
  h->Add("next", Range(500, 100), 1);
  auto s = h->Step();
  EXPECT_EQ(Got(s, "first"), 4);
  EXPECT_EQ(Got(s, "next"), 12);
  EXPECT_EQ(h->outputs["first"].size(), 1u);
}

TEST(SchedulerGoodputTest, TheAutomaticTargetFollowsMeasuredDecodeOnlySteps) {
  SchedulerConfig c = Goodput();
  c.fixed_step_cost.reset();  // learned
  auto h = MakeManual(c, 400, 4);
  // Step records as the engine would time them: 4 decodes alone take 100 ms;
  // with a 40-token prompt chunk 150 ms, and the mixed steps come last.
  const Ids tokens(64, 1);
  SchedulerOutput decodes, mixed;
  for (int i = 0; i < 4; ++i) {
    ScheduledSequence s;
    s.token_ids = std::span<const int32_t>(tokens.data(), 1);
    s.start_position = 3;
    s.sample = true;
    decodes.sequences.push_back(s);
  }
  mixed = decodes;
  ScheduledSequence chunk;
  chunk.token_ids = std::span<const int32_t>(tokens.data(), 40);
  mixed.sequences.push_back(chunk);
  for (int i = 0; i < 30; ++i) h->scheduler->ObserveStepTime(decodes, 0.100);
  for (int i = 0; i < 400; ++i) h->scheduler->ObserveStepTime(mixed, 0.150);
  // The mixed steps alone cannot split the step's cost from the tokens' (and
  // the decode-only ones have faded from that fit); the target comes from
  // the decode-only steps: 2.5 x 100 ms.
  StartDecodes(*h, 4);
  h->Add("long", Range(100, 100), 1);
  const SchedulerOutput out = h->scheduler->Schedule(Clock::now());
  EXPECT_NEAR(out.target_step_s, 0.250, 0.005);
  // What the fit of every step makes of the decode-only step by now.
  StepShape alone;
  for (int i = 0; i < 4; ++i) alone += StepShape::Chunk(3, 1, true);
  EXPECT_LT(h->scheduler->cost_model().Predict(alone), 0.080);
}

// Step records as the engine times them: num_decodes decodes at depth 2
// plus an optional prompt chunk.
SchedulerOutput StepRecord(const Ids& tokens, int num_decodes, int32_t chunk, int32_t chunk_start) {
  SchedulerOutput out;
  for (int i = 0; i < num_decodes; ++i) {
    ScheduledSequence s;
    s.token_ids = std::span<const int32_t>(tokens.data(), 1);
    s.start_position = 2;
    s.sample = true;
    out.sequences.push_back(s);
  }
  if (chunk > 0) {
    ScheduledSequence s;
    s.token_ids = std::span<const int32_t>(tokens.data(), chunk);
    s.start_position = chunk_start;
    out.sequences.push_back(s);
  }
  return out;
}

TEST(SchedulerGoodputTest, SlowColdPrefillsDoNotStarveShortPromptsLater) {
  // As measured on a busy machine: two 512-token prefills took 11 s each,
  // then 2 decodes alone take 75 ms. The fit of every step, steepened by the
  // prefills, predicts the decodes at ~3x that; the decode part of the slack
  // comes from the decode-only model, so a 100-token prompt still gets a
  // real chunk, not 1 token per step.
  SchedulerConfig c = Goodput(512, 4096);
  c.fixed_step_cost.reset();
  auto h = MakeManual(c, 1000, 16, /*caching=*/false);
  const Ids tokens(512, 1);
  for (int i = 0; i < 2; ++i) h->scheduler->ObserveStepTime(StepRecord(tokens, 0, 512, 0), 11.0);
  h->scheduler->ObserveStepTime(StepRecord(tokens, 0, 512, 0), 10.9);
  h->scheduler->ObserveStepTime(StepRecord(tokens, 0, 512, 512), 11.5);
  for (int i = 0; i < 6; ++i) h->scheduler->ObserveStepTime(StepRecord(tokens, 2, 0, 0), 0.075);
  StartDecodes(*h, 2);
  h->Add("prompt", Range(100, 100), 1);
  const SchedulerOutput out = h->scheduler->Schedule(Clock::now());
  int32_t got = 0;
  for (const ScheduledSequence& s : out.sequences) {
    if (s.request_id == "prompt") got = (int32_t)s.token_ids.size();
  }
  EXPECT_NEAR(out.target_step_s, 2.5 * 0.075, 0.02);
  // The fit of every step would leave no slack at all for the decodes.
  StepShape decodes;
  for (int i = 0; i < 2; ++i) decodes += StepShape::Chunk(2, 1, true);
  EXPECT_GT(h->scheduler->cost_model().Predict(decodes), out.target_step_s);
  EXPECT_GE(got, 4);
  EXPECT_LE(out.predicted_step_s, out.target_step_s + 1e-9);
}

TEST(SchedulerGoodputTest, MoreDecodesThanEverMeasuredAloneCostTheMixedStepsMarginal) {
  // As on 2 cores: 1 decode alone takes 11 ms (the only decode-only steps,
  // a client's test request); mixed steps of 6 ms + 4.2 ms a token + 0.7 ms
  // a sampled row, chunks of 10-40 tokens. 7 decodes then cost about
  // 11 + 6 x 4.9 = 40 ms: the target is 2.5 x that, not 2.5 x the decode
  // model's guess from its prior (~18 ms).
  SchedulerConfig c = Goodput(512, 4096);
  c.fixed_step_cost.reset();
  auto h = MakeManual(c, 1000, 16, /*caching=*/false);
  const Ids tokens(512, 1);
  for (int i = 0; i < 3; ++i) h->scheduler->ObserveStepTime(StepRecord(tokens, 1, 0, 0), 0.011);
  for (int i = 0; i < 60; ++i) {
    const int decodes = 3 + i % 5, chunk = 10 + 10 * (i % 4);
    h->scheduler->ObserveStepTime(StepRecord(tokens, decodes, chunk, 100),
                                  (6 + 4.2 * (decodes + chunk) + 0.7 * decodes) / 1e3);
  }
  StartDecodes(*h, 7);
  const SchedulerOutput out = h->scheduler->Schedule(Clock::now());
  EXPECT_NEAR(out.target_step_s, 2.5 * 0.0404, 0.008);
}

TEST(SchedulerGoodputTest, MaxPrefillTokensWhileDecodingCapsTheStepToo) {
  SchedulerConfig c = Goodput();
  c.max_prefill_tokens_while_decoding = 5;
  auto h = DecodesAndALongPrompt(c, 4, 100);
  EXPECT_EQ(Got(h->Step(), "long"), 5);
}

TEST(SchedulerGoodputTest, EveryOutputEqualsItsSoloRun) {
  SchedulerConfig c = Goodput(64, 256);
  c.fixed_step_cost.reset();  // learned from the fake runner's own timings
  auto h = MakeManual(c, 200, 4, /*caching=*/true);
  SamplingParams p;
  p.max_tokens = 20;
  p.ignore_eos = true;
  for (int i = 0; i < 6; ++i) {
    p.seed = 10 + i;
    h->Add("r" + std::to_string(i), Range(i * 7, 3 + 20 * i), p);
    h->Step();
  }
  h->RunToEnd();
  for (int i = 0; i < 6; ++i) {
    p.seed = 10 + i;
    EXPECT_EQ(h->outputs["r" + std::to_string(i)], RunAlone(Range(i * 7, 3 + 20 * i), p, 4, 256));
  }
  EXPECT_GT(h->scheduler->cost_model().num_observations(), 0);
}

// A proposer that knows each request's true continuation (from a run
// without speculation) and corrupts some of it: every step verifies a mix
// of right and wrong proposals, so rollbacks are partial and frequent.
class OracleProposer : public Proposer {
 public:
  explicit OracleProposer(const std::map<std::string, Ids>* truth) : truth_(truth) {}
  SpecMethod method() const override { return SpecMethod::kNgram; }
  void Propose(std::span<ProposalRequest> requests) override {
    for (ProposalRequest& r : requests) {
      const Ids& t = truth_->at(std::string(r.request_id));
      const size_t done = r.tokens.size() - r.num_prompt_tokens;
      r.proposals.clear();
      for (int32_t i = 0; i < r.max_proposals && done + i < t.size(); ++i) {
        const bool wrong = (++calls_ % 5) == 0;
        r.proposals.push_back(wrong ? (t[done + i] + 1) % kVocab : t[done + i]);
      }
    }
  }

 private:
  const std::map<std::string, Ids>* truth_;
  int64_t calls_ = 0;
};

// Speculation through the real scheduler with the fake runner: outputs equal
// the run without it, and every step keeps the KV invariants, with partial
// rejections, a tiny budget, preemption and prefix caching.
TEST(SchedulerSpecTest, ProposalsKeepOutputsAndInvariants) {
  auto add_all = [](Harness& h) {
    for (int i = 0; i < 12; ++i) {
      Ids prompt = Range(i % 3 == 0 ? 0 : 7 * i, 5 + (i * 13) % 40);
      h.Add("r" + std::to_string(i), prompt, 30 + i, 100 + i);
    }
  };
  Harness plain(Config(), 256, 4, true);
  add_all(plain);
  plain.RunToEnd();
  for (int32_t budget : {3, 9, 64}) {
    for (int32_t num_blocks : {24, 256}) {
      for (int32_t k : {1, 4, 8}) {
        SCOPED_TRACE("budget " + std::to_string(budget) + " blocks " + std::to_string(num_blocks) +
                     " k " + std::to_string(k));
        SchedulerConfig c = Config(budget);
        c.num_spec_tokens = k;
        Harness spec(c, num_blocks, 4, true, std::make_unique<OracleProposer>(&plain.outputs));
        add_all(spec);
        spec.RunToEnd();
        EXPECT_EQ(spec.outputs, plain.outputs);
        const SchedulerStats& st = spec.scheduler->stats();
        EXPECT_GT(st.spec_num_accepted_tokens_total, 0u);
        EXPECT_LT(st.spec_num_accepted_tokens_total, st.spec_num_draft_tokens_total);
        if (num_blocks == 24 && budget == 64) {
          EXPECT_GT(st.num_preemptions_total, 0u);
        }
        EXPECT_EQ(spec.scheduler->kv().num_free_blocks(), num_blocks);
      }
    }
  }
}

// Adaptive speculation's choice of k: batch throughput
// (B - 1 + E(k)) / (T + k (verify + propose)).
TEST(SpecAdaptiveTest, BestSpecTokensFollowsAcceptanceAndBatchCost) {
  // Batch 1, memory-bound step (10 ms) where a verified token costs 0.2 ms:
  // high acceptance speculates deep, none does not at all.
  EXPECT_EQ(Scheduler::BestSpecTokens(0.9, 8, 1, 10e-3, 0.2e-3, 0), 8);
  EXPECT_EQ(Scheduler::BestSpecTokens(0.0, 8, 1, 10e-3, 0.2e-3, 0), 0);
  const int32_t mid = Scheduler::BestSpecTokens(0.5, 8, 1, 10e-3, 0.2e-3, 0);
  EXPECT_GT(mid, 0);
  EXPECT_LT(mid, 8);
  // A compute-bound batch of 32 (every token costs as much as the step's
  // share of it): proposals only slow the others down.
  EXPECT_EQ(Scheduler::BestSpecTokens(0.9, 8, 32, 32 * 0.3e-3, 0.3e-3, 0), 0);
  // A costly proposer (as slow as the target per token) needs more acceptance.
  EXPECT_EQ(Scheduler::BestSpecTokens(0.3, 8, 1, 1e-3, 0.05e-3, 1e-3), 0);
  EXPECT_GT(Scheduler::BestSpecTokens(0.95, 8, 1, 1e-3, 0.05e-3, 0.05e-3), 0);
  // Never above the configured k.
  EXPECT_LE(Scheduler::BestSpecTokens(1.0, 3, 1, 1, 0, 0), 3);
}

}  // namespace
}  // namespace tern
