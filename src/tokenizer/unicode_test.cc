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
  EXPECT_EQ(NfdBaseCodepoint(0x00C4), (uint32_t)'A');  // A with diaeresis
  EXPECT_EQ(NfdBaseCodepoint(0x1EC7), (uint32_t)'e');  // e with circumflex and dot below
  EXPECT_EQ(NfdBaseCodepoint('z'), (uint32_t)'z');
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
