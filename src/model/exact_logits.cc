#include "model/exact_logits.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

namespace tern {
namespace {

// The value std::max_element finds in y[0, n) (the first largest), in one
// pass that the compiler vectorizes: `a > b ? a : b` is maxps's own rule.
// Rows that hold a NaN take std::max_element, whose answer there depends on
// where the NaN lies.
float RowMax(const float* y, int64_t n) {
  constexpr int kLanes = 16;
  float m[kLanes];
  bool nan = false;
  int64_t i = 0;
  for (int k = 0; k < kLanes; ++k) m[k] = y[0];
  for (; i + kLanes <= n; i += kLanes) {
    for (int k = 0; k < kLanes; ++k) {
      const float v = y[i + k];
      nan |= v != v;
      m[k] = v > m[k] ? v : m[k];
    }
  }
  for (; i < n; ++i) {
    nan |= y[i] != y[i];
    m[0] = y[i] > m[0] ? y[i] : m[0];
  }
  if (nan) return *std::max_element(y, y + n);
  float best = m[0];
  for (int k = 1; k < kLanes; ++k) best = m[k] > best ? m[k] : best;
  return best;
}

// Appends (y[j], j) for every j with y[j] >= threshold, in index order.
// Blocks of 64 are tested whole first (a compare the compiler vectorizes):
// almost none of a row's logits are near its largest.
void Candidates(const float* y, int64_t n, float threshold,
                std::vector<std::pair<float, int32_t>>* top) {
  constexpr int64_t kBlock = 64;
  int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    bool any = false;
    for (int64_t k = 0; k < kBlock; ++k) any |= y[i + k] >= threshold;
    if (!any) continue;
    for (int64_t k = i; k < i + kBlock; ++k) {
      if (y[k] >= threshold) top->emplace_back(y[k], (int32_t)k);
    }
  }
  for (; i < n; ++i) {
    if (y[i] >= threshold) top->emplace_back(y[i], (int32_t)i);
  }
}

// Each row's dot product with x, summed in double in column order. Rows
// are taken kRows at a time so their sums' add chains overlap (one chain
// alone waits on the add's latency every column); each row's sum is the
// same as alone.
void ExactDots(const kernels::WeightView& w, const float* x, const int32_t* ids, int64_t n,
               double* out) {
  constexpr int kRows = 4;
  const int64_t cols = w.cols;
  std::vector<float> rows((size_t)kRows * cols);
  for (int64_t i0 = 0; i0 < n; i0 += kRows) {
    const int nr = (int)std::min<int64_t>(kRows, n - i0);
    for (int r = 0; r < nr; ++r) kernels::GetRow(w, ids[i0 + r], &rows[(size_t)r * cols]);
    if (nr == kRows) {
      double s[kRows] = {};
      for (int64_t k = 0; k < cols; ++k) {
        for (int r = 0; r < kRows; ++r) s[r] += (double)rows[(size_t)r * cols + k] * x[k];
      }
      for (int r = 0; r < kRows; ++r) out[i0 + r] = s[r];
    } else {
      for (int r = 0; r < nr; ++r) {
        double s = 0.0;
        for (int64_t k = 0; k < cols; ++k) s += (double)rows[(size_t)r * cols + k] * x[k];
        out[i0 + r] = s;
      }
    }
  }
}

// A vocabulary this large has its one row's scans split among the threads
// (llama-3.2-1b's 128256 logits: the row's two scans were most of its
// refine, ~0.4% of the decode's CPU samples, on the caller alone).
constexpr int64_t kSplitScanRows = 16384;

// The top of kRefineMax then ties by id, as std::partial_sort orders them.
void KeepTop(std::vector<std::pair<float, int32_t>>* top) {
  if (top->size() <= kRefineMax) return;
  std::partial_sort(top->begin(), top->begin() + kRefineMax, top->end(),
                    [](const auto& a, const auto& b) {
                      return a.first != b.first ? a.first > b.first : a.second < b.second;
                    });
  top->resize(kRefineMax);
}

// One row's candidates as the serial scans find them, the row's n values
// split among the pool's threads: each part's largest, then each part's
// candidates against the largest of all, in index order.
void PickOneRowSplit(const float* y, int64_t n, ThreadPool* pool, std::vector<int32_t>* ids) {
  const int parts = pool->num_threads();
  std::vector<float> part_max(parts, -INFINITY);  // a part left empty adds nothing
  std::vector<std::vector<std::pair<float, int32_t>>> part_top(parts);
  constexpr int64_t kGrain = 1024;
  pool->ParallelFor(n, [&](int64_t i0, int64_t i1, int slot) {
    part_max[slot] = RowMax(y + i0, i1 - i0);
  }, kGrain);
  bool nan = false;
  float m = -INFINITY;
  for (const float p : part_max) {
    nan |= p != p;
    m = p > m ? p : m;
  }
  // A NaN: the serial scan's answer depends on where it lies.
  if (nan) m = *std::max_element(y, y + n);
  const float threshold = m - kRefineMargin;
  pool->ParallelFor(n, [&](int64_t i0, int64_t i1, int slot) {
    std::vector<std::pair<float, int32_t>> found;
    Candidates(y + i0, i1 - i0, threshold, &found);
    for (auto& c : found) c.second += (int32_t)i0;
    part_top[slot] = std::move(found);
  }, kGrain);
  std::vector<std::pair<float, int32_t>> top;
  for (const auto& t : part_top) top.insert(top.end(), t.begin(), t.end());
  KeepTop(&top);
  for (const auto& [approx, j] : top) ids->push_back(j);
}

}  // namespace

