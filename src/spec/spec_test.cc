// Proposers and verification: n-gram lookup, greedy verification, and the
// rejection-sampling rule's exactness (chi-square against the target).
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "spec/ngram_proposer.h"
#include "spec/verify.h"

namespace tern {
namespace {

using Ids = std::vector<int32_t>;

TEST(NgramProposerTest, ProposesWhatFollowedTheLatestMatch) {
  NgramProposer p(1, 3);
  // "a b c" last seen at 0 (the latest match of the longest n).
  EXPECT_EQ(p.Lookup(Ids{1, 2, 3, 4, 5, 1, 2, 3}, 3), (Ids{4, 5, 1}));
  EXPECT_EQ(p.Lookup(Ids{1, 2, 3, 4, 5, 1, 2, 3}, 1), (Ids{4}));
  // Two earlier matches: the latest one wins.
  EXPECT_EQ(p.Lookup(Ids{7, 1, 8, 7, 1, 9, 7, 1}, 2), (Ids{9, 7}));
  // Stops at the end of the sequence.
  EXPECT_EQ(p.Lookup(Ids{5, 6, 5}, 4), (Ids{6, 5}));
  // Falls back to shorter n-grams: only "3" recurs.
  EXPECT_EQ(p.Lookup(Ids{3, 4, 9, 9, 2, 3}, 2), (Ids{4, 9}));
  // Nothing recurs / k = 0 / too short.
  EXPECT_TRUE(p.Lookup(Ids{1, 2, 3, 4}, 3).empty());
  EXPECT_TRUE(p.Lookup(Ids{1, 2, 1}, 0).empty());
  EXPECT_TRUE(p.Lookup(Ids{1}, 3).empty());
  // ngram_min bounds the fallback.
  NgramProposer strict(2, 3);
  EXPECT_TRUE(strict.Lookup(Ids{3, 4, 9, 9, 2, 3}, 2).empty());
  EXPECT_EQ(strict.Lookup(Ids{2, 3, 4, 9, 2, 3}, 2), (Ids{4, 9}));
}

TEST(NgramProposerTest, ProposeFillsEveryRequestAsPointMasses) {
  NgramProposer p(1, 2);
  const Ids a{1, 2, 1}, b{4, 5, 6};
  std::vector<ProposalRequest> reqs(2);
  reqs[0].tokens = a;
  reqs[0].max_proposals = 4;
  reqs[1].tokens = b;
  reqs[1].max_proposals = 4;
  p.Propose(reqs);
  EXPECT_EQ(reqs[0].proposals, (Ids{2, 1}));
  EXPECT_TRUE(reqs[0].q.empty());
  EXPECT_TRUE(reqs[1].proposals.empty());
}

// Logits rows where row i's argmax is best[i].
std::vector<float> Rows(const Ids& best, int32_t n_vocab) {
  std::vector<float> l(best.size() * n_vocab, 0.0f);
  for (size_t i = 0; i < best.size(); ++i) l[i * n_vocab + best[i]] = 5.0f;
  return l;
}

TEST(VerifyTest, GreedyAcceptsWhileArgmaxMatches) {
  SamplingParams g;
  g.temperature = 0;
  Rng rng(1);
  const int32_t V = 8;
  // Target would say 3 4 5 6; proposals 3 4 7: two accepted, then 5.
  VerifyResult v = VerifyProposals(Rows({3, 4, 5, 6}, V), V, Ids{3, 4, 7}, {}, g, {}, rng);
  EXPECT_EQ(v.tokens, (Ids{3, 4, 5}));
  EXPECT_EQ(v.num_accepted, 2);
  // All accepted: the bonus token from the last row.
  v = VerifyProposals(Rows({3, 4, 5, 6}, V), V, Ids{3, 4, 5}, {}, g, {}, rng);
  EXPECT_EQ(v.tokens, (Ids{3, 4, 5, 6}));
  EXPECT_EQ(v.num_accepted, 3);
  // First rejected.
  v = VerifyProposals(Rows({3, 4}, V), V, Ids{1}, {}, g, {}, rng);
  EXPECT_EQ(v.tokens, (Ids{3}));
  EXPECT_EQ(v.num_accepted, 0);
  // No proposals: plain greedy.
  v = VerifyProposals(Rows({2}, V), V, Ids{}, {}, g, {}, rng);
  EXPECT_EQ(v.tokens, (Ids{2}));
}

TEST(VerifyTest, GreedyPenaltiesSeeTheAcceptedProposals) {
  SamplingParams g;
  g.temperature = 0;
  g.presence_penalty = 10;  // a token already produced never wins again
  Rng rng(1);
  const int32_t V = 4;
  std::vector<float> l(2 * V, 0.0f);
  l[0 * V + 1] = 5;  // row 0: 1
  l[1 * V + 1] = 5;  // row 1: 1 again, but penalised after proposal 1 ...
  l[1 * V + 2] = 4;  // ... so 2
  VerifyResult v = VerifyProposals(l, V, Ids{1}, {}, g, {}, rng);
  EXPECT_EQ(v.tokens, (Ids{1, 2}));
}

// ---- rejection sampling: the emitted tokens are distributed as the target's ----

constexpr int32_t kVocab = 6;

// A Markov "model": the next token's logits depend on the previous token.
std::vector<float> TargetLogits(int32_t prev) {
  std::vector<float> l(kVocab);
  for (int32_t x = 0; x < kVocab; ++x) l[x] = 0.7f * (float)((x * 3 + prev * 5) % kVocab) - 0.2f * x;
  return l;
}
// A deliberately bad draft: roughly the target's preferences reversed.
std::vector<float> DraftLogits(int32_t prev) {
  std::vector<float> l = TargetLogits(prev);
  for (float& v : l) v = -0.8f * v + 0.3f;
  return l;
}

// Upper 0.1% point of chi-square with df degrees of freedom (Wilson-Hilferty).
double ChiSquareCritical(int df) {
  const double z = 3.090;  // standard normal, upper 0.1%
  const double a = 2.0 / (9.0 * df);
  return df * std::pow(1 - a + z * std::sqrt(a), 3);
}

struct ChiSquareOutcome {
  double statistic = 0;
  int df = 0;
  double acceptance = 0;
};

// Draws the first two tokens of a sequence starting after token 0, n times,
// speculating k tokens a step (draft proposals, or n-gram-like point masses
// when point_mass), and compares their joint distribution with the target's
// own: p(x1) p(x2 | x1), each after every sampling parameter.
ChiSquareOutcome RunChiSquare(const SamplingParams& params, bool point_mass, int32_t k, int n) {
  std::vector<double> expected(kVocab * kVocab, 0);
  const std::vector<TokenProb> p1 = TargetDistribution(TargetLogits(0), params, {});
  for (const TokenProb& a : p1) {
    const Ids hist{a.token_id};
    for (const TokenProb& b : TargetDistribution(TargetLogits(a.token_id), params, hist)) {
      expected[a.token_id * kVocab + b.token_id] += (double)a.prob * b.prob * n;
    }
  }
  std::vector<int64_t> observed(kVocab * kVocab, 0);
  Rng rng(12345), draft_rng(777);
  int64_t proposed = 0, accepted = 0;
  for (int draw = 0; draw < n; ++draw) {
    Ids emitted;
    int32_t prev = 0;
    while (emitted.size() < 2) {
      Ids proposals;
      std::vector<std::vector<TokenProb>> q;
      Ids hist = emitted;
      int32_t ctx = prev;
      for (int32_t j = 0; j < k; ++j) {
        int32_t d;
        if (point_mass) {
          d = (ctx + 1 + (int32_t)(draft_rng.Next() % 2)) % kVocab;  // a fixed guess, no q
        } else {
          q.push_back(TargetDistribution(DraftLogits(ctx), params, hist));
          d = DrawFrom(q.back(), draft_rng.Uniform());
        }
        proposals.push_back(d);
        hist.push_back(d);
        ctx = d;
      }
      std::vector<float> rows = TargetLogits(prev);
      for (int32_t d : proposals) {
        const std::vector<float> r = TargetLogits(d);
        rows.insert(rows.end(), r.begin(), r.end());
      }
      const VerifyResult v = VerifyProposals(rows, kVocab, proposals, q, params, emitted, rng);
      EXPECT_EQ(v.tokens.size(), (size_t)v.num_accepted + 1);
      proposed += k;
      accepted += v.num_accepted;
      emitted.insert(emitted.end(), v.tokens.begin(), v.tokens.end());
      prev = emitted.back();
    }
    ++observed[emitted[0] * kVocab + emitted[1]];
  }
  ChiSquareOutcome out;
  out.acceptance = (double)accepted / proposed;
  // Cells the target never produces must stay empty; cells expecting fewer
  // than 5 are pooled.
  double pooled_e = 0, pooled_o = 0;
  for (size_t c = 0; c < expected.size(); ++c) {
    if (expected[c] == 0) {
      EXPECT_EQ(observed[c], 0) << "cell " << c << " is outside the target's support";
    } else if (expected[c] < 5) {
      pooled_e += expected[c];
      pooled_o += observed[c];
    } else {
      out.statistic += std::pow(observed[c] - expected[c], 2) / expected[c];
      ++out.df;
    }
  }
  if (pooled_e > 0) {
    out.statistic += std::pow(pooled_o - pooled_e, 2) / pooled_e;
    ++out.df;
  }
  --out.df;  // the counts sum to n
  return out;
}

TEST(VerifyTest, RejectionSamplingMatchesTheTargetDistribution) {
  constexpr int kDraws = 20000;
  struct Case {
    std::string name;
    SamplingParams params;
    bool point_mass;
    int32_t k;
  };
  std::vector<Case> cases;
  SamplingParams plain;
  plain.temperature = 1.0f;
  cases.push_back({"draft, temperature 1, k 3", plain, false, 3});
  SamplingParams filtered;
  filtered.temperature = 0.7f;
  filtered.top_k = 5;
  filtered.top_p = 0.95f;
  filtered.min_p = 0.02f;
  filtered.presence_penalty = 0.4f;
  filtered.repetition_penalty = 1.3f;
  cases.push_back({"draft, every filter and penalty, k 2", filtered, false, 2});
  cases.push_back({"point masses (n-gram), every filter, k 4", filtered, true, 4});
  cases.push_back({"point masses (n-gram), temperature 1, k 1", plain, true, 1});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const ChiSquareOutcome r = RunChiSquare(c.params, c.point_mass, c.k, kDraws);
    ASSERT_GT(r.df, 3);
    EXPECT_LT(r.statistic, ChiSquareCritical(r.df)) << "df " << r.df;
    // The draft is bad: rejections do happen (and acceptances too).
    EXPECT_LT(r.acceptance, 0.8);
    EXPECT_GT(r.acceptance, 0.02);
  }
}

// The same check must fail for a wrong rule, or it proves nothing: accepting
// every proposal gives the draft's distribution, far from the target's.
TEST(VerifyTest, ChiSquareRejectsTheDraftsOwnDistribution) {
  SamplingParams params;
  params.temperature = 1.0f;
  constexpr int kDraws = 20000;
  std::vector<double> expected(kVocab, 0);
  for (const TokenProb& t : TargetDistribution(TargetLogits(0), params, {})) {
    expected[t.token_id] = (double)t.prob * kDraws;
  }
  std::vector<int64_t> observed(kVocab, 0);
  Rng rng(5);
  const std::vector<TokenProb> q = TargetDistribution(DraftLogits(0), params, {});
  for (int i = 0; i < kDraws; ++i) ++observed[DrawFrom(q, rng.Uniform())];
  double stat = 0;
  for (int32_t x = 0; x < kVocab; ++x) stat += std::pow(observed[x] - expected[x], 2) / expected[x];
  EXPECT_GT(stat, ChiSquareCritical(kVocab - 1));
}

}  // namespace
}  // namespace tern
