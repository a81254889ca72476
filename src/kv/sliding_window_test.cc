// KvCacheManager with a sliding window: blocks wholly outside the window of
// the next position go back to the pool while the request runs.
#include <gtest/gtest.h>

#include <algorithm>
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

// Hybrid models (gemma2/gemma3): the windowed layers' group releases its
// blocks outside the window, the full group keeps every block.

Ids WindowTable(const KvCacheManager& m, const std::string& id) {
  auto t = m.WindowBlockTable(id);
  return Ids(t.begin(), t.end());
}

int32_t Held(const Ids& table) {
  return (int32_t)std::count_if(table.begin(), table.end(), [](int32_t b) { return b >= 0; });
}

TEST(HybridWindowKvTest, WindowedGroupPlateausWhileTheFullGroupGrows) {
  // 1 global layer, 5 windowed (gemma3's pattern), window 8, block size 4.
  constexpr int32_t kBlockSize = 4, kWindow = 8;
  KvCacheManager m(/*num_blocks=*/600, kBlockSize, /*enable_prefix_caching=*/false);
  m.SetWindowGroup(/*num_blocks=*/16, kWindow, /*full_layers=*/1, /*windowed_layers=*/5);
  ASSERT_NE(m.window_group(), nullptr);
  // Two sequences: a 13-token prompt in chunks of 5, a 3-token one.
  ASSERT_TRUE(m.AllocateSlots("a", 0, 5));
  ASSERT_TRUE(m.AllocateSlots("a", 5, 5));
  ASSERT_TRUE(m.AllocateSlots("a", 10, 3));
  ASSERT_TRUE(m.AllocateSlots("b", 0, 3));
  int32_t most_window_blocks = 0;
  for (int32_t n = 13; n < 1000; ++n) {  // both decode one token a step
    ASSERT_TRUE(m.AllocateSlots("a", n, 1)) << n;
    ASSERT_TRUE(m.AllocateSlots("b", n - 10, 1)) << n;
    for (const char* id : {"a", "b"}) {
      const Ids w = WindowTable(m, id);
      most_window_blocks = std::max(most_window_blocks, Held(w));
      // Same length as the full table, so position p maps to entry p / 4 in both.
      ASSERT_EQ(w.size(), Table(m, id).size());
    }
    if (n % 101 == 0) m.CheckInvariants();
  }
  EXPECT_LE(most_window_blocks, kWindow / kBlockSize + 2);
  // The full group holds every position: 1000 tokens = 250 blocks for a.
  EXPECT_EQ(Held(Table(m, "a")), 250);
  EXPECT_EQ(Held(Table(m, "b")), 248);
  EXPECT_EQ(m.num_free_blocks(), 600 - 250 - 248);
  EXPECT_GE(m.num_window_freed_blocks(), 2u * 240);
  // Usage weighs the pools by their layers: 498 of 600 one-layer blocks,
  // and at most 6 of 16 five-layer blocks.
  const int32_t window_held = 16 - m.window_group()->num_free_blocks();
  EXPECT_LE(window_held, 6);
  EXPECT_DOUBLE_EQ(m.Usage(), (498.0 * 1 + window_held * 5.0) / (600.0 * 1 + 16 * 5.0));
  m.Free("a");
  m.Free("b");
  EXPECT_EQ(m.num_free_blocks(), 600);
  EXPECT_EQ(m.window_group()->num_free_blocks(), 16);
  EXPECT_EQ(m.Usage(), 0.0);
  m.CheckInvariants();
}

TEST(HybridWindowKvTest, ShortGroupRefusesAndChangesNothing) {
  KvCacheManager m(8, 4, false);
  m.SetWindowGroup(3, 4, 1, 1);
  // 12 tokens need 3 blocks in each group.
  ASSERT_TRUE(m.AllocateSlots("a", 0, 12));
  // The windowed group is full: b gets nothing in either group.
  EXPECT_FALSE(m.AllocateSlots("b", 0, 1));
  EXPECT_TRUE(Table(m, "b").empty());
  EXPECT_TRUE(WindowTable(m, "b").empty());
  EXPECT_EQ(m.num_free_blocks(), 5);
  m.CheckInvariants();
  // a's next token (position 12 sees 9..12) frees blocks 0 and 1 of its
  // window table; now b fits there.
  ASSERT_TRUE(m.AllocateSlots("a", 12, 1));
  EXPECT_EQ(WindowTable(m, "a")[0], kFreed);
  ASSERT_TRUE(m.AllocateSlots("b", 0, 1));
  m.CheckInvariants();
  // The full group is short: a's 24 more tokens are refused, both tables
  // keep their length.
  const size_t full_len = Table(m, "a").size(), window_len = WindowTable(m, "a").size();
  EXPECT_FALSE(m.AllocateSlots("a", 13, 24));
  EXPECT_EQ(Table(m, "a").size(), full_len);
  EXPECT_EQ(WindowTable(m, "a").size(), window_len);
  m.CheckInvariants();
}

