#include "tokenizer/pre_tokenizer.h"

#include <gtest/gtest.h>

namespace tern {
namespace {

std::vector<std::string> SplitWith(std::string_view pre, std::string_view text) {
  auto pt = PreTokenizer::Create(pre);
  EXPECT_TRUE(pt.ok()) << pt.status().message();
  if (!pt.ok()) return {};
  return (*pt)->SplitRaw(text);
}

using Words = std::vector<std::string>;

TEST(PreTokenizerTest, Gpt2SplitsContractionsWordsAndSpaces) {
  EXPECT_EQ(SplitWith("gpt-2", "I'll go  now 123!"),
            (Words{"I", "'ll", " go", " ", " now", " 123", "!"}));
}

TEST(PreTokenizerTest, Llama3GroupsDigitsInThreesAndKeepsNewlines) {
  EXPECT_EQ(SplitWith("llama-bpe", "Hello world 12345\n\n x"),
            (Words{"Hello", " world", " ", "123", "45", "\n\n", " x"}));
}

TEST(PreTokenizerTest, Qwen2SplitsSingleDigits) {
  EXPECT_EQ(SplitWith("qwen2", "ab 123"), (Words{"ab", " ", "1", "2", "3"}));
}

TEST(PreTokenizerTest, ExpressionsApplyInSequenceKeepingGaps) {
  // starcoder: digits first, then the GPT-2 expression on every piece.
  EXPECT_EQ(SplitWith("starcoder", "a12 b"), (Words{"a", "1", "2", " b"}));
}

TEST(PreTokenizerTest, DeepseekLlmCompiles) {
  EXPECT_EQ(SplitWith("deepseek-llm", "Hi there\n"), (Words{"Hi", " there", "\n"}));
}

TEST(PreTokenizerTest, InvalidUtf8BecomesReplacementCharacter) {
  EXPECT_EQ(SplitWith("gpt-2", "a\xff"), (Words{"a", "\xef\xbf\xbd"}));
}

TEST(PreTokenizerTest, UnknownNameIsAnError) {
  auto pt = PreTokenizer::Create("no-such-pre");
  ASSERT_FALSE(pt.ok());
  EXPECT_NE(pt.status().message().find("no-such-pre"), std::string::npos);
}

TEST(PreTokenizerTest, EveryKnownNameCompiles) {
  for (const char* pre : {"default", "llama3", "qwen2", "deepseek-llm", "deepseek-coder",
                          "deepseek-v3", "falcon", "mpt", "starcoder", "refact", "smollm",
                          "command-r", "gpt-2", "poro-chat", "viking", "tekken", "gpt-4o"}) {
    EXPECT_TRUE(PreTokenizer::Create(pre).ok()) << pre;
  }
}

}  // namespace
}  // namespace tern
