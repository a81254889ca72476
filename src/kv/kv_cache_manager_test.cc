#include "kv/kv_cache_manager.h"

#include <gtest/gtest.h>

#include <vector>

#include "kv/kv_test_util.h"

namespace tern {
namespace {

using namespace kv_test;

TEST(BlockHashTest, ChainsOverFullBlocksOnly) {
  const Ids tokens = Range(0, 10);
  std::vector<BlockHash> h = Hashes(tokens, 4);
  ASSERT_EQ(h.size(), 2u);
  EXPECT_NE(h[0], h[1]);
  // Same second block after a different first block: different hash.
  Ids other = tokens;
  other[0] = 99;
  EXPECT_NE(Hashes(other, 4)[1], h[1]);
  EXPECT_NE(Hashes(tokens, 4, "tenant")[0], h[0]);
  // Extending adds only the new full blocks.
  Ids longer = Range(0, 12);
  ExtendBlockHashes(longer, 4, "", &h);
  ASSERT_EQ(h.size(), 3u);
  EXPECT_EQ(h, Hashes(longer, 4));
}

TEST(KvCacheManagerTest, AllocatesBlocksAsTokensGrow) {
  KvCacheManager m(4, 4, false);
  auto a = m.AllocateSlots("a", 0, 5);
  m.CheckInvariants();
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(*a, (Ids{0, 1}));
  EXPECT_EQ(Table(m, "a"), (Ids{0, 1}));
  // Tokens 5..7 fit in block 1: nothing new.
  a = m.AllocateSlots("a", 5, 3);
  m.CheckInvariants();
  ASSERT_TRUE(a.has_value());
  EXPECT_TRUE(a->empty());
  a = m.AllocateSlots("a", 8, 1);
  m.CheckInvariants();
  EXPECT_EQ(*a, (Ids{2}));
  EXPECT_EQ(m.num_free_blocks(), 1);
  EXPECT_DOUBLE_EQ(m.Usage(), 0.75);
}

TEST(KvCacheManagerTest, DoesNotFitIsNulloptAndChangesNothing) {
  KvCacheManager m(3, 4, false);
  ASSERT_TRUE(m.AllocateSlots("a", 0, 8).has_value());
  EXPECT_FALSE(m.AllocateSlots("b", 0, 5).has_value());
  m.CheckInvariants();
  EXPECT_TRUE(Table(m, "b").empty());
  EXPECT_EQ(m.num_free_blocks(), 1);
  EXPECT_EQ(m.pool().FreeQueue(), (Ids{2}));
}

TEST(KvCacheManagerTest, FreeReturnsBlocksTailFirst) {
  KvCacheManager m(5, 2, false);
  ASSERT_TRUE(m.AllocateSlots("a", 0, 6).has_value());  // 0 1 2
  m.Free("a");
  m.CheckInvariants();
  EXPECT_EQ(m.pool().FreeQueue(), (Ids{3, 4, 2, 1, 0}));
  EXPECT_EQ(m.num_requests(), 0);
  m.Free("a");  // unknown: no-op
  m.CheckInvariants();
}

TEST(KvCacheManagerTest, TruncateToReturnsBlocksBeyondTheKeptTokens) {
  KvCacheManager m(6, 4, true);
  const Ids tokens = Range(7, 6);
  const auto hashes = Hashes(tokens, 4);
  // 6 accepted tokens + 8 speculative slots: blocks 0 1 2 3.
  ASSERT_TRUE(m.AllocateSlots("a", 0, 14).has_value());
  EXPECT_EQ(Table(m, "a"), (Ids{0, 1, 2, 3}));
  m.CommitFullBlocks("a", hashes, tokens, 6, "");
  // Two proposals accepted: 8 computed tokens keep blocks 0 1.
  EXPECT_EQ(m.TruncateTo("a", 8), 2);
  m.CheckInvariants();
  EXPECT_EQ(Table(m, "a"), (Ids{0, 1}));
  EXPECT_EQ(m.num_free_blocks(), 4);
  EXPECT_TRUE(m.pool().is_cached(0));
  EXPECT_FALSE(m.pool().is_cached(1));  // never committed: it held rejected KV
  // Nothing to return: no-op; unknown ids too.
  EXPECT_EQ(m.TruncateTo("a", 8), 0);
  EXPECT_EQ(m.TruncateTo("b", 0), 0);
  // Growing again after a truncation reuses the pool.
  ASSERT_TRUE(m.AllocateSlots("a", 8, 9).has_value());
  EXPECT_EQ(Table(m, "a").size(), 5u);
  m.CheckInvariants();
}

TEST(KvCacheManagerTest, PrefixHitSharesComputedFullBlocks) {
  KvCacheManager m(8, 4, true);
  const Ids prompt = Range(100, 10);  // 2 full blocks + 2
  const auto hashes = Hashes(prompt, 4);
  ASSERT_TRUE(m.AllocateSlots("a", 0, 10).has_value());  // 0 1 2
  // Nothing is cached before its KV is computed.
  EXPECT_EQ(m.FindCachedPrefix(hashes, prompt, "").num_tokens, 0);
  m.CommitFullBlocks("a", hashes, prompt, 10, "");
  m.CheckInvariants();
  EXPECT_TRUE(m.pool().is_cached(0));
  EXPECT_TRUE(m.pool().is_cached(1));
  EXPECT_FALSE(m.pool().is_cached(2));

  PrefixHit hit = m.FindCachedPrefix(hashes, prompt, "");
  EXPECT_EQ(hit.num_tokens, 8);
  EXPECT_EQ(hit.block_ids, (Ids{0, 1}));
  auto b = m.AllocateSlots("b", 8, 2, hit);
  m.CheckInvariants();
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(*b, (Ids{3}));
  EXPECT_EQ(Table(m, "b"), (Ids{0, 1, 3}));
  EXPECT_EQ(m.pool().ref_count(0), 2);
  EXPECT_EQ(m.pool().ref_count(3), 1);
}

TEST(KvCacheManagerTest, FullHitStillRecomputesTheLastToken) {
  KvCacheManager m(8, 4, true);
  const Ids prompt = Range(0, 8);  // exactly 2 blocks
  const auto hashes = Hashes(prompt, 4);
  ASSERT_TRUE(m.AllocateSlots("a", 0, 8).has_value());
  m.CommitFullBlocks("a", hashes, prompt, 8, "");
  PrefixHit hit = m.FindCachedPrefix(hashes, prompt, "");
  EXPECT_EQ(hit.num_tokens, 4);  // capped at 7 tokens -> 1 block
  EXPECT_EQ(hit.block_ids, (Ids{0}));
}

TEST(KvCacheManagerTest, SaltIsolatesCacheEntries) {
  KvCacheManager m(8, 4, true);
  const Ids prompt = Range(0, 9);
  ASSERT_TRUE(m.AllocateSlots("a", 0, 9).has_value());
  m.CommitFullBlocks("a", Hashes(prompt, 4, "alice"), prompt, 9, "alice");
  EXPECT_EQ(m.FindCachedPrefix(Hashes(prompt, 4, "alice"), prompt, "alice").num_tokens, 8);
  EXPECT_EQ(m.FindCachedPrefix(Hashes(prompt, 4, "bob"), prompt, "bob").num_tokens, 0);
  EXPECT_EQ(m.FindCachedPrefix(Hashes(prompt, 4), prompt, "").num_tokens, 0);
}

TEST(KvCacheManagerTest, HashCollisionNeverHandsOutWrongBlocks) {
  KvCacheManager m(8, 4, true);
  const Ids prompt = Range(0, 9);
  const Ids other = Range(50, 9);
  const auto hashes = Hashes(prompt, 4);
  ASSERT_TRUE(m.AllocateSlots("a", 0, 9).has_value());
  m.CommitFullBlocks("a", hashes, prompt, 9, "");
  // Forge a collision: other's tokens presented with prompt's hashes.
  EXPECT_EQ(m.FindCachedPrefix(hashes, other, "").num_tokens, 0);
  // Same first block, different second block under a forged equal hash.
  Ids half = prompt;
  half[5] = 77;
  PrefixHit hit = m.FindCachedPrefix(hashes, half, "");
  EXPECT_EQ(hit.block_ids, (Ids{0}));
  // A colliding request cannot index its block under the taken hash, and
  // stops indexing its chain.
  ASSERT_TRUE(m.AllocateSlots("b", 0, 9).has_value());
  m.CommitFullBlocks("b", hashes, other, 9, "");
  m.CheckInvariants();
  for (int32_t b : Table(m, "b")) EXPECT_FALSE(m.pool().is_cached(b));
}

TEST(KvCacheManagerTest, EvictsLeastRecentlyFreedFirstAndTailBeforeHead) {
  KvCacheManager m(6, 2, true);
  const Ids pa = Range(0, 5);    // blocks 0 1 (full) 2
  const Ids pb = Range(100, 5);  // blocks 3 4 (full) 5
  ASSERT_TRUE(m.AllocateSlots("a", 0, 5).has_value());
  ASSERT_TRUE(m.AllocateSlots("b", 0, 5).has_value());
  m.CommitFullBlocks("a", Hashes(pa, 2), pa, 5, "");
  m.CommitFullBlocks("b", Hashes(pb, 2), pb, 5, "");
  m.Free("a");
  m.Free("b");
  m.CheckInvariants();
  EXPECT_EQ(m.pool().FreeQueue(), (Ids{2, 1, 0, 5, 4, 3}));
  // A new request needing 2 blocks evicts a's tail (1) after the uncached 2.
  ASSERT_TRUE(m.AllocateSlots("c", 0, 4).has_value());
  m.CheckInvariants();
  EXPECT_EQ(Table(m, "c"), (Ids{2, 1}));
  EXPECT_FALSE(m.pool().is_cached(1));
  EXPECT_TRUE(m.pool().is_cached(0));
  // a's first block is still a hit; its second is gone.
  EXPECT_EQ(m.FindCachedPrefix(Hashes(pa, 2), pa, "").block_ids, (Ids{0}));
  EXPECT_EQ(m.FindCachedPrefix(Hashes(pb, 2), pb, "").block_ids, (Ids{3, 4}));
}

TEST(KvCacheManagerTest, HitOnFreeBlocksCountsAgainstCapacity) {
  KvCacheManager m(3, 2, true);
  const Ids p = Range(0, 5);  // 2 full blocks + 1
  ASSERT_TRUE(m.AllocateSlots("a", 0, 5).has_value());
  m.CommitFullBlocks("a", Hashes(p, 2), p, 5, "");
  m.Free("a");
  PrefixHit hit = m.FindCachedPrefix(Hashes(p, 2), p, "");
  ASSERT_EQ(hit.block_ids, (Ids{0, 1}));
  // Needs the 2 hit blocks + 2 more = 4 > 3 free: does not fit.
  EXPECT_FALSE(m.AllocateSlots("b", 4, 4, hit).has_value());
  m.CheckInvariants();
  EXPECT_EQ(m.num_free_blocks(), 3);
  auto ok = m.AllocateSlots("b", 4, 1, hit);
  ASSERT_TRUE(ok.has_value());
  EXPECT_EQ(*ok, (Ids{2}));
  m.CheckInvariants();
  EXPECT_EQ(Table(m, "b"), (Ids{0, 1, 2}));
}

TEST(KvCacheManagerTest, DuplicateComputationChainsThroughTheCachedCopy) {
  KvCacheManager m(8, 2, true);
  const Ids p = Range(0, 6);
  const auto h = Hashes(p, 2);
  // Both computed the same prompt before either committed.
  ASSERT_TRUE(m.AllocateSlots("a", 0, 6).has_value());  // 0 1 2
  ASSERT_TRUE(m.AllocateSlots("b", 0, 6).has_value());  // 3 4 5
  m.CommitFullBlocks("a", h, p, 4, "");  // indexes 0 1
  m.CommitFullBlocks("b", h, p, 6, "");  // chains via 0 1, indexes 5
  m.CheckInvariants();
  EXPECT_FALSE(m.pool().is_cached(3));
  EXPECT_TRUE(m.pool().is_cached(5));
  Ids longer = Range(0, 7);
  auto h7 = Hashes(longer, 2);
  EXPECT_EQ(m.FindCachedPrefix(h7, longer, "").block_ids, (Ids{0, 1, 5}));
}

}  // namespace
}  // namespace tern
