// tern serve: the OpenAI-compatible HTTP server. Listens first (GET /health
// answers 503 while the model loads in a background thread, 200 once ready),
// then serves /v1/completions, /v1/chat/completions, /v1/models, /tokenize,
// /detokenize and /metrics. SIGINT/SIGTERM: stop accepting, abort running
// requests, exit 0.
//
// The API key comes from --api-key, --api-key-file, or else $TERN_API_KEY
// (read once here; a flag wins). -v adds one access-log line per request.
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "base/log.h"
#include "gguf/weight_summary.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "server/api_server.h"
#include "server/engine_backend.h"
#include "server/http_server.h"
#include "tools/arg_parser.h"
#include "tools/commands.h"
#include "tools/engine_flags.h"

namespace tern {
namespace {

// How much lower than the HTTP threads the compute threads run (nice steps).
constexpr int kComputeNice = 5;

constexpr const char* kApiKeyEnv = "TERN_API_KEY";

struct ServeArgs {
  EngineFlags engine;
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string api_key;
  std::string api_key_file;
  enum class KeySource { kNone, kFlag, kFile, kEnv } key_source = KeySource::kNone;
  std::string served_model_name;
  std::string chat_template;
  std::string max_body_bytes = "8MiB";
  int max_connections = 1024;
  int max_pending_requests = 4096;
  bool protect_metrics = false;
  std::string metrics_prefix = "tern";
};

int Fail(const std::string& message) {
  std::fprintf(stderr, "tern serve: %s\n", message.c_str());
  return 1;
}

void AddFlags(ArgParser& p, ServeArgs& a) {
  AddEngineFlags(p, &a.engine);
  p.AddString("--host", "ADDR", &a.host, "address to bind (default 127.0.0.1; 0.0.0.0 = all)");
  p.AddInt("--port", "N", &a.port, "TCP port (default 8080; 0 = any free port)");
  p.AddString("--api-key", "KEY", &a.api_key,
              "require 'Authorization: Bearer KEY' (default: $TERN_API_KEY when set, else no key)");
  p.AddString("--api-key-file", "FILE", &a.api_key_file,
              "read the API key from FILE's first line (default: none; wins over $TERN_API_KEY)");
  p.AddFlag("--protect-metrics", &a.protect_metrics,
            "with an API key, /metrics and /stats need it too (default: open, like /health)");
  p.AddString("--metrics-prefix", "NAME", &a.metrics_prefix,
              "namespace of the /metrics names (default tern: tern:num_requests_waiting; "
              "vllm: vLLM's names, for schedulers that expect them)");
  p.AddString("--served-model-name", "NAME", &a.served_model_name,
              "model name in the API (default: the model file name without .gguf)");
  p.AddString("--chat-template", "FILE|NAME", &a.chat_template,
              "chat template file, or a built-in: " + BuiltinChatTemplateList() +
                  " (default: the model's tokenizer.chat_template)");
  p.AddString("--max-body-bytes", "SIZE", &a.max_body_bytes,
              "largest request body (default 8MiB; larger -> 413)");
  p.AddInt("--max-connections", "N", &a.max_connections,
           "open connections at most (default 1024; more -> 503)");
  p.AddInt("--max-pending-requests", "N", &a.max_pending_requests,
           "engine requests in flight at most (default 4096; more -> 429)");
}

StatusOr<std::string> ReadKeyFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("--api-key-file: cannot read '" + path + "'");
  std::string key;
  std::getline(in, key);
  while (!key.empty() && (key.back() == '\r' || key.back() == ' ' || key.back() == '\t'))
    key.pop_back();
  if (key.empty())
    return InvalidArgument("--api-key-file: '" + path + "' holds no key on its first line");
  return key;
}

// Fills a.api_key and a.api_key_source: --api-key, else --api-key-file,
// else the environment value env_key (null or "" = none).
Status ResolveApiKey(ServeArgs& a, const char* env_key) {
  if (!a.api_key.empty() && !a.api_key_file.empty())
    return InvalidArgument("give --api-key or --api-key-file, not both");
  if (!a.api_key.empty()) {
    a.key_source = ServeArgs::KeySource::kFlag;
  } else if (!a.api_key_file.empty()) {
    TERN_ASSIGN_OR_RETURN(a.api_key, ReadKeyFile(a.api_key_file));
    a.key_source = ServeArgs::KeySource::kFile;
  } else if (env_key && *env_key) {
    a.api_key = env_key;
    a.key_source = ServeArgs::KeySource::kEnv;
  }
  return Status::Ok();
}

// The Authorization header a client sends, as a shell word for the curl hint:
// the same environment variable, the file, or a placeholder for the flag.
std::string AuthHeaderHint(const ServeArgs& a) {
  switch (a.key_source) {
    case ServeArgs::KeySource::kNone:
      return "";
    case ServeArgs::KeySource::kEnv:
      return " -H \"Authorization: Bearer $" + std::string(kApiKeyEnv) + "\"";
    case ServeArgs::KeySource::kFile:
      return " -H \"Authorization: Bearer $(cat '" + a.api_key_file + "')\"";
    case ServeArgs::KeySource::kFlag:
      break;
  }
  return " -H 'Authorization: Bearer <the --api-key value>'";
}

std::string KeySourceText(const ServeArgs& a) {
  switch (a.key_source) {
    case ServeArgs::KeySource::kFlag:
      return "--api-key";
    case ServeArgs::KeySource::kFile:
      return "--api-key-file " + a.api_key_file;
    case ServeArgs::KeySource::kEnv:
      return std::string("$") + kApiKeyEnv;
    case ServeArgs::KeySource::kNone:
      break;
  }
  return "nowhere";
}

std::string CurlHint(const std::string& url, const ServeArgs& a, const std::string& model) {
  return "curl " + url + "/v1/completions -H 'Content-Type: application/json'" +
         AuthHeaderHint(a) + " -d '{\"model\": \"" + model +
         "\", \"prompt\": \"Once upon a time\", \"max_tokens\": 32}'";
}

void LogApiKey(const ServeArgs& a) {
  if (a.key_source == ServeArgs::KeySource::kNone) {
    TERN_LOG_INFO("tern serve: API key: none (set --api-key, --api-key-file or $%s to require one)",
                  kApiKeyEnv);
  } else {
    TERN_LOG_INFO("tern serve: API key: required, from %s (/health and /metrics stay open)",
                  KeySourceText(a).c_str());
  }
}

// What was loaded and how it runs: one line each for the model, the compute
// setup, the context and the KV cache.
void LogLoaded(const Engine& engine, const ServeArgs& a, double load_s) {
  const Model& model = engine.model();
  const ModelConfig& mc = model.config();
  const gguf::WeightSummary w = gguf::SummarizeWeights(model.file());
  TERN_LOG_INFO(
      "tern serve: model %s (served as '%s', general.name '%s'): arch %s, weights %s, "
      "%s parameters (%s), loaded in %.2f s",
      model.file().path().c_str(), a.served_model_name.c_str(), mc.name.c_str(), mc.arch.c_str(),
      w.MainTypeName().c_str(), gguf::HumanCount(w.num_params).c_str(),
      FormatBytes((double)w.num_bytes).c_str(), load_s);
  TERN_LOG_INFO("tern serve: compute: %d threads, kernels %s", engine.num_threads(),
                kernels::ActiveIsa());
  TERN_LOG_INFO("tern serve: context: max_model_len %d tokens (model context %d)",
                engine.max_model_len(), mc.n_ctx_train);
  TERN_LOG_INFO("tern serve: %s", engine.KvSummary().c_str());
  if (const std::string spec = engine.SpeculativeSummary(); !spec.empty()) {
    TERN_LOG_INFO("tern serve: %s", spec.c_str());
  }
}

}  // namespace

