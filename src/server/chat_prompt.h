// ChatPrompt: chat messages -> prompt token ids through a chat template, the
// one rendering path of every front end (`tern serve` /v1/chat/completions,
// `tern chat`, `tern generate --chat-template`): the template renders the
// conversation with the generation prompt, `bos_token` / `eos_token` bound
// to the tokenizer's texts, and the text is tokenized with special tokens
// parsed; BOS is added only when the template did not write it.
//
// ResolveChatTemplate picks the template source the way `--chat-template`
// means it for every command: the GGUF's own, a built-in name, or a file.
//
// Thread rules: immutable after Create(); Encode is safe from any thread.
// The tokenizer must outlive the ChatPrompt.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "jinja/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace tern {

// The template source for a model: override_value is "" (use the GGUF's
// tokenizer.chat_template, "" when it has none), a built-in name
// (BuiltinChatTemplateNames()), or a file path. Errors name the file.
StatusOr<std::string> ResolveChatTemplate(const std::string& override_value,
                                          const std::string& model_path);

// "chatml, llama2, ...": the built-in names, for help texts and errors.
std::string BuiltinChatTemplateList();

class ChatPrompt {
 public:
  // template_source must not be empty; parse errors say "chat template: ...".
  static StatusOr<ChatPrompt> Create(const Tokenizer& tokenizer,
                                     const std::string& template_source);

  // add_special: BOS as the vocabulary asks (unless the template wrote it).
  // InvalidArgument "chat template: ..." when the template raises an error.
  // tools: the request's tools for the template (undefined: none).
  StatusOr<std::vector<int32_t>> Encode(const std::vector<ChatMessage>& messages,
                                        bool add_special, const Value& tools = Value()) const;

 private:
  ChatPrompt(const Tokenizer& tokenizer, Template chat_template)
      : tokenizer_(&tokenizer), template_(std::move(chat_template)) {}

  const Tokenizer* tokenizer_;
  Template template_;
  std::string bos_text_;
  std::string eos_text_;
};

}  // namespace tern
