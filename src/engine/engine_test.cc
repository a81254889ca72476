// Engine tests on the real stories260K model: golden greedy output through
// the engine, and invariance of greedy outputs to batching, chunk sizes,
// preemption and prefix caching.
#include "engine/engine.h"

#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <map>
#include <set>
#include <thread>
#include <iterator>
#include <sstream>

#include "base/paths.h"
#include "engine/engine_test_util.h"
#include "tokenizer/tokenizer.h"

namespace tern {
namespace {

using namespace engine_test;

// Runs all greedy requests at once on a fresh engine; outcomes in request order.
std::vector<Outcome> RunTogether(const EngineConfig& config, const std::vector<Ids>& prompts,
                                 int32_t max_tokens, EngineStats* stats = nullptr) {
  return RunOnFreshEngine(config, GreedyRequests(prompts, max_tokens), /*alone=*/false, stats);
}

class EngineModelTest : public StoriesModelTest {
 protected:
  // 24 prompts cut from the sample stories at varied lengths; many share a
  // prefix (the same story start), as chat requests share system prompts.
  std::vector<Ids> Prompts(const Tokenizer& tok, int n = 24) { return StoryPrompts(tok, n); }
};

TEST_F(EngineModelTest, GreedyFromBosMatchesGolden) {
  std::ifstream in(ModelsDir() + "/golden/stories260K.greedy200.ids");
  Ids golden((std::istream_iterator<int32_t>(in)), std::istream_iterator<int32_t>());
  ASSERT_EQ(golden.size(), 200u);
  auto out = RunTogether(BaseConfig(), {Ids{1}}, 200);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].tokens, golden);
  EXPECT_EQ(out[0].reason, FinishReason::kLength);
  EXPECT_EQ(out[0].metrics.generated_tokens, 200);
  EXPECT_EQ(out[0].metrics.prompt_tokens, 1);
}

TEST_F(EngineModelTest, GreedyOutputsDoNotDependOnBatchingChunkingPreemptionOrCaching) {
  auto engine = Engine::Create(BaseConfig());
  ASSERT_TRUE(engine.ok()) << engine.status().message();
  const std::vector<Ids> prompts = Prompts((*engine)->tokenizer());
  const int32_t kMaxTokens = 24;
  // Reference: each request alone.
  const std::vector<Outcome> alone =
      RunOn(**engine, GreedyRequests(prompts, kMaxTokens), /*alone=*/true);
  ASSERT_EQ(alone.size(), prompts.size());
  engine->reset();

  struct Variant {
    std::string name;
    EngineConfig config;
  };
  std::vector<Variant> variants;
  for (int32_t budget : {1, 7, 64, 512}) {
    EngineConfig c = BaseConfig();
    c.max_num_batched_tokens = budget;
    c.max_num_partial_prefills = budget == 7 ? 2 : 1;
    variants.push_back({"budget " + std::to_string(budget), c});
  }
  {
    EngineConfig c = BaseConfig();
    c.enable_prefix_caching = false;
    variants.push_back({"no prefix caching", c});
    c.enable_chunked_prefill = false;
    variants.push_back({"no chunking", c});
  }
  {
    // Room for 256 + 64 tokens: forces preemption.
    EngineConfig c = BaseConfig();
    c.block_size = 8;
    c.kv_cache_memory_bytes = (256 + 64) * 640;  // 640 bytes/token at f16
    variants.push_back({"tiny KV (preemption)", c});
    c.kv_cache_dtype = DType::kF32;
    c.kv_cache_memory_bytes *= 2;
    c.max_num_batched_tokens = 7;
    variants.push_back({"tiny f32 KV, budget 7", c});
  }
  for (const Variant& v : variants) {
    SCOPED_TRACE(v.name);
    EngineStats stats;
    std::vector<Outcome> together = RunTogether(v.config, prompts, kMaxTokens, &stats);
    ASSERT_EQ(together.size(), prompts.size());
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(together[i].tokens, alone[i].tokens) << "request " << i;
    }
    if (v.name == "tiny KV (preemption)") {
      EXPECT_GT(stats.num_preemptions_total, 0u);
    }
    if (v.config.enable_prefix_caching) {
      EXPECT_GT(stats.prefix_cache_hits_total, 0u);
    }
    EXPECT_EQ(stats.request_success_total["length"], prompts.size());
    EXPECT_EQ(stats.kv_cache_usage, 0.0);
  }
}

