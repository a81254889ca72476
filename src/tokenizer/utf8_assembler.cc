#include "tokenizer/utf8_assembler.h"

#include "tokenizer/unicode.h"

namespace tern {

std::string Utf8Assembler::Push(std::string_view bytes) {
  pending_.append(bytes);
  const size_t complete = CompleteUtf8PrefixLength(pending_);
  std::string out = pending_.substr(0, complete);
  pending_.erase(0, complete);
  return out;
}

std::string Utf8Assembler::Flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace tern
