// Test-only helpers: hand-built GGUF images with the offsets of their fields,
// so tests can corrupt one field at a time. Not part of the library.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace tern::gguf::testing {

class GgufBytes {
 public:
  // Appends v little-endian; returns its offset.
  template <typename T>
  size_t Put(T v) {
    const size_t at = bytes_.size();
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    bytes_.insert(bytes_.end(), p, p + sizeof(T));
    return at;
  }
  // Appends a GGUF string; returns the offset of its length field.
  size_t PutString(std::string_view s) {
    const size_t at = Put<uint64_t>(s.size());
    bytes_.insert(bytes_.end(), s.begin(), s.end());
    return at;
  }
  void PadTo(size_t alignment) {
    while (bytes_.size() % alignment) bytes_.push_back(0);
  }
  template <typename T>
  void Set(size_t at, T v) {
    std::memcpy(bytes_.data() + at, &v, sizeof(T));
  }
  std::vector<uint8_t>& bytes() { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

// A small valid v3 file: 3 keys (general.alignment = 32, general.name,
// a float32 array), tensors "a" (F32 [4, 2]) and "b" (Q8_0 [32]).
struct TinyFile {
  GgufBytes b;
  size_t version_at, tensor_count_at, kv_count_at;
  size_t alignment_type_at, alignment_value_at;
  size_t name_len_at;           // general.name's string length
  size_t array_type_at, array_count_at;
  size_t scores_value_type_at;  // value type of the array key
  size_t a_name_len_at, a_ndims_at, a_dim0_at, a_dim1_at, a_dtype_at, a_offset_at;
  size_t b_name_len_at, b_offset_at;
  size_t data_at;

  TinyFile() {
    b.Put<uint32_t>(0x46554747);
    version_at = b.Put<uint32_t>(3);
    tensor_count_at = b.Put<uint64_t>(2);
    kv_count_at = b.Put<uint64_t>(3);
    b.PutString("general.alignment");
    alignment_type_at = b.Put<uint32_t>(4);  // uint32
    alignment_value_at = b.Put<uint32_t>(32);
    b.PutString("general.name");
    b.Put<uint32_t>(8);  // string
    name_len_at = b.PutString("tiny");
    b.PutString("tokenizer.ggml.scores");
    scores_value_type_at = b.Put<uint32_t>(9);  // array
    array_type_at = b.Put<uint32_t>(6);         // of float32
    array_count_at = b.Put<uint64_t>(3);
    for (float f : {0.5f, -1.0f, 2.0f}) b.Put(f);
    a_name_len_at = b.PutString("a");
    a_ndims_at = b.Put<uint32_t>(2);
    a_dim0_at = b.Put<uint64_t>(4);
    a_dim1_at = b.Put<uint64_t>(2);
    a_dtype_at = b.Put<uint32_t>(0);  // F32
    a_offset_at = b.Put<uint64_t>(0);
    b_name_len_at = b.PutString("b");
    b.Put<uint32_t>(1);
    b.Put<uint64_t>(32);
    b.Put<uint32_t>(8);  // Q8_0: 34 bytes
    b_offset_at = b.Put<uint64_t>(32);
    b.PadTo(32);
    data_at = b.bytes().size();
    for (int i = 0; i < 8; ++i) b.Put(static_cast<float>(i));
    for (int i = 0; i < 34; ++i) b.Put<uint8_t>(static_cast<uint8_t>(i));
    b.PadTo(32);
  }
  std::vector<uint8_t>& bytes() { return b.bytes(); }
};

}  // namespace tern::gguf::testing
