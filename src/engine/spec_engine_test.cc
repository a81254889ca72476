// Speculative decoding through the engine on stories260K: greedy outputs
// with proposals (n-gram, k = 1..8) equal the outputs without them, bit for
// bit, alone and in batches of 1/8/32, with chunked prefill, preemption and
// prefix caching; structured-output requests never speculate.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "base/paths.h"
#include "engine/engine.h"
#include "engine/engine_test_util.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "spec/model_copy.h"
#include "tokenizer/tokenizer.h"

namespace tern {
namespace {

using namespace engine_test;

EngineConfig Ngram(EngineConfig c, int32_t k) {
  c.speculative_method = SpecMethod::kNgram;
  c.num_speculative_tokens = k;
  c.ngram_max = 3;
  c.ngram_min = 1;
  c.speculative_adaptive = false;  // a fixed k (adaptive: its own tests)
  return c;
}

Ids Drain(OutputChannel& ch, RequestMetrics* metrics) {
  Outcome o = engine_test::Drain(ch);
  if (metrics) *metrics = o.metrics;
  return o.tokens;
}

std::vector<Ids> Tokens(const std::vector<Outcome>& outcomes) {
  std::vector<Ids> out;
  for (const Outcome& o : outcomes) out.push_back(o.tokens);
  return out;
}

// Greedy requests on a fresh engine, all at once or one at a time when alone.
std::vector<Ids> RunAll(const EngineConfig& config, const std::vector<Ids>& prompts,
                        int32_t max_tokens, bool alone, EngineStats* stats = nullptr) {
  return Tokens(RunOnFreshEngine(config, GreedyRequests(prompts, max_tokens), alone, stats));
}

class SpecEngineTest : public StoriesModelTest {
 protected:
  // Prompts cut from the sample stories at varied lengths; a third share a start.
  static std::vector<Ids> Prompts(int n) {
    auto engine = Engine::Create(BaseConfig());
    EXPECT_TRUE(engine.ok());
    return StoryPrompts((*engine)->tokenizer(), n);
  }
};

TEST_F(SpecEngineTest, NgramGreedyEqualsPlainDecodingAloneAndBatched) {
  const std::vector<Ids> prompts = Prompts(32);
  const int32_t kMaxTokens = 40;
  const std::vector<Ids> reference = RunAll(BaseConfig(), prompts, kMaxTokens, true);
  ASSERT_EQ(reference.size(), prompts.size());
  uint64_t accepted = 0;
  for (int32_t k : {1, 2, 3, 5, 8}) {
    SCOPED_TRACE("k " + std::to_string(k));
    // Batch 1: one request at a time.
    EngineStats stats;
    const std::vector<Ids> alone = RunAll(Ngram(BaseConfig(), k), prompts, kMaxTokens, true, &stats);
    ASSERT_EQ(alone.size(), prompts.size());
    for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(alone[i], reference[i]) << "request " << i;
    EXPECT_GT(stats.spec_num_drafts_total, 0u);
    EXPECT_LE(stats.spec_num_accepted_tokens_total, stats.spec_num_draft_tokens_total);
    accepted += stats.spec_num_accepted_tokens_total;
    // Batches of 8 and 32.
    for (size_t batch : {8u, 32u}) {
      SCOPED_TRACE("batch " + std::to_string(batch));
      const std::vector<Ids> sub(prompts.begin(), prompts.begin() + batch);
      const std::vector<Ids> together = RunAll(Ngram(BaseConfig(), k), sub, kMaxTokens, false, &stats);
      ASSERT_EQ(together.size(), batch);
      for (size_t i = 0; i < batch; ++i) EXPECT_EQ(together[i], reference[i]) << "request " << i;
      EXPECT_EQ(stats.kv_cache_usage, 0.0);
    }
  }
  // The stories repeat themselves: n-gram proposals get accepted.
  EXPECT_GT(accepted, 0u);
}

TEST_F(SpecEngineTest, NgramGreedyKeepsChunkingPreemptionAndPrefixCaching) {
  const std::vector<Ids> prompts = Prompts(24);
  const int32_t kMaxTokens = 32;
  const std::vector<Ids> reference = RunAll(BaseConfig(), prompts, kMaxTokens, true);
  struct Variant {
    std::string name;
    EngineConfig config;
  };
  std::vector<Variant> variants;
  for (int32_t budget : {1, 7, 64}) {
    EngineConfig c = Ngram(BaseConfig(), 4);
    c.max_num_batched_tokens = budget;
    c.max_num_partial_prefills = budget == 7 ? 2 : 1;
    variants.push_back({"budget " + std::to_string(budget), c});
  }
  {
    EngineConfig c = Ngram(BaseConfig(), 6);
    c.scheduling_policy = SchedulingPolicy::kDecodeProtect;
    variants.push_back({"decode-protect", c});
    c.enable_prefix_caching = false;
    variants.push_back({"no prefix caching", c});
    c.enable_chunked_prefill = false;
    variants.push_back({"no chunking", c});
  }
  for (int32_t k : {2, 8}) {
    // Room for 256 + 64 tokens: forces preemption.
    EngineConfig c = Ngram(BaseConfig(), k);
    c.block_size = 8;
    c.kv_cache_memory_bytes = (256 + 64) * 640;  // 640 bytes/token at f16
    variants.push_back({"tiny KV (preemption) k " + std::to_string(k), c});
  }
  for (const Variant& v : variants) {
    SCOPED_TRACE(v.name);
    EngineStats stats;
    const std::vector<Ids> together = RunAll(v.config, prompts, kMaxTokens, false, &stats);
    ASSERT_EQ(together.size(), prompts.size());
    for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(together[i], reference[i]) << "request " << i;
    if (v.name.starts_with("tiny KV")) {
      EXPECT_GT(stats.num_preemptions_total, 0u);
    }
    if (v.config.enable_prefix_caching) {
      EXPECT_GT(stats.prefix_cache_hits_total, 0u);
    }
    // A budget of 1 token has no room for proposals.
    if (v.config.max_num_batched_tokens > 1) {
      EXPECT_GT(stats.spec_num_accepted_tokens_total, 0u);
    } else {
      EXPECT_EQ(stats.spec_num_draft_tokens_total, 0u);
    }
    EXPECT_EQ(stats.request_success_total["length"], prompts.size());
    EXPECT_EQ(stats.kv_cache_usage, 0.0);
  }
}

TEST_F(SpecEngineTest, MetricsCountDraftsAndAcceptedTokens) {
  const std::vector<Ids> prompts = Prompts(4);
  auto engine = Engine::Create(Ngram(BaseConfig(), 4));
  ASSERT_TRUE(engine.ok());
  int64_t drafts = 0, draft_tokens = 0, accepted = 0;
  for (const Ids& p : prompts) {
    auto ch = (*engine)->AddRequest(Greedy(p, 48));
    ASSERT_TRUE(ch.ok());
    RequestMetrics m;
    const Ids out = Drain(**ch, &m);
    EXPECT_EQ(out.size(), 48u);
    EXPECT_EQ(m.generated_tokens, 48);
    EXPECT_LE(m.spec_num_accepted_tokens, m.spec_num_draft_tokens);
    EXPECT_LE(m.spec_num_draft_tokens, 4 * m.spec_num_drafts);
    drafts += m.spec_num_drafts;
    draft_tokens += m.spec_num_draft_tokens;
    accepted += m.spec_num_accepted_tokens;
  }
  const EngineStats st = (*engine)->GetStats();
  EXPECT_EQ((int64_t)st.spec_num_drafts_total, drafts);
  EXPECT_EQ((int64_t)st.spec_num_draft_tokens_total, draft_tokens);
  EXPECT_EQ((int64_t)st.spec_num_accepted_tokens_total, accepted);
  // Per position: accepted at position i implies accepted at every earlier one.
  uint64_t sum = 0;
  for (size_t i = 0; i < st.spec_accepted_per_position.size(); ++i) {
    sum += st.spec_accepted_per_position[i];
    if (i > 0) {
      EXPECT_LE(st.spec_accepted_per_position[i], st.spec_accepted_per_position[i - 1]);
    }
  }
  EXPECT_EQ(sum, st.spec_num_accepted_tokens_total);
  // Each step emits accepted + 1 tokens: fewer steps than tokens.
  EXPECT_LT(st.num_steps_total, st.generation_tokens_total);
}

// Sampling with proposals (rejection sampling in the engine step): a seeded
// request run alone gives the same tokens every time, batched runs complete,
// and proposals are both accepted and rejected. (Alone vs batched is not
// compared: a batch's shape may move logits by rounding, which only greedy
// decoding is immune to.)
// A perturbed copy of stories260K (written once per test run) as the draft.
std::string DraftPath(double noise) {
  const std::string path = ::testing::TempDir() + "/spec_draft_" + std::to_string((int)(noise * 1000)) +
                           ".gguf";
  if (!FileExists(path)) {
    auto src = gguf::GgufFile::Open(ModelPath());
    EXPECT_TRUE(src.ok());
    Status st = WritePerturbedCopy(**src, path, noise, 42);
    EXPECT_TRUE(st.ok()) << st.message();
  }
  return path;
}

EngineConfig Draft(EngineConfig c, int32_t k, double noise) {
  c.speculative_method = SpecMethod::kDraft;
  c.speculative_model = DraftPath(noise);
  c.num_speculative_tokens = k;
  c.speculative_adaptive = false;
  return c;
}

TEST_F(SpecEngineTest, SeededSamplingWithProposalsIsReproducible) {
  const std::vector<Ids> prompts = Prompts(8);
  for (const EngineConfig& config : {Ngram(BaseConfig(), 4), Draft(BaseConfig(), 3, 0.3)}) {
  SCOPED_TRACE(SpecMethodName(config.speculative_method));
  std::vector<EngineRequest> requests;
  for (size_t i = 0; i < prompts.size(); ++i) {
    EngineRequest r;
    r.prompt_token_ids = prompts[i];
    r.sampling.temperature = 0.8f;
    r.sampling.top_p = 0.95f;
    r.sampling.max_tokens = 48;
    r.sampling.ignore_eos = true;
    r.sampling.seed = 100 + i;
    r.sampling.has_seed = true;
    requests.push_back(std::move(r));
  }
  auto sample = [&](bool alone, EngineStats* stats) {
    return Tokens(RunOnFreshEngine(config, requests, alone, stats));
  };
  EngineStats a_stats, b_stats, c_stats;
  const std::vector<Ids> a = sample(true, &a_stats);
  const std::vector<Ids> b = sample(true, &b_stats);
  const std::vector<Ids> c = sample(false, &c_stats);
  ASSERT_EQ(a.size(), prompts.size());
  ASSERT_EQ(c.size(), prompts.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].size(), 48u);
    EXPECT_EQ(c[i].size(), 48u);
    EXPECT_EQ(a[i], b[i]) << "request " << i;
  }
  EXPECT_EQ(c_stats.generation_tokens_total, 48u * prompts.size());
  EXPECT_GT(a_stats.spec_num_accepted_tokens_total, 0u);
  EXPECT_LT(a_stats.spec_num_accepted_tokens_total, a_stats.spec_num_draft_tokens_total);
  }
}