// A quantized cache keeps every engine path bitwise: each request's greedy
// tokens are the same alone, batched, chunked at odd budgets, preempted and
// recomputed, with and without prefix caching (one engine = one KV dtype, so
// a cached block is always of the run's dtype).
TEST_F(EngineModelTest, QuantizedKvOutputsDoNotDependOnBatchingChunkingPreemptionOrCaching) {
  struct Dtypes { DType k, v; int64_t bytes_per_token; };
  // stories260K: 5 layers x one 32-value row for K and for V.
  const Dtypes dtypes[] = {{DType::kQ8_0, DType::kQ8_0, 5 * 2 * 34},
                           {DType::kQ4_0, DType::kQ4_0, 5 * 2 * 18},
                           {DType::kQ8_0, DType::kQ4_0, 5 * (34 + 18)}};
  for (const Dtypes& d : dtypes) {
    SCOPED_TRACE(std::string(DTypeName(d.k)) + "/" + DTypeName(d.v));
    EngineConfig base = BaseConfig();
    base.kv_cache_dtype = d.k;
    base.kv_cache_dtype_v = d.v;
    auto engine = Engine::Create(base);
    ASSERT_TRUE(engine.ok()) << engine.status().message();
    const std::vector<Ids> prompts = Prompts((*engine)->tokenizer(), 16);
    const int32_t kMaxTokens = 16;
    const std::vector<Outcome> alone =
        RunOn(**engine, GreedyRequests(prompts, kMaxTokens), /*alone=*/true);
    ASSERT_EQ(alone.size(), prompts.size());
    const EngineStats first = (*engine)->GetStats();
    // Capped at max_num_seqs (64) x max_model_len (256).
    EXPECT_EQ(first.kv_cache_capacity_tokens,
              std::min<int64_t>((64LL << 20) / d.bytes_per_token / 16 * 16, 64 * 256));
    engine->reset();
    std::vector<std::pair<std::string, EngineConfig>> variants;
    {
      EngineConfig c = base;
      c.max_num_batched_tokens = 7;
      c.max_num_partial_prefills = 2;
      variants.push_back({"budget 7", c});
      c = base;
      c.enable_prefix_caching = false;
      variants.push_back({"no prefix caching", c});
      c = base;
      c.block_size = 8;
      c.kv_cache_memory_bytes = (256 + 64) * d.bytes_per_token;
      variants.push_back({"tiny KV (preemption)", c});
    }
    for (const auto& [name, config] : variants) {
      SCOPED_TRACE(name);
      EngineStats stats;
      std::vector<Outcome> together = RunTogether(config, prompts, kMaxTokens, &stats);
      ASSERT_EQ(together.size(), prompts.size());
      for (size_t i = 0; i < prompts.size(); ++i) {
        EXPECT_EQ(together[i].tokens, alone[i].tokens) << "request " << i;
      }
      if (name == "tiny KV (preemption)") {
        EXPECT_GT(stats.num_preemptions_total, 0u);
      }
      if (config.enable_prefix_caching) {
        EXPECT_GT(stats.prefix_cache_hits_total, 0u);
      }
    }
  }
}

// Bad configs fail at start-up with the reason: a KV dtype that is not a KV
// dtype names the choices; a KV budget below one sequence the length.
TEST_F(EngineModelTest, BadConfigsFailAtStartUpWithTheReason) {
  EngineConfig bad_dtype = BaseConfig();
  bad_dtype.kv_cache_dtype = DType::kQ4_K;
  EngineConfig small_kv = BaseConfig();
  small_kv.kv_cache_memory_bytes = 100 * 640;
  for (const auto& [config, needle] : {std::pair{bad_dtype, "f16, bf16, f32, q8_0, q4_0"},
                                       std::pair{small_kv, "max_model_len 256"}}) {
    auto e = Engine::Create(config);
    ASSERT_FALSE(e.ok()) << needle;
    EXPECT_NE(e.status().message().find(needle), std::string::npos) << e.status().message();
  }
}

TEST_F(EngineModelTest, SixtyFourTogetherMatchAlone) {
  auto engine = Engine::Create(BaseConfig());
  ASSERT_TRUE(engine.ok());
  const std::vector<Ids> prompts = Prompts((*engine)->tokenizer(), 64);
  std::vector<Outcome> alone = RunOn(**engine, GreedyRequests(prompts, 8), /*alone=*/true);
  engine->reset();
  std::vector<Outcome> together = RunTogether(BaseConfig(), prompts, 8);
  ASSERT_EQ(alone.size(), 64u);
  ASSERT_EQ(together.size(), 64u);
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(together[i].tokens, alone[i].tokens) << i;
}

