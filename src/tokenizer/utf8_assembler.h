// Utf8Assembler: joins pieces of bytes (a multi-byte character may be split
// over several token pieces) into text that only ever ends on a whole UTF-8
// character, so each streamed delta is valid text. A tail whose lead byte
// (0xC0 and up) promises more bytes than follow waits; other bytes, invalid
// ones included, are passed on (the JSON writer replaces those). The same
// rule as CompleteUtf8PrefixLength, which IncrementalDetokenizer applies.
// Thread rules: one assembler per stream, used by one thread.
#pragma once

#include <string>
#include <string_view>

namespace tern {

class Utf8Assembler {
 public:
  // Appends bytes; returns the longest prefix that ends on a whole character.
  std::string Push(std::string_view bytes);
  // Returns whatever is held (the stream ended inside a character).
  std::string Flush();
  // Bytes currently held back.
  size_t num_pending_bytes() const { return pending_.size(); }

 private:
  std::string pending_;
};

}  // namespace tern
