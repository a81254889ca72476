#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <random>

#include "tokenizer/incremental_detokenizer.h"
#include "tokenizer/unicode.h"

#include "tokenizer/vocab_test_util.h"

namespace tern {
namespace {

using testing_util::Escape;
using testing_util::IdsToString;
using testing_util::LoadTokenizer;
using testing_util::LoadVocabCases;
using testing_util::VocabCase;
using testing_util::VocabDir;

struct VectorFile {
  std::string name;  // e.g. ggml-vocab-llama-spm.gguf
  std::string gguf;
  std::string inp;
  std::string out;
};

std::vector<VectorFile> FindVectorFiles() {
  std::vector<VectorFile> files;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(VocabDir(), ec)) {
    const std::string path = entry.path().string();
    if (!path.ends_with(".gguf.inp")) continue;
    const std::string gguf = path.substr(0, path.size() - 4);
    files.push_back({std::filesystem::path(gguf).filename().string(), gguf, path, gguf + ".out"});
  }
  std::sort(files.begin(), files.end(),
            [](const VectorFile& a, const VectorFile& b) { return a.name < b.name; });
  return files;
}

TEST(TokenizerVectorsTest, EveryVocabularyMatchesItsReferenceVectors) {
  const std::vector<VectorFile> files = FindVectorFiles();
  if (files.empty()) GTEST_SKIP() << "no test vectors under " << VocabDir();
  int num_vocabs = 0;
  for (const VectorFile& vf : files) {
    if (!std::filesystem::exists(vf.gguf)) {
      std::printf("  note: %s is not available (only its .inp/.out), skipped\n", vf.name.c_str());
      continue;
    }
    auto tokenizer = LoadTokenizer(vf.gguf);
    ASSERT_TRUE(tokenizer.ok()) << vf.name << ": " << tokenizer.status().message();
    auto cases = LoadVocabCases(vf.inp, vf.out);
    ASSERT_TRUE(cases.ok()) << cases.status().message();
    int num_ok = 0;
    for (const VocabCase& c : *cases) {
      const std::vector<int32_t> ids = (*tokenizer)->Encode(c.text, false, false);
      if (ids == c.ids) {
        ++num_ok;
      } else {
        ADD_FAILURE() << vf.name << ": input '" << Escape(c.text) << "'\n  expected"
                      << IdsToString(c.ids) << "\n  got     " << IdsToString(ids);
      }
    }
    std::printf("  %s: %d/%zu\n", vf.name.c_str(), num_ok, cases->size());
    ++num_vocabs;
  }
  EXPECT_GT(num_vocabs, 0);
}

// Decoding the vectors' ids gives back the input for the lossless
// vocabularies (SentencePiece with its space prefix, byte-level BPE).
TEST(TokenizerVectorsTest, DecodeInvertsEncodeForLosslessVocabularies) {
  const std::string names[] = {"ggml-vocab-llama-spm.gguf", "ggml-vocab-phi-3.gguf",
                               "ggml-vocab-gpt-2.gguf", "ggml-vocab-deepseek-llm.gguf",
                               "ggml-vocab-deepseek-coder.gguf", "ggml-vocab-falcon.gguf",
                               "ggml-vocab-mpt.gguf", "ggml-vocab-refact.gguf",
                               "ggml-vocab-starcoder.gguf"};
  int num_checked = 0;
  for (const std::string& name : names) {
    const std::string path = VocabDir() + "/" + name;
    if (!std::filesystem::exists(path)) continue;
    auto tokenizer = LoadTokenizer(path);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().message();
    auto cases = LoadVocabCases(path + ".inp", path + ".out");
    ASSERT_TRUE(cases.ok()) << cases.status().message();
    for (const VocabCase& c : *cases) {
      const std::vector<int32_t> ids = (*tokenizer)->Encode(c.text, false, false);
      EXPECT_EQ((*tokenizer)->Decode(ids), c.text) << name << ": '" << Escape(c.text) << "'";
      ++num_checked;
    }
  }
  if (num_checked == 0) GTEST_SKIP() << "no vocabularies under " << VocabDir();
}

// Arbitrary bytes (invalid UTF-8, NULs, special-token texts) never crash and
// always give in-range ids; byte-exact vocabularies decode them back.
TEST(TokenizerVectorsTest, RandomBytesEncodeToValidIds) {
  const std::string names[] = {"ggml-vocab-llama-spm.gguf", "ggml-vocab-gpt-2.gguf",
                               "ggml-vocab-deepseek-llm.gguf", "ggml-vocab-bert-bge.gguf",
                               "ggml-vocab-phi-3.gguf"};
  std::mt19937 rng(1234);
  int num_checked = 0;
  for (const std::string& name : names) {
    const std::string path = VocabDir() + "/" + name;
    if (!std::filesystem::exists(path)) continue;
    auto tokenizer = LoadTokenizer(path);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().message();
    const Tokenizer& tok = **tokenizer;
    const bool lossless = name != "ggml-vocab-bert-bge.gguf";
    for (int round = 0; round < 50; ++round) {
      std::string text;
      const int len = rng() % 40;
      for (int i = 0; i < len; ++i) {
        const int kind = rng() % 4;
        if (kind == 0) text += (char)(rng() % 256);
        else if (kind == 1) text += " \n\t<s></s>"[rng() % 10];
        else text += (char)('a' + rng() % 26);
      }
      for (bool parse_special : {false, true}) {
        const std::vector<int32_t> ids = tok.Encode(text, true, parse_special);
        for (int32_t id : ids) ASSERT_TRUE(tok.IsValid(id)) << name << " id " << id;
        IncrementalDetokenizer detok(tok);
        std::string streamed;
        for (int32_t id : ids) streamed += detok.Add(id);
        streamed += detok.Flush();
        EXPECT_EQ(streamed, tok.Decode(ids)) << name;
        // Invalid UTF-8 is not lossless in the reference either: a lead byte
        // before a space swallows part of the U+2581 that replaced it.
        const bool valid_utf8 = SanitizeUtf8(text) == text;
        if (lossless && valid_utf8 && !parse_special && name == "ggml-vocab-llama-spm.gguf") {
          EXPECT_EQ(tok.Decode(ids, /*skip_special=*/true), text) << name << " '" << Escape(text) << "'";
        }
      }
      ++num_checked;
    }
  }
  if (num_checked == 0) GTEST_SKIP() << "no vocabularies under " << VocabDir();
}

TEST(TokenizerTest, SpmAddsBosAndRoundTripsWithSpecials) {
  const std::string path = VocabDir() + "/ggml-vocab-llama-spm.gguf";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not available";
  auto tokenizer = LoadTokenizer(path);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().message();
  const Tokenizer& tok = **tokenizer;
  EXPECT_EQ(tok.bos_id(), 1);
  EXPECT_EQ(tok.eos_id(), 2);
  EXPECT_TRUE(tok.add_bos());
  EXPECT_EQ(tok.vocab_size(), 32000);
  const std::vector<int32_t> ids = tok.Encode("Hello world", true, false);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(tok.Decode(ids, /*skip_special=*/true), "Hello world");
  EXPECT_EQ(tok.Decode(ids), "<s>Hello world");
  EXPECT_TRUE(tok.IsEog(2));
  EXPECT_FALSE(tok.IsEog(1));
  // Control token text is plain text unless parse_special.
  const std::vector<int32_t> plain = tok.Encode("</s>", false, false);
  EXPECT_NE(plain, std::vector<int32_t>{2});
  const std::vector<int32_t> parsed = tok.Encode("a</s>", false, true);
  ASSERT_FALSE(parsed.empty());
  EXPECT_EQ(parsed.back(), 2);
  EXPECT_EQ(tok.TokenToPiece(2), "</s>");
  EXPECT_EQ(tok.TokenToPiece(2, /*skip_special=*/true), "");
}

TEST(TokenizerTest, SpmFallsBackToByteTokens) {
  const std::string path = ModelsDir() + "/stories260K.gguf";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not available";
  auto tokenizer = LoadTokenizer(path);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().message();
  const Tokenizer& tok = **tokenizer;
  // U+9FA5 is not a piece of this 512-token vocabulary: three byte tokens.
  const std::string text = "\xe9\xbe\xa5";
  const std::vector<int32_t> ids = tok.Encode(text, false, false);
  ASSERT_EQ(ids.size(), 4u);  // the space prefix, then the bytes
  EXPECT_EQ(tok.TokenText(ids[1]), "<0xE9>");
  EXPECT_EQ(tok.TokenText(ids[2]), "<0xBE>");
  EXPECT_EQ(tok.TokenText(ids[3]), "<0xA5>");
  EXPECT_EQ(tok.Decode(ids), text);
  EXPECT_EQ(tok.TokenToPiece(ids[3]), "\xa5");
}

TEST(TokenizerTest, OutOfRangeIdsDecodeToNothing) {
  const std::string path = ModelsDir() + "/stories260K.gguf";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not available";
  auto tokenizer = LoadTokenizer(path);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().message();
  const std::vector<int32_t> ids = {-5, 100000};
  EXPECT_EQ((*tokenizer)->Decode(ids), "");
  EXPECT_EQ((*tokenizer)->TokenText(-1), "");
}

}  // namespace
}  // namespace tern