TEST_F(EngineModelTest, RejectsBadRequestsWithTheNumbers) {
  auto engine = Engine::Create(BaseConfig());
  ASSERT_TRUE(engine.ok());
  auto r = (*engine)->AddRequest(Greedy({1, 2, 3}, 254));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("prompt (3 tokens) + max_tokens (254) = 257 exceeds max_model_len 256"),
            std::string::npos)
      << r.status().message();
  EXPECT_FALSE((*engine)->AddRequest(Greedy({}, 4)).ok());
  EXPECT_FALSE((*engine)->AddRequest(Greedy({1, 512}, 4)).ok());
  EngineRequest dup = Greedy({1}, 100);
  dup.request_id = "x";
  ASSERT_TRUE((*engine)->AddRequest(dup).ok());
  EXPECT_FALSE((*engine)->AddRequest(dup).ok());
}

TEST_F(EngineModelTest, AbortFinishesWithAbortAndFreesKv) {
  auto engine = Engine::Create(BaseConfig());
  ASSERT_TRUE(engine.ok());
  EngineRequest r = Greedy({1}, 250);
  r.request_id = "long";
  auto ch = (*engine)->AddRequest(r);
  ASSERT_TRUE(ch.ok());
  ASSERT_TRUE((*ch)->Pop(std::chrono::seconds(30)).has_value());  // first token
  (*engine)->Abort("long");
  Outcome o = Drain(**ch);
  EXPECT_EQ(o.reason, FinishReason::kAbort);
  // Stats are published after the step that freed the blocks.
  for (int i = 0; i < 100 && (*engine)->GetStats().kv_cache_usage > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ((*engine)->GetStats().kv_cache_usage, 0.0);
  EXPECT_EQ((*engine)->GetStats().request_success_total["abort"], 1u);
}

// WaitForOutputs sleeps until a step delivers outputs: it times out on an
// idle engine with the generation unchanged, and wakes with a new one once a
// request produces tokens; every output it announced can then be popped.
TEST_F(EngineModelTest, WaitForOutputsWakesWhenAStepDelivers) {
  auto engine = Engine::Create(BaseConfig());
  ASSERT_TRUE(engine.ok());
  const uint64_t g0 = (*engine)->WaitForOutputs(0, std::chrono::milliseconds(0));
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ((*engine)->WaitForOutputs(g0, std::chrono::milliseconds(50)), g0);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(45));
  auto ch = (*engine)->AddRequest(Greedy({1}, 5));
  ASSERT_TRUE(ch.ok());
  uint64_t g = g0;
  int tokens = 0;
  bool finished = false;
  for (int i = 0; i < 100 && !finished; ++i) {
    const uint64_t next = (*engine)->WaitForOutputs(g, std::chrono::seconds(10));
    ASSERT_NE(next, g) << "no output within 10 s";
    g = next;
    while (auto o = (*ch)->Pop(std::chrono::milliseconds(0))) {
      tokens += (int)o->new_token_ids.size();
      finished = o->finished;
    }
  }
  EXPECT_TRUE(finished);
  EXPECT_EQ(tokens, 5);
}

TEST_F(EngineModelTest, ShutdownAbortsRunningRequests) {
  auto engine = Engine::Create(BaseConfig());
  ASSERT_TRUE(engine.ok());
  auto ch = (*engine)->AddRequest(Greedy({1}, 250));
  ASSERT_TRUE(ch.ok());
  (*engine)->Shutdown();
  Outcome o = Drain(**ch);
  EXPECT_TRUE(o.reason == FinishReason::kAbort || o.reason == FinishReason::kLength);
  EXPECT_FALSE((*engine)->AddRequest(Greedy({1}, 4)).ok());
}

