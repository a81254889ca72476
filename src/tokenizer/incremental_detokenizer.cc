#include "tokenizer/incremental_detokenizer.h"

namespace tern {

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special)
    : tokenizer_(tokenizer),
      skip_special_(skip_special),
      strip_next_space_(tokenizer.add_space_prefix()) {}

std::string IncrementalDetokenizer::Add(int32_t id) {
  std::string piece = tokenizer_.TokenToPiece(id, skip_special_);
  const bool leading_bos = num_tokens_ == 0 && id >= 0 && id == tokenizer_.bos_id();
  ++num_tokens_;
  if (!leading_bos && strip_next_space_) {
    strip_next_space_ = false;
    if (!piece.empty() && piece[0] == ' ') piece.erase(0, 1);
  }
  return utf8_.Push(piece);
}

std::string IncrementalDetokenizer::Flush() { return utf8_.Flush(); }

}  // namespace tern
