// ApiServer: the OpenAI-compatible HTTP API on top of a ServingBackend.
// Routes (all answers JSON; errors {"error": {message, type, param, code}}):
//   POST /v1/completions, POST /v1/chat/completions  (JSON or SSE stream)
//   GET  /v1/models, GET /v1/models/{id}, POST /tokenize, POST /detokenize
//   GET  /health   200 when ready, 503 while loading or shutting down
//   GET  /metrics  Prometheus text
//   GET  /, /dashboard  the live dashboard page (HTML); GET /stats  its JSON
// With an API key set, every route but /health, /metrics, /stats and the
// dashboard page needs "Authorization: Bearer KEY" (401 otherwise; compared
// in constant time); protect_metrics puts /metrics and /stats behind the key
// too. /health stays open always. Unknown route 404, wrong
// method 405, unknown model 404 (code model_not_found), more than
// max_pending_requests engine requests in flight 429.
//
// Model ids: the server serves one model, named served_model_name. That is
// the one id /v1/models lists and /v1/models/{id} knows (the id may hold
// '/', percent-encoded or not); a request's "model" field must be that name
// or absent/empty.
//
// With an access_log sink, every request handed to Handle() produces one
// AccessLogEntry when its answer is complete (tern serve -v logs it).
//
// Lifecycle: constructed before the model loads (requests get 503), then
// SetBackend() when it is ready; BeginShutdown() makes new requests 503 and
// aborts running ones. Thread rules: Handle() runs on many connection
// threads at once; the setters may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>

#include "server/access_log.h"
#include "server/http_exchange.h"
#include "server/http_parser.h"
#include "server/request_parser.h"
#include "server/server_metrics.h"
#include "server/serving_backend.h"

namespace tern {

// True when candidate equals key (non-empty), in time that depends only on
// key's length: no early exit on a mismatching byte or length.
bool SameSecret(std::string_view candidate, std::string_view key);

struct ApiServerOptions {
  std::string served_model_name = "model";
  std::string api_key;  // "" = no authentication
  bool protect_metrics = false;  // with a key: /metrics and /stats need it
  std::string metrics_prefix = "tern";  // namespace of the /metrics names (ValidateMetricsPrefix)
  RequestLimits limits;
  int32_t max_pending_requests = 4096;
  // Called once per request, on its connection thread; empty = no access log.
  std::function<void(const AccessLogEntry&)> access_log;
};

class ApiServer {
 public:
  explicit ApiServer(ApiServerOptions options);

  // The backend must outlive every Handle() call that starts after this.
  void SetBackend(ServingBackend* backend);
  // Loading failed: /health and model routes answer 503 with this message.
  void SetLoadError(const std::string& message);
  void BeginShutdown();
  bool shutting_down() const { return shutting_down_.load(); }
  int32_t pending_requests() const { return pending_requests_.load(); }

  void Handle(const HttpRequest& request, HttpExchange& exchange);
  // Requests Handle() answers at once, touching no engine lock (GET and
  // HEAD /health): HttpServerOptions::answer_on_accept.
  static bool AnswersAtOnce(const HttpRequest& request);

 private:
  void Dispatch(const HttpRequest& request, HttpExchange& exchange, AccessLogEntry* entry);
  void HandleRoute(const HttpRequest& request, HttpExchange& exchange, ServingBackend* backend,
                   AccessLogEntry* entry);
  void HandleCompletion(const HttpRequest& request, HttpExchange& exchange, ServingBackend* backend,
                        ApiEndpoint endpoint, AccessLogEntry* entry);
  // "/", "/dashboard", "/stats": answers and returns true; else false.
  bool HandleDashboardRoute(const HttpRequest& request, HttpExchange& exchange,
                            ServingBackend* backend);
  void HandleModel(const HttpRequest& request, HttpExchange& exchange, ServingBackend* backend);
  void HandleTokenize(const HttpRequest& request, HttpExchange& exchange, ServingBackend* backend);
  void HandleDetokenize(const HttpRequest& request, HttpExchange& exchange,
                        ServingBackend* backend);
  bool Authorized(const HttpRequest& request) const;
  // Empty or equal to the served name; otherwise writes 404 and returns false.
  bool CheckModel(const std::string& model, HttpExchange& exchange) const;
  ApiError ModelNotFound(const std::string& model) const;
  ApiError NotReadyError() const;

  const ApiServerOptions options_;
  const int64_t created_;
  std::atomic<ServingBackend*> backend_{nullptr};
  std::atomic<bool> shutting_down_{false};
  std::atomic<int32_t> pending_requests_{0};
  mutable std::mutex mu_;
  std::string load_error_;  // guarded by mu_
  ServerMetrics metrics_;
};

// Writes an ApiError as a JSON response with its status.
void RespondError(HttpExchange& exchange, const ApiError& error);

}  // namespace tern
