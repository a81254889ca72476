// SpmEncoder: SentencePiece-style BPE over a scored vocabulary (the
// tokenizer.ggml.model "llama" algorithm). The text is split into UTF-8
// characters; repeatedly the adjacent pair whose concatenation is a vocabulary
// token with the highest score is merged (ties: leftmost first), using a
// priority queue with lazy invalidation (O(n log n)). Pieces that are not
// tokens fall back to byte tokens <0xNN>. When no token has U+2581 after
// another character, the text is merged word by word (same result, and the
// heap stays small and cache-resident on long texts).
//
// Thread rules: immutable; Encode() may run on any thread.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/pair_merger.h"
#include "tokenizer/token_index.h"
#include "tokenizer/vocab.h"

namespace tern {

class SpmEncoder {
 public:
  // vocab and index must outlive the encoder.
  SpmEncoder(const Vocab& vocab, const TokenIndex& index);

  // text must already have its spaces replaced by U+2581 (and the space
  // prefix added when the model asks). Appends ids to *out.
  void Encode(std::string_view text, std::vector<int32_t>* out) const;

 private:
  void EncodeSegment(std::string_view text, PairMerger<float>* merger,
                     std::vector<int32_t>* out) const;

  const Vocab& vocab_;
  const TokenIndex& index_;
  std::array<int32_t, 256> byte_tokens_;  // -1 when the byte has no token
  bool split_at_words_ = false;
};

}  // namespace tern
