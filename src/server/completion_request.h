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
  bool content_null = false;    // a tool-call turn with content absent or null
  std::string tool_calls_json = {};  // assistant: its tool_calls array as sent ("" when none)
  std::string tool_call_id = {};     // tool: the call it answers
  std::string name = {};             // optional
};

// tools / tool_choice of a chat request (tool_calls.h).
struct ToolsRequest {
  enum class Choice { kAuto, kNone, kRequired, kNamed };
  std::string tools_json;  // the tools array as sent, key order kept ("" when none)
  std::vector<std::string> names;            // per tool: function.name
  std::vector<std::string> parameters_json;  // per tool: function.parameters ("" when none)
  Choice choice = Choice::kAuto;
  std::string choice_name;  // kNamed
  // Calls are looked for in the reply.
  bool active() const { return !names.empty() && choice != Choice::kNone; }
};

// A structured-output request (response_format, guided_*), checked for shape;
// compiled against the vocabulary by structured_output.h.
struct OutputConstraintSpec {
  enum class Kind { kNone, kJsonObject, kJsonSchema, kRegex, kChoice, kGrammar };
  Kind kind = Kind::kNone;
  std::string text;                  // json_schema: the schema, key order kept; regex: the pattern; grammar: GBNF
  std::vector<std::string> choices;  // guided_choice
  std::string param;                 // the request field it came from (errors name it)
  std::string prefix, suffix;        // json_schema: literal text around the JSON (tool calls)
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
  OutputConstraintSpec constraint;
  ToolsRequest tools;  // chat
};

// POST /tokenize: a prompt, or chat messages rendered with the template.
struct TokenizeRequest {
  std::string model;
  bool has_messages = false;
  std::string prompt;
  std::vector<ApiMessage> messages;
  bool add_special_tokens = true;
  // The prompt's special-token texts ("</s>", "<|im_end|>") become special
  // tokens only when asked; by default they are plain text.
  bool parse_special = false;
};

struct DetokenizeRequest {
  std::string model;
  std::vector<int32_t> tokens;
};

}  // namespace tern
