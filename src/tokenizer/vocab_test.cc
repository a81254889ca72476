#include "tokenizer/vocab.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "gguf/gguf_writer.h"
#include "tokenizer/vocab_test_util.h"

namespace tern {
namespace {

using gguf::Value;
using gguf::ValueType;

TEST(VocabTest, ReadsStories260KVocabulary) {
  const std::string path = ModelsDir() + "/stories260K.gguf";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not available";
  auto file = gguf::GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().message();
  auto vocab = Vocab::FromGguf(**file);
  ASSERT_TRUE(vocab.ok()) << vocab.status().message();
  EXPECT_EQ(vocab->type, VocabType::kSpm);
  EXPECT_EQ(vocab->size(), 512);
  EXPECT_EQ(vocab->bos_id, 1);
  EXPECT_EQ(vocab->eos_id, 2);
  EXPECT_EQ(vocab->unk_id, 0);
  EXPECT_EQ(vocab->sep_id, kNoToken);  // stored as 0xFFFFFFFF
  EXPECT_EQ(vocab->pad_id, kNoToken);
  EXPECT_TRUE(vocab->add_bos);           // key absent: the llama default
  EXPECT_TRUE(vocab->add_space_prefix);  // key absent: the llama default
  EXPECT_EQ(vocab->tokens[3], "<0x00>");
  EXPECT_EQ(vocab->token_types[3], TokenType::kByte);
  EXPECT_EQ(vocab->token_types[1], TokenType::kControl);
}

// Writes a small vocabulary GGUF with the given extra/overridden keys.
class VocabFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = ::testing::TempDir() + "/tern_vocab_test_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".gguf";
    std::vector<Value> tokens, scores, types;
    for (const char* t : {"<unk>", "<s>", "</s>", "\xe2\x96\x81" "a", "b"}) {
      tokens.push_back(Value::String(t));
      scores.push_back(Value::Float32(0.0f));
      types.push_back(Value::Int32(1));
    }
    writer_.SetValue("general.architecture", Value::String("llama"));
    writer_.SetValue("tokenizer.ggml.model", Value::String("llama"));
    writer_.SetValue("tokenizer.ggml.tokens", Value::Array(ValueType::kString, tokens));
    writer_.SetValue("tokenizer.ggml.scores", Value::Array(ValueType::kFloat32, scores));
    writer_.SetValue("tokenizer.ggml.token_type", Value::Array(ValueType::kInt32, types));
  }
  void TearDown() override { std::filesystem::remove(path_); }

  StatusOr<Vocab> Load() {
    Status written = writer_.WriteFile(path_);
    if (!written.ok()) return written;
    TERN_ASSIGN_OR_RETURN(std::unique_ptr<gguf::GgufFile> file, gguf::GgufFile::Open(path_));
    return Vocab::FromGguf(*file);
  }

  std::string path_;
  gguf::GgufWriter writer_;
};

TEST_F(VocabFileTest, KeysOverrideModelDefaults) {
  writer_.SetValue("tokenizer.ggml.add_bos_token", Value::Bool(false));
  writer_.SetValue("tokenizer.ggml.add_space_prefix", Value::Bool(false));
  writer_.SetValue("tokenizer.ggml.eos_token_id", Value::Uint32(4));
  writer_.SetValue("tokenizer.ggml.padding_token_id", Value::Uint32(0xFFFFFFFFu));
  auto vocab = Load();
  ASSERT_TRUE(vocab.ok()) << vocab.status().message();
  EXPECT_FALSE(vocab->add_bos);
  EXPECT_FALSE(vocab->add_space_prefix);
  EXPECT_EQ(vocab->eos_id, 4);
  EXPECT_EQ(vocab->pad_id, kNoToken);
}

TEST_F(VocabFileTest, RejectsScoresOfTheWrongLength) {
  writer_.SetValue("tokenizer.ggml.scores",
                   Value::Array(ValueType::kFloat32, {Value::Float32(0.0f)}));
  auto vocab = Load();
  ASSERT_FALSE(vocab.ok());
  EXPECT_NE(vocab.status().message().find("tokenizer.ggml.scores"), std::string::npos)
      << vocab.status().message();
}

TEST_F(VocabFileTest, RejectsSpecialIdOutsideTheVocabulary) {
  writer_.SetValue("tokenizer.ggml.bos_token_id", Value::Uint32(99));
  auto vocab = Load();
  ASSERT_FALSE(vocab.ok());
  EXPECT_NE(vocab.status().message().find("tokenizer.ggml.bos_token_id"), std::string::npos)
      << vocab.status().message();
}

TEST_F(VocabFileTest, RejectsUnknownTokenType) {
  std::vector<Value> types(5, Value::Int32(1));
  types[2] = Value::Int32(9);
  writer_.SetValue("tokenizer.ggml.token_type", Value::Array(ValueType::kInt32, types));
  auto vocab = Load();
  ASSERT_FALSE(vocab.ok());
  EXPECT_NE(vocab.status().message().find("token_type[2]"), std::string::npos)
      << vocab.status().message();
}

TEST_F(VocabFileTest, RejectsUnsupportedModel) {
  writer_.SetValue("tokenizer.ggml.model", Value::String("t5"));
  auto vocab = Load();
  ASSERT_FALSE(vocab.ok());
  EXPECT_EQ(vocab.status().code(), StatusCode::kUnimplemented);
}

TEST_F(VocabFileTest, RejectsByteLevelBpeWithoutMerges) {
  writer_.SetValue("tokenizer.ggml.model", Value::String("gpt2"));
  auto vocab = Load();
  ASSERT_FALSE(vocab.ok());
  EXPECT_NE(vocab.status().message().find("tokenizer.ggml.merges"), std::string::npos);
}

TEST_F(VocabFileTest, Gpt2DefaultsDependOnThePreTokenizer) {
  writer_.SetValue("tokenizer.ggml.model", Value::String("gpt2"));
  writer_.SetValue("tokenizer.ggml.merges", Value::Array(ValueType::kString,
                                                         {Value::String("a b")}));
  writer_.SetValue("tokenizer.ggml.pre", Value::String("gpt-2"));
  auto plain = Load();
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_FALSE(plain->add_bos);
  EXPECT_FALSE(plain->ignore_merges);
  writer_.SetValue("tokenizer.ggml.pre", Value::String("llama-bpe"));
  writer_.SetValue("tokenizer.ggml.bos_token_id", Value::Uint32(1));
  auto llama3 = Load();
  ASSERT_TRUE(llama3.ok()) << llama3.status().message();
  EXPECT_TRUE(llama3->add_bos);
  EXPECT_TRUE(llama3->ignore_merges);
}

TEST_F(VocabFileTest, MissingTokensIsNotFound) {
  gguf::GgufWriter bare;
  bare.SetValue("tokenizer.ggml.model", Value::String("llama"));
  ASSERT_TRUE(bare.WriteFile(path_).ok());
  auto file = gguf::GgufFile::Open(path_);
  ASSERT_TRUE(file.ok());
  auto vocab = Vocab::FromGguf(**file);
  ASSERT_FALSE(vocab.ok());
  EXPECT_NE(vocab.status().message().find("tokenizer.ggml.tokens"), std::string::npos);
}

}  // namespace
}  // namespace tern
