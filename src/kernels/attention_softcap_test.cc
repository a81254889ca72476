// Attention with score soft-capping (gemma2): every score s becomes
// cap * tanh(s / cap) before the softmax; checked against a direct
// double-precision computation, with and without a sliding window.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/kernels.h"

namespace tern::kernels {
namespace {

// out[h] for one query at position `pos` over positions [lo, pos].
std::vector<double> Reference(const std::vector<float>& q, const std::vector<float>& k,
                              const std::vector<float>& v, int n_head, int n_head_kv, int hd,
                              int pos, int window, float scale, float cap) {
  std::vector<double> out((size_t)n_head * hd, 0.0);
  const int lo = window > 0 ? std::max(0, pos - window + 1) : 0;
  for (int h = 0; h < n_head; ++h) {
    const int kvh = h / (n_head / n_head_kv);
    std::vector<double> s;
    for (int p = lo; p <= pos; ++p) {
      double dot = 0;
      for (int i = 0; i < hd; ++i) dot += (double)q[h * hd + i] * k[((size_t)p * n_head_kv + kvh) * hd + i];
      dot *= scale;
      s.push_back(cap > 0 ? cap * std::tanh(dot / cap) : dot);
    }
    double mx = -1e300, sum = 0;
    for (double x : s) mx = std::max(mx, x);
    for (double& x : s) sum += (x = std::exp(x - mx));
    for (int p = lo; p <= pos; ++p) {
      for (int i = 0; i < hd; ++i) {
        out[h * hd + i] += s[p - lo] / sum * v[((size_t)p * n_head_kv + kvh) * hd + i];
      }
    }
  }
  return out;
}

TEST(AttentionSoftcapTest, CapsEveryScoreBeforeTheSoftmax) {
  const int n_head = 4, n_head_kv = 2, hd = 16, num_pos = 37;
  std::vector<float> q(n_head * hd), k((size_t)num_pos * n_head_kv * hd), v(k.size());
  // Large scores so the cap bends them: |q.k| * scale reaches ~100.
  for (size_t i = 0; i < q.size(); ++i) q[i] = (float)std::sin(0.7 * i) * 3.0f;
  for (size_t i = 0; i < k.size(); ++i) k[i] = (float)std::cos(0.3 * i + 1.0) * 3.0f;
  for (size_t i = 0; i < v.size(); ++i) v[i] = (float)std::sin(0.11 * i);
  KvPagesView kv;
  kv.k = reinterpret_cast<const uint8_t*>(k.data());
  kv.v = reinterpret_cast<const uint8_t*>(v.data());
  kv.dtype = DType::kF32;
  kv.slot_elems = n_head_kv * hd;
  kv.block_size = 4;
  std::vector<int32_t> table((num_pos + 3) / 4);
  for (size_t b = 0; b < table.size(); ++b) table[b] = (int32_t)b;
  const float scale = 0.25f;
  for (int window : {0, 8}) {
    for (float cap : {0.0f, 50.0f, 5.0f, 1.0f}) {
      const int32_t pos = num_pos - 1;
      std::vector<float> out(n_head * hd);
      const AttentionSeq seq{q.data(), out.data(), &pos, 1, table.data()};
      AttentionBatch(std::span<const AttentionSeq>(&seq, 1), n_head, n_head_kv, hd, scale, window,
                     kv, nullptr, nullptr, cap);
      const std::vector<double> want =
          Reference(q, k, v, n_head, n_head_kv, hd, pos, window, scale, cap);
      for (size_t i = 0; i < out.size(); ++i) {
        EXPECT_NEAR(out[i], want[i], 1e-4) << "window " << window << " cap " << cap << " i " << i;
      }
    }
  }
  // The cap matters at these scores: capped and uncapped outputs differ.
  const int32_t pos = num_pos - 1;
  std::vector<float> a(n_head * hd), b(n_head * hd);
  const AttentionSeq sa{q.data(), a.data(), &pos, 1, table.data()};
  const AttentionSeq sb{q.data(), b.data(), &pos, 1, table.data()};
  AttentionBatch(std::span<const AttentionSeq>(&sa, 1), n_head, n_head_kv, hd, scale, 0, kv,
                 nullptr, nullptr, 0.0f);
  AttentionBatch(std::span<const AttentionSeq>(&sb, 1), n_head, n_head_kv, hd, scale, 0, kv,
                 nullptr, nullptr, 1.0f);
  double diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff = std::max(diff, (double)std::abs(a[i] - b[i]));
  EXPECT_GT(diff, 1e-2);
}

}  // namespace
}  // namespace tern::kernels
