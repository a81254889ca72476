// libFuzzer target: the Jinja lexer, parser and renderer. The input is a
// template, then (after a 0xFF byte, when present) message text: the
// template renders a three-message conversation built from that text, with
// the chat-template options and limits. Nothing may crash or hang.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "jinja/chat_template.h"
#include "jinja/template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t cut = input.find('\xff');
  const std::string source = input.substr(0, cut);
  const std::string text = cut == std::string::npos ? "hello" : input.substr(cut + 1);
  tern::TemplateOptions options = tern::ChatTemplateOptions();
  options.max_output_bytes = 1 << 20;
  options.max_loop_iterations = 100000;
  options.max_work_bytes = 16 << 20;
  auto t = tern::Template::Parse(source, options);
  if (!t.ok()) return 0;
  std::vector<tern::ChatMessage> messages = {
      {"system", text, {}}, {"user", text + text, {}}, {"assistant", text.substr(0, 8), {}}};
  (void)tern::RenderChatTemplate(*t, messages, true, "<s>", "</s>");
  return 0;
}
