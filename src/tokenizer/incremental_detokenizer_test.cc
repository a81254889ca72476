#include "tokenizer/incremental_detokenizer.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "tokenizer/unicode.h"
#include "tokenizer/vocab_test_util.h"

namespace tern {
namespace {

using testing_util::Escape;
using testing_util::LoadTokenizer;
using testing_util::LoadVocabCases;
using testing_util::VocabDir;
using testing_util::VocabGgufFiles;

// Feeds ids one at a time and checks every prefix against one-shot Decode.
void ExpectMatchesDecode(const Tokenizer& tok, const std::vector<int32_t>& ids,
                         const std::string& label) {
  IncrementalDetokenizer detok(tok);
  std::string streamed;
  for (size_t k = 0; k < ids.size(); ++k) {
    streamed += detok.Add(ids[k]);
    const std::string full =
        tok.Decode(std::span<const int32_t>(ids.data(), k + 1));
    const std::string complete = full.substr(0, CompleteUtf8PrefixLength(full));
    ASSERT_EQ(streamed, complete) << label << " after " << (k + 1) << " tokens";
  }
  streamed += detok.Flush();
  EXPECT_EQ(streamed, tok.Decode(ids)) << label;
}

TEST(IncrementalDetokenizerTest, EveryPrefixOfEveryVectorMatchesOneShotDecode) {
  int num_vocabs = 0;
  for (const std::string& path : VocabGgufFiles()) {
    auto tokenizer = LoadTokenizer(path);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().message();
    auto cases = LoadVocabCases(path + ".inp", path + ".out");
    if (!cases.ok()) continue;
    const Tokenizer& tok = **tokenizer;
    for (const auto& c : *cases) {
      const std::string label =
          std::filesystem::path(path).filename().string() + " '" + Escape(c.text) + "'";
      ExpectMatchesDecode(tok, c.ids, label);
      if (tok.bos_id() >= 0) {
        std::vector<int32_t> with_bos = {tok.bos_id()};
        with_bos.insert(with_bos.end(), c.ids.begin(), c.ids.end());
        ExpectMatchesDecode(tok, with_bos, label + " with BOS");
      }
    }
    ++num_vocabs;
  }
  if (num_vocabs == 0) GTEST_SKIP() << "no vocabularies under " << VocabDir();
}

TEST(IncrementalDetokenizerTest, HoldsBackSplitCharacterUntilComplete) {
  const std::string path = ModelsDir() + "/stories260K.gguf";
  TOKENIZER_OR_SKIP(tok, path);
  // U+9FA5 becomes three byte tokens after the space-prefix token.
  const std::vector<int32_t> ids = tok.Encode("\xe9\xbe\xa5", true, false);
  ASSERT_EQ(ids.size(), 5u);
  IncrementalDetokenizer detok(tok, /*skip_special=*/true);
  EXPECT_EQ(detok.Add(ids[0]), "");  // BOS skipped
  EXPECT_EQ(detok.Add(ids[1]), "");  // the prefix space is dropped after BOS
  EXPECT_EQ(detok.Add(ids[2]), "");
  EXPECT_EQ(detok.num_pending_bytes(), 1u);
  EXPECT_EQ(detok.Add(ids[3]), "");
  EXPECT_EQ(detok.Add(ids[4]), "\xe9\xbe\xa5");
  EXPECT_EQ(detok.Flush(), "");
}

TEST(IncrementalDetokenizerTest, FlushReturnsAnIncompleteTail) {
  const std::string path = ModelsDir() + "/stories260K.gguf";
  TOKENIZER_OR_SKIP(tok, path);
  const int32_t byte_e9 = tok.FindTokenId("<0xE9>");
  ASSERT_GE(byte_e9, 0);
  IncrementalDetokenizer detok(tok);
  EXPECT_EQ(detok.Add(byte_e9), "");
  EXPECT_EQ(detok.Flush(), "\xe9");
  EXPECT_EQ(detok.num_pending_bytes(), 0u);
}

}  // namespace
}  // namespace tern
