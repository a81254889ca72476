// tern chat: a conversation with the model in the terminal. Each user turn
// re-renders the whole conversation through the chat template (the server's
// path: EngineBackend::EncodeChat) and runs it on the Engine with prefix
// caching, so only the new turn's tokens are computed; the reply streams to
// stdout as it is generated, and a line per turn on stderr says how many
// prompt tokens there were and how many came from the cache.
//
// On a terminal the prompt is "> " and a line ending in '\' continues on the
// next; with piped stdin each line is one user turn and stdout holds only the
// replies, one after another, each ending in a newline. Lines starting with
// '/' are commands (/help); "//text" sends "/text". Ctrl-C while a reply is
// streaming stops that reply; EOF or /exit ends the session.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/atomic_file.h"
#include "server/engine_backend.h"
#include "server/stop_matcher.h"
#include "tools/arg_parser.h"
#include "tools/commands.h"
#include "tools/common_flags.h"
#include "tools/engine_flags.h"
#include "tools/generation_flags.h"

namespace tern {
namespace {

struct ChatArgs {
  std::string model;
  GenerationFlags gen;
  int64_t threads = 0;
};

int Fail(const std::string& message) {
  std::fprintf(stderr, "tern chat: %s\n", message.c_str());
  return 1;
}

const char kCommandHelp[] =
    "commands:\n"
    "  /reset       start a new conversation (the --system message stays)\n"
    "  /save FILE   write the conversation as JSON ({\"messages\": [...]}, a chat request body)\n"
    "  /help        this list\n"
    "  /exit        leave (so does end of input, Ctrl-D)\n"
    "a line starting with '//' sends the text after the first '/'; on a terminal a line\n"
    "ending in '\\' continues on the next; Ctrl-C stops the reply being written.\n";

// Set by SIGINT while a reply streams (the handler is installed only then).
std::atomic<bool> g_interrupted{false};
void OnInterrupt(int) { g_interrupted.store(true); }

// SIGINT stops the current reply instead of the process, for this scope.
class InterruptScope {
 public:
  InterruptScope() {
    g_interrupted.store(false);
    struct sigaction sa = {};
    sa.sa_handler = OnInterrupt;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_);
  }
  ~InterruptScope() { sigaction(SIGINT, &old_, nullptr); }

 private:
  struct sigaction old_ = {};
};

struct TurnStats {
  int32_t prompt_tokens = 0;
  int32_t cached_tokens = 0;
  int32_t completion_tokens = 0;
  std::string finish_reason;
  double ttft_s = 0;
  double e2e_s = 0;
};

// One conversation: the messages so far and how to answer the next turn.
class ChatSession {
 public:
  ChatSession(EngineBackend* backend, const GenerationFlags& gen)
      : backend_(backend), gen_(gen), sampling_(gen.ToSamplingParams()) {
    Reset();
  }

  void Reset() {
    messages_.clear();
    if (!gen_.system.empty()) messages_.push_back({"system", gen_.system});
  }

  // Answers user_text, streaming the reply to out; the turn joins the
  // history (a reply stopped by Ctrl-C too, as far as it got). An error
  // (conversation past the context) leaves the history as it was.
  StatusOr<TurnStats> Reply(const std::string& user_text, FILE* out) {
    messages_.push_back({"user", user_text});
    StatusOr<TurnStats> stats = Run(out);
    if (!stats.ok()) messages_.pop_back();
    return stats;
  }

  Status Save(const std::string& path) const {
    nlohmann::json list = nlohmann::json::array();
    for (const ApiMessage& m : messages_) list.push_back({{"role", m.role}, {"content", m.content}});
    Status st = WriteFileAtomically(path, nlohmann::json{{"messages", list}}.dump(2) + "\n");
    if (!st.ok()) return InvalidArgument("/save: cannot write '" + path + "': " + st.message());
    return Status::Ok();
  }

  size_t num_messages() const { return messages_.size(); }

 private:
  StatusOr<TurnStats> Run(FILE* out) {
    TERN_ASSIGN_OR_RETURN(std::vector<int32_t> prompt, backend_->EncodeChat(messages_, true));
    const int32_t limit = backend_->max_model_len();
    if ((int64_t)prompt.size() >= limit) {
      return InvalidArgument("the conversation is " + std::to_string(prompt.size()) +
                             " tokens, which leaves no room for a reply in the context of " +
                             std::to_string(limit) + " tokens: /reset to start over (or raise -c)");
    }
    EngineRequest req;
    req.request_id = "chat-" + std::to_string(++num_turns_);
    req.prompt_token_ids = prompt;
    req.sampling = sampling_;
    // Turn k draws with seed + k - 1: replayable, yet no two turns share draws.
    if (req.sampling.has_seed) req.sampling.seed += (uint64_t)(num_turns_ - 1);
    const int32_t room = limit - (int32_t)prompt.size();
    req.sampling.max_tokens = sampling_.max_tokens < 0 ? room : std::min(sampling_.max_tokens, room);
    TERN_ASSIGN_OR_RETURN(std::shared_ptr<OutputChannel> channel,
                          backend_->AddRequest(std::move(req)));
    return Stream(*channel, "chat-" + std::to_string(num_turns_), prompt, out);
  }