int RunServe(int argc, char** argv) {
  ServeArgs a;
  ArgParser parser(
      "serve -m MODEL [--host ADDR] [--port N] [--api-key KEY] [options]",
      "Serves the model over an OpenAI-compatible HTTP API (completions, chat "
      "completions with SSE streaming, models, tokenize, health, Prometheus metrics).");
  AddFlags(parser, a);
  if (int rc = ParseOrExit(parser, argc, argv, "serve"); rc >= 0) return rc;

  StatusOr<EngineConfig> config = a.engine.ToConfig();
  if (!config.ok()) return Fail(config.status().message());
  if (a.port < 0 || a.port > 65535)
    return Fail("--port must be in 0..65535, got " + std::to_string(a.port));
  if (a.max_connections < 1) return Fail("--max-connections must be >= 1");
  if (a.max_pending_requests < 1) return Fail("--max-pending-requests must be >= 1");
  if (Status st = ValidateMetricsPrefix(a.metrics_prefix); !st.ok()) return Fail(st.message());
  if (Status st = ResolveApiKey(a, std::getenv(kApiKeyEnv)); !st.ok()) return Fail(st.message());
  if (a.protect_metrics && a.api_key.empty()) {
    return Fail("--protect-metrics needs an API key (--api-key, --api-key-file or $TERN_API_KEY)");
  }
  StatusOr<int64_t> max_body = ParseByteSize(a.max_body_bytes);
  if (!max_body.ok() || *max_body <= 0)
    return Fail("--max-body-bytes: not a positive size: '" + a.max_body_bytes + "'");
  if (!std::filesystem::exists(config->model_path))
    return Fail("model file not found: " + config->model_path);
  if (a.served_model_name.empty()) {
    a.served_model_name = std::filesystem::path(config->model_path).stem().string();
  }
  StatusOr<std::string> chat_template = ResolveChatTemplate(a.chat_template, config->model_path);
  if (!chat_template.ok()) return Fail(chat_template.status().message());

  // Signals are taken by sigwait on this thread only; SIGUSR1 = load failed.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  ApiServerOptions api_options;
  api_options.served_model_name = a.served_model_name;
  api_options.api_key = a.api_key;
  api_options.protect_metrics = a.protect_metrics;
  api_options.metrics_prefix = a.metrics_prefix;
  api_options.max_pending_requests = a.max_pending_requests;
  if (config->verbose) {
    api_options.access_log = [](const AccessLogEntry& e) {
      TERN_LOG_INFO("%s", FormatAccessLog(e).c_str());
    };
  }
  ApiServer api(api_options);
  HttpServerOptions http_options;
  http_options.host = a.host;
  http_options.port = a.port;
  http_options.max_connections = a.max_connections;
  http_options.limits.max_body_bytes = (size_t)*max_body;
  // Health checks are answered on the accept thread, ahead of a burst of
  // connections waiting for their threads (docs/reliability.md).
  http_options.answer_on_accept = &ApiServer::AnswersAtOnce;
  HttpServer http(http_options,
                  [&api](const HttpRequest& r, HttpExchange& ex) { api.Handle(r, ex); });
  if (Status st = http.Listen(); !st.ok()) return Fail(st.message());
  http.Start();
  const std::string host = a.host.find(':') != std::string::npos ? "[" + a.host + "]" : a.host;
  const std::string url = "http://" + host + ":" + std::to_string(http.port());
  TERN_LOG_INFO(
      "tern serve: listening on %s (model '%s' loading; GET /health answers 503 until ready)",
      url.c_str(), a.served_model_name.c_str());
  LogApiKey(a);
  if (config->verbose) TERN_LOG_INFO("tern serve: -v: one 'access ...' line per request");
  if (a.api_key.empty() && a.host != "127.0.0.1" && a.host != "localhost" && a.host != "::1") {
    TERN_LOG_WARN("tern serve: bound to %s without an API key: anyone who can reach it may use it",
                  a.host.c_str());
  }
  if (chat_template->empty()) {
    TERN_LOG_WARN(
        "tern serve: the model has no chat template; /v1/chat/completions answers 400 "
        "(pass --chat-template chatml or a file)");
  }

  std::unique_ptr<EngineBackend> backend;
  pthread_t main_thread = pthread_self();
  std::thread loader([&] {
    // Compute yields to HTTP: the engine thread and the kernel pool are
    // started by this thread and inherit its nice value, so the accept and
    // connection threads (nice 0) get a core promptly while compute keeps
    // every core busy; idle cores still go to compute. Measured in the soak
    // on 2 shared cores: worst /health 141-173 ms -> 85-97 ms
    // (docs/reliability.md). A thread may always lower its own priority.
    const id_t tid = (id_t)::syscall(SYS_gettid);
    errno = 0;
    const int nice_now = ::getpriority(PRIO_PROCESS, tid);
    if (errno == 0 &&
        ::setpriority(PRIO_PROCESS, tid, std::min(nice_now + kComputeNice, 19)) != 0) {
      TERN_LOG_WARN("tern serve: cannot lower the compute threads' priority: %s",
                    std::strerror(errno));
    }
    const auto load_start = std::chrono::steady_clock::now();
    StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(*config);
    Status status = engine.status();
    if (engine.ok()) {
      StatusOr<std::unique_ptr<EngineBackend>> b =
          EngineBackend::Create(std::move(engine).value(), *chat_template);
      if (b.ok()) {
        backend = std::move(b).value();
        const double load_s = std::chrono::duration<double>(
                                  std::chrono::steady_clock::now() - load_start)
                                  .count();
        LogLoaded(backend->engine(), a, load_s);
        // Serve first, then say so: a script that waits for "ready on" may send at once.
        api.SetBackend(backend.get());
        TERN_LOG_INFO("tern serve: ready on %s (max_model_len %d); try:\n  %s", url.c_str(),
                      backend->max_model_len(), CurlHint(url, a, a.served_model_name).c_str());
        return;
      }
      status = b.status();
    }
    api.SetLoadError(status.message());
    TERN_LOG_ERROR("tern serve: cannot load %s: %s", config->model_path.c_str(),
                   status.message().c_str());
    pthread_kill(main_thread, SIGUSR1);
  });

  int sig = 0;
  sigwait(&signals, &sig);
  const bool load_failed = sig == SIGUSR1;
  if (!load_failed) TERN_LOG_INFO("tern serve: %s received; shutting down", strsignal(sig));
  api.BeginShutdown();
  http.Stop(std::chrono::seconds(10));
  loader.join();
  if (backend) backend->engine().Shutdown();
  backend.reset();
  if (load_failed) return 1;
  TERN_LOG_INFO("tern serve: stopped");
  return 0;
}

}  // namespace tern
