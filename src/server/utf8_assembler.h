// Utf8Assembler: joins token pieces (raw bytes, a multi-byte character may be
// split over several tokens) into text that only ever ends on a whole UTF-8
// character, so each streamed delta is valid text. Invalid bytes are passed
// on (the JSON writer replaces them); only an incomplete final sequence waits.
// Thread rules: one assembler per choice, used by one thread.
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

 private:
  std::string pending_;
};

}  // namespace tern
