// tern generate: continue a prompt with one model on this machine, streaming
// the generated text to stdout (or the ids with --ids) and the timings to
// stderr. Drives Model directly through a SequenceRunner (one sequence,
// contiguous KV); serving goes through the engine instead.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/paths.h"
#include "base/thread_pool.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "model/sequence_runner.h"
#include "sample/rng.h"
#include "sample/sampler.h"
#include "tokenizer/incremental_detokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tools/arg_parser.h"
#include "tools/commands.h"
#include "tools/common_flags.h"

namespace tern {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

struct GenerateArgs {
  std::string model;
  std::string prompt;
  int64_t num_predict = 128;
  double temperature = 0.8;
  int64_t top_k = 40;
  double top_p = 0.95;
  double min_p = 0.05;
  double repeat_penalty = 1.0;
  double presence_penalty = 0.0;
  double frequency_penalty = 0.0;
  int64_t seed = -1;
  bool no_bos = false;
  bool ignore_eos = false;
  bool ids = false;
  int64_t threads = 0;
  int64_t ctx = 0;
  std::string kv_dtype = "f32";
};

int Fail(const std::string& message) {
  std::fprintf(stderr, "tern generate: %s\n", message.c_str());
  return 1;
}

void AddFlags(ArgParser& p, GenerateArgs& a) {
  AddModelFlag(p, &a.model,
              "GGUF model (default: " + DefaultModelPath() + " when present)");
  p.AddString("-p,--prompt", "TEXT", &a.prompt, "prompt text (default: empty, i.e. BOS only)");
  p.AddInt("-n,--n-predict", "N", &a.num_predict,
           "tokens to generate (default 128; -1 = until end of text or context)");
  p.AddDouble("--temp", "T", &a.temperature, "temperature (default 0.8; 0 = greedy)");
  p.AddInt("--top-k", "K", &a.top_k, "keep the K most likely tokens (default 40; 0 = off)");
  p.AddDouble("--top-p", "P", &a.top_p, "nucleus sampling mass (default 0.95; 1 = off)");
  p.AddDouble("--min-p", "P", &a.min_p, "drop tokens below P x the best (default 0.05; 0 = off)");
  p.AddDouble("--repeat-penalty", "R", &a.repeat_penalty,
              "penalty on generated tokens (default 1 = off)");
  p.AddDouble("--presence-penalty", "X", &a.presence_penalty, "OpenAI presence penalty (default 0)");
  p.AddDouble("--frequency-penalty", "X", &a.frequency_penalty,
              "OpenAI frequency penalty (default 0)");
  p.AddInt("--seed", "S", &a.seed, "sampling seed (default: random, printed on stderr)");
  p.AddFlag("--no-bos", &a.no_bos, "do not add the BOS token before the prompt");
  p.AddFlag("--ignore-eos", &a.ignore_eos, "keep generating after an end-of-text token");
  p.AddFlag("--ids", &a.ids, "print the generated token ids instead of text");
  AddThreadsFlag(p, &a.threads);
  p.AddInt("-c,--ctx", "N", &a.ctx,
           "context size in tokens, prompt included (default: the model's, at most 4096)");
  p.AddString("--kv-cache-dtype", "TYPE", &a.kv_dtype, "KV cache element type: f32 or f16 (default f32)");
}

// Writes one generated token to stdout right away.
class TokenPrinter {
 public:
  TokenPrinter(const Tokenizer& tokenizer, bool ids, std::span<const int32_t> prompt)
      : ids_(ids), detok_(tokenizer) {
    // The prompt goes through the detokenizer (unprinted) so the first
    // generated piece gets its leading space right.
    for (int32_t id : prompt) detok_.Add(id);
  }
  void Print(int32_t id) {
    if (ids_) {
      std::fprintf(stdout, "%s%d", first_ ? "" : " ", id);
    } else {
      const std::string text = detok_.Add(id);
      std::fwrite(text.data(), 1, text.size(), stdout);
    }
    first_ = false;
    std::fflush(stdout);
  }
  void Finish() {
    if (!ids_) {
      const std::string rest = detok_.Flush();
      std::fwrite(rest.data(), 1, rest.size(), stdout);
    }
    if (ids_ || isatty(STDOUT_FILENO)) std::fputc('\n', stdout);
    std::fflush(stdout);
  }

 private:
  bool ids_;
  bool first_ = true;
  IncrementalDetokenizer detok_;
};

}  // namespace

