// A seeded randomized simulation of the engine core with the fake model
// runner: random arrivals, aborts, shared prefixes, salts, token budgets,
// block sizes, and a KV pool small enough to force preemption. Every request
// must produce exactly what it produces when run alone, and no block may leak.
#include "engine/engine_core.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>

#include "engine/fake_model_runner.h"

namespace tern {
namespace {

using Ids = std::vector<int32_t>;
constexpr int32_t kVocab = 64;
constexpr int32_t kMaxModelLen = 48;
const std::vector<int32_t> kEog = {0};

struct SimRequest {
  std::string id;
  Ids prompt;
  SamplingParams params;
  std::string salt;
};

struct Result {
  Ids tokens;
  FinishReason reason = FinishReason::kNone;
  RequestMetrics metrics;
};

std::unique_ptr<EngineCore> MakeCore(const SchedulerConfig& config, int32_t num_blocks,
                                     int32_t block_size, bool caching, Scheduler** sched_out,
                                     const std::string& step_log_path = "") {
  auto sched = std::make_unique<Scheduler>(
      config, std::make_unique<KvCacheManager>(num_blocks, block_size, caching));
  *sched_out = sched.get();
  return std::make_unique<EngineCore>(
      std::move(sched), std::make_unique<FakeModelRunner>(num_blocks, block_size, kVocab), nullptr,
      step_log_path);
}

void Record(std::vector<RequestDelta> deltas, std::map<std::string, Result>* results) {
  for (RequestDelta& d : deltas) {
    Result& r = (*results)[d.request_id];
    r.tokens.insert(r.tokens.end(), d.output.new_token_ids.begin(), d.output.new_token_ids.end());
    if (d.output.finished) {
      EXPECT_EQ(r.reason, FinishReason::kNone) << "finished twice: " << d.request_id;
      r.reason = d.output.finish_reason;
      r.metrics = d.output.metrics;
    }
  }
}

Result RunAlone(const SimRequest& req) {
  SchedulerConfig c;
  c.max_model_len = kMaxModelLen;
  c.eog_token_ids = kEog;
  Scheduler* sched = nullptr;
  auto core = MakeCore(c, kMaxModelLen, 1, false, &sched);
  core->AddRequest(std::make_unique<Request>(req.id, req.prompt, req.params, req.salt,
                                             Clock::now()));
  std::map<std::string, Result> results;
  while (core->HasWork()) Record(core->Step(), &results);
  return results[req.id];
}

struct SimTotals {
  uint64_t steps = 0;
  uint64_t preemptions = 0;
  uint64_t cache_hits = 0;
  uint64_t aborts = 0;
};

void Simulate(uint64_t seed, SimTotals* totals,
              SchedulingPolicy policy = SchedulingPolicy::kDecodeProtect) {
  std::mt19937_64 rng(seed);
  auto pick = [&](int lo, int hi) { return (int)std::uniform_int_distribution<int>(lo, hi)(rng); };
  auto chance = [&](double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; };

  const int32_t block_size = std::vector<int32_t>{1, 2, 4, 16}[pick(0, 3)];
  SchedulerConfig config;
  config.max_model_len = kMaxModelLen;
  config.max_num_batched_tokens = std::vector<int32_t>{1, 7, 64}[pick(0, 2)];
  config.enable_chunked_prefill = pick(0, 3) != 0;
  config.max_num_partial_prefills = pick(1, 3);
  config.max_num_seqs = pick(1, 8);
  // Decode protection: automatic (0) or tight fixed caps; from the seed so the
  // random stream of the other choices stays as it was.
  config.max_prefill_tokens_while_decoding = std::vector<int32_t>{0, 1, 3, 0}[seed % 4];
  config.eog_token_ids = kEog;
  config.policy = policy;  // goodput: its cost model learns the fake runner's step times
  const bool caching = pick(0, 3) != 0;
  // One max_model_len sequence plus a little: forces preemption.
  const int32_t num_blocks = (kMaxModelLen + block_size - 1) / block_size + pick(0, 6);
  SCOPED_TRACE("seed " + std::to_string(seed) + " block_size " + std::to_string(block_size) +
               " budget " + std::to_string(config.max_num_batched_tokens) + " chunked " +
               std::to_string(config.enable_chunked_prefill) + " seqs " +
               std::to_string(config.max_num_seqs) + " prefill cap " +
               std::to_string(config.max_prefill_tokens_while_decoding) + " blocks " +
               std::to_string(num_blocks) + " caching " + std::to_string(caching));

  std::vector<Ids> prefixes;
  for (int i = 0; i < 3; ++i) {
    Ids p(pick(0, 24));
    for (int32_t& t : p) t = pick(1, kVocab - 1);
    prefixes.push_back(p);
  }
  std::vector<SimRequest> requests;
  for (int i = 0; i < 40; ++i) {
    SimRequest r;
    r.id = "r" + std::to_string(i);
    r.prompt = prefixes[pick(0, 2)];
    const int suffix = pick(r.prompt.empty() ? 1 : 0, 8);
    for (int k = 0; k < suffix; ++k) r.prompt.push_back(pick(1, kVocab - 1));
    r.params.max_tokens = pick(1, kMaxModelLen - (int)r.prompt.size());
    r.params.seed = rng();
    r.params.ignore_eos = chance(0.5);
    if (chance(0.2)) r.params.stop_token_ids = {pick(1, kVocab - 1)};
    r.salt = chance(0.2) ? "tenant" : "";
    requests.push_back(r);
  }

  Scheduler* sched = nullptr;
  auto core = MakeCore(config, num_blocks, block_size, caching, &sched);
  std::map<std::string, Result> results;
  std::vector<std::string> aborted;
  size_t next = 0;
  int step = 0;
  while (next < requests.size() || core->HasWork()) {
    ASSERT_LT(step++, 200000) << "no progress";
    while (next < requests.size() && (chance(0.3) || !core->HasWork())) {
      const SimRequest& r = requests[next++];
      core->AddRequest(std::make_unique<Request>(r.id, r.prompt, r.params, r.salt, Clock::now()));
    }
    if (chance(0.02) && next > 0) {
      const std::string& id = requests[pick(0, (int)next - 1)].id;
      if (std::optional<RequestDelta> d = core->Finish(id, FinishReason::kAbort)) {
        aborted.push_back(id);
        std::vector<RequestDelta> one;
        one.push_back(std::move(*d));
        Record(std::move(one), &results);
      }
    }
    sched->CheckInvariants();
    Record(core->Step(), &results);
    sched->CheckInvariants();
  }
  EXPECT_EQ(sched->kv().num_free_blocks(), num_blocks) << "leaked blocks";
  EXPECT_EQ(sched->kv().num_requests(), 0);

  for (const SimRequest& r : requests) {
    SCOPED_TRACE(r.id);
    const Result& got = results[r.id];
    const Result want = RunAlone(r);
    const bool was_aborted = got.reason == FinishReason::kAbort;
    if (was_aborted) {
      ASSERT_LE(got.tokens.size(), want.tokens.size());
      EXPECT_TRUE(std::equal(got.tokens.begin(), got.tokens.end(), want.tokens.begin()));
    } else {
      EXPECT_EQ(got.tokens, want.tokens);
      EXPECT_EQ(got.reason, want.reason);
      EXPECT_EQ(got.metrics.generated_tokens, (int32_t)got.tokens.size());
    }
  }
  totals->steps += step;
  totals->preemptions += sched->stats().num_preemptions_total;
  totals->cache_hits += sched->stats().prefix_cache_hits_total;
  totals->aborts += aborted.size();
}

TEST(EngineCoreSimulationTest, EveryRequestMatchesItsSoloRunUnderRandomLoad) {
  SimTotals totals;
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    Simulate(seed, &totals);
    if (HasFatalFailure()) return;
  }
  // The simulation must actually exercise what it claims to.
  EXPECT_GT(totals.steps, 2000u);
  EXPECT_GT(totals.preemptions, 0u);
  EXPECT_GT(totals.cache_hits, 0u);
  EXPECT_GT(totals.aborts, 0u);
  std::printf("simulated %llu steps, %llu preemptions, %llu cached tokens, %llu aborts\n",
              (unsigned long long)totals.steps, (unsigned long long)totals.preemptions,
              (unsigned long long)totals.cache_hits, (unsigned long long)totals.aborts);
}


TEST(EngineCoreSimulationTest, GoodputPolicyKeepsEveryRequestEqualToItsSoloRun) {
  SimTotals totals;
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    Simulate(seed, &totals, SchedulingPolicy::kGoodput);
    if (HasFatalFailure()) return;
  }
  EXPECT_GT(totals.steps, 2000u);
  EXPECT_GT(totals.preemptions, 0u);
  EXPECT_GT(totals.cache_hits, 0u);
  EXPECT_GT(totals.aborts, 0u);
}

