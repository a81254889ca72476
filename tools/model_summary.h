// The hyper-parameters of a model as tern runs it (family traits, sliding
// window layout, soft-capping, KV bytes naive and windowed), for `tern
// inspect` and the start-up logs.
#pragma once

#include <cstdint>
#include <string>

#include "gguf/gguf_file.h"
#include "model/model_config.h"

namespace tern {

// Lines "  key:  value\n" describing config (and the tensors of f it looks
// at: fused matrices, tied output).
std::string ModelSummary(const ModelConfig& config, const gguf::GgufFile& f);

// "naive N MiB, windowed M MiB (K of L layers keep only the last W
// positions)" for one sequence of num_tokens at bytes_per_elem, or just the
// naive figure for a model without a window.
std::string KvBytesLine(const ModelConfig& config, int64_t num_tokens, DType kv_dtype);

}  // namespace tern
