// tern generate: continue a prompt with one model on this machine, streaming
// the generated text to stdout (or the ids with --ids) and the timings to
// stderr. One request through the Engine (max_num_seqs 1, context =
// max_model_len), as `tern serve` and `tern chat` run theirs: the engine's
// end-of-text, length, seed and streaming-eviction rules, and its
// per-request metrics (TTFT, TPOT, evicted tokens) in the summary.
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
#include "engine/engine.h"
#include "kernels/kernels.h"
#include "sample/request_checks.h"
#include "server/chat_prompt.h"
#include "server/stop_matcher.h"
#include "tokenizer/incremental_detokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tools/arg_parser.h"
#include "tools/commands.h"
#include "tools/common_flags.h"
#include "tools/engine_flags.h"
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
  KvEvictionFlags eviction;  // streaming KV eviction past the context
  SpecFlags spec;            // speculative decoding

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
                     "keep going, dropping whole KV blocks of the oldest tokens after the first "
                     "--kv-sink-tokens (rounded up to a block of " +
                         std::to_string(EngineConfig{}.block_size) + ")",
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

// The engine for one sequence of ctx tokens: no prefix cache (nothing to
// share), the KV dtypes, threads, streaming eviction and speculative
// decoding the flags ask for.
StatusOr<EngineConfig> MakeEngineConfig(const GenerateArgs& a, int32_t ctx) {
  EngineConfig config;
  TERN_RETURN_IF_ERROR(a.spec.Apply(&config));
  config.model_path = a.model;
  config.num_threads = (int)a.threads;
  config.max_num_seqs = 1;
  config.max_model_len = ctx;
  config.kv_cache_dtype = a.gen.kv.k_dtype;
  if (a.gen.kv.v_dtype != a.gen.kv.k_dtype) config.kv_cache_dtype_v = a.gen.kv.v_dtype;
  config.enable_prefix_caching = false;
  if (a.eviction.streaming()) {
    config.kv_eviction = KvEviction::kStreaming;
    config.kv_sink_tokens = ClampToInt32(a.eviction.sink_tokens);
    config.kv_window_tokens = ClampToInt32(a.eviction.window);
  }
  ApplyEnvSettings(EnvSettings::FromProcess(), &config);
  return config;
}

// What one request came to, for the summary on stderr.
struct GenerateResult {
  size_t generated = 0;  // tokens printed (an end-of-text token is not)
  bool stop_string = false;
  FinishReason finish_reason = FinishReason::kNone;
  RequestMetrics metrics;  // the engine's
};

// Streams the request's tokens to stdout until the engine finishes it; a
// --stop string seen in the text finishes it early.
GenerateResult Stream(Engine& engine, const EngineRequest& r, OutputChannel& channel,
                      bool ignore_eos, TokenPrinter& printer) {
  GenerateResult result;
  bool stopped = false;
  while (true) {
    std::optional<RequestOutput> out = channel.Pop(std::chrono::seconds(1));
    if (!out) continue;
    for (int32_t id : out->new_token_ids) {
      if (stopped) break;
      if (!ignore_eos && engine.tokenizer().IsEog(id)) break;  // ends the text, not printed
      ++result.generated;
      if (!printer.Print(id)) {
        stopped = true;
        engine.FinishWithStop(r.request_id);
      }
    }
    if (out->finished) {
      result.finish_reason = out->finish_reason;
      result.metrics = out->metrics;
      break;
    }
  }
  printer.Finish();
  result.stop_string = printer.stopped();
  return result;
}