// The step log (--step-log, TERN_STEP_LOG): one JSON record per step, in step order, with the step's
// token counts.
TEST(EngineCoreTest, StepLogWritesOneRecordPerStep) {
  const std::string path = ::testing::TempDir() + "/tern_step_log_test.jsonl";
  std::remove(path.c_str());
  SchedulerConfig c;
  c.max_model_len = kMaxModelLen;
  c.max_num_batched_tokens = 4;
  c.eog_token_ids = kEog;
  int steps = 0;
  {
    Scheduler* sched = nullptr;
    auto core = MakeCore(c, kMaxModelLen, 1, false, &sched, path);
    SamplingParams p;
    p.max_tokens = 3;
    p.ignore_eos = true;
    core->AddRequest(std::make_unique<Request>("a", std::vector<int32_t>{5, 6, 7, 8, 9, 10},
                                               p, "", Clock::now()));
    while (core->HasWork()) {
      core->Step();
      ++steps;
    }
  }  // closes the log
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ((int)lines.size(), steps);
  // 6 prompt tokens at 4 per step: 4 + 2 (the second step samples), then 2
  // decode steps.
  ASSERT_EQ(steps, 4);
  EXPECT_NE(lines[0].find("\"scheduled_tokens\":4,\"prefill_tokens\":4,\"sampled_tokens\":0"),
            std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find("\"scheduled_tokens\":2,\"prefill_tokens\":2,\"sampled_tokens\":1"),
            std::string::npos) << lines[1];
  EXPECT_NE(lines[3].find("\"scheduled_tokens\":1,\"prefill_tokens\":0,\"sampled_tokens\":1"),
            std::string::npos) << lines[3];
  for (const std::string& l : lines) EXPECT_NE(l.find("\"duration_ms\":"), std::string::npos);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace tern
