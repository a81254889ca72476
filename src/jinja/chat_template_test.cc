#include "jinja/chat_template.h"

#include <ctime>

#include <gtest/gtest.h>

#include "jinja/chat_test_messages.h"
#include "jinja/chat_template_testdata.h"

namespace tern {
namespace {

using namespace testdata;  // NOLINT: test data constants

std::string Chat(std::string_view tmpl, const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                 const std::string& bos = "<s>", const std::string& eos = "</s>") {
  StatusOr<std::string> out =
      RenderChatTemplate(std::string(tmpl), messages, add_generation_prompt, bos, eos);
  if (!out.ok()) return "ERROR: " + out.status().message();
  return *out;
}

// Checks the rendering with and without the generation prompt, which must
// differ exactly by `generation_prompt` at the end.
void ExpectChat(std::string_view tmpl, const std::vector<ChatMessage>& messages, const std::string& expected,
                const std::string& generation_prompt, const std::string& bos = "<s>",
                const std::string& eos = "</s>") {
  EXPECT_EQ(Chat(tmpl, messages, true, bos, eos), expected + generation_prompt);
  EXPECT_EQ(Chat(tmpl, messages, false, bos, eos), expected);
}

const char kChatMlBody[] =
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    "<|im_start|>user\nHello<|im_end|>\n"
    "<|im_start|>assistant\n Hi there! <|im_end|>\n"
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n";

TEST(ChatTemplateTest, ChatMl) {
  ExpectChat(kChatml, kWithSystem, kChatMlBody, "<|im_start|>assistant\n");
}

TEST(ChatTemplateTest, Qwen2UsesDefaultSystemMessageOnlyWhenMissing) {
  ExpectChat(kQwen2, kWithSystem, kChatMlBody, "<|im_start|>assistant\n");
  ExpectChat(kQwen2, kNoSystem,
             "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
             "<|im_start|>user\nHello<|im_end|>\n"
             "<|im_start|>assistant\n Hi there! <|im_end|>\n"
             "<|im_start|>user\nWhat is 2+2?<|im_end|>\n",
             "<|im_start|>assistant\n");
}

TEST(ChatTemplateTest, Qwen25WithoutTools) {
  ExpectChat(kQwen25, kWithSystem, kChatMlBody, "<|im_start|>assistant\n");
  ExpectChat(kQwen25, kNoSystem,
             "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
             "<|im_start|>user\nHello<|im_end|>\n"
             "<|im_start|>assistant\n Hi there! <|im_end|>\n"
             "<|im_start|>user\nWhat is 2+2?<|im_end|>\n",
             "<|im_start|>assistant\n");
}

TEST(ChatTemplateTest, Llama2MergesSystemIntoFirstUserTurn) {
  ExpectChat(kLlama2, kWithSystem,
             "<s>[INST] <<SYS>>\nYou are a helpful assistant.\n<</SYS>>\n\nHello [/INST] Hi there! </s>"
             "<s>[INST] What is 2+2? [/INST]",
             "");
  EXPECT_EQ(Chat(kLlama2, kNoSystem, true), "<s>[INST] Hello [/INST] Hi there! </s><s>[INST] What is 2+2? [/INST]");
}

TEST(ChatTemplateTest, Llama3TrimsContent) {
  ExpectChat(kLlama3, kWithSystem,
             "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant.<|eot_id|>"
             "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
             "<|start_header_id|>assistant<|end_header_id|>\n\nHi there!<|eot_id|>"
             "<|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|>",
             "<|start_header_id|>assistant<|end_header_id|>\n\n", "<|begin_of_text|>", "<|eot_id|>");
}

TEST(ChatTemplateTest, Llama31ToolLessPath) {
  const std::string turns =
      "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
      "<|start_header_id|>assistant<|end_header_id|>\n\nHi there!<|eot_id|>"
      "<|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|>";
  ExpectChat(kLlama31, kWithSystem,
             "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
             "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n"
             "You are a helpful assistant.<|eot_id|>" + turns,
             "<|start_header_id|>assistant<|end_header_id|>\n\n", "<|begin_of_text|>", "<|eot_id|>");
  ExpectChat(kLlama31, kNoSystem,
             "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
             "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|>" + turns,
             "<|start_header_id|>assistant<|end_header_id|>\n\n", "<|begin_of_text|>", "<|eot_id|>");
}

TEST(ChatTemplateTest, Llama32UsesStrftimeNow) {
  // The Llama 3.2 template differs from 3.1 by dating the prompt with strftime_now.
  const char kLlama32Head[] = R"tmpl({{- bos_token }}
{%- if not date_string is defined %}
    {%- if strftime_now is defined %}
        {%- set date_string = strftime_now("%d %b %Y") %}
    {%- else %}
        {%- set date_string = "26 Jul 2024" %}
    {%- endif %}
{%- endif %}
{{- "Today Date: " + date_string + "\n\n" }})tmpl";
  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char date[64];
  std::strftime(date, sizeof(date), "%d %b %Y", &local);
  EXPECT_EQ(Chat(kLlama32Head, kNoSystem, true, "<B>"), std::string("<B>Today Date: ") + date + "\n\n");
}

TEST(ChatTemplateTest, MistralV1RejectsSystemRole) {
  EXPECT_EQ(Chat(kMistralV1, kNoSystem, true), "<s>[INST] Hello [/INST] Hi there! </s>[INST] What is 2+2? [/INST]");
  std::string err = Chat(kMistralV1, kWithSystem, true);
  EXPECT_NE(err.find("ERROR: "), std::string::npos);
  EXPECT_NE(err.find("Conversation roles must alternate user/assistant/user/assistant/..."), std::string::npos) << err;
}

TEST(ChatTemplateTest, MistralInstructV02WithSystemPrompt) {
  ExpectChat(kMistralV2sys, kWithSystem,
             "<s> [INST] You are a helpful assistant.\n\nHello [/INST]  Hi there! </s> [INST] What is 2+2? [/INST]", "");
}

TEST(ChatTemplateTest, MistralNemoPutsSystemPromptInLastUserTurn) {
  ExpectChat(kMistralNemo, kWithSystem,
             "<s>[INST]Hello[/INST] Hi there! </s>[INST]You are a helpful assistant.\n\nWhat is 2+2?[/INST]", "");
  std::vector<ChatMessage> bad = {{"user", "a"}, {"user", "b"}};
  std::string err = Chat(kMistralNemo, bad, true);
  EXPECT_NE(err.find("After the optional system message, conversation roles must alternate"), std::string::npos)
      << err;
}

TEST(ChatTemplateTest, Phi3FromGguf) {
  ExpectChat(kPhi3, kWithSystem,
             "<s><|user|>\nHello<|end|>\n<|assistant|>\n Hi there! <|end|>\n<|user|>\nWhat is 2+2?<|end|>\n<|assistant|>\n",
             "");
}

TEST(ChatTemplateTest, Phi35) {
  const std::string body =
      "<|system|>\nYou are a helpful assistant.<|end|>\n<|user|>\nHello<|end|>\n"
      "<|assistant|>\n Hi there! <|end|>\n<|user|>\nWhat is 2+2?<|end|>\n";
  EXPECT_EQ(Chat(kPhi35, kWithSystem, true, "<s>", "<|endoftext|>"), body + "<|assistant|>\n");
  EXPECT_EQ(Chat(kPhi35, kWithSystem, false, "<s>", "<|endoftext|>"), body + "<|endoftext|>");
}

TEST(ChatTemplateTest, Gemma2) {
  ExpectChat(kGemma2, kNoSystem,
             "<bos><start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\nHi there!<end_of_turn>\n"
             "<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n",
             "<start_of_turn>model\n", "<bos>", "<eos>");
  std::string err = Chat(kGemma2, kWithSystem, true, "<bos>", "<eos>");
  EXPECT_NE(err.find("System role not supported"), std::string::npos) << err;
}

TEST(ChatTemplateTest, ZephyrAndTinyLlama) {
  ExpectChat(kZephyr, kWithSystem,
             "<|system|>\nYou are a helpful assistant.</s>\n<|user|>\nHello</s>\n"
             "<|assistant|>\n Hi there! </s>\n<|user|>\nWhat is 2+2?</s>\n",
             "<|assistant|>\n");
}

TEST(ChatTemplateTest, DeepseekCoder) {
  const std::string bos = "<｜begin▁of▁sentence｜>";
  ExpectChat(kDeepseekCoder, kWithSystem,
             bos + "You are a helpful assistant.### Instruction:\nHello\n### Response:\n Hi there! \n<|EOT|>\n"
                   "### Instruction:\nWhat is 2+2?\n",
             "### Response:\n", bos, "<|EOT|>");
  std::string no_system = Chat(kDeepseekCoder, kNoSystem, false, bos, "<|EOT|>");
  EXPECT_EQ(no_system.rfind(bos + "You are an AI programming assistant, utilizing the Deepseek Coder model", 0), 0u)
      << no_system;
}

TEST(ChatTemplateTest, DeepseekV2) {
  const std::string eos = "<｜end▁of▁sentence｜>";
  ExpectChat(kDeepseekV2, kWithSystem,
             "<B>You are a helpful assistant.\n\nUser: Hello\n\nAssistant:  Hi there! " + eos +
                 "User: What is 2+2?\n\n",
             "Assistant:", "<B>", eos);
}

TEST(ChatTemplateTest, DeepseekR1DropsReasoningFromHistory) {
  const std::string eos = "<｜end▁of▁sentence｜>";
  std::vector<ChatMessage> messages = kWithSystem;
  messages[2].content = "<think>Greeting.</think>Hi there!";
  ExpectChat(kDeepseekR1, messages,
             "<B>You are a helpful assistant.<｜User｜>Hello<｜Assistant｜>Hi there!" + eos + "<｜User｜>What is 2+2?",
             "<｜Assistant｜><think>\n", "<B>", eos);
}

TEST(ChatTemplateTest, RaiseExceptionMessageIsSurfaced) {
  StatusOr<std::string> out = RenderChatTemplate("a{{ raise_exception('custom failure 42') }}", kNoSystem, true, "", "");
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("custom failure 42"), std::string::npos) << out.status().message();
  EXPECT_NE(out.status().message().find("line 1"), std::string::npos) << out.status().message();
}