void PrintSummary(const GenerateArgs& a, const Engine& engine, const EngineConfig& config,
                  double load_s, uint64_t seed, bool context_limited, const GenerateResult& g) {
  const RequestMetrics& m = g.metrics;
  std::fprintf(stderr, "\nmodel: %s (%s, %d threads, kernels %s, context %d, KV %s)\n",
               a.model.c_str(), engine.model_config().arch.c_str(), engine.num_threads(),
               kernels::ActiveIsa(), engine.max_model_len(), a.gen.kv.Name().c_str());
  std::fprintf(stderr, "load: %.1f ms   seed: %llu\n", load_s * 1e3, (unsigned long long)seed);
  std::fprintf(stderr, "prompt: %d tokens, %.1f tok/s prefill, TTFT %.1f ms\n", m.prompt_tokens,
               m.ttft_s > 0 ? m.prompt_tokens / m.ttft_s : 0.0, m.ttft_s * 1e3);
  const bool context_full = context_limited && g.finish_reason == FinishReason::kLength;
  std::fprintf(stderr, "generated: %zu tokens, %.1f tok/s decode, TPOT %.2f ms%s\n", g.generated,
               m.tpot_s > 0 ? 1 / m.tpot_s : 0.0, m.tpot_s * 1e3,
               g.stop_string  ? " (stopped: --stop string)"
               : context_full ? " (stopped: context full)"
                              : "");
  if (config.kv_eviction == KvEviction::kStreaming) {
    // The engine keeps the sinks as whole KV blocks.
    const int32_t bs = config.block_size;
    const int32_t window =
        config.kv_window_tokens > 0 ? config.kv_window_tokens : engine.max_model_len() / 2;
    std::fprintf(stderr,
                 "context: %d tokens evicted (streaming: %d sink tokens + %d recent kept)\n",
                 m.evicted_tokens, (config.kv_sink_tokens + bs - 1) / bs * bs, window);
  }
  if (config.speculative_method != SpecMethod::kNone) {
    const SpecSummary spec{m.spec_num_drafts, m.spec_num_draft_tokens, m.spec_num_accepted_tokens};
    std::fprintf(stderr,
                 "speculative: %s, k %d%s: acceptance %.1f%% (%lld of %lld proposals), mean "
                 "accepted length %.2f tokens/step over %lld steps\n",
                 SpecMethodName(config.speculative_method), config.num_speculative_tokens,
                 config.speculative_adaptive ? " adaptive" : "", 100 * spec.AcceptanceRate(),
                 (long long)spec.accepted_tokens, (long long)spec.draft_tokens,
                 spec.MeanAcceptedLength(), (long long)spec.drafts);
  }
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
  // The context first (it sizes the engine's KV), from the file's header.
  const Clock::time_point load_start = Clock::now();
  StatusOr<int32_t> ctx_or = a.gen.ResolveContext(a.model);
  if (!ctx_or.ok()) return Fail(ctx_or.status().message());
  const int32_t ctx = *ctx_or;
  StatusOr<EngineConfig> config = MakeEngineConfig(a, ctx);
  if (!config.ok()) return Fail(config.status().message());
  StatusOr<std::unique_ptr<Engine>> created = Engine::Create(*config);
  if (!created.ok()) return Fail(created.status().message());
  Engine& engine = **created;
  const double load_s = SecondsSince(load_start);

  StatusOr<std::vector<int32_t>> prompt_or = EncodePrompt(a, engine.tokenizer(), *prompt_text);
  if (!prompt_or.ok()) return Fail(prompt_or.status().message());
  const std::vector<int32_t> prompt = std::move(prompt_or).value();
  if (prompt.empty()) return Fail("the prompt is empty (give -p TEXT or drop --no-bos)");
  // With streaming eviction the engine evicts a long prompt as it prefills.
  if ((int64_t)prompt.size() > ctx && !engine.streaming_kv_eviction()) {
    return Fail("the prompt is " + std::to_string(prompt.size()) +
                " tokens, longer than the context of " + std::to_string(ctx) +
                " tokens (raise -c)");
  }

  EngineRequest r;
  r.request_id = "generate";
  r.prompt_token_ids = prompt;
  r.sampling = a.gen.ToSamplingParams();
  if (!r.sampling.has_seed) {
    r.sampling.seed = std::random_device{}();
    r.sampling.has_seed = true;
  }
  r.sampling.ignore_eos = a.ignore_eos;
  // -n, or -1: until end of text or, without streaming eviction, the
  // context (prompt + generated tokens = -c, the engine's max_model_len).
  const int64_t wanted = a.gen.max_tokens < 0 ? INT32_MAX : a.gen.max_tokens;
  const int64_t room = engine.streaming_kv_eviction() ? INT32_MAX : ctx - (int64_t)prompt.size();
  if (room < 1) return Fail("the prompt fills the context of " + std::to_string(ctx) +
                            " tokens: nothing to generate (raise -c)");
  r.sampling.max_tokens = (int32_t)std::min(wanted, room);
  StatusOr<std::shared_ptr<OutputChannel>> channel = engine.AddRequest(r);
  if (!channel.ok()) return Fail(channel.status().message());
  TokenPrinter printer(engine.tokenizer(), a.ids, prompt, a.gen.stop);
  const GenerateResult result = Stream(engine, r, **channel, a.ignore_eos, printer);
  PrintSummary(a, engine, *config, load_s, r.sampling.seed, room < wanted, result);
  return 0;
}

}  // namespace tern