TEST_F(SpecEngineTest, DraftGreedyEqualsPlainDecodingAloneBatchedPreemptedCached) {
  const std::vector<Ids> prompts = Prompts(32);
  const int32_t kMaxTokens = 32;
  const std::vector<Ids> reference = RunAll(BaseConfig(), prompts, kMaxTokens, true);
  ASSERT_EQ(reference.size(), prompts.size());
  struct Variant {
    std::string name;
    EngineConfig config;
    size_t batch;
    bool alone;
  };
  std::vector<Variant> variants;
  for (int32_t k : {1, 4, 8}) {
    variants.push_back({"alone k " + std::to_string(k), Draft(BaseConfig(), k, 0.1), 32, true});
    variants.push_back({"batch 8 k " + std::to_string(k), Draft(BaseConfig(), k, 0.1), 8, false});
    variants.push_back({"batch 32 k " + std::to_string(k), Draft(BaseConfig(), k, 0.1), 32, false});
  }
  {
    EngineConfig c = Draft(BaseConfig(), 3, 0.1);
    c.max_num_batched_tokens = 7;
    c.max_num_partial_prefills = 2;
    variants.push_back({"budget 7", c, 32, false});
    c = Draft(BaseConfig(), 5, 0.1);
    c.block_size = 8;
    c.kv_cache_memory_bytes = (256 + 64) * 640;  // forces preemption
    variants.push_back({"tiny KV (preemption)", c, 32, false});
    c = Draft(BaseConfig(), 2, 0.1);
    c.scheduling_policy = SchedulingPolicy::kDecodeProtect;
    c.enable_prefix_caching = false;
    variants.push_back({"decode-protect, no prefix caching", c, 32, false});
  }
  for (const Variant& v : variants) {
    SCOPED_TRACE(v.name);
    EngineStats stats;
    const std::vector<Ids> sub(prompts.begin(), prompts.begin() + v.batch);
    const std::vector<Ids> out = RunAll(v.config, sub, kMaxTokens, v.alone, &stats);
    ASSERT_EQ(out.size(), v.batch);
    for (size_t i = 0; i < v.batch; ++i) EXPECT_EQ(out[i], reference[i]) << "request " << i;
    EXPECT_GT(stats.spec_num_accepted_tokens_total, 0u);
    EXPECT_LT(stats.spec_num_accepted_tokens_total, stats.spec_num_draft_tokens_total);
    if (v.name.starts_with("tiny KV")) {
      EXPECT_GT(stats.num_preemptions_total, 0u);
    }
    // (8 short prompts arriving together share no computed block.)
    if (v.config.enable_prefix_caching && v.batch == 32) {
      EXPECT_GT(stats.prefix_cache_hits_total, 0u);
    }
    EXPECT_EQ(stats.kv_cache_usage, 0.0);
  }
}

