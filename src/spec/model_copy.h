// Model files for speculative decoding's tests and benchmarks:
//
//   WritePerturbedCopy: the same model with noise on its weights, a draft
//     whose proposals the original accepts often but not always.
//
// Thread rules: pure functions of their inputs (they write one file).
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "gguf/gguf_file.h"

namespace tern {

// Copies src to out (metadata and tensors), adding noise x rms(w) x N(0, 1)
// to every element of each F32 weight matrix (2-D tensors; norms and other
// dtypes are copied unchanged). noise 0 writes an identical copy.
Status WritePerturbedCopy(const gguf::GgufFile& src, const std::string& out, double noise,
                          uint64_t seed);

}  // namespace tern
