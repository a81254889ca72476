// BpeEncoder: byte-level BPE (tokenizer.ggml.model "gpt2"). The text is cut
// into words by the PreTokenizer of tokenizer.ggml.pre; within each word the
// adjacent pair with the lowest merge rank is merged until none applies
// (priority queue, ties leftmost first). With ignore_merges (Llama-3 style) a
// word that is itself a token is emitted whole. A final piece that is not a
// token falls back to its single-byte tokens.
//
// Thread rules: immutable after Create(); Encode() may run on any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/token_index.h"
#include "tokenizer/vocab.h"

namespace tern {

class BpeEncoder {
 public:
  // vocab and index must outlive the encoder. Fails on an unknown pre name.
  static StatusOr<std::unique_ptr<BpeEncoder>> Create(const Vocab& vocab,
                                                      const TokenIndex& index);

  // Appends the ids of text (raw UTF-8, no special tokens) to *out.
  void Encode(std::string_view text, std::vector<int32_t>* out) const;

 private:
  BpeEncoder(const Vocab& vocab, const TokenIndex& index) : vocab_(vocab), index_(index) {}
  // Rank of merging left+right, or -1. *key is scratch space.
  int32_t Rank(std::string_view left, std::string_view right, std::string* key) const;
  void EncodeWord(std::string_view word, std::vector<int32_t>* out, std::string* key) const;

  const Vocab& vocab_;
  const TokenIndex& index_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  // "left right" -> rank (an index into vocab.merges); the first occurrence
  // of a merge wins.
  TokenIndex ranks_;
};

}  // namespace tern