void RefineTopLogits(const kernels::WeightView& w, const float* x, int64_t num_rows,
                     float* logits, ThreadPool* pool) {
  if (w.dtype == DType::kF32 || w.dtype == DType::kF16 || w.dtype == DType::kBF16) return;
  if (num_rows <= 0 || w.rows <= 0) return;
  // Row r's refined logits: its candidates, kept to the kRefineMax largest.
  std::vector<std::vector<int32_t>> ids((size_t)num_rows);
  const auto pick = [&](int64_t r0, int64_t r1, int) {
    std::vector<std::pair<float, int32_t>> top;
    for (int64_t r = r0; r < r1; ++r) {
      const float* y = logits + r * w.rows;
      const float m = RowMax(y, w.rows);
      top.clear();
      Candidates(y, w.rows, m - kRefineMargin, &top);
      KeepTop(&top);
      for (const auto& [approx, j] : top) ids[r].push_back(j);
    }
  };
  // The candidates of all rows, as one list that the threads split.
  std::vector<int64_t> first(num_rows + 1, 0);
  std::vector<int32_t> all;
  std::vector<double> exact;
  const auto dots = [&](int64_t i0, int64_t i1, int) {
    int64_t r = std::upper_bound(first.begin(), first.end(), i0) - first.begin() - 1;
    for (int64_t i = i0; i < i1;) {
      while (first[r + 1] <= i) ++r;
      const int64_t end = std::min(i1, first[r + 1]);
      ExactDots(w, x + r * w.cols, &all[i], end - i, &exact[i]);
      i = end;
    }
  };
  const bool parallel = pool != nullptr && pool->num_threads() > 1;
  if (parallel && num_rows > 1) {
    pool->ParallelFor(num_rows, pick);
  } else if (parallel && w.rows >= kSplitScanRows) {
    PickOneRowSplit(logits, w.rows, pool, &ids[0]);
  } else {
    pick(0, num_rows, 0);
  }
  for (int64_t r = 0; r < num_rows; ++r) first[r + 1] = first[r] + (int64_t)ids[r].size();
  all.reserve(first[num_rows]);
  for (const auto& v : ids) all.insert(all.end(), v.begin(), v.end());
  exact.resize(all.size());
  // A decode step's one row has up to kRefineMax candidates: the threads
  // split them. The refine had run on the caller alone, rows one by one;
  // per decode token (rdtsc around the call, 2 threads, EPYC Zen 4, two
  // runs each): tinyllama-shaped Q4_0 250-259k -> 155-180k cycles (0.6% of
  // the token), llama-3.2-1b-shaped Q4_0 542-553k -> 300-332k (1.0-1.6%).
  if (parallel && all.size() > 1) pool->ParallelFor((int64_t)all.size(), dots);
  else dots(0, (int64_t)all.size(), 0);
  for (int64_t r = 0; r < num_rows; ++r) {
    float* y = logits + r * w.rows;
    for (int64_t i = first[r]; i < first[r + 1]; ++i) y[all[i]] = (float)exact[i];
  }
}

}  // namespace tern
