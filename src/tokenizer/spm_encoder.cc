#include "tokenizer/spm_encoder.h"

#include <algorithm>
#include <cstdio>

#include "tokenizer/unicode.h"

namespace tern {
namespace {

constexpr std::string_view kSpaceMarker = "\xe2\x96\x81";  // U+2581

using Symbol = SpmEncoder::Symbol;
using Bigram = SpmEncoder::Bigram;

// Highest score first; on ties the leftmost pair.
struct BigramOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

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
  Scratch scratch;
  if (!split_at_words_) {
    EncodeSegment(text, &scratch, out);
    return;
  }
  // Cut before each U+2581 that follows another character: no token spans
  // such a cut, so the segments merge independently with the same result.
  size_t segment_begin = 0;
  bool prev_is_marker = false;
  for (size_t offset = 0; offset < text.size();) {
    const bool is_marker = text.compare(offset, kSpaceMarker.size(), kSpaceMarker) == 0;
    if (is_marker && !prev_is_marker && offset > segment_begin) {
      EncodeSegment(text.substr(segment_begin, offset - segment_begin), &scratch, out);
      segment_begin = offset;
    }
    prev_is_marker = is_marker;
    offset += std::min(Utf8SequenceLength((uint8_t)text[offset]), text.size() - offset);
  }
  EncodeSegment(text.substr(segment_begin), &scratch, out);
}

void SpmEncoder::EncodeSegment(std::string_view text, Scratch* scratch,
                               std::vector<int32_t>* out) const {
  std::vector<Symbol>& symbols = scratch->symbols;
  std::vector<Bigram>& heap = scratch->heap;
  symbols.clear();
  heap.clear();
  for (size_t offset = 0; offset < text.size();) {
    const size_t len = std::min(Utf8SequenceLength((uint8_t)text[offset]), text.size() - offset);
    const int32_t index = (int32_t)symbols.size();
    offset += len;
    symbols.push_back({index - 1, offset == text.size() ? -1 : index + 1,
                       (uint32_t)(offset - len), (uint32_t)len});
  }

  const BigramOrder order;
  auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const uint32_t length = symbols[left].length + symbols[right].length;
    const int32_t id = FindToken(index_, text.substr(symbols[left].offset, length));
    if (id < 0) return;
    heap.push_back({left, right, vocab_.scores[id], length});
    std::push_heap(heap.begin(), heap.end(), order);
  };
  for (int32_t i = 1; i < (int32_t)symbols.size(); ++i) try_add(i - 1, i);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), order);
    const Bigram bigram = heap.back();
    heap.pop_back();
    Symbol& left = symbols[bigram.left];
    Symbol& right = symbols[bigram.right];
    // Stale: one side was merged away or grew since this pair was queued.
    if (left.length == 0 || right.length == 0 || left.length + right.length != bigram.length) {
      continue;
    }
    left.length += right.length;
    right.length = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = bigram.left;
    try_add(left.prev, bigram.left);
    try_add(bigram.left, left.next);
  }

  for (int32_t i = 0; i != -1; i = symbols[i].next) {
    const Symbol& s = symbols[i];
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
