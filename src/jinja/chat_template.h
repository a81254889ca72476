// ChatTemplate: renders a conversation with a model's chat template the way
// Hugging Face's apply_chat_template does (trim_blocks and lstrip_blocks on,
// trailing newline of the source dropped). The context holds `messages` (list
// of {role, content} dicts), `add_generation_prompt`, `bos_token`,
// `eos_token`, `tools` (when the request has tools: the OpenAI tools list),
// and the functions `raise_exception(msg)` (turns into an error
// Status carrying msg) and `strftime_now(fmt)` (local time).
//
// Built-in templates ("chatml", "llama2", "llama3", "mistral", "phi3",
// "gemma", "zephyr") are written here from the published prompt formats, for
// models whose GGUF lacks `tokenizer.chat_template`.
//
// Thread rules: free functions without shared state; safe from any thread.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "jinja/template.h"

namespace tern {

struct ChatMessage {
  std::string role;
  std::string content;
  // More keys of the message dict (tool_calls, tool_call_id, name); a
  // "content" here replaces the string above (None for a tool-call turn).
  ValueDict extra = {};
};

// The options Hugging Face uses for chat templates.
TemplateOptions ChatTemplateOptions();

// Parses once for repeated use with the overload below.
StatusOr<Template> ParseChatTemplate(const std::string& template_source);

// tools: undefined (the default) leaves `tools` out of the context.
StatusOr<std::string> RenderChatTemplate(const Template& chat_template,
                                         const std::vector<ChatMessage>& messages,
                                         bool add_generation_prompt, const std::string& bos_token,
                                         const std::string& eos_token, const Value& tools = Value());

StatusOr<std::string> RenderChatTemplate(const std::string& template_source,
                                         const std::vector<ChatMessage>& messages,
                                         bool add_generation_prompt, const std::string& bos_token,
                                         const std::string& eos_token, const Value& tools = Value());

// Template source of a built-in format by name, or nullopt.
std::optional<std::string> BuiltinChatTemplate(std::string_view name);
std::vector<std::string> BuiltinChatTemplateNames();

}  // namespace tern