TEST_F(EngineModelTest, ConcurrentClientsAndAbortsEachGetOneFinalOutput) {
  auto engine = Engine::Create(BaseConfig());
  ASSERT_TRUE(engine.ok());
  Engine& e = **engine;
  std::vector<std::thread> clients;
  std::atomic<int> finished{0}, aborted{0}, errors{0};
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&, c] {
      for (int i = 0; i < 8; ++i) {
        EngineRequest r = Greedy({1, 403, 407}, 20 + i);
        r.request_id = "c" + std::to_string(c) + "-" + std::to_string(i);
        auto ch = e.AddRequest(r);
        if (!ch.ok()) {
          ++errors;
          continue;
        }
        if (i % 3 == 0) e.Abort(r.request_id);
        Outcome o = Drain(**ch);
        ++finished;
        if (o.reason == FinishReason::kAbort) ++aborted;
        if (o.reason == FinishReason::kLength && o.tokens.size() != (size_t)(20 + i)) ++errors;
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(finished.load(), 32);
  EngineStats st = e.GetStats();
  EXPECT_EQ(st.request_success_total["abort"], (uint64_t)aborted.load());
  EXPECT_EQ(st.request_success_total["length"] + st.request_success_total["abort"], 32u);
  EXPECT_EQ(st.kv_cache_usage, 0.0);
  EXPECT_EQ(st.num_running + st.num_waiting, 0);
}

TEST_F(EngineModelTest, StopsAtEosUnlessIgnored) {
  auto engine = Engine::Create(BaseConfig());
  ASSERT_TRUE(engine.ok());
  EngineRequest r = Greedy({1}, 250);
  r.sampling.ignore_eos = false;
  auto ch = (*engine)->AddRequest(r);
  ASSERT_TRUE(ch.ok());
  Outcome o = Drain(**ch);
  // Whatever it does, a "stop" must end on an end-of-generation token.
  if (o.reason == FinishReason::kStop) {
    ASSERT_FALSE(o.tokens.empty());
    EXPECT_TRUE((*engine)->tokenizer().IsEog(o.tokens.back()));
  } else {
    EXPECT_EQ(o.reason, FinishReason::kLength);
  }
  EXPECT_EQ((*engine)->KvSummary().rfind("KV cache: ", 0), 0u);
}

TEST_F(EngineModelTest, StatsKeepRecentStepsAndTheKvShape) {
  EngineConfig config = BaseConfig();
  config.max_num_batched_tokens = 512;
  EngineStats st;
  // One 40-token prompt, 10 tokens: prefill (one step, or chunks), then 9
  // one-token decode steps.
  std::vector<Outcome> out = RunTogether(config, {Ids(40, 5)}, 10, &st);
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out[0].tokens.size(), 10u);
  ASSERT_EQ(st.recent_steps.size(), st.num_steps_total);
  int32_t prefill = 0, decode = 0;
  for (size_t i = 0; i < st.recent_steps.size(); ++i) {
    const StepStats& s = st.recent_steps[i];
    prefill += s.num_prefill_tokens;
    decode += s.num_scheduled_tokens - s.num_prefill_tokens;
    if (i > 0) {
      EXPECT_GE(s.start_s, st.recent_steps[i - 1].start_s) << i;
    }
  }
  EXPECT_EQ(st.recent_steps.front().num_prefill_tokens, st.recent_steps.front().num_scheduled_tokens);
  // A prompt's last chunk may be a single token, which counts as decode-shaped.
  EXPECT_EQ(prefill + decode, 40 + 9);
  EXPECT_GE(prefill, 39);
  EXPECT_GT(st.num_kv_blocks, 0);
  EXPECT_EQ(st.block_size, config.block_size);
  EXPECT_EQ(st.max_num_seqs, config.max_num_seqs);
  EXPECT_GT(st.kv_cache_bytes, 0);
}

// A scripted constraint: masks nothing, but after the sampled tokens listed
// in force_after it forces the given tokens (jump-forward), and it completes
// after complete_after sampled tokens.
class ScriptedConstraint : public TokenConstraint {
 public:
  std::map<int32_t, Ids> force_after;  // sampled-token count -> tokens forced then
  int32_t complete_after = 1 << 30;
  std::unique_ptr<TokenConstraintState> NewState() const override {
    return std::make_unique<State>(this);
  }

 private:
  class State : public TokenConstraintState {
   public:
    explicit State(const ScriptedConstraint* c) : c_(c) {}
    void MaskLogits(std::span<float>, int32_t) override {}
    void Accept(int32_t) override { ++sampled_; }
    std::vector<int32_t> ForcedTokens(int32_t max_tokens) override {
      auto it = c_->force_after.find(sampled_);
      if (it == c_->force_after.end() || forced_done_.count(sampled_)) return {};
      forced_done_.insert(sampled_);
      Ids f = it->second;
      if ((int32_t)f.size() > max_tokens) f.resize(max_tokens);
      return f;
    }
    bool IsComplete() const override { return sampled_ >= c_->complete_after; }

