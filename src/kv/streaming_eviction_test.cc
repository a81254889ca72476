// KvCacheManager with streaming eviction: whole blocks after the sinks are
// dropped when a request would pass max_tokens positions, the blocks after
// them are re-rotated (KvBlockMove), shared ones through a copy, and the
// prefix cache never serves a re-rotated block.
#include <gtest/gtest.h>

#include <vector>

#include "kv/kv_cache_manager.h"
#include "kv/kv_test_util.h"

namespace tern {
namespace {

using namespace kv_test;

// Request "a" prefills `prompt` in chunks of the given sizes and commits its
// full blocks (of 4) to the prefix cache; returns the hit a request with the
// same prompt gets.
PrefixHit PrefillCommitAndFind(KvCacheManager& m, const Ids& prompt,
                               std::initializer_list<int32_t> chunks) {
  int32_t pos = 0;
  for (int32_t n : chunks) {
    EXPECT_TRUE(m.AllocateSlots("a", pos, n)) << pos;
    pos += n;
  }
  const std::vector<BlockHash> h = Hashes(prompt, 4);
  m.CommitFullBlocks("a", h, prompt, pos, "");
  return m.FindCachedPrefix(h, prompt, "");
}

TEST(StreamingEvictionTest, DropsBlocksAfterTheSinksDownToTheWindowAndReRotatesTheRest) {
  KvCacheManager m(/*num_blocks=*/16, /*block_size=*/4, /*enable_prefix_caching=*/false);
  m.SetStreamingEviction(/*sink_tokens=*/4, /*window_tokens=*/6, /*max_tokens=*/16);
  EXPECT_EQ(m.MaxStreamingChunk(), 16 - 4 - 6 - 4 + 1);
  ASSERT_TRUE(m.AllocateSlots("a", 0, 16));  // positions 0..15: blocks s, a, b, c
  const Ids t = Table(m, "a");
  ASSERT_EQ(t.size(), 4u);
  EXPECT_TRUE(m.TakeKvMoves().empty());
  // Token 16 does not fit: 12 tokens after the sink, window 6 -> drop
  // floor((12 - 6) / 4) = 1 block... and room needs 1: one block (a) goes,
  // b and c move down 4 positions.
  ASSERT_TRUE(m.AllocateSlots("a", 16, 1));
  EXPECT_EQ(m.EvictedTokens("a"), 4);
  const Ids after = Table(m, "a");
  ASSERT_EQ(after.size(), 4u);  // s, b, c + a new block for KV position 12
  EXPECT_EQ(after[0], t[0]);
  EXPECT_EQ(after[1], t[2]);
  EXPECT_EQ(after[2], t[3]);
  const std::vector<KvBlockMove> moves = m.TakeKvMoves();
  ASSERT_EQ(moves.size(), 2u);
  EXPECT_EQ(moves[0].src_block, t[2]);
  EXPECT_EQ(moves[0].dst_block, t[2]);
  EXPECT_EQ(moves[0].delta, -4);
  EXPECT_EQ(moves[1].src_block, t[3]);
  EXPECT_EQ(moves[1].delta, -4);
  EXPECT_TRUE(m.TakeKvMoves().empty());  // taken once
  EXPECT_EQ(m.num_evicted_tokens(), 4u);
  m.CheckInvariants();
}

TEST(StreamingEvictionTest, ALongSequenceHoldsAtMostMaxTokensOfBlocks) {
  KvCacheManager m(64, 4, false);
  m.SetStreamingEviction(4, 8, 24);
  ASSERT_TRUE(m.AllocateSlots("a", 0, 5));
  int32_t max_held = 0;
  size_t num_moves = 0;
  for (int32_t n = 5; n < 2000; ++n) {  // decode one token at a time
    ASSERT_TRUE(m.AllocateSlots("a", n, 1)) << n;
    for (const KvBlockMove& mv : m.TakeKvMoves()) {
      EXPECT_EQ(mv.delta, -12);  // from 24 positions down to the sink + 12 (>= window 8)
      ++num_moves;
    }
    const int32_t kv_len = n + 1 - m.EvictedTokens("a");
    ASSERT_LE(kv_len, 24) << n;
    ASSERT_EQ((int32_t)Table(m, "a").size(), (kv_len + 3) / 4) << n;
    max_held = std::max(max_held, 64 - m.num_free_blocks());
    if (n % 97 == 0) m.CheckInvariants();
  }
  EXPECT_LE(max_held, 6);  // 24 positions
  EXPECT_EQ(m.num_evicted_tokens(), (uint64_t)m.EvictedTokens("a"));
  EXPECT_GT(m.EvictedTokens("a"), 1900);
  EXPECT_GT(num_moves, 0u);
  FreeAllAndCheck(m, {"a"}, 64);
}

TEST(StreamingEvictionTest, FreeDropsTheRequestsPendingMoves) {
  KvCacheManager m(16, 4, false);
  m.SetStreamingEviction(4, 6, 16);
  ASSERT_TRUE(m.AllocateSlots("a", 0, 16));
  ASSERT_TRUE(m.AllocateSlots("b", 0, 3));
  ASSERT_TRUE(m.AllocateSlots("a", 16, 1));
  m.Free("a");
  EXPECT_TRUE(m.TakeKvMoves().empty());
  m.CheckInvariants();
}

TEST(StreamingEvictionTest, SharedBlocksAreCopiedAndReRotatedBlocksLeaveThePrefixCache) {
  KvCacheManager m(32, 4, true);
  m.SetStreamingEviction(4, 8, 16);
  // b shares a's cached prefix, capped at sinks + window = 12 tokens: 3 blocks.
  const PrefixHit hit = PrefillCommitAndFind(m, Range(100, 16), {5, 5, 6});
  const Ids a = Table(m, "a");
  EXPECT_EQ(m.pool().num_cached_blocks(), 4);
  ASSERT_EQ(hit.num_tokens, 12);
  ASSERT_TRUE(m.AllocateSlots("b", 12, 4, hit));
  // a evicts one block (down to the window): block 1 dropped (still b's,
  // and cached: its KV is exact for its prefix); block 2 is shared with b
  // -> a rotates a copy; block 3 in place, and it leaves the cache.
  ASSERT_TRUE(m.AllocateSlots("a", 16, 1));
  EXPECT_EQ(m.EvictedTokens("a"), 4);
  const Ids a2 = Table(m, "a");
  ASSERT_EQ(a2.size(), 4u);
  EXPECT_EQ(a2[0], a[0]);
  EXPECT_NE(a2[1], a[2]);  // the copy
  EXPECT_EQ(a2[2], a[3]);
  const std::vector<KvBlockMove> moves = m.TakeKvMoves();
  ASSERT_EQ(moves.size(), 2u);
  EXPECT_EQ(moves[0].src_block, a[2]);
  EXPECT_EQ(moves[0].dst_block, a2[1]);
  EXPECT_EQ(moves[1].src_block, a[3]);
  EXPECT_EQ(moves[1].dst_block, a[3]);
  EXPECT_FALSE(m.pool().is_cached(a[3]));
  EXPECT_TRUE(m.pool().is_cached(a[1]));
  EXPECT_TRUE(m.pool().is_cached(a[2]));  // b's, unchanged
  EXPECT_FALSE(m.pool().is_cached(a2[1]));
  EXPECT_EQ(Table(m, "b")[2], a[2]);
  // a indexes nothing more.
  const Ids more = Range(100, 24);
  m.CommitFullBlocks("a", Hashes(more, 4), more, 17, "");
  EXPECT_FALSE(m.pool().is_cached(a2[1]));
  EXPECT_FALSE(m.pool().is_cached(a[3]));
  m.CheckInvariants();
  FreeAllAndCheck(m, {"a", "b"}, 32);
}

TEST(StreamingEvictionTest, ShortPoolFailsWithoutChangingAnything) {
  // 5 blocks: a holds 4, b shares a's first 3 and holds 1 more. a's
  // eviction drops a shared block (nothing released) and needs a copy of
  // the shared block 2 and a new block: the pool has none.
  KvCacheManager m(5, 4, true);
  m.SetStreamingEviction(4, 8, 16);
  const PrefixHit hit = PrefillCommitAndFind(m, Range(7, 16), {5, 11});
  ASSERT_EQ(hit.num_tokens, 12);
  ASSERT_TRUE(m.AllocateSlots("b", 12, 1, hit));
  EXPECT_EQ(m.num_free_blocks(), 0);
  const Ids before = Table(m, "a");
  EXPECT_FALSE(m.AllocateSlots("a", 16, 1));
  EXPECT_EQ(Table(m, "a"), before);
  EXPECT_EQ(m.EvictedTokens("a"), 0);
  EXPECT_TRUE(m.TakeKvMoves().empty());
  m.CheckInvariants();
  m.Free("b");  // now the copy and the new block fit
  EXPECT_TRUE(m.AllocateSlots("a", 16, 1));
  EXPECT_EQ(m.EvictedTokens("a"), 4);
  m.CheckInvariants();
}

}  // namespace
}  // namespace tern
