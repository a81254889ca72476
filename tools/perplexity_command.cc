// tern perplexity: perplexity of a model on a text file by llama.cpp's
// perplexity convention (see model/perplexity.h), optionally saving the
// scored log-probabilities (--save-logits, format in model/logprob_file.h) or
// comparing against a saved base run (--kl-base: KL divergence, top-1
// agreement, delta perplexity).
//
// Cheap checks first: the text and --kl-base files are read and the
// --save-logits folder probed before the model loads, and a --kl-base run is
// checked against this run's scored token ids before any window is evaluated.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "base/file_checks.h"
#include "base/progress.h"
#include "model/logprob_file.h"
#include "model/model.h"
#include "model/perplexity.h"
#include "model/sequence_runner.h"
#include "model/streaming_kv.h"
#include "tokenizer/tokenizer.h"
#include "tools/arg_parser.h"
#include "tools/commands.h"
#include "tools/common_flags.h"
#include "tools/kv_dtype_flags.h"
#include "tools/kv_eviction_flags.h"
#include "tools/text_run.h"

namespace tern {
namespace {

using Clock = std::chrono::steady_clock;

int Fail(const std::string& message) {
  std::fprintf(stderr, "tern perplexity: %s\n", message.c_str());
  return 1;
}

struct PerplexityArgs {
  std::string model;
  TextRunFlags text;  // -f, -c, --chunks, -t
  int64_t batch = 0;
  std::string save_logits;
  std::string kl_base;
  KvDtypeFlags kv;
  KvEvictionFlags eviction;
};

// --kv-eviction streaming: the whole text as one stream through a KV of
// --ctx tokens with attention sinks (model/streaming_kv.h); every token after
// the first ctx / 2 is scored.
int RunStreaming(const PerplexityArgs& a, Model& model) {
  auto vocab = Vocab::FromGguf(model.file());
  if (!vocab.ok()) return Fail(vocab.status().message());
  auto tokenizer = Tokenizer::Create(std::move(vocab).value());
  if (!tokenizer.ok()) return Fail(tokenizer.status().message());
  std::ifstream in(a.text.text_file, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<int32_t> tokens = (*tokenizer)->Encode(text, true, false);
  if (a.text.max_chunks > 0 && (int64_t)tokens.size() > a.text.max_chunks * a.text.ctx) {
    tokens.resize(a.text.max_chunks * a.text.ctx);
  }
  ThreadPool pool(a.text.threads > 0 ? (int)a.text.threads : ThreadPool::DefaultNumThreads());
  SequenceRunner runner(model, (int32_t)a.text.ctx, a.kv.k_dtype, a.kv.v_dtype, &pool);
  const StreamingKvConfig config = a.eviction.ToConfig();
  const Clock::time_point start = Clock::now();
  auto result = RunStreamingPerplexity(runner, tokens, config, a.text.ctx / 2);
  if (!result.ok()) return Fail(result.status().message());
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::fprintf(stderr,
               "perplexity: %zu tokens as one stream, KV of %lld tokens, %d sink tokens + %d "
               "recent kept at each eviction; %lld tokens evicted, %lld scored in %.2f s\n",
               tokens.size(), (long long)a.text.ctx, config.sink_tokens,
               config.window_tokens > 0 ? config.window_tokens : (int)(a.text.ctx / 2),
               (long long)result->num_evicted, (long long)result->num_scored, seconds);
  std::fprintf(stdout, "ppl = %.4f\n", result->ppl);
  return 0;
}

std::string PplDetail(const PerplexityEvaluator& ev) {
  char text[32];
  std::snprintf(text, sizeof text, "ppl %.4f", ev.Perplexity());
  return text;
}

}  // namespace

int RunPerplexity(int argc, char** argv) {
  PerplexityArgs a;
  ArgParser p("perplexity -m MODEL -f TEXT [--ctx N] [--save-logits FILE] [--kl-base FILE]",
              "Perplexity of MODEL on the text in windows of --ctx tokens, each scored on its "
              "second half (llama.cpp's convention). Prints 'ppl = X +/- E' on stdout.");
  AddModelFlag(p, &a.model, "GGUF model (required)");
  AddTextRunFlags(p, &a.text, "text file (required), tokenized as is");
  p.AddInt("-b,--batch", "N", &a.batch, "tokens per forward pass (default: --ctx)");
  p.AddString("--save-logits", "FILE", &a.save_logits,
              "save the scored log-probabilities, as a base for --kl-base (default: none)");
  p.AddString("--kl-base", "FILE", &a.kl_base,
              "compare with a saved base run: KL divergence, top-1 agreement, delta ppl; "
              "checked against this run's tokens before any window runs (default: none)");
  AddThreadsFlag(p, &a.text.threads);
  AddKvDtypeFlags(p, &a.kv, "f32");
  AddKvEvictionFlags(p, &a.eviction, "windows of --ctx",
                     "the text as one stream through a KV of --ctx tokens with attention sinks, "
                     "scored after the first ctx/2 tokens",
                     "ctx/2");
  if (int rc = ParseOrExit(p, argc, argv, "perplexity"); rc >= 0) return rc;
  if (a.model.empty()) return Fail("no model given: pass one with -m MODEL.gguf");
  if (Status st = CheckTextRunFlags(a.text, "text"); !st.ok()) return Fail(st.message());
  if (Status st = CheckReadableFile(a.text.text_file, "text file"); !st.ok()) return Fail(st.message());
  if (!a.save_logits.empty()) {
    if (Status st = CheckWritableFile(a.save_logits, "--save-logits"); !st.ok()) {
      return Fail(st.message());
    }
  }
  LogprobFile base;
  if (!a.kl_base.empty()) {
    auto base_or = ReadLogprobFile(a.kl_base);
    if (!base_or.ok()) return Fail(base_or.status().message());
    base = std::move(base_or).value();
    if (base.ctx != a.text.ctx) {
      return Fail("cannot compare with " + a.kl_base + ": it was saved with --ctx " +
                  std::to_string(base.ctx) + ", this run has --ctx " + std::to_string(a.text.ctx));
    }
  }
  if (a.eviction.streaming() && (!a.kl_base.empty() || !a.save_logits.empty())) {
    return Fail("--kv-eviction streaming cannot be combined with --save-logits or --kl-base");
  }
  auto model_or = Model::Load(a.model);
  if (!model_or.ok()) return Fail(model_or.status().message());
  std::unique_ptr<Model> model = std::move(model_or).value();
  if (Status st = CheckKvDtypesFit(a.kv, model->config(), a.model); !st.ok()) {
    return Fail(st.message());
  }
  if (a.eviction.streaming()) return RunStreaming(a, *model);
  if (!a.kl_base.empty() && base.n_vocab != model->config().n_vocab) {
    return Fail("cannot compare with " + a.kl_base + ": its vocabulary has " +
                std::to_string(base.n_vocab) + " tokens, this model's " +
                std::to_string(model->config().n_vocab));
  }

  PerplexityOptions options;
  options.ctx = (int32_t)a.text.ctx;
  options.batch = a.batch > 0 ? (int32_t)a.batch : options.ctx;
  options.kv_dtype = a.kv.k_dtype;
  options.kv_dtype_v = a.kv.v_dtype;
  options.keep_logprobs = !a.save_logits.empty() || !a.kl_base.empty();
  auto run_or =
      PrepareTextRun("perplexity", *model, a.text.text_file, options, a.text.threads, a.text.max_chunks);
  if (!run_or.ok()) return Fail(run_or.status().message());
  PerplexityRun& run = *run_or;
  PerplexityEvaluator& ev = *run.evaluator;
  const int32_t num_chunks = run.num_chunks;

  if (!a.kl_base.empty()) {
    const Status st = CheckSameRun(base, model->config().n_vocab, options.ctx,
                                   ev.TokensToScore(num_chunks));
    if (!st.ok()) return Fail("cannot compare with " + a.kl_base + ": " + st.message());
  }

  const Clock::time_point start = Clock::now();
  Progress progress("perplexity", "chunks", num_chunks);
  while (ev.chunks_done() < num_chunks) {
    if (Status st = ev.RunNextChunk(); !st.ok()) return Fail(st.message());
    progress.Update(ev.chunks_done(), PplDetail(ev));
  }
  progress.Finish(PplDetail(ev));
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::fprintf(stderr, "%lld scored positions in %.2f s (%.1f tok/s)\n",
               (long long)ev.num_scored(), seconds,
               seconds > 0 ? (double)ev.chunks_done() * options.ctx / seconds : 0.0);
  std::fprintf(stdout, "ppl = %.4f +/- %.5f\n", ev.Perplexity(), ev.PerplexityError());

  LogprobFile current;
  if (options.keep_logprobs) {
    current.n_vocab = model->config().n_vocab;
    current.ctx = options.ctx;
    current.token_ids = ev.scored_tokens();
    current.logprobs = ev.logprobs();
  }
  if (!a.save_logits.empty()) {
    if (Status st = WriteLogprobFile(a.save_logits, current); !st.ok()) return Fail(st.message());
    std::fprintf(stderr, "saved %lld log-prob rows to %s\n", (long long)current.num_positions(),
                 a.save_logits.c_str());
  }
  if (!a.kl_base.empty()) {
    auto kl = CompareLogprobs(base, current);
    if (!kl.ok()) return Fail("cannot compare with " + a.kl_base + ": " + kl.status().message());
    std::fprintf(stdout, "kl mean = %.6f  kl p99 = %.6f  kl max = %.6f\n", kl->mean_kl, kl->p99_kl,
                 kl->max_kl);
    std::fprintf(stdout, "top-1 agreement = %.2f%%\n", 100.0 * kl->top1_agreement);
    std::fprintf(stdout, "ppl base = %.4f  delta ppl = %+.4f\n", kl->base_ppl,
                 kl->ppl - kl->base_ppl);
  }
  return 0;
}

}  // namespace tern
