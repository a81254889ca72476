#include "tokenizer/wpm_encoder.h"

#include <algorithm>

#include "tokenizer/unicode.h"

namespace tern {
namespace {

bool IsCjkIdeograph(uint32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

constexpr std::string_view kWordStart = "\xe2\x96\x81";  // U+2581

}  // namespace

WpmEncoder::WpmEncoder(const Vocab& vocab, const TokenIndex& index)
    : vocab_(vocab), index_(index) {
  max_token_length_ = index_.max_length();
}

// BERT's basic tokenizer: drop control characters, split on whitespace,
// lowercase, strip accents (NFD, then drop nonspacing marks, in every
// script), then split punctuation, ASCII symbols and CJK ideographs off as
// words of their own.
std::vector<std::string> WpmEncoder::SplitWords(std::string_view text) {
  std::vector<std::string> words(1);
  std::vector<uint32_t> pieces;
  for (uint32_t cpt : DecodeUtf8Lenient(text)) {
    if (IsUnicodeWhitespace(cpt)) {
      if (!words.back().empty()) words.emplace_back();
      continue;
    }
    if (cpt == 0 || cpt == kReplacementChar ||
        GetCodepointFlags(cpt).Has(CodepointFlags::kControl)) {
      continue;
    }
    pieces.clear();
    AppendWithoutAccents(ToLowerCodepoint(cpt), &pieces);
    for (uint32_t piece : pieces) {
      const CodepointFlags flags = GetCodepointFlags(piece);
      std::string s;
      AppendUtf8(ToLowerCodepoint(piece), &s);
      if (flags.Has(CodepointFlags::kPunctuation) ||
          (piece < 0x7F && flags.Has(CodepointFlags::kSymbol)) || IsCjkIdeograph(piece)) {
        if (!words.back().empty()) words.emplace_back();
        words.back() = std::move(s);
        words.emplace_back();
      } else {
        words.back() += s;
      }
    }
  }
  if (words.back().empty()) words.pop_back();
  return words;
}

void WpmEncoder::Encode(std::string_view text, std::vector<int32_t>* out) const {
  for (const std::string& word : SplitWords(text)) {
    if (word.empty()) continue;
    const std::string marked = std::string(kWordStart) + word;
    const size_t n = marked.size();
    const size_t first = out->size();
    for (size_t i = 0; i < n;) {
      // Longest token starting at i.
      size_t match_end = 0;
      for (size_t j = std::min(n, i + max_token_length_ + 1); j > i; --j) {
        const int32_t id = FindToken(index_, std::string_view(marked).substr(i, j - i));
        if (id >= 0) {
          out->push_back(id);
          match_end = j;
          break;
        }
      }
      if (match_end == 0) {
        out->resize(first);  // the whole word is unknown
        break;
      }
      i = match_end;
    }
    if (out->size() == first && vocab_.unk_id >= 0) out->push_back(vocab_.unk_id);
  }
}

}  // namespace tern
