// tern generate: continue a prompt with one model on this machine, streaming
// the generated text to stdout (or the ids with --ids) and the timings to
// stderr. Drives Model directly through a SequenceRunner (one sequence,
// contiguous KV); serving and `tern chat` go through the engine instead.
//
// The prompt is -p TEXT, -p - (stdin) or -f FILE, taken verbatim; with
// --chat-template or --system it is one user message rendered through the
// chat template (ChatPrompt, the server's path). --stop strings are cut by
// the server's StopMatcher, so the text printed is what the API returns.
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "base/elapsed.h"
#include "base/paths.h"
#include "base/thread_pool.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "model/sequence_runner.h"
#include "model/streaming_kv.h"
#include "sample/rng.h"
#include "sample/sampler.h"
#include "server/chat_prompt.h"
#include "server/stop_matcher.h"
#include "tokenizer/incremental_detokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tools/arg_parser.h"
#include "tools/commands.h"
#include "tools/common_flags.h"
#include "tools/engine_flags.h"
#include "engine/engine.h"
#include "tools/generation_flags.h"
#include "tools/kv_eviction_flags.h"
#include "tools/spec_flags.h"

namespace tern {
namespace {

using Clock = std::chrono::steady_clock;

struct GenerateArgs {
  std::string model;
  std::string prompt;
  bool has_prompt = false;
  std::string prompt_file;
  GenerationFlags gen;
  bool no_bos = false;
  bool ignore_eos = false;
  bool ids = false;
  int64_t threads = 0;
  // Streaming KV eviction past the context (model/streaming_kv.h).
  KvEvictionFlags eviction;
  SpecFlags spec;  // speculative decoding: runs through the engine