TEST_F(SpecEngineTest, IdenticalDraftIsAlmostAlwaysAccepted) {
  const std::vector<Ids> prompts = Prompts(4);
  EngineStats stats;
  const std::vector<Ids> ref = RunAll(BaseConfig(), prompts, 40, true);
  const std::vector<Ids> out = RunAll(Draft(BaseConfig(), 4, 0.0), prompts, 40, true, &stats);
  EXPECT_EQ(out, ref);
  ASSERT_GT(stats.spec_num_draft_tokens_total, 0u);
  EXPECT_GT((double)stats.spec_num_accepted_tokens_total / stats.spec_num_draft_tokens_total, 0.95);
}

TEST_F(SpecEngineTest, DraftWithAnotherVocabularyIsRejectedNamingTheId) {
  auto src = gguf::GgufFile::Open(ModelPath());
  ASSERT_TRUE(src.ok());
  gguf::GgufWriter w;
  w.CopyMetadataFrom(**src);
  for (const auto& [key, value] : (*src)->metadata()) {
    if (key != "tokenizer.ggml.tokens") continue;
    gguf::Value tokens = value;
    tokens.array[37] = gguf::Value::String("<changed>");
    w.SetValue(key, tokens);
  }
  for (const gguf::TensorInfo& t : (*src)->tensors()) {
    ASSERT_TRUE(w.AddTensor(t.name, t.dtype, t.shape, t.data, t.num_bytes).ok());
  }
  const std::string path = ::testing::TempDir() + "/spec_other_vocab.gguf";
  ASSERT_TRUE(w.WriteFile(path).ok());
  EngineConfig c = BaseConfig();
  c.speculative_method = SpecMethod::kDraft;
  c.speculative_model = path;
  c.num_speculative_tokens = 4;
  auto e = Engine::Create(c);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("differs from the target's at token id 37"), std::string::npos)
      << e.status().message();
  c.speculative_model = "/nonexistent/draft.gguf";
  e = Engine::Create(c);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("/nonexistent/draft.gguf"), std::string::npos)
      << e.status().message();
}