TEST(ChatTemplateTest, ParsedTemplateCanBeReused) {
  StatusOr<Template> t = ParseChatTemplate(std::string(kChatml));
  ASSERT_TRUE(t.ok()) << t.status().message();
  for (int i = 0; i < 3; ++i) {
    StatusOr<std::string> out = RenderChatTemplate(*t, kWithSystem, false, "", "");
    ASSERT_TRUE(out.ok());
    EXPECT_EQ(*out, kChatMlBody);
  }
}

// ------------------------------------------------------------ built-in templates

TEST(ChatTemplateTest, BuiltinNamesAreListedAndUnknownIsEmpty) {
  std::vector<std::string> names = BuiltinChatTemplateNames();
  EXPECT_EQ(names, (std::vector<std::string>{"chatml", "llama2", "llama3", "mistral", "phi3", "gemma", "zephyr"}));
  for (const std::string& name : names) EXPECT_TRUE(BuiltinChatTemplate(name).has_value()) << name;
  EXPECT_FALSE(BuiltinChatTemplate("nope").has_value());
}

std::string Builtin(const std::string& name, const std::vector<ChatMessage>& messages, bool agp,
                    const std::string& bos, const std::string& eos) {
  std::optional<std::string> src = BuiltinChatTemplate(name);
  if (!src.has_value()) return "missing";
  return Chat(*src, messages, agp, bos, eos);
}