  bool chat() const { return !gen.chat_template.empty() || !gen.system.empty(); }
};

int Fail(const std::string& message) {
  std::fprintf(stderr, "tern generate: %s\n", message.c_str());
  return 1;
}

void AddFlags(ArgParser& p, GenerateArgs& a) {
  AddModelFlag(p, &a.model,
               "GGUF model (default: " + DefaultModelPath() + " when present)");
  p.AddString("-p,--prompt", "TEXT", &a.prompt,
              "prompt text; '-' reads it from stdin (default: empty, i.e. BOS only)");
  p.AddString("-f,--file", "FILE", &a.prompt_file, "read the prompt from FILE (verbatim)");
  AddGenerationFlags(p, &a.gen, "the continuation");
  p.AddFlag("--no-bos", &a.no_bos, "do not add the BOS token before the prompt");
  p.AddFlag("--ignore-eos", &a.ignore_eos, "keep generating after an end-of-text token");
  p.AddFlag("--ids", &a.ids, "print the generated token ids instead of text");
  AddThreadsFlag(p, &a.threads);
  AddKvEvictionFlags(p, &a.eviction, "stop when the context is full",
                     "keep going, dropping the oldest tokens after the first --kv-sink-tokens",
                     "half the context");
  AddSpecFlags(p, &a.spec);
  p.AddCheck([&a]() -> Status {
    if (!a.prompt.empty() && !a.prompt_file.empty())
      return InvalidArgument("give the prompt with -p or -f, not both");
    if (a.ids && !a.gen.stop.empty())
      return InvalidArgument("--stop works on the text; it cannot be combined with --ids");
    return Status::Ok();
  });
}

// The prompt text from -p, -p - (stdin) or -f FILE.
StatusOr<std::string> ReadPrompt(const GenerateArgs& a) {
  if (!a.prompt_file.empty()) {
    std::ifstream in(a.prompt_file, std::ios::binary);
    if (!in) return NotFound("-f: cannot read '" + a.prompt_file + "'");
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  if (a.prompt == "-") {
    std::ostringstream ss;
    ss << std::cin.rdbuf();
    return ss.str();
  }
  return a.prompt;
}

// The prompt ids: the text as is, or one user message (after --system)
// through the chat template.
StatusOr<std::vector<int32_t>> EncodePrompt(const GenerateArgs& a, const Tokenizer& tokenizer,
                                            const std::string& text) {
  if (!a.chat()) return tokenizer.Encode(text, !a.no_bos, true);
  TERN_ASSIGN_OR_RETURN(std::string source, ResolveChatTemplate(a.gen.chat_template, a.model));
  if (source.empty()) {
    return InvalidArgument("--system needs a chat template and " + a.model +
                           " has none: add --chat-template NAME|FILE");
  }
  TERN_ASSIGN_OR_RETURN(ChatPrompt chat, ChatPrompt::Create(tokenizer, source));
  std::vector<ChatMessage> messages;
  if (!a.gen.system.empty()) messages.push_back({"system", a.gen.system});
  messages.push_back({"user", text});
  return chat.Encode(messages, !a.no_bos);
}

// Writes generated tokens to stdout as they come: ids, or text with the
// --stop strings cut (held back while they could still match).
class TokenPrinter {
 public:
  TokenPrinter(const Tokenizer& tokenizer, bool ids, std::span<const int32_t> prompt,
               std::vector<std::string> stops)
      : ids_(ids), detok_(tokenizer), stop_(std::move(stops)) {
    // The prompt goes through the detokenizer (unprinted) so the first
    // generated piece gets its leading space right.
    for (int32_t id : prompt) detok_.Add(id);
  }
  // False once a stop string has been seen: generation ends.
  bool Print(int32_t id) {
    if (ids_) {
      std::fprintf(stdout, "%s%d", first_ ? "" : " ", id);
    } else {
      Write(stop_.Push(detok_.Add(id)));
    }
    first_ = false;
    std::fflush(stdout);
    return !stop_.matched();
  }
  void Finish() {
    if (!ids_ && !stop_.matched()) {
      Write(stop_.Push(detok_.Flush()));
      if (!stop_.matched()) Write(stop_.Flush());
    }
    if (ids_ || isatty(STDOUT_FILENO)) std::fputc('\n', stdout);
    std::fflush(stdout);
  }
  bool stopped() const { return stop_.matched(); }

 private:
  static void Write(const std::string& text) { std::fwrite(text.data(), 1, text.size(), stdout); }

  bool ids_;
  bool first_ = true;
  IncrementalDetokenizer detok_;
  StopMatcher stop_;
};

// With speculative decoding: one request through the engine (proposals,
// verification and rollback live there), streamed like the plain path.
int GenerateSpeculative(const GenerateArgs& a, EngineConfig config, int32_t ctx,
                        const Tokenizer& tokenizer, const std::vector<int32_t>& prompt,
                        double tokenizer_load_s) {
  const Clock::time_point load_start = Clock::now();
  config.model_path = a.model;
  config.num_threads = (int)a.threads;
  config.max_num_seqs = 1;
  config.max_model_len = ctx;
  config.kv_cache_dtype = a.gen.kv.k_dtype;
  if (a.gen.kv.v_dtype != a.gen.kv.k_dtype) config.kv_cache_dtype_v = a.gen.kv.v_dtype;
  config.enable_prefix_caching = false;
  ApplyEnvSettings(EnvSettings::FromProcess(), &config);
  StatusOr<std::unique_ptr<Engine>> created = Engine::Create(config);
  if (!created.ok()) return Fail(created.status().message());
  Engine& engine = **created;
  const double load_s = tokenizer_load_s + SecondsSince(load_start);

  EngineRequest r;
  r.request_id = "generate";
  r.prompt_token_ids = prompt;
  r.sampling = a.gen.ToSamplingParams();
  if (!r.sampling.has_seed) {
    r.sampling.seed = std::random_device{}();
    r.sampling.has_seed = true;
  }
  const uint64_t seed = r.sampling.seed;
  r.sampling.ignore_eos = a.ignore_eos;
  const int64_t room = ctx - (int64_t)prompt.size();
  r.sampling.max_tokens = (int32_t)(a.gen.max_tokens < 0 ? room : std::min<int64_t>(a.gen.max_tokens, room));
  if (r.sampling.max_tokens < 1) return Fail("the prompt fills the context: nothing to generate (raise -c)");
  auto channel = engine.AddRequest(r);
  if (!channel.ok()) return Fail(channel.status().message());
  TokenPrinter printer(tokenizer, a.ids, prompt, a.gen.stop);
  RequestMetrics m;
  size_t generated = 0;
  bool stopped = false;
  while (true) {
    std::optional<RequestOutput> out = (*channel)->Pop(std::chrono::seconds(1));
    if (!out) continue;
    for (int32_t id : out->new_token_ids) {
      if (stopped) break;
      if (!a.ignore_eos && tokenizer.IsEog(id)) break;  // as the plain path: not printed
      ++generated;
      if (!printer.Print(id)) {
        stopped = true;
        engine.FinishWithStop(r.request_id);
      }
    }
    if (out->finished) {
      m = out->metrics;
      break;
    }
  }
  printer.Finish();
  const SpecSummary spec{m.spec_num_drafts, m.spec_num_draft_tokens, m.spec_num_accepted_tokens};
  const double decode_s = m.e2e_s - m.ttft_s;
  const size_t decoded = m.generated_tokens > 1 ? m.generated_tokens - 1 : 0;
  std::fprintf(stderr, "\nmodel: %s (%s, %d threads, kernels %s, context %d, KV %s)\n",
               a.model.c_str(), engine.model_config().arch.c_str(), engine.num_threads(),
               kernels::ActiveIsa(), ctx, a.gen.kv.Name().c_str());
  std::fprintf(stderr, "load: %.1f ms   seed: %llu\n", load_s * 1e3, (unsigned long long)seed);
  std::fprintf(stderr, "prompt: %zu tokens, %.1f tok/s prefill, TTFT %.1f ms\n", prompt.size(),
               m.ttft_s > 0 ? prompt.size() / m.ttft_s : 0.0, m.ttft_s * 1e3);
  std::fprintf(stderr, "generated: %zu tokens, %.1f tok/s decode, TPOT %.2f ms%s\n", generated,
               decode_s > 0 ? decoded / decode_s : 0.0, decoded > 0 ? decode_s * 1e3 / decoded : 0.0,
               printer.stopped() ? " (stopped: --stop string)" : "");
  std::fprintf(stderr,
               "speculative: %s, k %d%s: acceptance %.1f%% (%lld of %lld proposals), mean accepted "
               "length %.2f tokens/step over %lld steps\n",
               SpecMethodName(config.speculative_method), config.num_speculative_tokens,
               config.speculative_adaptive ? " adaptive" : "", 100 * spec.AcceptanceRate(),
               (long long)spec.accepted_tokens, (long long)spec.draft_tokens,
               spec.MeanAcceptedLength(), (long long)spec.drafts);
  return 0;
}

}  // namespace

int RunGenerate(int argc, char** argv) {
  GenerateArgs a;
  ArgParser parser(
      "generate -m MODEL (-p PROMPT | -p - | -f FILE) [options]",
      "Continues the prompt with the model and prints only the generated text (streamed) on "
      "stdout; load time, prefill and decode speed on stderr. With --chat-template or --system "
      "the prompt is sent as one user message through the chat template. " +
          SamplingDefaultsHelp());
  AddFlags(parser, a);
  if (int rc = ParseOrExit(parser, argc, argv, "generate"); rc >= 0) return rc;

  if (a.model.empty()) {
    a.model = DefaultModelPath();
    if (!FileExists(a.model)) {
      return Fail("no model given: pass one with -m MODEL.gguf (the default " + a.model +
                  " does not exist)");
    }
  }
  StatusOr<std::string> prompt_text = ReadPrompt(a);
  if (!prompt_text.ok()) return Fail(prompt_text.status().message());
  EngineConfig speculative;
  if (Status st = a.spec.Apply(&speculative); !st.ok()) return Fail(st.message());
  if (speculative.speculative_method != SpecMethod::kNone && a.eviction.streaming()) {
    return Fail("--kv-eviction streaming cannot be combined with speculative decoding");
  }

  const Clock::time_point load_start = Clock::now();
  auto model_or = Model::Load(a.model);
  if (!model_or.ok()) return Fail(model_or.status().message());
  std::unique_ptr<Model> model = std::move(model_or).value();
  StatusOr<int32_t> ctx_or = a.gen.ResolveContext(model->config(), a.model);
  if (!ctx_or.ok()) return Fail(ctx_or.status().message());
  const int32_t ctx = *ctx_or;
  auto vocab = Vocab::FromGguf(model->file());
  if (!vocab.ok()) return Fail(vocab.status().message());
  auto tokenizer_or = Tokenizer::Create(std::move(vocab).value());
  if (!tokenizer_or.ok()) return Fail(tokenizer_or.status().message());
  std::unique_ptr<Tokenizer> tokenizer = std::move(tokenizer_or).value();
  const double load_s = SecondsSince(load_start);

  StatusOr<std::vector<int32_t>> prompt_or = EncodePrompt(a, *tokenizer, *prompt_text);
  if (!prompt_or.ok()) return Fail(prompt_or.status().message());
  const std::vector<int32_t> prompt = std::move(prompt_or).value();
  if (prompt.empty()) return Fail("the prompt is empty (give -p TEXT or drop --no-bos)");
  if ((int64_t)prompt.size() > ctx) {
    return Fail("the prompt is " + std::to_string(prompt.size()) +
                " tokens, longer than the context of " + std::to_string(ctx) +
                " tokens (raise -c)");
  }
  if (speculative.speculative_method != SpecMethod::kNone) {
    model.reset();  // the engine loads its own
    return GenerateSpeculative(a, speculative, ctx, *tokenizer, prompt, load_s);
  }

  SamplingParams params = a.gen.ToSamplingParams();
  if (!params.has_seed) params.seed = std::random_device{}();
  Rng rng(params.seed);
  const int64_t num_predict = a.gen.max_tokens;  // -1: until end of text or context

  const int threads = a.threads > 0 ? (int)a.threads : ThreadPool::DefaultNumThreads();
  ThreadPool pool(threads);
  if (Status st = CheckKvDtypesFit(a.gen.kv, model->config(), a.model); !st.ok()) {
    return Fail(st.message());
  }
  SequenceRunner runner(*model, ctx, a.gen.kv.k_dtype, a.gen.kv.v_dtype, &pool);
  const bool streaming = a.eviction.streaming();
  const StreamingKvConfig eviction = a.eviction.ToConfig();
  if (streaming) {
    if (Status st = CheckStreamingKv(eviction, ctx); !st.ok()) return Fail(st.message());
  }
  int64_t num_evicted = 0;
  TokenPrinter printer(*tokenizer, a.ids, prompt, a.gen.stop);

  const Clock::time_point prefill_start = Clock::now();
  if (Status st = runner.Append(prompt, false); !st.ok()) return Fail(st.message());
  double ttft_s = 0;
  Clock::time_point decode_start;
  std::vector<int32_t> generated;
  bool hit_context = false;
  while (num_predict < 0 || (int64_t)generated.size() < num_predict) {
    const SampledToken t = SampleToken(runner.Logits(0), params, generated, rng.Uniform());
    if (generated.empty()) {
      ttft_s = SecondsSince(prefill_start);
      decode_start = Clock::now();
    }
    if (!a.ignore_eos && tokenizer->IsEog(t.token_id)) break;
    generated.push_back(t.token_id);
    if (!printer.Print(t.token_id)) break;
    if (num_predict >= 0 && (int64_t)generated.size() >= num_predict) break;
    if (runner.num_computed() >= ctx && streaming) num_evicted += MakeRoom(runner, eviction, 1);
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
  const std::string kv_name = a.gen.kv.Name();  // as --kv-cache-dtype
  std::fprintf(stderr, "\nmodel: %s (%s, %d threads, kernels %s, context %d, KV %s)\n",
               a.model.c_str(), model->config().arch.c_str(), threads, kernels::ActiveIsa(), ctx,
               kv_name.c_str());
  std::fprintf(stderr, "load: %.1f ms   seed: %llu\n", load_s * 1e3,
               (unsigned long long)params.seed);
  std::fprintf(stderr, "prompt: %zu tokens, %.1f tok/s prefill, TTFT %.1f ms\n", prompt.size(),
               prefill_s > 0 ? prompt.size() / prefill_s : 0.0, ttft_s * 1e3);
  const size_t decoded = generated.size() > 1 ? generated.size() - 1 : 0;
  std::fprintf(stderr, "generated: %zu tokens, %.1f tok/s decode, TPOT %.2f ms%s\n",
               generated.size(), decode_s > 0 ? decoded / decode_s : 0.0,
               decoded > 0 ? decode_s * 1e3 / decoded : 0.0,
               hit_context       ? " (stopped: context full)"
               : printer.stopped() ? " (stopped: --stop string)"
                                   : "");
  if (streaming) {
    std::fprintf(stderr, "context: %lld tokens evicted (streaming: %d sink tokens + %d recent kept)\n",
                 (long long)num_evicted, eviction.sink_tokens,
                 eviction.window_tokens > 0 ? eviction.window_tokens : ctx / 2);
  }
  return 0;
}

}  // namespace tern