   private:
    const ScriptedConstraint* c_;
    int32_t sampled_ = 0;
    std::set<int32_t> forced_done_;
  };
};

// One greedy request under `constraint` on `engine`, to its end.
Outcome RunConstrained(Engine& engine, const Ids& prompt, int32_t max_tokens,
                       std::shared_ptr<const TokenConstraint> constraint) {
  EngineRequest r = Greedy(prompt, max_tokens);
  r.sampling.constraint = std::move(constraint);
  std::vector<Outcome> out = RunOn(engine, {r}, /*alone=*/true);
  return out.empty() ? Outcome{} : out[0];
}

TEST_F(EngineModelTest, JumpForwardTokensAreComputedLikeSampledOnesAndCounted) {
  auto engine = Engine::Create(BaseConfig());
  ASSERT_TRUE(engine.ok());
  auto script = std::make_shared<ScriptedConstraint>();
  script->force_after[2] = {300, 301, 302};
  script->force_after[5] = {400};
  script->complete_after = 8;
  const Ids prompt = {1, 403, 407};
  const Outcome o = RunConstrained(**engine, prompt, 40, script);
  // 8 sampled + 4 forced, then complete: "stop" although ignore_eos is set.
  ASSERT_EQ(o.tokens.size(), 12u);
  EXPECT_EQ(o.reason, FinishReason::kStop);
  EXPECT_EQ(Ids(o.tokens.begin() + 2, o.tokens.begin() + 5), Ids({300, 301, 302}));
  EXPECT_EQ(o.tokens[8], 400);
  EXPECT_EQ(o.metrics.forced_tokens, 4);
  EXPECT_EQ((*engine)->GetStats().forced_tokens_total, 4u);
  // Every sampled token after a forced run is the greedy token of the whole
  // prefix: the forced tokens' KV was computed like any other.
  for (size_t k : {5u, 9u}) {
    Ids prefix = prompt;
    prefix.insert(prefix.end(), o.tokens.begin(), o.tokens.begin() + k);
    auto one = (*engine)->AddRequest(Greedy(prefix, 1));
    ASSERT_TRUE(one.ok());
    EXPECT_EQ(Drain(**one).tokens, Ids({o.tokens[k]})) << "after " << k << " tokens";
  }
}

TEST_F(EngineModelTest, ForcedTokensStopAtMaxTokens) {
  auto engine = Engine::Create(BaseConfig());
  ASSERT_TRUE(engine.ok());
  auto script = std::make_shared<ScriptedConstraint>();
  script->force_after[1] = {300, 301, 302, 303, 304, 305};
  const Outcome o = RunConstrained(**engine, {1}, 4, script);
  EXPECT_EQ(o.tokens.size(), 4u);
  EXPECT_EQ(o.reason, FinishReason::kLength);
}

// A request with a constraint never speculates (its mask depends on every
// token before); unconstrained requests beside it do.
TEST_F(EngineModelTest, ConstrainedRequestsDoNotSpeculate) {
  auto script = std::make_shared<ScriptedConstraint>();
  script->force_after[2] = {300, 301, 302};
  script->complete_after = 20;
  EngineRequest constrained = Greedy({1, 403, 407}, 40);
  constrained.sampling.constraint = script;
  auto plain = Engine::Create(BaseConfig());
  ASSERT_TRUE(plain.ok());
  auto ch = (*plain)->AddRequest(constrained);
  ASSERT_TRUE(ch.ok());
  const Outcome reference = Drain(**ch);
  plain->reset();

  EngineConfig c = BaseConfig();
  c.speculative_method = SpecMethod::kNgram;
  c.num_speculative_tokens = 4;
  c.speculative_adaptive = false;
  auto spec = Engine::Create(c);
  ASSERT_TRUE(spec.ok());
  ch = (*spec)->AddRequest(constrained);
  ASSERT_TRUE(ch.ok());
  const Outcome o = Drain(**ch);
  EXPECT_EQ(o.tokens, reference.tokens);
  EXPECT_EQ(o.metrics.spec_num_drafts, 0);
  EXPECT_EQ((*spec)->GetStats().spec_num_drafts_total, 0u);
  // An unconstrained request on the same engine does speculate.
  ch = (*spec)->AddRequest(Greedy({1}, 60));
  ASSERT_TRUE(ch.ok());
  EXPECT_GT(Drain(**ch).metrics.spec_num_drafts, 0);
}

}  // namespace
}  // namespace tern