// Adaptive k (the default): greedy outputs stay exact whatever k it picks.
TEST_F(SpecEngineTest, AdaptiveGreedyEqualsPlainDecoding) {
  const std::vector<Ids> prompts = Prompts(16);
  const std::vector<Ids> reference = RunAll(BaseConfig(), prompts, 32, true);
  for (EngineConfig c : {Ngram(BaseConfig(), 4), Draft(BaseConfig(), 4, 0.1)}) {
    SCOPED_TRACE(SpecMethodName(c.speculative_method));
    c.speculative_adaptive = true;
    EXPECT_EQ(RunAll(c, prompts, 32, true), reference);
    EXPECT_EQ(RunAll(c, prompts, 32, false), reference);
  }
}

// A draft that is always wrong: after its first rejections the measured
// acceptance is 0 and adaptive speculation stops proposing; with a fixed k
// every step keeps proposing.
TEST_F(SpecEngineTest, AdaptiveTurnsItselfOffWhenNothingIsAccepted) {
  const std::vector<Ids> prompts = Prompts(4);
  EngineConfig fixed = Draft(BaseConfig(), 4, 3.0);  // noise 3x the weights: garbage
  EngineConfig adaptive = fixed;
  adaptive.speculative_adaptive = true;
  EngineStats f, a;
  const std::vector<Ids> reference = RunAll(BaseConfig(), prompts, 48, true);
  EXPECT_EQ(RunAll(fixed, prompts, 48, true, &f), reference);
  EXPECT_EQ(RunAll(adaptive, prompts, 48, true, &a), reference);
  ASSERT_GT(f.spec_num_drafts_total, 0u);
  EXPECT_LT((double)f.spec_num_accepted_tokens_total / f.spec_num_draft_tokens_total, 0.1);
  EXPECT_GT(f.spec_num_drafts_total, 100u);  // ~every decode step of 4 x 48 tokens
  EXPECT_LT(a.spec_num_drafts_total, 12u);   // a few steps to measure, then off
}

