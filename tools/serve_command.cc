// tern serve: the OpenAI-compatible HTTP server. Listens first (GET /health
// answers 503 while the model loads in a background thread, 200 once ready),
// then serves /v1/completions, /v1/chat/completions, /v1/models, /tokenize,
// /detokenize and /metrics. SIGINT/SIGTERM: stop accepting, abort running
// requests, exit 0.
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "base/log.h"
#include "server/api_server.h"
#include "server/engine_backend.h"
#include "server/http_server.h"
#include "tools/arg_parser.h"
#include "tools/commands.h"
#include "tools/engine_flags.h"

namespace tern {
namespace {

struct ServeArgs {
  EngineFlags engine;
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string api_key;
  std::string api_key_file;
  std::string served_model_name;
  std::string chat_template;
  std::string max_body_bytes = "8MiB";
  int max_connections = 1024;
  int max_pending_requests = 4096;
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
              "require 'Authorization: Bearer KEY' (default: no key)");
  p.AddString("--api-key-file", "FILE", &a.api_key_file, "read the API key from FILE");
  p.AddString("--served-model-name", "NAME", &a.served_model_name,
              "model name in the API (default: the model file name without .gguf)");
  p.AddString("--chat-template", "FILE|NAME", &a.chat_template,
              "chat template file, or a built-in: chatml, llama2, llama3, mistral, phi3, gemma, "
              "zephyr (default: the model's tokenizer.chat_template)");
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

std::string CurlHint(const std::string& url, const ServeArgs& a, const std::string& model) {
  std::string auth = a.api_key.empty() ? "" : " -H \"Authorization: Bearer $TERN_API_KEY\"";
  return "curl " + url + "/v1/completions -H 'Content-Type: application/json'" + auth +
         " -d '{\"model\": \"" + model +
         "\", \"prompt\": \"Once upon a time\", \"max_tokens\": 32}'";
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
  if (!a.api_key.empty() && !a.api_key_file.empty())
    return Fail("give --api-key or --api-key-file, not both");
  if (!a.api_key_file.empty()) {
    StatusOr<std::string> key = ReadKeyFile(a.api_key_file);
    if (!key.ok()) return Fail(key.status().message());
    a.api_key = *key;
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
  api_options.max_pending_requests = a.max_pending_requests;
  ApiServer api(api_options);
  HttpServerOptions http_options;
  http_options.host = a.host;
  http_options.port = a.port;
  http_options.max_connections = a.max_connections;
  http_options.limits.max_body_bytes = (size_t)*max_body;
  HttpServer http(http_options,
                  [&api](const HttpRequest& r, HttpExchange& ex) { api.Handle(r, ex); });
  if (Status st = http.Listen(); !st.ok()) return Fail(st.message());
  http.Start();
  const std::string host = a.host.find(':') != std::string::npos ? "[" + a.host + "]" : a.host;
  const std::string url = "http://" + host + ":" + std::to_string(http.port());
  TERN_LOG_INFO(
      "tern serve: listening on %s (model '%s' loading; GET /health answers 503 until ready)",
      url.c_str(), a.served_model_name.c_str());
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
    StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(*config);
    Status status = engine.status();
    if (engine.ok()) {
      const std::string kv = (*engine)->KvSummary();
      StatusOr<std::unique_ptr<EngineBackend>> b =
          EngineBackend::Create(std::move(engine).value(), *chat_template);
      if (b.ok()) {
        backend = std::move(b).value();
        // Serving first, then "ready": a client that waits for the line
        // must not meet a 503.
        api.SetBackend(backend.get());
        TERN_LOG_INFO("tern serve: %s", kv.c_str());
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
