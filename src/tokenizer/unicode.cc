#include "tokenizer/unicode.h"

#include <algorithm>
#include <array>

namespace tern {

namespace unicode_tables {
extern const uint32_t kNumFlagRanges;
extern const uint32_t kFlagRanges[][2];
extern const uint32_t kNumLowerPairs;
extern const uint32_t kLowerPairs[][2];
extern const uint32_t kNumStrippedNfdRanges;
extern const uint32_t kStrippedNfdRanges[][5];
extern const uint32_t kNumMnRanges;
extern const uint32_t kMnRanges[][2];
}  // namespace unicode_tables

namespace {

bool IsContinuation(uint8_t b) { return (b & 0xC0) == 0x80; }

// One codepoint at offset; advances offset. Returns false when malformed.
bool DecodeOne(std::string_view s, size_t* offset, uint32_t* cpt) {
  const size_t i = *offset;
  const uint8_t b0 = (uint8_t)s[i];
  if (!(b0 & 0x80)) {
    *cpt = b0;
    *offset = i + 1;
    return true;
  }
  if (!(b0 & 0x40)) return false;
  int extra = !(b0 & 0x20) ? 1 : !(b0 & 0x10) ? 2 : !(b0 & 0x08) ? 3 : -1;
  if (extra < 0 || i + extra >= s.size()) return false;
  uint32_t c = b0 & (0x3F >> extra);
  for (int k = 1; k <= extra; ++k) {
    const uint8_t b = (uint8_t)s[i + k];
    if (!IsContinuation(b)) return false;
    c = (c << 6) | (b & 0x3F);
  }
  *cpt = c;
  *offset = i + 1 + extra;
  return true;
}

struct ByteLevelTables {
  std::array<uint32_t, 256> byte_to_cpt{};
  std::vector<int16_t> cpt_to_byte;  // index < 512; -1 when not in the alphabet
  ByteLevelTables() : cpt_to_byte(512, -1) {
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) ||
                             (b >= 0xAE && b <= 0xFF);
      byte_to_cpt[b] = printable ? (uint32_t)b : next++;
      cpt_to_byte[byte_to_cpt[b]] = (int16_t)b;
    }
  }
};

const ByteLevelTables& ByteLevel() {
  static const ByteLevelTables tables;
  return tables;
}

}  // namespace

size_t Utf8SequenceLength(uint8_t first_byte) {
  static constexpr uint8_t kLengths[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLengths[first_byte >> 4];
}

std::vector<uint32_t> DecodeUtf8Lenient(std::string_view text) {
  std::vector<uint32_t> out;
  out.reserve(text.size());
  size_t offset = 0;
  while (offset < text.size()) {
    uint32_t cpt = 0;
    if (DecodeOne(text, &offset, &cpt)) {
      out.push_back(cpt);
    } else {
      out.push_back(kReplacementChar);
      ++offset;
    }
  }
  return out;
}

std::string SanitizeUtf8(std::string_view text) {
  // Fast path: plain ASCII needs no work.
  if (std::all_of(text.begin(), text.end(), [](char c) { return !(c & 0x80); })) {
    return std::string(text);
  }
  std::string out;
  out.reserve(text.size());
  for (uint32_t cpt : DecodeUtf8Lenient(text)) AppendUtf8(cpt, &out);
  return out;
}

size_t CompleteUtf8PrefixLength(std::string_view text) {
  // Look back at most 3 bytes for a lead byte whose sequence is cut short.
  const size_t n = text.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const uint8_t b = (uint8_t)text[n - back];
    if (IsContinuation(b)) continue;
    if (!(b & 0x80)) return n;  // ASCII: complete
    const size_t need = Utf8SequenceLength(b);
    if (need > back) {
      // Incomplete only if the bytes we have are valid continuations.
      return n - back;
    }
    return n;
  }
  return n;
}

