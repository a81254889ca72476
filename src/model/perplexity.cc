#include "model/perplexity.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

namespace tern {

StatusOr<std::unique_ptr<PerplexityEvaluator>> PerplexityEvaluator::Create(
    Model& model, std::vector<int32_t> tokens, const PerplexityOptions& options,
    ThreadPool* pool) {
  if (options.ctx < 4) {
    return InvalidArgument("perplexity context must be at least 4 tokens, got " +
                           std::to_string(options.ctx));
  }
  if ((int64_t)tokens.size() < 2 * (int64_t)options.ctx) {
    return InvalidArgument("text has " + std::to_string(tokens.size()) +
                           " tokens; perplexity with a context of " +
                           std::to_string(options.ctx) + " needs at least " +
                           std::to_string(2 * options.ctx));
  }
  return std::unique_ptr<PerplexityEvaluator>(
      new PerplexityEvaluator(model, std::move(tokens), options, pool));
}

PerplexityEvaluator::PerplexityEvaluator(Model& model, std::vector<int32_t> tokens,
                                         const PerplexityOptions& options, ThreadPool* pool)
    : model_(model),
      tokens_(std::move(tokens)),
      options_(options),
      runner_(model, options.ctx, options.kv_dtype, options.kv_dtype_v.value_or(options.kv_dtype),
              pool, options.batch) {
  num_chunks_ = (int32_t)(tokens_.size() / options_.ctx);
}

Status PerplexityEvaluator::RunNextChunk() {
  if (chunks_done_ >= num_chunks_) return OutOfRange("all perplexity chunks are done");
  const int32_t ctx = options_.ctx;
  const size_t start = (size_t)chunks_done_ * ctx;
  std::vector<int32_t> window(tokens_.begin() + start, tokens_.begin() + start + ctx);
  if (options_.bos_id >= 0) window[0] = options_.bos_id;
  runner_.Reset();
  TERN_RETURN_IF_ERROR(runner_.Append(window, true));
  const int32_t n_vocab = model_.config().n_vocab;
  for (int32_t j = ctx / 2; j < ctx - 1; ++j) {
    std::span<const float> logits = runner_.Logits(j);
    const int32_t target = tokens_[start + j + 1];
    float max_logit = -INFINITY;
    for (float l : logits) max_logit = std::max(max_logit, l);
    double sum = 0;
    for (float l : logits) sum += std::exp((double)l - max_logit);
    const double log_z = max_logit + std::log(sum);
    nll_.push_back(log_z - logits[target]);
    scored_tokens_.push_back(target);
    if (options_.keep_logprobs) {
      for (int32_t v = 0; v < n_vocab; ++v) logprobs_.push_back((float)(logits[v] - log_z));
    }
  }
  ++chunks_done_;
  return Status::Ok();
}

std::vector<int32_t> PerplexityEvaluator::TokensToScore(int32_t num_chunks) const {
  const int32_t ctx = options_.ctx;
  std::vector<int32_t> out;
  for (int32_t w = 0; w < std::min(num_chunks, num_chunks_); ++w) {
    const size_t start = (size_t)w * ctx;
    for (int32_t j = ctx / 2; j < ctx - 1; ++j) out.push_back(tokens_[start + j + 1]);
  }
  return out;
}

double PerplexityEvaluator::Perplexity() const {
  if (nll_.empty()) return 0;
  double sum = 0;
  for (double v : nll_) sum += v;
  return std::exp(sum / nll_.size());
}

double PerplexityEvaluator::PerplexityError() const {
  const size_t n = nll_.size();
  if (n < 2) return 0;
  double sum = 0, sum2 = 0;
  for (double v : nll_) {
    sum += v;
    sum2 += v * v;
  }
  const double mean = sum / n;
  const double var = sum2 / n - mean * mean;
  return var > 0 ? std::sqrt(var / (n - 1)) * std::exp(mean) : 0;
}

StatusOr<PerplexityRun> PreparePerplexityRun(
    Model& model, const std::string& text_path,
    const std::function<std::vector<int32_t>(const std::string&)>& encode,
    const PerplexityOptions& options, int threads, int64_t max_chunks) {
  std::ifstream in(text_path, std::ios::binary);
  if (!in) return NotFound(text_path + ": cannot open text file");
  std::ostringstream text;
  text << in.rdbuf();
  std::vector<int32_t> tokens = encode(text.str());
  PerplexityRun run;
  run.num_tokens = tokens.size();
  run.threads = threads > 0 ? threads : ThreadPool::DefaultNumThreads();
  run.pool = std::make_unique<ThreadPool>(run.threads);
  auto evaluator = PerplexityEvaluator::Create(model, std::move(tokens), options, run.pool.get());
  if (!evaluator.ok()) {
    return evaluator.status().WithContext(text_path);
  }
  run.evaluator = std::move(evaluator).value();
  const int32_t all = run.evaluator->num_chunks();
  run.num_chunks = max_chunks > 0 ? (int32_t)std::min<int64_t>(max_chunks, all) : all;
  return run;
}

}  // namespace tern
