#include "tokenizer/utf8_assembler.h"

#include <gtest/gtest.h>

namespace tern {
namespace {

TEST(Utf8AssemblerTest, HoldsSplitCharacterUntilComplete) {
  Utf8Assembler a;
  // "é" = C3 A9, "€" = E2 82 AC, "😀" = F0 9F 98 80
  EXPECT_EQ(a.Push("ab\xC3"), "ab");
  EXPECT_EQ(a.Push("\xA9"), "\xC3\xA9");
  EXPECT_EQ(a.Push("\xE2"), "");
  EXPECT_EQ(a.Push("\x82"), "");
  EXPECT_EQ(a.Push("\xAC!"), "\xE2\x82\xAC!");
  EXPECT_EQ(a.Push("\xF0\x9F\x98"), "");
  EXPECT_EQ(a.Push("\x80"), "\xF0\x9F\x98\x80");
}

TEST(Utf8AssemblerTest, PassesInvalidBytesAndFlushesTail) {
  Utf8Assembler a;
  EXPECT_EQ(a.Push("\x80x"), "\x80x");
  EXPECT_EQ(a.Push("\xC3x"), "\xC3x");  // a lead byte cut short by ASCII
  // 0xFF reads as a 4-byte lead: held until a later lead byte ends it.
  EXPECT_EQ(a.Push("\xFF"), "");
  EXPECT_EQ(a.Push("\xE2\x82"), "\xFF");
  EXPECT_EQ(a.num_pending_bytes(), 2u);
  EXPECT_EQ(a.Flush(), "\xE2\x82");
  EXPECT_EQ(a.Flush(), "");
}

}  // namespace
}  // namespace tern
