#include "spec/step_calibration.h"

#include <algorithm>
#include <chrono>

namespace tern {

std::vector<std::pair<int32_t, double>> MeasureForwardTimes(Model& model, KvStorage& kv,
                                                            int32_t block_size,
                                                            int64_t num_blocks,
                                                            int32_t max_tokens, ThreadPool* pool) {
  std::vector<std::pair<int32_t, double>> table;
  int64_t limit = std::min<int64_t>(max_tokens, num_blocks * block_size);
  // A windowed group of its own (hybrid models): the same table there.
  const bool window = kv.has_window_group();
  if (window) limit = std::min<int64_t>(limit, kv.shape().window_group_blocks * block_size);
  const int32_t n_vocab = model.config().n_vocab;
  std::vector<float> logits;
  for (int32_t n = 1; n <= limit; n *= 2) {
    ForwardBatch batch;
    ForwardSequence seq;
    seq.first_token = 0;
    seq.num_tokens = n;
    seq.context_len = n;
    for (int32_t b = 0; b * block_size < n; ++b) seq.block_table.push_back(b);
    for (int32_t i = 0; i < n; ++i) {
      batch.token_ids.push_back(i % n_vocab);
      batch.positions.push_back(i);
      batch.slots.push_back(i);
      batch.logits_rows.push_back(i);  // verification wants every row's logits
    }
    if (window) {
      seq.window_block_table = seq.block_table;
      batch.window_slots = batch.slots;
    }
    batch.sequences.push_back(std::move(seq));
    logits.resize((size_t)n * n_vocab);
    double best = 1e30;
    // Best of 3, or of fewer when a run takes long (start-up time).
    for (int rep = 0; rep < 3 && (rep == 0 || best < 0.1); ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
      model.Forward(batch, kv, logits.data(), pool);
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    // More tokens never take less time: a faster reading is the machine's noise.
    if (!table.empty()) best = std::max(best, table.back().second);
    table.emplace_back(n, best);
  }
  return table;
}

double InterpolateStepTime(const std::vector<std::pair<int32_t, double>>& t, double n) {
  if (t.empty()) return 0;
  if (t.size() == 1 || n <= t.front().first) {
    return t.front().second * std::max(0.0, n) / std::max(1, t.front().first);
  }
  size_t i = 1;
  while (i + 1 < t.size() && t[i].first < n) ++i;
  const auto& [x0, y0] = t[i - 1];
  const auto& [x1, y1] = t[i];
  return y0 + (y1 - y0) * (n - x0) / (double)(x1 - x0);
}

}  // namespace tern
