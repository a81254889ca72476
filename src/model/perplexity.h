// PerplexityEvaluator: perplexity of a model on a token stream, by the
// convention of llama.cpp's perplexity tool, so figures compare:
//
//   tokens:  [ t0 ... t(ctx-1) | t(ctx) ... t(2ctx-1) | ... ]   (a partial tail
//             window 0            window 1                      is dropped)
//   each window runs on a fresh KV with its first token replaced by BOS;
//   rows ctx/2 .. ctx-2 are scored, row j predicting the window's token j+1:
//   ctx/2 - 1 scored positions per window.
//
// PPL = exp(mean NLL); its error exp(mean) * sqrt(var(NLL) / (N - 1)).
//
// Thread rules: one thread at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "model/model.h"
#include "model/sequence_runner.h"

namespace tern {

struct PerplexityOptions {
  int32_t ctx = 512;            // window length in tokens
  int32_t batch = 512;          // tokens per Forward call
  int32_t bos_id = -1;          // replaces each window's first token; -1 = keep
  DType kv_dtype = DType::kF32;  // K's, and V's unless kv_dtype_v is set
  std::optional<DType> kv_dtype_v;
  bool keep_logprobs = false;   // keep the log-softmax row of every scored position
};

class PerplexityEvaluator {
 public:
  // Fails when tokens hold fewer than 2 windows or ctx < 4.
  static StatusOr<std::unique_ptr<PerplexityEvaluator>> Create(
      Model& model, std::vector<int32_t> tokens, const PerplexityOptions& options,
      ThreadPool* pool);

  int32_t num_chunks() const { return num_chunks_; }
  int32_t chunks_done() const { return chunks_done_; }
  // Runs the next window.
  Status RunNextChunk();

  int64_t num_scored() const { return (int64_t)nll_.size(); }
  double Perplexity() const;       // over the windows run so far
  double PerplexityError() const;  // standard error of Perplexity()
  // Per scored position: the token it predicts and (keep_logprobs) its
  // log-softmax row [n_vocab].
  const std::vector<int32_t>& scored_tokens() const { return scored_tokens_; }
  const std::vector<float>& logprobs() const { return logprobs_; }
  // What scored_tokens() will hold once the first num_chunks windows have
  // run, known before any runs (a saved base run can be checked against it).
  std::vector<int32_t> TokensToScore(int32_t num_chunks) const;

 private:
  PerplexityEvaluator(Model& model, std::vector<int32_t> tokens,
                      const PerplexityOptions& options, ThreadPool* pool);

  Model& model_;
  std::vector<int32_t> tokens_;
  PerplexityOptions options_;
  SequenceRunner runner_;
  int32_t num_chunks_ = 0;
  int32_t chunks_done_ = 0;
  std::vector<double> nll_;
  std::vector<int32_t> scored_tokens_;
  std::vector<float> logprobs_;
};

// The set-up shared by the tools that run a text file through a model in
// these windows (`tern perplexity`, `tern imatrix`): the text read whole and
// tokenized by the caller's encoder, a thread pool, the evaluator and the
// number of windows to run. pool is declared before evaluator so that it
// outlives it.
struct PerplexityRun {
  size_t num_tokens = 0;   // tokens of the whole text
  int32_t num_chunks = 0;  // windows to run: all of them, or at most max_chunks
  int threads = 0;
  std::unique_ptr<ThreadPool> pool;
  std::unique_ptr<PerplexityEvaluator> evaluator;
};

// Reads text_path, tokenizes it with encode, starts `threads` threads (<= 0:
// ThreadPool::DefaultNumThreads()) and creates the evaluator; max_chunks <= 0
// runs every window. Errors name text_path.
StatusOr<PerplexityRun> PreparePerplexityRun(
    Model& model, const std::string& text_path,
    const std::function<std::vector<int32_t>(const std::string&)>& encode,
    const PerplexityOptions& options, int threads, int64_t max_chunks);

}  // namespace tern
