// Response formatting: plain result records -> OpenAI-schema JSON text
// (completions, chat completions, their stream chunks, usage, models, errors,
// tokenize). Token text may hold partial UTF-8 (a byte token); it is written
// with invalid bytes replaced, so output is always valid JSON.
// Pure functions; safe from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "server/api_error.h"

namespace tern {

// One sampled token with its log-probability and the top alternatives.
struct LogprobEntry {
  std::string token;  // the token's text (raw bytes)
  float logprob = 0;
  std::vector<std::pair<std::string, float>> top;
  int32_t text_offset = 0;  // completions: byte offset of the token in the text
};

// One function call of the assistant (chat message.tool_calls).
struct ToolCallResult {
  std::string id;         // "call_..."
  std::string name;
  std::string arguments;  // JSON text
};

struct ChoiceResult {
  int32_t index = 0;
  std::string text;
  std::string finish_reason;  // "" -> null (a stream chunk before the end)
  bool has_logprobs = false;
  std::vector<LogprobEntry> logprobs;
  std::vector<ToolCallResult> tool_calls = {};  // chat: content is null when text is empty
  int32_t tool_call_base = 0;              // chunks: index of tool_calls[0] in the message
};

struct UsageInfo {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;
  // Context dropped by streaming KV eviction (all choices); the usage
  // object carries "evicted_tokens" only when it is > 0.
  int64_t evicted_tokens = 0;
};

struct ResponseMeta {
  std::string id;       // "cmpl-..." or "chatcmpl-..."
  int64_t created = 0;  // unix seconds
  std::string model;
};

std::string ErrorJson(const ApiError& error);

std::string CompletionJson(const ResponseMeta& meta, const std::vector<ChoiceResult>& choices,
                           const UsageInfo& usage);
std::string ChatCompletionJson(const ResponseMeta& meta, const std::vector<ChoiceResult>& choices,
                               const UsageInfo& usage);

// Stream chunks. usage_null: stream_options.include_usage was asked, so every
// chunk carries "usage": null until the final usage chunk.
std::string CompletionChunkJson(const ResponseMeta& meta, const ChoiceResult& choice,
                                bool usage_null);
// with_role: the first chunk of a choice carries delta.role = "assistant".
std::string ChatChunkJson(const ResponseMeta& meta, const ChoiceResult& choice, bool with_role,
                          bool usage_null);
// The final include_usage chunk: empty choices and the usage.
std::string UsageChunkJson(const ResponseMeta& meta, bool chat, const UsageInfo& usage);

// GET /v1/models/{id}: one model object; GET /v1/models: a list holding it.
std::string ModelJson(const std::string& model, int64_t created, int32_t max_model_len);
std::string ModelsJson(const std::string& model, int64_t created, int32_t max_model_len);
std::string TokenizeJson(const std::vector<int32_t>& tokens, int32_t max_model_len);
std::string DetokenizeJson(const std::string& text);

}  // namespace tern
