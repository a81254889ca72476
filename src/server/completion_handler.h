// CompletionHandler: runs one validated /v1/completions or
// /v1/chat/completions request: tokenizes (through the chat template for
// chat), checks lengths, submits one engine request per choice (prompts x n),
// then turns each choice's token stream into text (whole UTF-8 characters,
// stop strings held back and cut) and answers with one JSON response or an
// SSE stream ending in "data: [DONE]". A client that disconnects, or a server
// shutdown, aborts the engine requests so their KV blocks are freed.
//
// Thread rules: one handler per HTTP request, on that connection's thread.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/api_error.h"
#include "server/completion_request.h"
#include "server/http_exchange.h"
#include "server/response_writer.h"
#include "server/server_metrics.h"
#include "server/serving_backend.h"
#include "server/stop_matcher.h"
#include "server/tool_calls.h"

namespace tern {

struct CompletionContext {
  ServingBackend* backend = nullptr;
  ServerMetrics* metrics = nullptr;
  const std::atomic<bool>* shutting_down = nullptr;
  std::atomic<int32_t>* pending_requests = nullptr;  // engine requests in flight
  int32_t max_pending_requests = 4096;
  std::string model_name;
};

class CompletionHandler {
 public:
  CompletionHandler(const CompletionContext& ctx, CompletionRequest request,
                    HttpExchange* exchange);
  ~CompletionHandler();

  // Answers the request. Returns an error when nothing was sent yet (the
  // caller writes it); nullopt when a response or stream was sent.
  std::optional<ApiError> Run();

  // For the access log, after Run(): the response id ("cmpl-..."), the
  // token counts, when the first token arrived (a default time_point when
  // none did) and the distinct finish reasons ("length", "stop,length", "").
  using Clock = std::chrono::steady_clock;
  const std::string& id() const { return id_; }
  UsageInfo Usage() const;
  Clock::time_point first_token_time() const { return first_token_time_; }
  std::string FinishReasons() const;

 private:
  struct Choice {
    int32_t index = 0;
    std::string engine_id;
    std::shared_ptr<OutputChannel> channel;
    std::vector<int32_t> prompt_ids;
    int32_t max_tokens = 0;
    std::shared_ptr<const TokenConstraint> constraint;  // structured output, or null
    std::string echo_text;
    std::unique_ptr<StopMatcher> stop;
    std::unique_ptr<TokenTextStream> detok;
    std::string text;                          // released text (non-streaming)
    std::string delta;                         // released since the last chunk
    std::vector<LogprobEntry> logprobs;        // all (non-streaming)
    std::vector<LogprobEntry> delta_logprobs;  // since the last chunk
    size_t raw_bytes = 0;                      // decoded bytes so far (text offsets)
    int32_t completion_tokens = 0;
    int32_t cached_tokens = 0;
    int32_t evicted_tokens = 0;  // dropped from its KV (streaming eviction)
    bool client_done = false;  // finish sent / decided
    bool engine_done = false;  // the engine's final output arrived
    std::string finish_reason;
    std::unique_ptr<ToolCallStream> tools;         // chat with tools: calls held back and parsed
    std::vector<ToolCallResult> tool_calls;        // all (non-streaming)
    std::vector<ToolCallResult> delta_tool_calls;  // since the last chunk
  };

  std::optional<ApiError> BuildPrompts(std::vector<std::vector<int32_t>>* prompts,
                                       std::vector<std::string>* echo_texts);
  std::optional<ApiError> CheckLength(size_t prompt_len, int32_t* max_tokens) const;
  std::optional<ApiError> Submit(const std::vector<std::vector<int32_t>>& prompts,
                                 const std::vector<std::string>& echo_texts);
  void Consume(Choice& c, const RequestOutput& out);
  void FinishChoice(Choice& c, const std::string& reason);
  // Consumes every output of `c` that has arrived, one stream chunk each.
  // False when the client went away.
  bool ReadOutputs(Choice& c, bool streaming);
  // Reads outputs until every choice is done for the client, sleeping on the
  // engine's output generation (ServingBackend::WaitForOutputs) between
  // passes. False when the client went away (everything aborted).
  bool Pump(bool streaming);
  // The longest sleep between passes: how soon a departed client or a
  // shutdown is noticed when no outputs arrive.
  static constexpr std::chrono::milliseconds kWakeInterval{50};
  bool SendStreamStart();
  bool SendChunk(Choice& c);
  void SendFinalResponse();
  void AbortUnfinished();
  void DrainForMetrics();
  ResponseMeta Meta() const;
  bool is_chat() const { return request_.endpoint == ApiEndpoint::kChatCompletions; }

  CompletionContext ctx_;
  CompletionRequest request_;
  HttpExchange* exchange_;
  std::string id_;
  int64_t created_ = 0;
  std::vector<Choice> choices_;
  int32_t reserved_ = 0;  // counted in ctx_.pending_requests
  Clock::time_point first_token_time_{};
};

}  // namespace tern
