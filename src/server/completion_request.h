// Plain records for validated API requests: what request_parser produces and
// the API server consumes. No JSON here; every field is already checked for
// type and range (lengths against max_model_len are checked after
// tokenization, by the API server).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sample/sampling_params.h"

namespace tern {

enum class ApiEndpoint { kCompletions, kChatCompletions };

// One chat message; content parts of type "text" are joined into content.
struct ApiMessage {
  std::string role;
  std::string content;
};

// One completions prompt: text, or token ids when is_tokens.
struct PromptInput {
  bool is_tokens = false;
  std::string text;
  std::vector<int32_t> token_ids;
};

struct CompletionRequest {
  ApiEndpoint endpoint = ApiEndpoint::kCompletions;
  std::string model;                 // "" when omitted
  std::vector<PromptInput> prompts;  // completions: one or more
  std::vector<ApiMessage> messages;  // chat: one or more
  // Absent: DefaultMaxTokens(endpoint) (request_parser.h), capped by the
  // room the context leaves.
  std::optional<int32_t> max_tokens;
  SamplingParams sampling;  // defaults from sample/defaults.h; max_tokens and logprobs set later
  std::vector<std::string> stop;     // non-empty strings, at most 4
  int32_t n = 1;                     // choices per prompt
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  int32_t logprobs = -1;       // -1: none; k >= 0: chosen + top-k
  bool echo = false;           // completions: prompt text prepended
  std::string user;
  std::string cache_salt;
};

// POST /tokenize: a prompt, or chat messages rendered with the template.
struct TokenizeRequest {
  std::string model;
  bool has_messages = false;
  std::string prompt;
  std::vector<ApiMessage> messages;
  bool add_special_tokens = true;
};

struct DetokenizeRequest {
  std::string model;
  std::vector<int32_t> tokens;
};

}  // namespace tern
