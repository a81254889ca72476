// WpmEncoder: WordPiece (tokenizer.ggml.model "bert"). Text is normalised
// (each codepoint to its NFD base letter, lowercased; control characters
// dropped), split on whitespace, and punctuation, ASCII symbols and CJK
// ideographs become words of their own. Each word, prefixed with U+2581 as the
// GGUF vocabulary stores word starts, is cut greedily into the longest
// vocabulary tokens; a word that cannot be cut becomes the unknown token.
//
// Thread rules: immutable; Encode() may run on any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/token_index.h"
#include "tokenizer/vocab.h"

namespace tern {

class WpmEncoder {
 public:
  // vocab and index must outlive the encoder.
  WpmEncoder(const Vocab& vocab, const TokenIndex& index);

  void Encode(std::string_view text, std::vector<int32_t>* out) const;

  // The normalised words of text (exposed for tests).
  static std::vector<std::string> SplitWords(std::string_view text);

 private:
  const Vocab& vocab_;
  const TokenIndex& index_;
  size_t max_token_length_ = 0;
};

}  // namespace tern
