#include "sample/sampler.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

namespace tern {
namespace {

bool ByProbDesc(const TokenProb& a, const TokenProb& b) {
  return a.prob != b.prob ? a.prob > b.prob : a.token_id < b.token_id;
}

// Scales probs so they sum to 1.
void Renormalise(std::vector<TokenProb>& c) {
  double sum = 0;
  for (const TokenProb& t : c) sum += t.prob;
  for (TokenProb& t : c) t.prob = (float)(t.prob / sum);
}

}  // namespace

void ApplyPenalties(std::span<float> logits, const SamplingParams& params,
                    std::span<const int32_t> history) {
  const bool repetition = params.repetition_penalty != 1.0f && params.repetition_penalty > 0;
  if (history.empty() ||
      (!repetition && params.presence_penalty == 0 && params.frequency_penalty == 0)) {
    return;
  }
  std::unordered_map<int32_t, int32_t> counts;
  for (int32_t id : history) {
    if (id >= 0 && id < (int32_t)logits.size()) ++counts[id];
  }
  for (const auto& [id, count] : counts) {
    float& l = logits[id];
    if (repetition) l = l > 0 ? l / params.repetition_penalty : l * params.repetition_penalty;
    l -= params.presence_penalty + params.frequency_penalty * (float)count;
  }
}

int32_t Argmax(std::span<const float> logits) {
  int32_t best = 0;
  for (int32_t i = 1; i < (int32_t)logits.size(); ++i) {
    if (logits[i] > logits[best]) best = i;
  }
  return best;
}

std::vector<TokenProb> FilteredDistribution(std::span<const float> logits,
                                            const SamplingParams& params) {
  const int32_t n = (int32_t)logits.size();
  const float inv_t = 1.0f / params.temperature;
  float max_logit = -INFINITY;
  for (float l : logits) max_logit = std::max(max_logit, l);
  // Unnormalised probabilities; the most likely token has 1.
  std::vector<TokenProb> c(n);
  for (int32_t i = 0; i < n; ++i) c[i] = {i, std::exp((logits[i] - max_logit) * inv_t)};
  auto mass = [&]() {
    double z = 0;
    for (const TokenProb& t : c) z += t.prob;
    return z;
  };
  bool sorted = false;
  if (params.top_k > 0 && params.top_k < n) {
    // Only the k best need ordering.
    std::partial_sort(c.begin(), c.begin() + params.top_k, c.end(), ByProbDesc);
    c.resize(params.top_k);
    sorted = true;
  }
  if (params.top_p < 1.0f) {
    const double z = mass();
    // Most vocabularies put the nucleus in a few hundred tokens: order a
    // prefix first, and the whole list only when the prefix falls short.
    auto nucleus = [&](size_t limit) -> size_t {
      double cum = 0;
      for (size_t i = 0; i < limit; ++i) {
        cum += c[i].prob;
        if (cum >= params.top_p * z) return i + 1;
      }
      return 0;
    };
    size_t keep = 0;
    if (!sorted) {
      const size_t m = std::min<size_t>(256, c.size());
      std::partial_sort(c.begin(), c.begin() + m, c.end(), ByProbDesc);
      keep = nucleus(m);
      if (keep == 0 && m < c.size()) std::sort(c.begin() + m, c.end(), ByProbDesc);
      sorted = true;
    }
    if (keep == 0) keep = nucleus(c.size());
    c.resize(std::max<size_t>(keep, 1));
  }
  if (params.min_p > 0.0f) {
    float p_max = 0;
    for (const TokenProb& t : c) p_max = std::max(p_max, t.prob);
    const float threshold = params.min_p * p_max;
    std::erase_if(c, [&](const TokenProb& t) { return t.prob < threshold; });
  }
  if (!sorted && params.min_p > 0.0f) std::sort(c.begin(), c.end(), ByProbDesc);
  // With no filter at all the survivors stay in id order (no sort needed).
  Renormalise(c);
  return c;
}

void ComputeLogprobs(std::span<const float> logits, int32_t token_id, int32_t n,
                     SampledToken* out) {
  float max_logit = -INFINITY;
  for (float l : logits) max_logit = std::max(max_logit, l);
  double sum = 0;
  for (float l : logits) sum += std::exp((double)l - max_logit);
  const double log_z = max_logit + std::log(sum);
  out->logprob = (float)(logits[token_id] - log_z);
  out->top.clear();
  if (n <= 0) return;
  std::vector<int32_t> ids(logits.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = (int32_t)i;
  const size_t k = std::min<size_t>(n, ids.size());
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int32_t a, int32_t b) {
    return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
  });
  for (size_t i = 0; i < k; ++i) {
    out->top.push_back({ids[i], (float)(logits[ids[i]] - log_z)});
  }
}

SampledToken SampleToken(std::span<const float> logits, const SamplingParams& params,
                         std::span<const int32_t> history, double u) {
  std::vector<float> adjusted(logits.begin(), logits.end());
  ApplyPenalties(adjusted, params, history);
  SampledToken result;
  if (params.temperature <= 0.0f || params.top_k == 1) {
    result.token_id = Argmax(adjusted);
  } else {
    const std::vector<TokenProb> c = FilteredDistribution(adjusted, params);
    // Inverse CDF; the last survivor catches any rounding shortfall.
    double cum = 0;
    result.token_id = c.back().token_id;
    for (const TokenProb& t : c) {
      cum += t.prob;
      if (u < cum) {
        result.token_id = t.token_id;
        break;
      }
    }
  }
  if (params.logprobs >= 0) ComputeLogprobs(logits, result.token_id, params.logprobs, &result);
  return result;
}

}  // namespace tern
