// Fixtures shared by the engine's tests: the stories260K model, a small
// engine config, greedy requests, draining a request's output channel, and
// prompts cut from the sample stories.
#ifndef TERN_ENGINE_ENGINE_TEST_UTIL_H_
#define TERN_ENGINE_ENGINE_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iterator>
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

}  // namespace tern::engine_test

#endif  // TERN_ENGINE_ENGINE_TEST_UTIL_H_
