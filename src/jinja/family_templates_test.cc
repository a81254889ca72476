// Chat templates of the qwen3 and gemma3 families render as Jinja2 renders
// them with Hugging Face's options (trim_blocks, lstrip_blocks). The expected
// strings were produced by Python's jinja2 3.1 (Debian python3-jinja2) on the
// same template sources and messages; they are test data, not our output.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "jinja/chat_template.h"
#include "jinja/chat_test_messages.h"
#include "jinja/family_templates_testdata.h"

namespace tern {
namespace {

using namespace testdata;  // NOLINT: test data constants

const std::vector<ChatMessage> kThinkingEarlier = {
    {"user", "Hello"},
    {"assistant", "<think>\nThe user greets.\n</think>\n\nHi there!"},
    {"user", "What is 2+2?"},
};
const std::vector<ChatMessage> kThinkingLast = {
    {"user", "What is 2+2?"},
    {"assistant", "<think>\nAdd them.\n</think>\n\n4"},
};
const std::vector<ChatMessage> kTwoUsers = {
    {"user", "a"},
    {"user", "b"},
};

struct Case {
  std::string_view tmpl;
  const std::vector<ChatMessage>* messages;
  bool add_generation_prompt;
  const char* bos;
  const char* eos;
  bool ok;               // false: Jinja2 raised; expected is its message
  const char* expected;
};

const Case kCases[] = {
    {kQwen3, &kWithSystem, true, "", "<|im_end|>", true,
     "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n Hi there! <|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n"},
    {kQwen3, &kWithSystem, false, "", "<|im_end|>", true,
     "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n Hi there! <|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n"},
    {kQwen3, &kNoSystem, true, "", "<|im_end|>", true,
     "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n Hi there! <|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n"},
    {kQwen3, &kNoSystem, false, "", "<|im_end|>", true,
     "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n Hi there! <|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n"},
    {kQwen3, &kThinkingEarlier, true, "", "<|im_end|>", true,
     "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\nHi there!<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n"},
    {kQwen3, &kThinkingEarlier, false, "", "<|im_end|>", true,
     "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\nHi there!<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n"},
    {kQwen3, &kThinkingLast, true, "", "<|im_end|>", true,
     "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n<think>\nAdd them.\n</think>\n\n4<|im_end|>\n<|im_start|>assistant\n"},
    {kQwen3, &kThinkingLast, false, "", "<|im_end|>", true,
     "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n<think>\nAdd them.\n</think>\n\n4<|im_end|>\n"},
    {kQwen3, &kTwoUsers, true, "", "<|im_end|>", true,
     "<|im_start|>user\na<|im_end|>\n<|im_start|>user\nb<|im_end|>\n<|im_start|>assistant\n"},
    {kQwen3, &kTwoUsers, false, "", "<|im_end|>", true,
     "<|im_start|>user\na<|im_end|>\n<|im_start|>user\nb<|im_end|>\n"},
    {kGemma3, &kWithSystem, true, "<bos>", "<eos>", true,
     "<bos><start_of_turn>user\nYou are a helpful assistant.\n\nHello<end_of_turn>\n<start_of_turn>model\nHi there!<end_of_turn>\n<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n"},
    {kGemma3, &kWithSystem, false, "<bos>", "<eos>", true,
     "<bos><start_of_turn>user\nYou are a helpful assistant.\n\nHello<end_of_turn>\n<start_of_turn>model\nHi there!<end_of_turn>\n<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n"},
    {kGemma3, &kNoSystem, true, "<bos>", "<eos>", true,
     "<bos><start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\nHi there!<end_of_turn>\n<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n"},
    {kGemma3, &kNoSystem, false, "<bos>", "<eos>", true,
     "<bos><start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\nHi there!<end_of_turn>\n<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n"},
    {kGemma3, &kThinkingEarlier, true, "<bos>", "<eos>", true,
     "<bos><start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\n<think>\nThe user greets.\n</think>\n\nHi there!<end_of_turn>\n<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n"},
    {kGemma3, &kThinkingEarlier, false, "<bos>", "<eos>", true,
     "<bos><start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\n<think>\nThe user greets.\n</think>\n\nHi there!<end_of_turn>\n<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n"},
    {kGemma3, &kThinkingLast, true, "<bos>", "<eos>", true,
     "<bos><start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n<think>\nAdd them.\n</think>\n\n4<end_of_turn>\n<start_of_turn>model\n"},
    {kGemma3, &kThinkingLast, false, "<bos>", "<eos>", true,
     "<bos><start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n<think>\nAdd them.\n</think>\n\n4<end_of_turn>\n"},
    {kGemma3, &kTwoUsers, true, "<bos>", "<eos>", false,
     "Conversation roles must alternate user/assistant/user/assistant/..."},
    {kGemma3, &kTwoUsers, false, "<bos>", "<eos>", false,
     "Conversation roles must alternate user/assistant/user/assistant/..."},
};

TEST(FamilyTemplateTest, RendersLikeJinja2) {
  for (size_t i = 0; i < std::size(kCases); ++i) {
    const Case& c = kCases[i];
    StatusOr<std::string> out = RenderChatTemplate(std::string(c.tmpl), *c.messages,
                                                   c.add_generation_prompt, c.bos, c.eos);
    if (c.ok) {
      ASSERT_TRUE(out.ok()) << "case " << i << ": " << out.status().message();
      EXPECT_EQ(*out, c.expected) << "case " << i;
    } else {
      ASSERT_FALSE(out.ok()) << "case " << i << " rendered " << *out;
      EXPECT_NE(out.status().message().find(c.expected), std::string::npos)
          << "case " << i << ": " << out.status().message();
    }
  }
}

}  // namespace
}  // namespace tern