  // Pops the request's outputs until the engine's final one, printing the
  // text (stop strings cut) as it comes.
  TurnStats Stream(OutputChannel& channel, const std::string& id,
                   const std::vector<int32_t>& prompt, FILE* out) {
    std::unique_ptr<TokenTextStream> detok = backend_->NewTextStream(prompt);
    StopMatcher stop(gen_.stop);
    std::string reply;
    auto emit = [&](const std::string& text) {
      reply += text;
      std::fwrite(text.data(), 1, text.size(), out);
      std::fflush(out);
    };
    TurnStats stats;
    InterruptScope interrupt_scope;
    bool aborted = false, finished = false;
    while (!finished) {
      if (g_interrupted.load() && !aborted) {
        backend_->Abort(id);
        aborted = true;
      }
      std::optional<RequestOutput> o = channel.Pop(std::chrono::milliseconds(50));
      if (!o) continue;
      for (int32_t token : o->new_token_ids) {
        if (stop.matched() || aborted) break;
        emit(stop.Push(detok->Add(token)));
        if (stop.matched()) backend_->FinishWithStop(id);
      }
      if (!o->finished) continue;
      finished = true;
      if (!stop.matched() && !aborted) {
        emit(stop.Push(detok->Flush()));
        if (!stop.matched()) emit(stop.Flush());
      }
      stats.prompt_tokens = o->metrics.prompt_tokens;
      stats.cached_tokens = o->metrics.cached_tokens;
      stats.completion_tokens = o->metrics.generated_tokens;
      stats.ttft_s = o->metrics.ttft_s;
      stats.e2e_s = o->metrics.e2e_s;
      stats.finish_reason = FinishReasonName(stop.matched() ? FinishReason::kStop : o->finish_reason);
    }
    std::fputc('\n', out);
    std::fflush(out);
    messages_.push_back({"assistant", reply});
    return stats;
  }

  EngineBackend* backend_;
  const GenerationFlags& gen_;
  SamplingParams sampling_;
  std::vector<ApiMessage> messages_;
  int64_t num_turns_ = 0;
};

void PrintTurnStats(int64_t turn, const TurnStats& s) {
  const double decode_s = s.e2e_s - s.ttft_s;
  std::fprintf(stderr,
               "[turn %lld] prompt %d tokens (%d cached), reply %d tokens (%s), TTFT %.1f ms, "
               "%.1f tok/s\n",
               (long long)turn, s.prompt_tokens, s.cached_tokens, s.completion_tokens,
               s.finish_reason.c_str(), s.ttft_s * 1e3,
               decode_s > 0 && s.completion_tokens > 1 ? (s.completion_tokens - 1) / decode_s
                                                        : 0.0);
}

// One user turn from the input: a line, or on a terminal lines joined while
// they end in '\'. False at end of input.
bool ReadTurn(bool interactive, std::string* text) {
  text->clear();
  std::string line;
  for (;;) {
    if (interactive) {
      std::fputs(text->empty() ? "> " : ". ", stdout);
      std::fflush(stdout);
    }
    if (!std::getline(std::cin, line)) return !text->empty();
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (interactive && !line.empty() && line.back() == '\\') {
      line.pop_back();
      *text += line + "\n";
      continue;
    }
    *text += line;
    return true;
  }
}

// Runs a '/' command; false for /exit.
bool RunCommand(const std::string& line, ChatSession& session) {
  const size_t space = line.find(' ');
  const std::string name = line.substr(0, space);
  std::string arg = space == std::string::npos ? "" : line.substr(space + 1);
  while (!arg.empty() && arg.front() == ' ') arg.erase(0, 1);
  while (!arg.empty() && arg.back() == ' ') arg.pop_back();
  if (name == "/exit" || name == "/quit") return false;
  if (name == "/reset") {
    session.Reset();
    std::fprintf(stderr, "(new conversation)\n");
  } else if (name == "/save") {
    if (arg.empty()) {
      std::fprintf(stderr, "/save needs a file name: /save FILE\n");
    } else if (Status st = session.Save(arg); !st.ok()) {
      std::fprintf(stderr, "%s\n", st.message().c_str());
    } else {
      std::fprintf(stderr, "(saved %zu messages to %s)\n", session.num_messages(), arg.c_str());
    }
  } else if (name == "/help") {
    std::fputs(kCommandHelp, stderr);
  } else {
    std::fprintf(stderr, "unknown command '%s' (/help lists them)\n", name.c_str());
  }
  return true;
}

StatusOr<std::unique_ptr<EngineBackend>> StartEngine(const ChatArgs& a, int32_t ctx,
                                                     const std::string& template_source) {
  EngineConfig config;
  config.model_path = a.model;
  config.num_threads = (int)a.threads;
  config.max_num_seqs = 1;  // one conversation; its KV = one context's worth
  config.max_model_len = ctx;
  config.kv_cache_dtype = a.gen.kv.k_dtype;
  if (a.gen.kv.v_dtype != a.gen.kv.k_dtype) config.kv_cache_dtype_v = a.gen.kv.v_dtype;
  config.enable_prefix_caching = true;  // the point: turn N+1 reuses turn N's KV
  ApplyEnvSettings(EnvSettings::FromProcess(), &config);
  TERN_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Create(config));
  return EngineBackend::Create(std::move(engine), template_source);
}

}  // namespace

