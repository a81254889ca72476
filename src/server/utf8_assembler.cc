#include "server/utf8_assembler.h"

namespace tern {
namespace {

// Length of the sequence a lead byte starts (0: continuation byte, 1: ASCII or
// an invalid lead byte, which is emitted as is).
size_t SequenceLength(unsigned char c) {
  if ((c & 0x80) == 0) return 1;
  if ((c & 0xC0) == 0x80) return 0;
  if ((c & 0xE0) == 0xC0) return 2;
  if ((c & 0xF0) == 0xE0) return 3;
  if ((c & 0xF8) == 0xF0) return 4;
  return 1;
}

// Bytes at the end of s that start an incomplete sequence (0..3).
size_t IncompleteTail(const std::string& s) {
  for (size_t back = 1; back <= 3 && back <= s.size(); ++back) {
    size_t len = SequenceLength((unsigned char)s[s.size() - back]);
    if (len == 0) continue;        // a continuation byte: keep looking back
    return len > back ? back : 0;  // the lead byte's sequence is short?
  }
  return 0;
}

}  // namespace

std::string Utf8Assembler::Push(std::string_view bytes) {
  pending_.append(bytes);
  size_t keep = IncompleteTail(pending_);
  std::string out = pending_.substr(0, pending_.size() - keep);
  pending_.erase(0, pending_.size() - keep);
  return out;
}

std::string Utf8Assembler::Flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace tern
