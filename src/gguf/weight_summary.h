// WeightSummary: what a model file's tensors add up to, for start-up lines
// and reports (`tern serve`, `tern bench`, `tern inspect`): the weight type
// (the dtype holding most bytes of the 2-D weight matrices, e.g. Q4_K for a
// "Q4_K_M" file whose norms are F32), the parameter count and the tensor
// bytes. Pure; safe from any thread.
#pragma once

#include <cstdint>
#include <string>

#include "gguf/gguf_file.h"
#include "tensor/dtype.h"

namespace tern::gguf {

struct WeightSummary {
  bool has_matrices = false;       // false: no 2-D tensor; main_dtype means nothing
  DType main_dtype = DType::kF32;  // most bytes among 2-D tensors
  int64_t num_params = 0;          // elements of every tensor
  int64_t num_bytes = 0;           // bytes of every tensor

  // "Q4_K", or "?" without 2-D tensors.
  std::string MainTypeName() const;
};

WeightSummary SummarizeWeights(const GgufFile& file);

// 1234 -> "1.2K", 6738415616 -> "6.74B": a count for people to read.
std::string HumanCount(int64_t n);

}  // namespace tern::gguf
