// Request parsing and validation: JSON request bodies -> the plain records of
// completion_request.h, or an ApiError (400 invalid_request_error naming the
// offending field in `param`). Unknown fields are ignored, as OpenAI clients
// send many. Fields a request leaves out take the front-end defaults of
// sample/defaults.h. Types are checked here, ranges by sample/request_checks.h
// (the rules every front end shares). Pure functions; safe from any thread.
#pragma once

#include <optional>
#include <string_view>

#include "sample/request_checks.h"
#include "server/api_error.h"
#include "server/completion_request.h"

namespace tern {

struct RequestLimits {
  int32_t max_n = limits::kMaxChoices;         // choices per request
  int32_t max_stop = limits::kMaxStopStrings;  // stop strings
  int32_t max_logprobs = limits::kMaxLogprobs; // top alternatives per token
  int32_t max_prompts = 64;   // prompts in one completions request
  int32_t vocab_size = 0;     // > 0: token ids must be below it
};

// Tokens to generate when a request gives neither max_tokens nor
// max_completion_tokens: defaults::kMaxTokensCompletion (16) for
// /v1/completions, defaults::kMaxTokensUntilContext (-1: until an
// end-of-generation token or max_model_len) for /v1/chat/completions.
int32_t DefaultMaxTokens(ApiEndpoint endpoint);

std::optional<ApiError> ParseCompletionRequest(std::string_view body, ApiEndpoint endpoint,
                                               const RequestLimits& limits, CompletionRequest* out);
std::optional<ApiError> ParseTokenizeRequest(std::string_view body, TokenizeRequest* out);
std::optional<ApiError> ParseDetokenizeRequest(std::string_view body, const RequestLimits& limits,
                                               DetokenizeRequest* out);

}  // namespace tern