CodepointFlags GetCodepointFlags(uint32_t cpt) {
  using unicode_tables::kFlagRanges;
  if (cpt > 0x10FFFF) return {CodepointFlags::kControl | CodepointFlags::kUndefined};
  // Last range whose first <= cpt.
  size_t lo = 0, hi = unicode_tables::kNumFlagRanges;
  while (hi - lo > 1) {
    const size_t mid = (lo + hi) / 2;
    if (kFlagRanges[mid][0] <= cpt) lo = mid; else hi = mid;
  }
  return {(uint8_t)kFlagRanges[lo][1]};
}

bool IsUnicodeWhitespace(uint32_t cpt) {
  return (cpt >= 0x09 && cpt <= 0x0D) || cpt == 0x20 || cpt == 0x85 || cpt == 0xA0 ||
         cpt == 0x1680 || (cpt >= 0x2000 && cpt <= 0x200A) || cpt == 0x2028 ||
         cpt == 0x2029 || cpt == 0x202F || cpt == 0x205F || cpt == 0x3000;
}

uint32_t ToLowerCodepoint(uint32_t cpt) {
  using unicode_tables::kLowerPairs;
  if (cpt < 0x80) return (cpt >= 'A' && cpt <= 'Z') ? cpt + 32 : cpt;
  size_t lo = 0, hi = unicode_tables::kNumLowerPairs;
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (kLowerPairs[mid][0] < cpt) lo = mid + 1; else hi = mid;
  }
  if (lo < unicode_tables::kNumLowerPairs && kLowerPairs[lo][0] == cpt) return kLowerPairs[lo][1];
  return cpt;
}

bool IsNonspacingMark(uint32_t cpt) {
  using unicode_tables::kMnRanges;
  if (cpt < 0x300) return false;
  size_t lo = 0, hi = unicode_tables::kNumMnRanges;
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (kMnRanges[mid][1] < cpt) lo = mid + 1; else hi = mid;
  }
  return lo < unicode_tables::kNumMnRanges && kMnRanges[lo][0] <= cpt;
}

void AppendWithoutAccents(uint32_t cpt, std::vector<uint32_t>* out) {
  using unicode_tables::kStrippedNfdRanges;
  if (cpt < 0xC0) {
    out->push_back(cpt);
    return;
  }
  // Hangul syllables decompose algorithmically into two or three jamo
  // (Unicode chapter 3.12); jamo are letters, not marks, so all stay.
  constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
  constexpr uint32_t kVCount = 21, kTCount = 28, kSCount = 19 * kVCount * kTCount;
  if (cpt >= kSBase && cpt < kSBase + kSCount) {
    const uint32_t s = cpt - kSBase;
    out->push_back(kLBase + s / (kVCount * kTCount));
    out->push_back(kVBase + (s % (kVCount * kTCount)) / kTCount);
    if (s % kTCount != 0) out->push_back(kTBase + s % kTCount);
    return;
  }
  if (IsNonspacingMark(cpt)) return;
  size_t lo = 0, hi = unicode_tables::kNumStrippedNfdRanges;
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (kStrippedNfdRanges[mid][1] < cpt) lo = mid + 1; else hi = mid;
  }
  if (lo < unicode_tables::kNumStrippedNfdRanges && kStrippedNfdRanges[lo][0] <= cpt) {
    for (int i = 2; i < 5 && kStrippedNfdRanges[lo][i] != 0; ++i) {
      out->push_back(kStrippedNfdRanges[lo][i]);
    }
    return;
  }
  out->push_back(cpt);
}

std::string ByteLevelEncode(std::string_view bytes) {
  const auto& t = ByteLevel();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) AppendUtf8(t.byte_to_cpt[(uint8_t)c], &out);
  return out;
}

std::string ByteLevelDecode(std::string_view text) {
  const auto& t = ByteLevel();
  std::string out;
  out.reserve(text.size());
  for (uint32_t cpt : DecodeUtf8Lenient(text)) {
    if (cpt < t.cpt_to_byte.size() && t.cpt_to_byte[cpt] >= 0) {
      out.push_back((char)t.cpt_to_byte[cpt]);
    } else {
      AppendUtf8(cpt, &out);
    }
  }
  return out;
}

}  // namespace tern
