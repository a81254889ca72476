#include "model/exact_logits.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace tern {

void RefineTopLogits(const kernels::WeightView& w, const float* x, int64_t num_rows,
                     float* logits, ThreadPool* pool) {
  if (w.dtype == DType::kF32 || w.dtype == DType::kF16 || w.dtype == DType::kBF16) return;
  if (num_rows <= 0 || w.rows <= 0) return;
  const auto refine = [&](int64_t r0, int64_t r1, int) {
    std::vector<float> row(w.cols);
    std::vector<std::pair<float, int32_t>> top;
    for (int64_t r = r0; r < r1; ++r) {
      float* y = logits + r * w.rows;
      const float* xr = x + r * w.cols;
      const float m = *std::max_element(y, y + w.rows);
      top.clear();
      for (int32_t j = 0; j < (int32_t)w.rows; ++j) {
        if (y[j] >= m - kRefineMargin) top.emplace_back(y[j], j);
      }
      if (top.size() > kRefineMax) {
        std::partial_sort(top.begin(), top.begin() + kRefineMax, top.end(),
                          [](const auto& a, const auto& b) {
                            return a.first != b.first ? a.first > b.first : a.second < b.second;
                          });
        top.resize(kRefineMax);
      }
      for (const auto& [approx, j] : top) {
        kernels::GetRow(w, j, row.data());
        double sum = 0.0;
        for (int64_t k = 0; k < w.cols; ++k) sum += (double)row[k] * xr[k];
        y[j] = (float)sum;
      }
    }
  };
  if (pool != nullptr && num_rows > 1) {
    pool->ParallelFor(num_rows, refine);
  } else {
    refine(0, num_rows, 0);
  }
}

}  // namespace tern
