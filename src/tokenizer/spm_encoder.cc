#include "tokenizer/spm_encoder.h"

#include <algorithm>
#include <cstdio>

#include "tokenizer/unicode.h"

namespace tern {
namespace {

constexpr std::string_view kSpaceMarker = "\xe2\x96\x81";  // U+2581

}  // namespace

SpmEncoder::SpmEncoder(const Vocab& vocab, const TokenIndex& index)
    : vocab_(vocab), index_(index) {
  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof(hex), "<0x%02X>", b);
    int32_t id = FindToken(index_, hex);
    if (id < 0) id = FindToken(index_, std::string_view(reinterpret_cast<const char*>(&b), 1));
    if (id < 0) id = vocab_.unk_id;
    byte_tokens_[b] = id;
  }
  // Word-wise merging is exact when every U+2581 inside a token belongs to
  // the token's leading run of U+2581.
  split_at_words_ = true;
  for (const std::string& token : vocab_.tokens) {
    size_t lead = 0;
    while (token.compare(lead, kSpaceMarker.size(), kSpaceMarker) == 0) lead += kSpaceMarker.size();
    if (token.find(kSpaceMarker, lead) != std::string::npos) {
      split_at_words_ = false;
      break;
    }
  }
}

void SpmEncoder::Encode(std::string_view text, std::vector<int32_t>* out) const {
  if (text.empty()) return;
  PairMerger<float> merger;
  if (!split_at_words_) {
    EncodeSegment(text, &merger, out);
    return;
  }
  // Cut before each U+2581 that follows another character: no token spans
  // such a cut, so the segments merge independently with the same result.
  size_t segment_begin = 0;
  bool prev_is_marker = false;
  for (size_t offset = 0; offset < text.size();) {
    const bool is_marker = text.compare(offset, kSpaceMarker.size(), kSpaceMarker) == 0;
    if (is_marker && !prev_is_marker && offset > segment_begin) {
      EncodeSegment(text.substr(segment_begin, offset - segment_begin), &merger, out);
      segment_begin = offset;
    }
    prev_is_marker = is_marker;
    offset += std::min(Utf8SequenceLength((uint8_t)text[offset]), text.size() - offset);
  }
  EncodeSegment(text.substr(segment_begin), &merger, out);
}

void SpmEncoder::EncodeSegment(std::string_view text, PairMerger<float>* merger,
                               std::vector<int32_t>* out) const {
  const std::vector<MergeSymbol>& symbols =
      merger->Merge(text, [&](std::string_view left, std::string_view right) -> std::optional<float> {
        // Adjacent pieces of text: their concatenation is one view.
        const int32_t id = FindToken(index_, std::string_view(left.data(), left.size() + right.size()));
        if (id < 0) return std::nullopt;
        return vocab_.scores[id];
      });
  for (int32_t i = 0; i != -1; i = symbols[i].next) {
    const MergeSymbol& s = symbols[i];
    const std::string_view piece = text.substr(s.offset, s.length);
    const int32_t id = FindToken(index_, piece);
    if (id >= 0) {
      out->push_back(id);
      continue;
    }
    for (char c : piece) {
      const int32_t byte_id = byte_tokens_[(uint8_t)c];
      if (byte_id >= 0) out->push_back(byte_id);
    }
  }
}

}  // namespace tern
