#include "gguf/weight_summary.h"

#include <cinttypes>
#include <cstdio>
#include <map>

namespace tern::gguf {

std::string WeightSummary::MainTypeName() const {
  return has_matrices ? DTypeName(main_dtype) : "?";
}

WeightSummary SummarizeWeights(const GgufFile& file) {
  WeightSummary s;
  std::map<uint32_t, int64_t> matrix_bytes;  // by dtype; ordered, so ties pick the lower id
  for (const TensorInfo& t : file.tensors()) {
    s.num_params += t.NumElements();
    s.num_bytes += (int64_t)t.num_bytes;
    if (t.shape.size() >= 2) matrix_bytes[(uint32_t)t.dtype] += (int64_t)t.num_bytes;
  }
  int64_t best = -1;
  for (const auto& [dtype, bytes] : matrix_bytes) {
    if (bytes <= best) continue;
    best = bytes;
    s.main_dtype = (DType)dtype;
    s.has_matrices = true;
  }
  return s;
}

std::string HumanCount(int64_t n) {
  char buf[32];
  if (n >= 1000000000) std::snprintf(buf, sizeof(buf), "%.2fB", n / 1e9);
  else if (n >= 1000000) std::snprintf(buf, sizeof(buf), "%.2fM", n / 1e6);
  else if (n >= 1000) std::snprintf(buf, sizeof(buf), "%.1fK", n / 1e3);
  else std::snprintf(buf, sizeof(buf), "%" PRId64, n);
  return buf;
}

}  // namespace tern::gguf
