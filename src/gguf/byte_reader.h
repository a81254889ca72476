// ByteReader: a bounds-checked little-endian cursor over a byte range.
//
// Every read first checks that the bytes are there; a failed read returns
// false and leaves the position unchanged. Never reads outside [data, data +
// size). Not thread-safe (one reader per parse).
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <string>

namespace tern::gguf {

static_assert(std::endian::native == std::endian::little,
              "GGUF reading assumes a little-endian host");

class ByteReader {
 public:
  ByteReader(const uint8_t* data, uint64_t size) : data_(data), size_(size) {}

  uint64_t pos() const { return pos_; }
  uint64_t size() const { return size_; }
  uint64_t remaining() const { return size_ - pos_; }
  bool Has(uint64_t n) const { return n <= size_ - pos_; }

  template <typename T>
  bool Read(T* out) {
    if (!Has(sizeof(T))) return false;
    std::memcpy(out, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }

  bool ReadBytes(uint64_t n, std::string* out) {
    if (!Has(n)) return false;
    out->assign(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(n));
    pos_ += n;
    return true;
  }

 private:
  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

}  // namespace tern::gguf
