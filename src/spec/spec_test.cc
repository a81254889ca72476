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

}  // namespace
}  // namespace tern
