#include "tokenizer/unicode.h"

#include <gtest/gtest.h>

namespace tern {
namespace {

TEST(UnicodeTest, MalformedUtf8BecomesReplacementCharacters) {
  const std::vector<uint32_t> cpts = DecodeUtf8Lenient("a\xff\xc3(\xe2\x82\xac");
  const std::vector<uint32_t> expected = {'a', kReplacementChar, kReplacementChar, '(', 0x20AC};
  EXPECT_EQ(cpts, expected);
  EXPECT_EQ(SanitizeUtf8("a\xff"), "a\xef\xbf\xbd");
  EXPECT_EQ(SanitizeUtf8("plain"), "plain");
}

TEST(UnicodeTest, CompletePrefixStopsBeforeACutCharacter) {
  EXPECT_EQ(CompleteUtf8PrefixLength("ab"), 2u);
  EXPECT_EQ(CompleteUtf8PrefixLength("a\xe2\x82"), 1u);
  EXPECT_EQ(CompleteUtf8PrefixLength("a\xe2\x82\xac"), 4u);
  EXPECT_EQ(CompleteUtf8PrefixLength("\xf0\x9f\x98"), 0u);
  EXPECT_EQ(CompleteUtf8PrefixLength(""), 0u);
}

TEST(UnicodeTest, CategoriesCaseAndDecomposition) {
  EXPECT_TRUE(GetCodepointFlags('a').Has(CodepointFlags::kLetter));
  EXPECT_TRUE(GetCodepointFlags('7').Has(CodepointFlags::kNumber));
  EXPECT_TRUE(GetCodepointFlags('!').Has(CodepointFlags::kPunctuation));
  EXPECT_TRUE(GetCodepointFlags('$').Has(CodepointFlags::kSymbol));
  EXPECT_TRUE(GetCodepointFlags(0x0301).Has(CodepointFlags::kAccentMark));
  EXPECT_TRUE(GetCodepointFlags(0x0378).Has(CodepointFlags::kUndefined));
  EXPECT_TRUE(IsUnicodeWhitespace(0x3000));
  EXPECT_FALSE(IsUnicodeWhitespace('x'));
  EXPECT_EQ(ToLowerCodepoint('Q'), (uint32_t)'q');
  EXPECT_EQ(ToLowerCodepoint(0x0416), 0x0436u);  // Cyrillic Zhe
}

std::vector<uint32_t> WithoutAccents(std::u32string_view text) {
  std::vector<uint32_t> out;
  for (char32_t c : text) AppendWithoutAccents(c, &out);
  return out;
}

std::vector<uint32_t> Cps(std::u32string_view text) { return {text.begin(), text.end()}; }

// BERT's accent stripping (NFD, drop category Mn) in every script, not only
// Latin: precomposed letters lose their marks, lone combining marks vanish,
// spacing marks (Mc) and letters stay.
TEST(UnicodeTest, AccentStrippingCoversEveryScript) {
  EXPECT_EQ(WithoutAccents(U"\u00C4\u1EC7z"), Cps(U"Aez"));                 // Latin, Vietnamese
  EXPECT_EQ(WithoutAccents(U"\u03AC\u1F00"), Cps(U"\u03B1\u03B1"));        // Greek tonos, psili
  EXPECT_EQ(WithoutAccents(U"\u0439\u0451"), Cps(U"\u0438\u0435"));        // Cyrillic short i, io
  EXPECT_EQ(WithoutAccents(U"\uFB2A\u05D1\u05BC"), Cps(U"\u05E9\u05D1"));  // Hebrew shin dot, dagesh
  EXPECT_EQ(WithoutAccents(U"\u0643\u064E\u062A\u064E\u0628"),           // Arabic harakat
            Cps(U"\u0643\u062A\u0628"));
  EXPECT_EQ(WithoutAccents(U"\u0958\u0915\u093F"),                         // Devanagari nukta;
            Cps(U"\u0915\u0915\u093F"));                                   // vowel sign i is Mc
  EXPECT_EQ(WithoutAccents(U"\u09CB"), Cps(U"\u09C7\u09BE"));               // Bengali o: two Mc
  EXPECT_EQ(WithoutAccents(U"\u0E01\u0E31"), Cps(U"\u0E01"));               // Thai mai han-akat
  EXPECT_EQ(WithoutAccents(U"\u304C\u30D1"), Cps(U"\u304B\u30CF"));        // kana (han)dakuten
  EXPECT_EQ(WithoutAccents(U"\uD55C\uAE00"),                                // Hangul: jamo stay
            Cps(U"\u1112\u1161\u11AB\u1100\u1173\u11AF"));
  EXPECT_EQ(WithoutAccents(U"\uAC00"), Cps(U"\u1100\u1161"));               // no final consonant
  EXPECT_EQ(WithoutAccents(U"\u0301\u0344"), Cps(U""));                     // lone marks vanish
  EXPECT_EQ(WithoutAccents(U"\u4E2D\U0001F600"), Cps(U"\u4E2D\U0001F600")); // no decomposition
}

// Over every codepoint: the result never holds a nonspacing mark and is
// either the codepoint itself or its accent-free decomposition (a mark
// yields nothing). Python's unicodedata cross-check: gen_unicode_tables.py.
TEST(UnicodeTest, AccentStrippingNeverLeavesAMark) {
  std::vector<uint32_t> out;
  size_t changed = 0;
  for (uint32_t c = 0; c < 0x110000; ++c) {
    if (c >= 0xD800 && c <= 0xDFFF) continue;
    out.clear();
    AppendWithoutAccents(c, &out);
    for (uint32_t o : out) ASSERT_FALSE(IsNonspacingMark(o)) << std::hex << c;
    if (IsNonspacingMark(c)) {
      ASSERT_TRUE(out.empty()) << std::hex << c;
    } else {
      ASSERT_FALSE(out.empty()) << std::hex << c;
      ASSERT_LE(out.size(), 3u) << std::hex << c;
    }
    changed += !(out.size() == 1 && out[0] == c);
  }
  // Thousands of precomposed letters, 11,172 Hangul syllables, ~2,000 marks.
  EXPECT_GT(changed, 13000u);
}

TEST(UnicodeTest, ByteLevelAlphabetRoundTripsEveryByte) {
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back((char)b);
  const std::string encoded = ByteLevelEncode(all);
  EXPECT_EQ(ByteLevelDecode(encoded), all);
  EXPECT_EQ(ByteLevelEncode(" "), "\xc4\xa0");  // U+0120
  EXPECT_EQ(ByteLevelEncode("\n"), "\xc4\x8a");  // U+010A
  EXPECT_EQ(ByteLevelEncode("A"), "A");
}

}  // namespace
}  // namespace tern
