// GgufFile: a memory-mapped, validated GGUF v2/v3 file.
//
// Open() parses the header, every metadata key/value (arrays and nested
// arrays), and the tensor directory, and validates: counts and string lengths
// in bounds, known value and tensor types, general.alignment a power of two,
// each tensor's byte size consistent with dtype and shape (no overflow), each
// tensor's data inside the file and aligned. Any violation yields a Status
// naming the path, key or tensor and the offset, never a crash. Counts and
// lengths are checked against the bytes left before anything is allocated.
// Errors: NotFound (cannot open), Unimplemented (GGUF v1, big-endian),
// DataLoss (corrupt or truncated).
//
// Layout (little-endian):
//   "GGUF" u32 version | u64 tensor_count | u64 kv_count
//   kv_count x { string key | u32 value_type | value }
//   tensor_count x { string name | u32 n_dims | n_dims x u64 dim | u32 dtype | u64 offset }
//   padding to general.alignment (default 32) | data section
//   (string = u64 length + bytes; array = u32 elem_type + u64 count + elems)
//
// Thread rules: immutable after Open(); any thread may read.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "gguf/gguf_value.h"
#include "tensor/dtype.h"

namespace tern::gguf {

constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" little-endian
constexpr uint64_t kDefaultAlignment = 32;
constexpr int kMaxArrayDepth = 8;       // arrays nested deeper are rejected
constexpr uint32_t kMaxDims = 4;

struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  // ggml order: shape[0] is the contiguous (row) dimension.
  std::vector<int64_t> shape;
  uint64_t offset = 0;     // relative to the data section
  uint64_t num_bytes = 0;  // exact size from dtype and shape
  const uint8_t* data = nullptr;  // points into the mapping

  int64_t NumElements() const;
  int64_t NumRows() const;  // product of shape[1..]
  int64_t RowLength() const { return shape.empty() ? 1 : shape[0]; }
};

class GgufFile {
 public:
  // Maps and validates the file at path.
  static StatusOr<std::unique_ptr<GgufFile>> Open(const std::string& path);
  // Validates an in-memory image (copied into an owned buffer). name is used
  // in messages.
  static StatusOr<std::unique_ptr<GgufFile>> FromBuffer(
      std::span<const uint8_t> bytes, const std::string& name = "<buffer>");

  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  // Lets the memory of [p, p + bytes) (inside the file's data) go where it
  // holds whole pages of a mapped file: they are read back from the file
  // when next touched. For a tensor the model copied elsewhere. Nothing for
  // a FromBuffer image (its bytes are the only copy).
  void ReleasePages(const void* p, uint64_t bytes) const;

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t file_size() const { return size_; }
  // Start of the data section; past the end of a file without tensors.
  uint64_t data_offset() const { return data_offset_; }
  // The whole file image (mapping or owned copy); tensor data lies inside.
  std::span<const uint8_t> bytes() const { return {base_, static_cast<size_t>(size_)}; }

  // Metadata in file order.
  const std::vector<std::pair<std::string, Value>>& metadata() const { return kv_; }
  const Value* Find(std::string_view key) const;
  std::optional<int64_t> GetInt(std::string_view key) const;
  std::optional<double> GetFloat(std::string_view key) const;
  std::optional<bool> GetBool(std::string_view key) const;
  std::optional<std::string> GetString(std::string_view key) const;
  // Array of strings / numbers; nullopt when absent or of another type.
  std::optional<std::vector<std::string>> GetStringArray(std::string_view key) const;
  std::optional<std::vector<float>> GetFloatArray(std::string_view key) const;
  std::optional<std::vector<int64_t>> GetIntArray(std::string_view key) const;

  // Tensors in file order.
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* FindTensor(std::string_view name) const;

 private:
  struct AlignedFree {
    void operator()(uint8_t* p) const;
  };
  GgufFile() = default;
  Status Parse();

  std::string path_;
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  bool mapped_ = false;               // munmap on destruction
  std::unique_ptr<uint8_t[], AlignedFree> owned_;  // FromBuffer storage (64-aligned)
  uint32_t version_ = 0;
  uint64_t alignment_ = kDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, Value>> kv_;
  std::map<std::string, size_t, std::less<>> kv_index_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

}  // namespace tern::gguf
