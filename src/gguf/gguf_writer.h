// GgufWriter: builds a GGUF v3 file (metadata, tensor directory, aligned data)
// and writes it. A written file re-opens with GgufFile to the same metadata and
// tensor bytes.
//
// Keys keep their first-set order; tensors are laid out in AddTensor order,
// each padded to the alignment. Errors: InvalidArgument (inconsistent tensor,
// mixed-type array, bad general.alignment), Unavailable (I/O). Not
// thread-safe; one writer per thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_value.h"
#include "tensor/dtype.h"

namespace tern::gguf {

class GgufWriter {
 public:
  GgufWriter() = default;
  // Sets (or replaces, keeping its position) a metadata key.
  void SetValue(const std::string& key, Value value);
  // Copies all metadata of another file (e.g. to keep the tokenizer).
  void CopyMetadataFrom(const GgufFile& file);
  // Adds a tensor; data holds exactly the bytes of dtype and shape (copied).
  Status AddTensor(const std::string& name, DType dtype,
                   const std::vector<int64_t>& shape, const void* data,
                   uint64_t num_bytes);
  // Writes the file atomically (temp file + rename). Alignment from
  // general.alignment if set, else 32.
  Status WriteFile(const std::string& path) const;

 private:
  struct PendingTensor {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> data;
  };
  std::vector<std::pair<std::string, Value>> kv_;
  std::vector<PendingTensor> tensors_;
};

}  // namespace tern::gguf
