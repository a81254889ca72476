#include "server/api_server.h"

#include <chrono>
#include <ctime>

#include "server/completion_handler.h"
#include "server/dashboard_page.h"
#include "server/response_writer.h"
#include "server/stats_json.h"

namespace tern {

// Constant time in the candidate: always walks the whole key and never exits
// early, so neither a matching prefix nor the key's length can be timed
// (the work depends only on the key's length, fixed for the server's life).
bool SameSecret(std::string_view candidate, std::string_view key) {
  if (key.empty()) return false;
  volatile unsigned char diff = candidate.size() == key.size() ? 0 : 1;
  const size_t n = candidate.size();
  for (size_t i = 0; i < key.size(); ++i) {
    const unsigned char c = n == 0 ? 0 : (unsigned char)candidate[i < n ? i : i % n];
    diff = diff | (unsigned char)(c ^ (unsigned char)key[i]);
  }
  return diff == 0;
}

namespace {

struct Route {
  const char* path;
  const char* method;
};

// A path ending in '/' is a prefix: "/v1/models/" matches "/v1/models/{id}".
const Route kRoutes[] = {
    {"/v1/completions", "POST"}, {"/v1/chat/completions", "POST"}, {"/v1/models", "GET"},
    {"/v1/models/", "GET"},      {"/tokenize", "POST"},            {"/detokenize", "POST"},
    {"/health", "GET"},          {"/metrics", "GET"},
    {"/", "GET"},                {"/dashboard", "GET"},            {"/stats", "GET"},
};
constexpr std::string_view kModelPrefix = "/v1/models/";

bool PathMatches(std::string_view route, std::string_view path) {
  if (route.back() != '/' || route.size() == 1) return path == route;
  return path.size() > route.size() && path.substr(0, route.size()) == route;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// "%2F" -> "/"; a '%' without two hex digits stays as it is.
std::string PercentDecode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && HexValue(s[i + 1]) >= 0 && HexValue(s[i + 2]) >= 0) {
      out += (char)(HexValue(s[i + 1]) * 16 + HexValue(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// Passes everything through and remembers the status that was sent.
class RecordingExchange : public HttpExchange {
 public:
  explicit RecordingExchange(HttpExchange& inner) : inner_(inner) {}
  int status() const { return status_; }

  void Respond(int status, std::string_view content_type, std::string_view body) override {
    status_ = status;
    inner_.Respond(status, content_type, body);
  }
  bool BeginEventStream() override {
    status_ = 200;
    return inner_.BeginEventStream();
  }
  bool SendEvent(std::string_view data) override { return inner_.SendEvent(data); }
  void EndEventStream() override { inner_.EndEventStream(); }
  bool ClientGone() override { return inner_.ClientGone(); }

 private:
  HttpExchange& inner_;
  int status_ = 0;
};

}  // namespace

void RespondError(HttpExchange& exchange, const ApiError& error) {
  exchange.Respond(error.http_status, "application/json", ErrorJson(error));
}

ApiServer::ApiServer(ApiServerOptions options)
    : options_(std::move(options)),
      created_((int64_t)std::time(nullptr)),
      metrics_(options_.metrics_prefix) {}

void ApiServer::SetBackend(ServingBackend* backend) { backend_.store(backend); }

void ApiServer::SetLoadError(const std::string& message) {
  std::lock_guard<std::mutex> lock(mu_);
  load_error_ = message;
}

void ApiServer::BeginShutdown() { shutting_down_.store(true); }

ApiError ApiServer::NotReadyError() const {
  if (shutting_down_.load()) return ApiError::Unavailable("the server is shutting down");
  std::lock_guard<std::mutex> lock(mu_);
  if (!load_error_.empty())
    return ApiError::Unavailable("the model failed to load: " + load_error_);
  return ApiError::Unavailable("the model is still loading; retry when GET /health answers 200");
}

bool ApiServer::Authorized(const HttpRequest& request) const {
  if (options_.api_key.empty()) return true;
  std::string_view auth = request.Header("authorization");
  constexpr std::string_view kBearer = "Bearer ";
  if (auth.size() < kBearer.size() || auth.substr(0, kBearer.size()) != kBearer) return false;
  return SameSecret(auth.substr(kBearer.size()), options_.api_key);
}

ApiError ApiServer::ModelNotFound(const std::string& model) const {
  ApiError e = ApiError::NotFound("The model '" + model + "' does not exist; this server serves '" +
                                      options_.served_model_name + "'",
                                  "model_not_found");
  e.param = "model";
  return e;
}

bool ApiServer::CheckModel(const std::string& model, HttpExchange& exchange) const {
  if (model.empty() || model == options_.served_model_name) return true;
  RespondError(exchange, ModelNotFound(model));
  return false;
}

bool ApiServer::AnswersAtOnce(const HttpRequest& request) {
  return request.path == "/health" && (request.method == "GET" || request.method == "HEAD");
}

void ApiServer::Handle(const HttpRequest& request, HttpExchange& exchange) {
  if (!options_.access_log) {
    Dispatch(request, exchange, nullptr);
    return;
  }
  AccessLogEntry entry;
  entry.time = std::chrono::system_clock::now();
  const auto start = std::chrono::steady_clock::now();
  entry.client = request.remote_addr;
  entry.method = request.method;
  entry.path = request.path;
  RecordingExchange recording(exchange);
  Dispatch(request, recording, &entry);
  entry.status = recording.status();
  entry.duration_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  options_.access_log(entry);
}

void ApiServer::Dispatch(const HttpRequest& request, HttpExchange& exchange,
                         AccessLogEntry* entry) {
  const Route* route = nullptr;
  bool path_known = false;
  for (const Route& r : kRoutes) {
    if (!PathMatches(r.path, request.path)) continue;
    path_known = true;
    if (request.method == r.method ||
        (request.method == "HEAD" && std::string_view(r.method) == "GET")) {
      route = &r;
    }
  }
  if (!path_known) {
    RespondError(exchange,
                 ApiError::NotFound("no route for " + request.method + " " + request.path));
    return;
  }
  if (!route) {
    RespondError(exchange, ApiError::MethodNotAllowed("method " + request.method +
                                                      " is not allowed on " + request.path));
    return;
  }
  ServingBackend* backend = shutting_down_.load() ? nullptr : backend_.load();
  if (request.path == "/health") {
    if (backend)
      exchange.Respond(200, "application/json", "{\"status\":\"ok\"}");
    else
      RespondError(exchange, NotReadyError());
    return;
  }
  const bool metrics_route = request.path == "/metrics" || request.path == "/stats";
  if (metrics_route && options_.protect_metrics && !Authorized(request)) {
    RespondError(exchange, ApiError::Unauthorized(
                               "missing or wrong API key; send 'Authorization: Bearer <key>'"));
    return;
  }
  if (request.path == "/metrics") {
    EngineStats stats;
    if (backend) stats = backend->GetStats();
    exchange.Respond(200, "text/plain; version=0.0.4; charset=utf-8",
                     metrics_.Render(options_.served_model_name, backend ? &stats : nullptr));
    return;
  }
  if (HandleDashboardRoute(request, exchange, backend)) return;
  if (!Authorized(request)) {
    RespondError(exchange, ApiError::Unauthorized(
                               "missing or wrong API key; send 'Authorization: Bearer <key>'"));
    return;
  }
  if (request.path == "/v1/models") {
    exchange.Respond(
        200, "application/json",
        ModelsJson(options_.served_model_name, created_, backend ? backend->max_model_len() : 0));
    return;
  }
  if (std::string_view(route->path) == kModelPrefix) {
    HandleModel(request, exchange, backend);
    return;
  }
  if (!backend) {
    RespondError(exchange, NotReadyError());
    return;
  }
  HandleRoute(request, exchange, backend, entry);
}

// The dashboard page and /stats are readable like /metrics (without the key);
// the page asks for the key before it calls the API.
bool ApiServer::HandleDashboardRoute(const HttpRequest& request, HttpExchange& exchange,
                                     ServingBackend* backend) {
  if (request.path == "/" || request.path == "/dashboard") {
    exchange.Respond(200, "text/html; charset=utf-8", DashboardHtml());
    return true;
  }
  if (request.path != "/stats") return false;
  EngineStats stats;
  if (backend) stats = backend->GetStats();
  exchange.Respond(200, "application/json",
                   StatsJson(options_.served_model_name, backend ? &stats : nullptr, metrics_,
                             (double)((int64_t)std::time(nullptr) - created_)));
  return true;
}

void ApiServer::HandleModel(const HttpRequest& request, HttpExchange& exchange,
                            ServingBackend* backend) {
  const std::string id = PercentDecode(std::string_view(request.path).substr(kModelPrefix.size()));
  if (id != options_.served_model_name) {
    RespondError(exchange, ModelNotFound(id));
    return;
  }
  exchange.Respond(
      200, "application/json",
      ModelJson(options_.served_model_name, created_, backend ? backend->max_model_len() : 0));
}

void ApiServer::HandleRoute(const HttpRequest& request, HttpExchange& exchange,
                            ServingBackend* backend, AccessLogEntry* entry) {
  if (request.path == "/v1/completions") {
    HandleCompletion(request, exchange, backend, ApiEndpoint::kCompletions, entry);
  } else if (request.path == "/v1/chat/completions") {
    HandleCompletion(request, exchange, backend, ApiEndpoint::kChatCompletions, entry);
  } else if (request.path == "/tokenize") {
    HandleTokenize(request, exchange, backend);
  } else {
    HandleDetokenize(request, exchange, backend);
  }
}

void ApiServer::HandleCompletion(const HttpRequest& request, HttpExchange& exchange,
                                 ServingBackend* backend, ApiEndpoint endpoint,
                                 AccessLogEntry* entry) {
  const auto start = CompletionHandler::Clock::now();
  RequestLimits limits = options_.limits;
  limits.vocab_size = backend->vocab_size();
  CompletionRequest parsed;
  if (auto e = ParseCompletionRequest(request.body, endpoint, limits, &parsed)) {
    RespondError(exchange, *e);
    return;
  }
  if (!CheckModel(parsed.model, exchange)) return;
  CompletionContext ctx{backend,
                        &metrics_,
                        &shutting_down_,
                        &pending_requests_,
                        options_.max_pending_requests,
                        options_.served_model_name};
  CompletionHandler handler(ctx, std::move(parsed), &exchange);
  const std::optional<ApiError> error = handler.Run();
  if (error) RespondError(exchange, *error);
  if (!entry) return;
  const UsageInfo usage = handler.Usage();
  if (!error) entry->request_id = handler.id();  // the id the client saw
  entry->prompt_tokens = usage.prompt_tokens;
  entry->completion_tokens = usage.completion_tokens;
  entry->cached_tokens = usage.cached_tokens;
  entry->finish_reason = handler.FinishReasons();
  if (handler.first_token_time() != CompletionHandler::Clock::time_point{}) {
    entry->ttft_ms =
        std::chrono::duration<double, std::milli>(handler.first_token_time() - start).count();
  }
}

void ApiServer::HandleTokenize(const HttpRequest& request, HttpExchange& exchange,
                               ServingBackend* backend) {
  TokenizeRequest parsed;
  if (auto e = ParseTokenizeRequest(request.body, &parsed)) {
    RespondError(exchange, *e);
    return;
  }
  if (!CheckModel(parsed.model, exchange)) return;
  std::vector<int32_t> ids;
  if (parsed.has_messages) {
    StatusOr<std::vector<int32_t>> r =
        backend->EncodeChat(parsed.messages, parsed.add_special_tokens);
    if (!r.ok()) {
      RespondError(exchange, ApiError::Invalid(r.status().message(), "messages"));
      return;
    }
    ids = std::move(r).value();
  } else {
    ids = backend->Encode(parsed.prompt, parsed.add_special_tokens, parsed.parse_special);
  }
  exchange.Respond(200, "application/json", TokenizeJson(ids, backend->max_model_len()));
}

void ApiServer::HandleDetokenize(const HttpRequest& request, HttpExchange& exchange,
                                 ServingBackend* backend) {
  RequestLimits limits = options_.limits;
  limits.vocab_size = backend->vocab_size();
  DetokenizeRequest parsed;
  if (auto e = ParseDetokenizeRequest(request.body, limits, &parsed)) {
    RespondError(exchange, *e);
    return;
  }
  if (!CheckModel(parsed.model, exchange)) return;
  exchange.Respond(200, "application/json", DetokenizeJson(backend->Decode(parsed.tokens)));
}

}  // namespace tern