// The benchmark pair (spec/model_copy.h): a grown target with the source as
// draft. With noise 0 the target computes the source's function; with
// noise its greedy output with speculation equals its own without.
TEST_F(SpecEngineTest, GrownTargetWithItsSourceAsDraftIsExact) {
  auto src = gguf::GgufFile::Open(ModelPath());
  ASSERT_TRUE(src.ok());
  const std::vector<Ids> prompts = Prompts(32);
  const std::vector<Ids> source_out = RunAll(BaseConfig(), prompts, 24, true);
  for (double noise : {0.0, 0.1}) {
    SCOPED_TRACE("noise " + std::to_string(noise));
    GrowOptions o;
    o.ffn_size = 384;
    o.extra_layers = 2;
    o.noise = noise;
    const std::string path = ::testing::TempDir() + "/spec_grown_" + std::to_string(noise) + ".gguf";
    ASSERT_TRUE(GrowModel(**src, path, o).ok());
    EngineConfig target = BaseConfig();
    target.model_path = path;
    const std::vector<Ids> plain = RunAll(target, prompts, 24, true);
    if (noise == 0) {
      EXPECT_EQ(plain, source_out);
    }
    EngineConfig spec = target;
    spec.speculative_method = SpecMethod::kDraft;
    spec.speculative_model = ModelPath();
    spec.speculative_adaptive = false;
    for (int32_t k : {1, 2, 4, 8}) {
      SCOPED_TRACE("k " + std::to_string(k));
      spec.num_speculative_tokens = k;
      EngineStats stats;
      EXPECT_EQ(RunAll(spec, prompts, 24, k == 1, &stats), plain);
      const double acceptance =
          (double)stats.spec_num_accepted_tokens_total / stats.spec_num_draft_tokens_total;
      if (noise == 0) {
        EXPECT_GT(acceptance, 0.95);
      } else {
        EXPECT_LT(acceptance, 0.95);
      }
    }
    // Batch 8, preempted.
    spec.num_speculative_tokens = 4;
    spec.block_size = 8;
    // Room for 128 tokens (7 layers x 128 B a token): 8 requests of ~50 tokens
    // are admitted a few at a time and preempt each other as they grow.
    spec.max_model_len = 128;
    spec.kv_cache_memory_bytes = 128 * 896;
    const std::vector<Ids> sub(prompts.begin(), prompts.begin() + 8);
    EngineStats stats;
    EXPECT_EQ(RunAll(spec, sub, 24, false, &stats), std::vector<Ids>(plain.begin(), plain.begin() + 8));
    EXPECT_GT(stats.num_preemptions_total, 0u);
  }
}

TEST_F(SpecEngineTest, BadSpeculativeConfigIsAClearError) {
  EngineConfig c = Ngram(BaseConfig(), 0);
  auto e = Engine::Create(c);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("--num-speculative-tokens must be in [1, 64], got 0"),
            std::string::npos)
      << e.status().message();
  c.num_speculative_tokens = 65;
  EXPECT_FALSE(Engine::Create(c).ok());
  c.num_speculative_tokens = 4;
  c.ngram_min = 3;
  c.ngram_max = 2;
  e = Engine::Create(c);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("--ngram-min"), std::string::npos) << e.status().message();
}

}  // namespace
}  // namespace tern
