// DType: the tensor element formats of GGUF, with their numeric ids as stored
// in the file (ggml_type) and their block traits. A row of n elements of a
// block format takes (n / block_size) * block_bytes bytes; n must be a
// multiple of block_size.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tern {

enum class DType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ3_XXS = 18,
  kIQ1_S = 19,
  kIQ4_NL = 20,
  kIQ3_S = 21,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kIQ1_M = 29,
  kBF16 = 30,
  kTQ1_0 = 34,
  kTQ2_0 = 35,
  kMXFP4 = 39,
};

struct DTypeTraits {
  const char* name;      // as GGUF tools print it: "F32", "Q4_K", ...
  int64_t block_size;    // elements per block
  int64_t block_bytes;   // bytes per block
};

// Traits of a known dtype, or nullopt for an id GGUF does not define.
std::optional<DTypeTraits> GetDTypeTraits(uint32_t id);
const DTypeTraits& Traits(DType t);  // t must be known
inline const char* DTypeName(DType t) { return Traits(t).name; }
inline int64_t BlockSize(DType t) { return Traits(t).block_size; }
inline int64_t BlockBytes(DType t) { return Traits(t).block_bytes; }
// Bytes of a row of n elements; n must be a multiple of the block size.
inline int64_t RowBytes(DType t, int64_t n) {
  return n / BlockSize(t) * BlockBytes(t);
}
// Parses "q4_0", "Q4_K", "f16", "bf16" (case-insensitive).
std::optional<DType> ParseDType(std::string_view name);

}  // namespace tern