TEST(HybridWindowKvTest, TruncateAndFreeActOnBothGroups) {
  KvCacheManager m(16, 4, false);
  m.SetWindowGroup(16, 4, 1, 1);
  ASSERT_TRUE(m.AllocateSlots("a", 0, 6));
  ASSERT_TRUE(m.AllocateSlots("a", 6, 6));  // speculative slots, say
  EXPECT_EQ(Table(m, "a").size(), 3u);
  // Rolled back to 6 tokens: block 2 goes from each group.
  EXPECT_EQ(m.TruncateTo("a", 6), 2);
  EXPECT_EQ(Table(m, "a").size(), 2u);
  EXPECT_EQ(WindowTable(m, "a").size(), 2u);
  m.CheckInvariants();
  m.Free("a");
  EXPECT_EQ(m.num_requests(), 0);
  EXPECT_EQ(m.window_group()->num_requests(), 0);
  EXPECT_EQ(m.window_group()->num_free_blocks(), 16);
  m.CheckInvariants();
}

TEST(HybridWindowKvTest, PrefixHitNeedsTheWindowedGroupsLastWindow) {
  // Window 4, block size 4: the token after a hit of n blocks reads
  // positions 4n - 3 .. 4n, i.e. the windowed group's block n - 1 only.
  KvCacheManager m(32, 4, /*enable_prefix_caching=*/true);
  m.SetWindowGroup(32, 4, 1, 1);
  const Ids prompt = Range(100, 17);
  const std::vector<BlockHash> h = Hashes(prompt, 4);
  ASSERT_TRUE(m.AllocateSlots("a", 0, 17));
  m.CommitFullBlocks("a", h, prompt, 17, "");
  const Ids a_full = Table(m, "a"), a_window = WindowTable(m, "a");
  EXPECT_EQ(m.window_group()->pool().num_cached_blocks(), 4);
  // b shares the 16-token prefix: the full group's 4 blocks, and of the
  // windowed group only block 3 (the window of position 16).
  PrefixHit hit = m.FindCachedPrefix(h, prompt, "");
  ASSERT_EQ(hit.num_tokens, 16);
  EXPECT_EQ(hit.block_ids, Ids(a_full.begin(), a_full.begin() + 4));
  EXPECT_EQ(hit.window_block_ids, (Ids{kFreed, kFreed, kFreed, a_window[3]}));
  ASSERT_TRUE(m.AllocateSlots("b", 16, 1, hit));
  EXPECT_EQ(WindowTable(m, "b"), (Ids{kFreed, kFreed, kFreed, a_window[3], WindowTable(m, "b")[4]}));
  m.CheckInvariants();
  m.Free("b");
  m.Free("a");
  m.CheckInvariants();
}

TEST(HybridWindowKvTest, PrefixHitShrinksToWhatTheWindowedGroupHolds) {
  KvCacheManager m(32, 4, true);
  m.SetWindowGroup(32, 4, 1, 1);
  const Ids prompt = Range(100, 17);
  const std::vector<BlockHash> h = Hashes(prompt, 4);
  // Two chunks; the second (from position 12, which reads 9..12) releases
  // the windowed blocks 0 and 1 before they were indexed.
  ASSERT_TRUE(m.AllocateSlots("a", 0, 12));
  ASSERT_TRUE(m.AllocateSlots("a", 12, 5));
  m.CommitFullBlocks("a", h, prompt, 17, "");
  EXPECT_EQ(m.pool().num_cached_blocks(), 4);
  EXPECT_EQ(m.window_group()->pool().num_cached_blocks(), 2);  // blocks 2, 3
  // The same prompt: the window of position 16 is block 3, cached.
  EXPECT_EQ(m.FindCachedPrefix(h, prompt, "").num_tokens, 16);
  // A prompt sharing the first 8 tokens: the full group holds 2 blocks, but
  // the windowed group neither block 1 (read by position 8) nor block 0
  // (read by position 4): no hit.
  Ids other(prompt.begin(), prompt.begin() + 8);
  for (int32_t t : Range(500, 5)) other.push_back(t);
  const std::vector<BlockHash> h2 = Hashes(other, 4);
  EXPECT_EQ(m.pool().FindCached(h2[1], m.pool().content_id(Table(m, "a")[0]),
                                std::span<const int32_t>(other).subspan(4, 4), ""),
            Table(m, "a")[1]);
  const PrefixHit hit = m.FindCachedPrefix(h2, other, "");
  EXPECT_EQ(hit.num_tokens, 0);
  EXPECT_TRUE(hit.block_ids.empty());
  m.Free("a");
  m.CheckInvariants();
}

}  // namespace
}  // namespace tern