int RunGenerate(int argc, char** argv) {
  GenerateArgs a;
  ArgParser parser("generate -m MODEL -p PROMPT [options]",
                   "Continues PROMPT with the model and prints only the generated text "
                   "(streamed) on stdout; load time, prefill and decode speed on stderr.");
  AddFlags(parser, a);
  if (int rc = ParseOrExit(parser, argc, argv, "generate"); rc >= 0) return rc;

  if (a.model.empty()) {
    a.model = DefaultModelPath();
    if (!FileExists(a.model)) {
      return Fail("no model given: pass one with -m MODEL.gguf (the default " + a.model +
                  " does not exist)");
    }
  }
  std::optional<DType> kv_dtype = ParseDType(a.kv_dtype);
  if (!kv_dtype || (*kv_dtype != DType::kF32 && *kv_dtype != DType::kF16)) {
    return Fail("--kv-cache-dtype must be f32 or f16, got '" + a.kv_dtype + "'");
  }
  if (a.temperature < 0 || a.top_k < 0 || a.top_p <= 0 || a.top_p > 1 || a.min_p < 0 ||
      a.min_p > 1 || a.repeat_penalty <= 0) {
    return Fail("sampling flags out of range (need --temp >= 0, --top-k >= 0, "
                "0 < --top-p <= 1, 0 <= --min-p <= 1, --repeat-penalty > 0)");
  }

  const Clock::time_point load_start = Clock::now();
  auto model_or = Model::Load(a.model);
  if (!model_or.ok()) return Fail(model_or.status().message());
  std::unique_ptr<Model> model = std::move(model_or).value();
  auto vocab = Vocab::FromGguf(model->file());
  if (!vocab.ok()) return Fail(vocab.status().message());
  auto tokenizer_or = Tokenizer::Create(std::move(vocab).value());
  if (!tokenizer_or.ok()) return Fail(tokenizer_or.status().message());
  std::unique_ptr<Tokenizer> tokenizer = std::move(tokenizer_or).value();
  const double load_s = SecondsSince(load_start);

  std::vector<int32_t> prompt = tokenizer->Encode(a.prompt, !a.no_bos, true);
  if (prompt.empty()) return Fail("the prompt is empty (give -p TEXT or drop --no-bos)");
  const int32_t ctx =
      a.ctx > 0 ? (int32_t)a.ctx : std::min<int32_t>(model->config().n_ctx_train, 4096);
  if ((int64_t)prompt.size() > ctx) {
    return Fail("the prompt is " + std::to_string(prompt.size()) +
                " tokens, longer than the context of " + std::to_string(ctx) +
                " tokens (raise --ctx)");
  }

  SamplingParams params;
  params.temperature = (float)a.temperature;
  params.top_k = (int32_t)a.top_k;
  params.top_p = (float)a.top_p;
  params.min_p = (float)a.min_p;
  params.repetition_penalty = (float)a.repeat_penalty;
  params.presence_penalty = (float)a.presence_penalty;
  params.frequency_penalty = (float)a.frequency_penalty;
  params.seed = a.seed >= 0 ? (uint64_t)a.seed : std::random_device{}();
  Rng rng(params.seed);

  const int threads = a.threads > 0 ? (int)a.threads : ThreadPool::DefaultNumThreads();
  ThreadPool pool(threads);
  SequenceRunner runner(*model, ctx, *kv_dtype, &pool);
  TokenPrinter printer(*tokenizer, a.ids, prompt);

  const Clock::time_point prefill_start = Clock::now();
  if (Status st = runner.Append(prompt, false); !st.ok()) return Fail(st.message());
  double ttft_s = 0;
  Clock::time_point decode_start;
  std::vector<int32_t> generated;
  bool hit_context = false;
  while (a.num_predict < 0 || (int64_t)generated.size() < a.num_predict) {
    const SampledToken t = SampleToken(runner.Logits(0), params, generated, rng.Uniform());
    if (generated.empty()) {
      ttft_s = SecondsSince(prefill_start);
      decode_start = Clock::now();
    }
    if (!a.ignore_eos && tokenizer->IsEog(t.token_id)) break;
    generated.push_back(t.token_id);
    printer.Print(t.token_id);
    if (a.num_predict >= 0 && (int64_t)generated.size() >= a.num_predict) break;
    if (runner.num_computed() >= ctx) {
      hit_context = true;
      break;
    }
    if (Status st = runner.Append(std::vector<int32_t>{t.token_id}, false); !st.ok()) {
      return Fail(st.message());
    }
  }
  printer.Finish();

  const double prefill_s = ttft_s;
  const double decode_s = generated.size() > 1 ? SecondsSince(decode_start) : 0;
  std::fprintf(stderr, "\nmodel: %s (%s, %d threads, kernels %s)\n", a.model.c_str(),
               model->config().arch.c_str(), threads, kernels::ActiveIsa());
  std::fprintf(stderr, "load: %.1f ms   seed: %llu\n", load_s * 1e3,
               (unsigned long long)params.seed);
  std::fprintf(stderr, "prompt: %zu tokens, %.1f tok/s prefill, TTFT %.1f ms\n", prompt.size(),
               prefill_s > 0 ? prompt.size() / prefill_s : 0.0, ttft_s * 1e3);
  const size_t decoded = generated.size() > 1 ? generated.size() - 1 : 0;
  std::fprintf(stderr, "generated: %zu tokens, %.1f tok/s decode, TPOT %.2f ms%s\n",
               generated.size(), decode_s > 0 ? decoded / decode_s : 0.0,
               decoded > 0 ? decode_s * 1e3 / decoded : 0.0,
               hit_context ? " (stopped: context full)" : "");
  return 0;
}

}  // namespace tern
