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
using testing_util::VocabGgufFiles;

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

// Calls fn(name, path, tokenizer) for each of `names` that exists under
// VocabDir(); a vocabulary that exists but does not load is a failure.
template <size_t N, typename Fn>
void ForEachPresentVocab(const std::string (&names)[N], Fn fn) {
  for (const std::string& name : names) {
    const std::string path = VocabDir() + "/" + name;
    if (!std::filesystem::exists(path)) continue;
    auto tokenizer = LoadTokenizer(path);
    if (!tokenizer.ok()) {
      ADD_FAILURE() << name << ": " << tokenizer.status().message();
      continue;
    }
    fn(name, path, **tokenizer);
  }
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
  ForEachPresentVocab(names, [&](const std::string& name, const std::string& path,
                                 const Tokenizer& tok) {
    auto cases = LoadVocabCases(path + ".inp", path + ".out");
    ASSERT_TRUE(cases.ok()) << cases.status().message();
    for (const VocabCase& c : *cases) {
      const std::vector<int32_t> ids = tok.Encode(c.text, false, false);
      EXPECT_EQ(tok.Decode(ids), c.text) << name << ": '" << Escape(c.text) << "'";
      ++num_checked;
    }
  });
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
  ForEachPresentVocab(names, [&](const std::string& name, const std::string&,
                                 const Tokenizer& tok) {
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
  });
  if (num_checked == 0) GTEST_SKIP() << "no vocabularies under " << VocabDir();
}

// For every vocabulary (SPM, BPE, WPM): the text of each special-looking
// token (control, unknown, role tokens, "<...>"/"[...]" user-defined ones) is
// plain text unless parse_special, and is that one token when it is.
TEST(TokenizerVectorsTest, SpecialTokenTextIsPlainUnlessParseSpecial) {
  int num_checked = 0;
  for (const std::string& path : VocabGgufFiles()) {
    const std::string name = std::filesystem::path(path).filename().string();
    auto tokenizer = LoadTokenizer(path);
    ASSERT_TRUE(tokenizer.ok()) << path << ": " << tokenizer.status().message();
    const Tokenizer& tok = **tokenizer;
    const Vocab& v = tok.vocab();
    int specials = 0;
    for (int32_t id = 0; id < tok.vocab_size(); ++id) {
      const std::string& text = v.tokens[id];
      const TokenType t = v.token_types[id];
      const bool bracketed = text.size() >= 3 && ((text.front() == '<' && text.back() == '>') ||
                                                  (text.front() == '[' && text.back() == ']'));
      const bool role = id == v.bos_id || id == v.eos_id || id == v.sep_id || id == v.pad_id ||
                        id == v.eot_id || id == v.unk_id;
      if (!(t == TokenType::kControl || t == TokenType::kUnknown ||
            (t == TokenType::kUserDefined && bracketed) || role)) {
        continue;
      }
      if (tok.FindTokenId(text) != id) continue;  // a duplicate text: the later id wins
      ++specials;
      const std::vector<int32_t> plain = tok.Encode("x " + text + " y", false, false);
      EXPECT_EQ(std::count(plain.begin(), plain.end(), id), 0)
          << name << " id " << id << " " << Escape(text);
      const std::vector<int32_t> parsed = tok.Encode(text, false, true);
      EXPECT_EQ(parsed, std::vector<int32_t>{id})
          << name << " id " << id << " " << Escape(text);
    }
    EXPECT_GT(specials, 0) << path;
    ++num_checked;
  }
  if (num_checked == 0) GTEST_SKIP() << "no vocabularies under " << VocabDir();
}

// BERT's basic tokenizer strips accents in every script (NFD, then drop the
// nonspacing marks), so accented and bare spellings tokenize alike.
TEST(TokenizerTest, WpmStripsAccentsInEveryScript) {
  const std::string path = VocabDir() + "/ggml-vocab-bert-bge.gguf";
  TOKENIZER_OR_SKIP(tok, path);
  const std::pair<const char*, const char*> pairs[] = {
      {"Caf\u00e9 na\u00efve", "cafe naive"},
      {"\u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac", "\u03b5\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03b1"},
      {"\u0419\u043e\u0433\u0443\u0440\u0442 \u0451\u0436", "\u0438\u043e\u0433\u0443\u0440\u0442 \u0435\u0436"},
      {"\u05e9\u05b8\u05c1\u05dc\u05d5\u05b9\u05dd", "\u05e9\u05dc\u05d5\u05dd"},          // Hebrew niqqud
      {"\u0643\u064e\u062a\u064e\u0628\u064e", "\u0643\u062a\u0628"},                  // Arabic harakat
      {"\u0915\u093c\u092e", "\u0915\u092e"},                                          // Devanagari nukta
      {"\u304c\u3063\u3053\u3046", "\u304b\u3063\u3053\u3046"},                        // kana dakuten
      {"Ti\u1ebfng Vi\u1ec7t", "tieng viet"},
  };
  const int32_t unk = tok.vocab().unk_id;
  for (const auto& [accented, bare] : pairs) {
    const std::vector<int32_t> ids = tok.Encode(bare, true, false);
    EXPECT_EQ(std::count(ids.begin(), ids.end(), unk), 0) << bare;  // a real comparison
    EXPECT_EQ(tok.Encode(accented, true, false), ids) << accented;
  }
  // Hangul syllables become their jamo, as NFD gives them.
  EXPECT_EQ(tok.Encode("\ud55c", false, false),
            tok.Encode("\u1112\u1161\u11ab", false, false));
  // A spacing vowel sign (Mc) is not an accent: it stays.
  EXPECT_NE(tok.Encode("\u0915\u093e", false, false), tok.Encode("\u0915", false, false));
}

TEST(TokenizerTest, SpmAddsBosAndRoundTripsWithSpecials) {
  const std::string path = VocabDir() + "/ggml-vocab-llama-spm.gguf";
  TOKENIZER_OR_SKIP(tok, path);
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
  TOKENIZER_OR_SKIP(tok, path);
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
  TOKENIZER_OR_SKIP(tok, path);
  const std::vector<int32_t> ids = {-5, 100000};
  EXPECT_EQ(tok.Decode(ids), "");
  EXPECT_EQ(tok.TokenText(-1), "");
}

}  // namespace
}  // namespace tern