TEST(ChatTemplateTest, BuiltinChatMlAndZephyr) {
  EXPECT_EQ(Builtin("chatml", kWithSystem, true, "", ""), std::string(kChatMlBody) + "<|im_start|>assistant\n");
  EXPECT_EQ(Builtin("zephyr", kWithSystem, true, "<s>", "</s>"),
            "<|system|>\nYou are a helpful assistant.</s>\n<|user|>\nHello</s>\n"
            "<|assistant|>\n Hi there! </s>\n<|user|>\nWhat is 2+2?</s>\n<|assistant|>\n");
}

TEST(ChatTemplateTest, BuiltinLlamaFamiliesMatchTheirPublishedTemplates) {
  for (bool agp : {true, false}) {
    EXPECT_EQ(Builtin("llama2", kWithSystem, agp, "<s>", "</s>"), Chat(kLlama2, kWithSystem, agp));
    EXPECT_EQ(Builtin("llama2", kNoSystem, agp, "<s>", "</s>"), Chat(kLlama2, kNoSystem, agp));
    EXPECT_EQ(Builtin("llama3", kWithSystem, agp, "<|begin_of_text|>", ""),
              Chat(kLlama3, kWithSystem, agp, "<|begin_of_text|>", ""));
  }
}

TEST(ChatTemplateTest, BuiltinMistralPhi3Gemma) {
  EXPECT_EQ(Builtin("mistral", kWithSystem, true, "<s>", "</s>"),
            "<s>[INST] You are a helpful assistant.\n\nHello [/INST] Hi there! </s>[INST] What is 2+2? [/INST]");
  EXPECT_EQ(Builtin("phi3", kWithSystem, true, "<s>", "<|endoftext|>"),
            "<|system|>\nYou are a helpful assistant.<|end|>\n<|user|>\nHello<|end|>\n"
            "<|assistant|>\n Hi there! <|end|>\n<|user|>\nWhat is 2+2?<|end|>\n<|assistant|>\n");
  EXPECT_EQ(Builtin("gemma", kWithSystem, true, "<bos>", "<eos>"),
            "<bos><start_of_turn>user\nYou are a helpful assistant.\n\nHello<end_of_turn>\n"
            "<start_of_turn>model\nHi there!<end_of_turn>\n<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n"
            "<start_of_turn>model\n");
  EXPECT_EQ(Builtin("gemma", kNoSystem, false, "<bos>", "<eos>"), Chat(kGemma2, kNoSystem, false, "<bos>", "<eos>"));
}

}  // namespace
}  // namespace tern
