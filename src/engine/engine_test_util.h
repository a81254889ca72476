// Fixtures shared by the engine's tests: the stories260K model, a small
// engine config, greedy requests, draining a request's output channel,
// prompts cut from the sample stories, and running requests on a fresh
// engine.
#ifndef TERN_ENGINE_ENGINE_TEST_UTIL_H_
#define TERN_ENGINE_ENGINE_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/paths.h"
#include "engine/engine.h"
#include "tokenizer/tokenizer.h"

namespace tern::engine_test {

using Ids = std::vector<int32_t>;

inline std::string ModelPath() { return ModelsDir() + "/stories260K.gguf"; }

// One thread, 256 positions, 64 MiB of KV.
inline EngineConfig BaseConfig() {
  EngineConfig c;
  c.model_path = ModelPath();
  c.num_threads = 1;
  c.max_model_len = 256;
  c.kv_cache_memory_bytes = 64 << 20;
  return c;
}

inline EngineRequest Greedy(Ids prompt, int32_t max_tokens) {
  EngineRequest r;
  r.prompt_token_ids = std::move(prompt);
  r.sampling.temperature = 0;
  r.sampling.max_tokens = max_tokens;
  r.sampling.ignore_eos = true;
  return r;
}

struct Outcome {
  Ids tokens;
  FinishReason reason = FinishReason::kNone;
  RequestMetrics metrics;
};

// Every token of one request until it finishes (a test failure if nothing
// arrives within `timeout`).
inline Outcome Drain(OutputChannel& ch, std::chrono::seconds timeout = std::chrono::seconds(60)) {
  Outcome o;
  while (true) {
    std::optional<RequestOutput> out = ch.Pop(timeout);
    if (!out) {
      ADD_FAILURE() << "timed out waiting for output";
      return o;
    }
    o.tokens.insert(o.tokens.end(), out->new_token_ids.begin(), out->new_token_ids.end());
    if (out->finished) {
      o.reason = out->finish_reason;
      o.metrics = out->metrics;
      return o;
    }
  }
}

// n prompts cut from the sample stories at varied lengths; every third
// starts the text (a shared prefix, as chat requests share system prompts).
inline std::vector<Ids> StoryPrompts(const Tokenizer& tok, int n) {
  std::ifstream in(ModelsDir() + "/text/tinystories_sample.txt");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  Ids all = tok.Encode(text, true, false);
  std::vector<Ids> prompts;
  for (int i = 0; i < n; ++i) {
    const size_t start = (i % 3 == 0) ? 0 : (size_t)(i * 37) % 400;
    const size_t len = 1 + (size_t)(i * 29) % 90;
    Ids p;
    if (start > 0) p.push_back(tok.bos_id());
    p.insert(p.end(), all.begin() + start, all.begin() + std::min(all.size(), start + len));
    prompts.push_back(p);
  }
  return prompts;
}

// Runs requests on `engine`: all at once, or one after another when
// `alone`. Outcomes in request order; empty (and a test failure) when a
// request is refused.
inline std::vector<Outcome> RunOn(Engine& engine, const std::vector<EngineRequest>& requests,
                                  bool alone) {
  std::vector<Outcome> out;
  std::vector<std::shared_ptr<OutputChannel>> channels;
  for (const EngineRequest& r : requests) {
    auto ch = engine.AddRequest(r);
    EXPECT_TRUE(ch.ok()) << ch.status().message();
    if (!ch.ok()) return {};
    if (alone) {
      out.push_back(Drain(**ch));
    } else {
      channels.push_back(*ch);
    }
  }
  for (auto& ch : channels) out.push_back(Drain(*ch));
  return out;
}

// The same on a fresh engine of `config` (empty, and a test failure, when it
// does not start).
inline std::vector<Outcome> RunOnFreshEngine(const EngineConfig& config,
                                             const std::vector<EngineRequest>& requests,
                                             bool alone, EngineStats* stats = nullptr) {
  auto engine = Engine::Create(config);
  EXPECT_TRUE(engine.ok()) << engine.status().message();
  if (!engine.ok()) return {};
  std::vector<Outcome> out = RunOn(**engine, requests, alone);
  if (stats) *stats = (*engine)->GetStats();
  return out;
}

inline std::vector<EngineRequest> GreedyRequests(const std::vector<Ids>& prompts,
                                                 int32_t max_tokens) {
  std::vector<EngineRequest> requests;
  for (const Ids& p : prompts) requests.push_back(Greedy(p, max_tokens));
  return requests;
}

// Tests on the stories260K model: skipped where it is missing.
class StoriesModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!FileExists(ModelPath())) GTEST_SKIP() << "test model missing: " << ModelPath();
  }
};

}  // namespace tern::engine_test

#endif  // TERN_ENGINE_ENGINE_TEST_UTIL_H_
