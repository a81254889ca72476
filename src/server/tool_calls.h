// Tool calling on /v1/chat/completions: the request's `tools` and
// `tool_choice`, the chat template's view of them (the `tools` variable and
// assistant `tool_calls` / `role: tool` messages as dicts), and the model's
// tool calls read back out of its text.
//
// Formats, chosen from the chat template's source (DetectToolCallFormat):
//   kHermes  (Qwen2/2.5, Hermes, and templates that show none):
//            <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>
//   kLlama3  (Llama 3.1-3.3): {"name": ..., "parameters": {...}}, the whole
//            reply, optionally after <|python_tag|>
//   kMistral ([TOOL_CALLS] in the template): [TOOL_CALLS][{"name": ...,
//            "arguments": {...}}]; [TOOL_CALLS] is a control token that the
//            text stream leaves out, so a reply that is such a JSON array
//            counts as well.
// tool_choice "required" or a named function constrains the reply to one
// call in the format, its arguments to the function's `parameters` schema
// (ToolCallConstraint, compiled like a response_format json_schema).
//
// Thread rules: pure functions; a ToolCallStream belongs to one choice.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "jinja/value.h"
#include "server/api_error.h"
#include "server/completion_request.h"
#include "server/response_writer.h"

namespace tern {

enum class ToolCallFormat { kHermes, kLlama3, kMistral };

ToolCallFormat DetectToolCallFormat(std::string_view template_source);
const char* ToolCallFormatName(ToolCallFormat format);

// tools, tool_choice, parallel_tool_calls of a chat request into out.
std::optional<ApiError> ParseTools(const nlohmann::json& obj, std::string_view body,
                                   ToolsRequest* out);

// The constraint of tool_choice required / named (kNone otherwise).
OutputConstraintSpec ToolCallConstraint(const ToolsRequest& tools, ToolCallFormat format);

// JSON -> template value (key order kept).
Value JsonToValue(const nlohmann::ordered_json& v);
// The tools list for the template (undefined when the request has none).
Value ToolsValue(const ToolsRequest& tools);
// The extra message keys a template reads: tool_calls (arguments as dicts,
// as templates index them), tool_call_id, name, content None.
ValueDict MessageExtras(const ApiMessage& m);

struct ParsedToolOutput {
  std::string content;             // text besides the calls
  std::vector<ToolCallResult> calls;
};

// A finished reply -> content and calls (no calls when none is well formed).
ParsedToolOutput ParseToolCalls(std::string_view text, ToolCallFormat format);

// Streams content while holding back what may be the start of a tool call.
class ToolCallStream {
 public:
  explicit ToolCallStream(ToolCallFormat format) : format_(format) {}
  // The text that is surely content, now.
  std::string Push(std::string_view text);
  // At the end: the content not yet released, and the calls.
  ParsedToolOutput Finish();

 private:
  ToolCallFormat format_;
  std::string all_;
  size_t released_ = 0;
  bool in_call_ = false;
  bool content_only_ = false;  // start-anchored formats: decided, no call
};

}  // namespace tern