int RunChat(int argc, char** argv) {
  ChatArgs a;
  ArgParser parser(
      "chat -m MODEL [--system TEXT] [--chat-template NAME|FILE] [options]",
      "A conversation with the model: each line you type is a user turn, the reply streams "
      "back. The conversation goes through the model's chat template (as /v1/chat/completions "
      "of tern serve) and the prefix cache, so each turn computes only its new tokens; stderr "
      "gets one line per turn with the prompt tokens and how many were cached. With piped stdin "
      "every line is one turn and stdout holds only the replies (one per turn, newline-ended). "
      "Commands: /reset, /save FILE, /help, /exit. " +
          SamplingDefaultsHelp());
  AddModelFlag(parser, &a.model, "GGUF model file (required)");
  AddGenerationFlags(parser, &a.gen, "each reply");
  AddThreadsFlag(parser, &a.threads);
  if (int rc = ParseOrExit(parser, argc, argv, "chat"); rc >= 0) return rc;
  if (a.model.empty()) return Fail("missing -m MODEL (see 'tern chat --help')");

  StatusOr<int32_t> ctx = a.gen.ResolveContext(a.model);
  if (!ctx.ok()) return Fail(ctx.status().message());
  StatusOr<std::string> source = ResolveChatTemplate(a.gen.chat_template, a.model);
  if (!source.ok()) return Fail(source.status().message());
  if (source->empty()) {
    return Fail(a.model + " has no chat template (no tokenizer.chat_template): pass "
                "--chat-template NAME|FILE (built-ins: " + BuiltinChatTemplateList() + ")");
  }

  // One seed for the session, printed, so a sampled conversation can be
  // replayed with --seed.
  if (a.gen.seed < 0) a.gen.seed = (int64_t)(std::random_device{}() & 0x7fffffff);
  StatusOr<std::unique_ptr<EngineBackend>> backend = StartEngine(a, *ctx, *source);
  if (!backend.ok()) return Fail(backend.status().message());
  const bool interactive = isatty(STDIN_FILENO);
  std::fprintf(stderr, "tern chat: %s, context %d tokens, seed %lld, %s\n", a.model.c_str(),
               (*backend)->max_model_len(), (long long)a.gen.seed,
               a.gen.chat_template.empty() ? "the model's chat template"
                                           : ("chat template " + a.gen.chat_template).c_str());
  if (interactive) std::fprintf(stderr, "type /help for commands, /exit or Ctrl-D to leave\n");

  ChatSession session(backend->get(), a.gen);
  int64_t turn = 0;
  std::string text;
  while (ReadTurn(interactive, &text)) {
    if (text.rfind("//", 0) == 0) {
      text.erase(0, 1);
    } else if (!text.empty() && text[0] == '/') {
      if (!RunCommand(text, session)) break;
      continue;
    }
    if (text.empty() && interactive) continue;
    StatusOr<TurnStats> stats = session.Reply(text, stdout);
    if (!stats.ok()) {
      std::fprintf(stderr, "tern chat: %s\n", stats.status().message().c_str());
      continue;
    }
    PrintTurnStats(++turn, *stats);
  }
  if (interactive) std::fputc('\n', stdout);
  (*backend)->engine().Shutdown();
  return 0;
}

}  // namespace tern
