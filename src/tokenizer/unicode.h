// Unicode helpers for the tokenizers: lenient UTF-8 decoding (invalid bytes
// become U+FFFD, as the reference tokenizer does), codepoint category flags,
// lowercase and accent stripping (NFD without nonspacing marks; tables
// generated from Unicode data by gen_unicode_tables.py), and the GPT-2 byte-level alphabet (each byte
// 0..255 maps to one printable codepoint and back).
//
// All functions are pure and thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/utf8.h"  // AppendUtf8

namespace tern {

// Category bits of one codepoint (general category's first letter).
struct CodepointFlags {
  enum : uint8_t {
    kNumber = 1,       // \p{N}
    kLetter = 2,       // \p{L}
    kSeparator = 4,    // \p{Z}
    kAccentMark = 8,   // \p{M}
    kPunctuation = 16, // \p{P}
    kSymbol = 32,      // \p{S}
    kControl = 64,     // \p{C} (Cc, Cf, Cs, Co, Cn)
    kUndefined = 128,  // Cn
  };
  uint8_t bits = 0;
  bool Has(uint8_t b) const { return (bits & b) != 0; }
};

constexpr uint32_t kReplacementChar = 0xFFFD;

// Bytes of the UTF-8 sequence that starts with this byte, from its top four
// bits (continuation bytes and 0xF8.. count as 1 and 4 as the reference does).
size_t Utf8SequenceLength(uint8_t first_byte);

// Decodes UTF-8; a malformed sequence yields U+FFFD and skips one byte.
std::vector<uint32_t> DecodeUtf8Lenient(std::string_view text);
// DecodeUtf8Lenient then re-encode: valid, canonical UTF-8.
std::string SanitizeUtf8(std::string_view text);
// Length of the longest prefix of text that does not end inside an
// incomplete (but so far valid) UTF-8 sequence.
size_t CompleteUtf8PrefixLength(std::string_view text);

CodepointFlags GetCodepointFlags(uint32_t cpt);
// The White_Space property.
bool IsUnicodeWhitespace(uint32_t cpt);
uint32_t ToLowerCodepoint(uint32_t cpt);
// General category Mn (nonspacing mark: accents, vowel points, nukta, ...).
bool IsNonspacingMark(uint32_t cpt);
// Appends cpt's canonical decomposition (NFD) without its nonspacing marks,
// as BERT's accent stripping does for every script: "\u00e9" gives "e", a
// lone combining mark gives nothing, a Hangul syllable its jamo, and cpt
// itself when it neither decomposes nor is a mark.
void AppendWithoutAccents(uint32_t cpt, std::vector<uint32_t>* out);

// GPT-2 byte-level alphabet.
std::string ByteLevelEncode(std::string_view bytes);
// Maps each codepoint of text back to its byte; codepoints outside the
// alphabet are copied through as UTF-8.
std::string ByteLevelDecode(std::string_view text);

}  // namespace tern
