#include "spec/verify.h"

#include <algorithm>
#include <unordered_map>

#include "base/check.h"

namespace tern {

std::vector<TokenProb> TargetDistribution(std::span<const float> logits,
                                          const SamplingParams& params,
                                          std::span<const int32_t> history) {
  std::vector<float> adjusted(logits.begin(), logits.end());
  ApplyPenalties(adjusted, params, history);
  return FilteredDistribution(adjusted, params);
}

int32_t DrawFrom(std::span<const TokenProb> probs, double u) {
  CHECK(!probs.empty());
  double cum = 0;
  for (const TokenProb& t : probs) {
    cum += t.prob;
    if (u < cum) return t.token_id;
  }
  return probs.back().token_id;  // rounding shortfall
}

namespace {

float ProbOf(std::span<const TokenProb> probs, int32_t token) {
  for (const TokenProb& t : probs) {
    if (t.token_id == token) return t.prob;
  }
  return 0;
}

}  // namespace

VerifyResult VerifyProposals(std::span<const float> logits, int32_t n_vocab,
                             std::span<const int32_t> proposals,
                             std::span<const std::vector<TokenProb>> q,
                             const SamplingParams& params, std::span<const int32_t> history,
                             Rng& rng) {
  const size_t k = proposals.size();
  CHECK_EQ(logits.size(), (k + 1) * (size_t)n_vocab);
  CHECK(q.empty() || q.size() == k);
  VerifyResult out;
  std::vector<int32_t> hist(history.begin(), history.end());
  for (size_t i = 0; i <= k; ++i) {
    std::span<const float> row = logits.subspan(i * n_vocab, n_vocab);
    if (IsGreedy(params)) {
      (void)rng.Uniform();  // one draw per emitted token, as without speculation
      std::vector<float> adjusted(row.begin(), row.end());
      ApplyPenalties(adjusted, params, hist);
      const int32_t t = Argmax(adjusted);
      out.tokens.push_back(t);
      if (i == k || t != proposals[i]) return out;
      ++out.num_accepted;
      hist.push_back(t);
      continue;
    }
    const std::vector<TokenProb> p = TargetDistribution(row, params, hist);
    if (i == k) {  // every proposal accepted: the bonus token from p
      out.tokens.push_back(DrawFrom(p, rng.Uniform()));
      return out;
    }
    const int32_t d = proposals[i];
    const double pd = ProbOf(p, d);
    const double qd = q.empty() ? 1.0 : ProbOf(q[i], d);
    // Accept with min(1, p/q). q(d) > 0 for a token drawn from q; a proposer
    // that claims q(d) = 0 gets treated as a point mass.
    const double ratio = qd > 0 ? pd / qd : pd;
    if (rng.Uniform() < ratio) {
      out.tokens.push_back(d);
      ++out.num_accepted;
      hist.push_back(d);
      continue;
    }
    // Rejected: draw from norm(max(0, p - q)).
    std::vector<TokenProb> residual;
    residual.reserve(p.size());
    double mass = 0;
    if (q.empty()) {
      for (const TokenProb& t : p) {
        if (t.token_id != d && t.prob > 0) residual.push_back(t);
      }
    } else {
      std::unordered_map<int32_t, float> qmap;
      qmap.reserve(q[i].size());
      for (const TokenProb& t : q[i]) qmap[t.token_id] = t.prob;
      for (const TokenProb& t : p) {
        auto it = qmap.find(t.token_id);
        const float r = t.prob - (it == qmap.end() ? 0.0f : it->second);
        if (r > 0) residual.push_back({t.token_id, r});
      }
    }
    for (const TokenProb& t : residual) mass += t.prob;
    const double u = rng.Uniform();
    if (mass <= 0) {
      // p <= q everywhere yet d rejected: only rounding gets here; p itself
      // is the residual's limit.
      out.tokens.push_back(DrawFrom(p, u));
      return out;
    }
    for (TokenProb& t : residual) t.prob = (float)(t.prob / mass);
    out.tokens.push_back(DrawFrom(residual, u));
    return out;
  }
  return out;
}

}  // namespace tern
