// IncrementalDetokenizer: turns a stream of token ids into text one id at a
// time, returning only whole UTF-8 characters; bytes of a character split
// across tokens are held back until it completes. It applies the same
// leading-space rule as Tokenizer::Decode, so for any ids:
//   Add(ids[0]) + ... + Add(ids[k-1]) == Decode(ids[0..k)) minus its trailing
//   incomplete UTF-8 bytes, and adding Flush() gives Decode(ids[0..k)).
//
// Thread rules: one instance per stream, used by one thread at a time. The
// tokenizer must outlive it.
#pragma once

#include <cstdint>
#include <string>

#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8_assembler.h"

namespace tern {

class IncrementalDetokenizer {
 public:
  explicit IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special = false);

  // Feeds one id; returns the text it completes (possibly empty).
  std::string Add(int32_t id);
  // Returns whatever is held back (an incomplete UTF-8 tail) and clears it.
  std::string Flush();
  // Bytes currently held back.
  size_t num_pending_bytes() const { return utf8_.num_pending_bytes(); }
  size_t num_tokens() const { return num_tokens_; }

 private:
  const Tokenizer& tokenizer_;
  bool skip_special_;
  size_t num_tokens_ = 0;
  bool strip_next_space_;
  Utf8Assembler utf8_;
};

}  // namespace tern
