// KvCacheManager with a sliding window: blocks wholly outside the window of
// the next position go back to the pool while the request runs.
#include <gtest/gtest.h>

#include <vector>

#include "kv/kv_cache_manager.h"
#include "kv/kv_test_util.h"

namespace tern {
namespace {

using namespace kv_test;
constexpr int32_t kFreed = KvCacheManager::kFreedBlock;

TEST(SlidingWindowKvTest, ReleasesBlocksBeforeTheWindowOfTheNextPosition) {
  KvCacheManager m(/*num_blocks=*/8, /*block_size=*/4, /*enable_prefix_caching=*/false);
  m.SetSlidingWindow(6);
  ASSERT_TRUE(m.AllocateSlots("a", 0, 13));  // positions 0..12: blocks 0..3
  const Ids first = Table(m, "a");
  ASSERT_EQ(first.size(), 4u);
  EXPECT_EQ(m.num_free_blocks(), 4);
  m.CheckInvariants();
  // Position 13 sees 8..13: blocks 0 (0-3) and 1 (4-7) are never read again.
  ASSERT_TRUE(m.AllocateSlots("a", 13, 1));
  EXPECT_EQ(Table(m, "a"), (Ids{kFreed, kFreed, first[2], first[3]}));
  EXPECT_EQ(m.num_free_blocks(), 6);
  EXPECT_EQ(m.num_window_freed_blocks(), 2u);
  // Released in position order, so the oldest is reused first.
  const Ids queue = m.pool().FreeQueue();
  EXPECT_EQ(Ids(queue.end() - 2, queue.end()), (Ids{first[0], first[1]}));
  m.CheckInvariants();
  // Position 14 sees 9..14: block 2 (8-11) still holds position 9..11.
  ASSERT_TRUE(m.AllocateSlots("a", 14, 1));
  EXPECT_EQ(m.num_window_freed_blocks(), 2u);
  FreeAllAndCheck(m, {"a"}, 8);
}

TEST(SlidingWindowKvTest, UsageOfALongSequencePlateaus) {
  KvCacheManager m(64, 4, false);
  m.SetSlidingWindow(8);
  ASSERT_TRUE(m.AllocateSlots("a", 0, 5));
  int32_t max_held = 0;
  for (int32_t n = 5; n < 1000; ++n) {  // decode one token at a time
    ASSERT_TRUE(m.AllocateSlots("a", n, 1)) << n;
    max_held = std::max(max_held, 64 - m.num_free_blocks());
    if (n % 97 == 0) m.CheckInvariants();
  }
  // The window (8) plus the block being filled: at most 4 blocks of 4.
  EXPECT_LE(max_held, 4);
  EXPECT_EQ((int32_t)Table(m, "a").size(), 250);  // positions 0..999 still map 1:1
  m.CheckInvariants();
}

TEST(SlidingWindowKvTest, ChunkedPrefillKeepsTheWindowOfTheChunksFirstToken) {
  KvCacheManager m(16, 4, false);
  m.SetSlidingWindow(5);
  ASSERT_TRUE(m.AllocateSlots("a", 0, 8));
  // The next chunk starts at 8, which sees 4..8: block 0 goes, block 1 stays.
  ASSERT_TRUE(m.AllocateSlots("a", 8, 8));
  const Ids t = Table(m, "a");
  EXPECT_EQ(t[0], kFreed);
  EXPECT_NE(t[1], kFreed);
  EXPECT_EQ(t.size(), 4u);
  m.CheckInvariants();
}

TEST(SlidingWindowKvTest, WithoutAWindowNothingIsReleased) {
  KvCacheManager m(64, 4, false);
  ASSERT_TRUE(m.AllocateSlots("a", 0, 5));
  for (int32_t n = 5; n < 200; ++n) ASSERT_TRUE(m.AllocateSlots("a", n, 1));
  for (int32_t b : Table(m, "a")) EXPECT_GE(b, 0);
  EXPECT_EQ(m.num_free_blocks(), 64 - 50);
}

TEST(SlidingWindowKvTest, ReleasedCachedBlocksServeTheSamePrefixAgain) {
  // A released block's KV is still exact for its prefix: another request
  // with the same prompt shares it back from the free queue.
  KvCacheManager m(16, 4, true);
  m.SetSlidingWindow(4);
  const Ids prompt = Range(100, 12);
  const std::vector<BlockHash> h = Hashes(prompt, 4);
  ASSERT_TRUE(m.AllocateSlots("a", 0, 12));
  m.CommitFullBlocks("a", h, prompt, 12, "");
  const Ids a_table = Table(m, "a");
  ASSERT_TRUE(m.AllocateSlots("a", 12, 1));  // position 12 sees 9..12: blocks 0, 1 go
  EXPECT_EQ(Table(m, "a")[0], kFreed);
  EXPECT_EQ(Table(m, "a")[1], kFreed);
  m.CheckInvariants();
  const PrefixHit hit = m.FindCachedPrefix(h, prompt, "");
  ASSERT_EQ(hit.num_tokens, 8);  // the last token is recomputed: 2 of 3 blocks
  EXPECT_EQ(hit.block_ids, (Ids{a_table[0], a_table[1]}));
  ASSERT_TRUE(m.AllocateSlots("b", 8, 4, hit));
  m.CheckInvariants();
  FreeAllAndCheck(m, {"a", "b"}, 16);
}

TEST(SlidingWindowKvTest, BlockReleasedBeforeItWasIndexedStopsTheChain) {
  KvCacheManager m(16, 4, true);
  m.SetSlidingWindow(4);
  const Ids tokens = Range(7, 16);
  ASSERT_TRUE(m.AllocateSlots("a", 0, 12));
  ASSERT_TRUE(m.AllocateSlots("a", 12, 4));  // blocks 0, 1 released unindexed
  m.CommitFullBlocks("a", Hashes(tokens, 4), tokens, 16, "");
  EXPECT_EQ(m.pool().num_cached_blocks(), 0);
  m.CheckInvariants();
}

}  // namespace
}  // namespace tern
