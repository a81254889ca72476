#include "server/chat_prompt.h"

#include <fstream>
#include <sstream>

#include "gguf/gguf_file.h"

namespace tern {

std::string BuiltinChatTemplateList() {
  std::string names;
  for (const std::string& n : BuiltinChatTemplateNames()) names += (names.empty() ? "" : ", ") + n;
  return names;
}

StatusOr<std::string> ResolveChatTemplate(const std::string& override_value,
                                          const std::string& model_path) {
  if (override_value.empty()) {
    StatusOr<std::unique_ptr<gguf::GgufFile>> file = gguf::GgufFile::Open(model_path);
    if (!file.ok()) return file.status();
    return (*file)->GetString("tokenizer.chat_template").value_or("");
  }
  if (std::optional<std::string> builtin = BuiltinChatTemplate(override_value)) return *builtin;
  std::ifstream in(override_value, std::ios::binary);
  if (!in) {
    return NotFound("--chat-template: '" + override_value +
                    "' is neither a readable file nor a built-in template (" +
                    BuiltinChatTemplateList() + ")");
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

StatusOr<ChatPrompt> ChatPrompt::Create(const Tokenizer& tokenizer,
                                        const std::string& template_source) {
  if (template_source.empty()) return InvalidArgument("chat template: empty template");
  StatusOr<Template> t = ParseChatTemplate(template_source);
  if (!t.ok()) return t.status().WithContext("chat template");
  ChatPrompt p(tokenizer, std::move(t).value());
  if (tokenizer.bos_id() >= 0) p.bos_text_ = tokenizer.TokenText(tokenizer.bos_id());
  if (tokenizer.eos_id() >= 0) p.eos_text_ = tokenizer.TokenText(tokenizer.eos_id());
  return p;
}

StatusOr<std::vector<int32_t>> ChatPrompt::Encode(const std::vector<ChatMessage>& messages,
                                                  bool add_special, const Value& tools) const {
  StatusOr<std::string> text = RenderChatTemplate(template_, messages,
                                                  /*add_generation_prompt=*/true, bos_text_,
                                                  eos_text_, tools);
  if (!text.ok()) return InvalidArgument("chat template: " + text.status().message());
  // The template usually writes BOS itself; add it only when it did not.
  const bool starts_with_bos = !bos_text_.empty() && text->rfind(bos_text_, 0) == 0;
  return tokenizer_->Encode(*text, add_special && !starts_with_bos, /*parse_special=*/true);
}

}  // namespace tern
