// Byte-level BPE with the Llama-3 pre-tokenizer, built from the GPT-2-style
// encoder.json + vocab.bpe files (the llama-bpe GGUF is not available).
#include "tokenizer/bpe_encoder.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab_test_util.h"

namespace tern {
namespace {

using testing_util::Escape;
using testing_util::IdsToString;
using testing_util::ReadWholeFile;

constexpr int32_t kNumBaseTokens = 128000;
constexpr int32_t kNumTokens = 128256;

// The Llama-3 special tokens 128000.. (those not named are reserved).
std::string SpecialTokenText(int32_t id) {
  switch (id) {
    case 128000: return "<|begin_of_text|>";
    case 128001: return "<|end_of_text|>";
    case 128004: return "<|finetune_right_pad_id|>";
    case 128006: return "<|start_header_id|>";
    case 128007: return "<|end_header_id|>";
    case 128008: return "<|eom_id|>";
    case 128009: return "<|eot_id|>";
    case 128010: return "<|python_tag|>";
    default: break;
  }
  const int32_t reserved = id == 128002 ? 0 : id == 128003 ? 1 : id == 128005 ? 2 : id - 128008;
  return "<|reserved_special_token_" + std::to_string(reserved) + "|>";
}

StatusOr<Vocab> LoadLlama3Vocab(const std::string& dir) {
  std::string encoder_text, merges_text;
  if (!ReadWholeFile(dir + "/encoder.json", &encoder_text)) return NotFound(dir + "/encoder.json");
  if (!ReadWholeFile(dir + "/vocab.bpe", &merges_text)) return NotFound(dir + "/vocab.bpe");
  Vocab vocab;
  vocab.model = "gpt2";
  vocab.pre = "llama-bpe";
  vocab.tokens.resize(kNumTokens);
  vocab.token_types.assign(kNumTokens, TokenType::kNormal);
  vocab.scores.assign(kNumTokens, 0.0f);
  nlohmann::json encoder = nlohmann::json::parse(encoder_text, nullptr, /*allow_exceptions=*/false);
  if (!encoder.is_object()) return DataLoss(dir + "/encoder.json: not a JSON object");
  for (const auto& [text, id] : encoder.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= kNumBaseTokens) {
      return DataLoss(dir + "/encoder.json: bad id for '" + text + "'");
    }
    vocab.tokens[id.get<int32_t>()] = text;
  }
  for (int32_t id = kNumBaseTokens; id < kNumTokens; ++id) {
    vocab.tokens[id] = SpecialTokenText(id);
    vocab.token_types[id] = TokenType::kControl;
  }
  // One merge per line, rank = line order; lines starting with '#' are merges too.
  size_t pos = 0;
  while (pos < merges_text.size()) {
    size_t end = merges_text.find('\n', pos);
    if (end == std::string::npos) end = merges_text.size();
    if (end > pos) vocab.merges.push_back(merges_text.substr(pos, end - pos));
    pos = end + 1;
  }
  TERN_RETURN_IF_ERROR(vocab.ApplyModelDefaults());
  vocab.bos_id = 128000;
  vocab.eos_id = 128001;
  return vocab;
}

class Llama3BpeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string dir = ModelsDir() + "/tokenizers/llama3.2";
    if (!std::filesystem::exists(dir + "/encoder.json")) return;
    auto vocab = LoadLlama3Vocab(dir);
    ASSERT_TRUE(vocab.ok()) << vocab.status().message();
    auto tokenizer = Tokenizer::Create(std::move(*vocab));
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().message();
    tokenizer_ = std::move(*tokenizer).release();
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    tokenizer_ = nullptr;
  }
  void SetUp() override {
    if (tokenizer_ == nullptr) GTEST_SKIP() << "tokenizers/llama3.2 not available";
  }
  static Tokenizer* tokenizer_;
};

Tokenizer* Llama3BpeTest::tokenizer_ = nullptr;

TEST_F(Llama3BpeTest, MatchesLlamaBpeReferenceVectors) {
  const std::string base = testing_util::VocabDir() + "/ggml-vocab-llama-bpe.gguf";
  auto cases = testing_util::LoadVocabCases(base + ".inp", base + ".out");
  if (!cases.ok()) GTEST_SKIP() << cases.status().message();
  int num_ok = 0;
  for (const auto& c : *cases) {
    const std::vector<int32_t> ids = tokenizer_->Encode(c.text, false, false);
    if (ids == c.ids) {
      ++num_ok;
    } else {
      ADD_FAILURE() << "input '" << Escape(c.text) << "'\n  expected" << IdsToString(c.ids)
                    << "\n  got     " << IdsToString(ids);
    }
    EXPECT_EQ(tokenizer_->Decode(ids), c.text);
  }
  std::printf("  llama-bpe (from encoder.json + vocab.bpe): %d/%zu\n", num_ok, cases->size());
  EXPECT_EQ(num_ok, (int)cases->size());
}

TEST_F(Llama3BpeTest, AddsBosAndParsesSpecialTokensOnlyWhenAsked) {
  EXPECT_TRUE(tokenizer_->add_bos());
  const std::vector<int32_t> with_bos = tokenizer_->Encode("Hello", true, false);
  ASSERT_EQ(with_bos.size(), 2u);
  EXPECT_EQ(with_bos[0], 128000);
  const std::string text = "<|start_header_id|>user<|end_header_id|>";
  const std::vector<int32_t> parsed = tokenizer_->Encode(text, false, true);
  ASSERT_EQ(parsed.size(), 3u);
  EXPECT_EQ(parsed[0], 128006);
  EXPECT_EQ(parsed[2], 128007);
  const std::vector<int32_t> plain = tokenizer_->Encode(text, false, false);
  EXPECT_GT(plain.size(), 3u);
  EXPECT_EQ(tokenizer_->Decode(parsed), text);
  EXPECT_EQ(tokenizer_->Decode(parsed, /*skip_special=*/true), "user");
  EXPECT_TRUE(tokenizer_->IsEog(128009));  // <|eot_id|>
  EXPECT_TRUE(tokenizer_->IsEog(128008));  // <|eom_id|>
  EXPECT_TRUE(tokenizer_->IsEog(128001));
  EXPECT_FALSE(tokenizer_->IsEog(128006));
}

TEST_F(Llama3BpeTest, KeepsAWordWholeWhenItIsAToken) {
  // " Việt" is a single token only through the ignore-merges rule.
  const std::vector<int32_t> ids = tokenizer_->Encode(" Vi\xe1\xbb\x87t", false, false);
  EXPECT_EQ(ids.size(), 1u) << IdsToString(ids);
}

}  // namespace
}  // namespace tern
