#include "kv/block_pool.h"

#include <gtest/gtest.h>

#include <vector>

namespace tern {
namespace {

using Ids = std::vector<int32_t>;

TEST(BlockPoolTest, StartsWithAllBlocksFreeInIdOrder) {
  BlockPool pool(4);
  pool.CheckInvariants();
  EXPECT_EQ(pool.num_free_blocks(), 4);
  EXPECT_EQ(pool.FreeQueue(), (Ids{0, 1, 2, 3}));
  EXPECT_DOUBLE_EQ(pool.Usage(), 0.0);
}

TEST(BlockPoolTest, AllocatesFromHeadAndFreesToTail) {
  BlockPool pool(5);
  EXPECT_EQ(pool.Allocate(2), (Ids{0, 1}));
  pool.CheckInvariants();
  EXPECT_EQ(pool.ref_count(0), 1);
  EXPECT_EQ(pool.FreeQueue(), (Ids{2, 3, 4}));
  EXPECT_DOUBLE_EQ(pool.Usage(), 0.4);
  const Ids freed = {1, 0};
  pool.Free(freed);
  pool.CheckInvariants();
  EXPECT_EQ(pool.FreeQueue(), (Ids{2, 3, 4, 1, 0}));
  EXPECT_EQ(pool.Allocate(4), (Ids{2, 3, 4, 1}));
  pool.CheckInvariants();
  EXPECT_EQ(pool.FreeQueue(), (Ids{0}));
}

TEST(BlockPoolTest, SharedBlockReturnsToQueueOnlyAtRefZero) {
  BlockPool pool(3);
  Ids a = pool.Allocate(1);
  pool.Touch(a);
  pool.CheckInvariants();
  EXPECT_EQ(pool.ref_count(0), 2);
  pool.Free(a);
  pool.CheckInvariants();
  EXPECT_EQ(pool.FreeQueue(), (Ids{1, 2}));
  pool.Free(a);
  pool.CheckInvariants();
  EXPECT_EQ(pool.FreeQueue(), (Ids{1, 2, 0}));
}

TEST(BlockPoolTest, TouchTakesAFreeBlockOutOfTheMiddleOfTheQueue) {
  BlockPool pool(4);
  const Ids one = {2};
  pool.Allocate(4);
  pool.Free(Ids{0, 1, 2, 3});
  pool.Touch(one);
  pool.CheckInvariants();
  EXPECT_EQ(pool.FreeQueue(), (Ids{0, 1, 3}));
  EXPECT_EQ(pool.ref_count(2), 1);
}

TEST(BlockPoolTest, CachedBlockSurvivesFreeAndIsEvictedWhenReached) {
  BlockPool pool(3);
  const Ids tokens = {5, 6};
  Ids a = pool.Allocate(1);  // block 0
  const uint64_t content = pool.CacheBlock(0, 42, BlockPool::kRootContent, tokens, "");
  EXPECT_NE(content, 0u);
  pool.Free(a);
  pool.CheckInvariants();
  EXPECT_EQ(pool.FreeQueue(), (Ids{1, 2, 0}));
  EXPECT_EQ(pool.FindCached(42, BlockPool::kRootContent, tokens, ""), 0);
  // Blocks 1 and 2 go first; then 0 is evicted.
  EXPECT_EQ(pool.Allocate(2), (Ids{1, 2}));
  EXPECT_TRUE(pool.is_cached(0));
  EXPECT_EQ(pool.Allocate(1), (Ids{0}));
  pool.CheckInvariants();
  EXPECT_FALSE(pool.is_cached(0));
  EXPECT_EQ(pool.FindCached(42, BlockPool::kRootContent, tokens, ""), -1);
  EXPECT_EQ(pool.num_evictions(), 1u);
}

TEST(BlockPoolTest, FindCachedComparesTheExactKeyNotJustTheHash) {
  BlockPool pool(2);
  const Ids tokens = {1, 2, 3};
  const Ids other = {1, 2, 4};
  pool.Allocate(1);
  const uint64_t c = pool.CacheBlock(0, 7, BlockPool::kRootContent, tokens, "salt");
  EXPECT_EQ(pool.FindCached(7, BlockPool::kRootContent, tokens, "salt"), 0);
  EXPECT_EQ(pool.FindCached(7, BlockPool::kRootContent, other, "salt"), -1);
  EXPECT_EQ(pool.FindCached(7, BlockPool::kRootContent, tokens, ""), -1);
  EXPECT_EQ(pool.FindCached(7, c, tokens, "salt"), -1);
  EXPECT_EQ(pool.FindCached(8, BlockPool::kRootContent, tokens, "salt"), -1);
}

TEST(BlockPoolTest, CollidingHashIsNotCachedTwice) {
  BlockPool pool(2);
  const Ids a = {1};
  const Ids b = {2};
  pool.Allocate(2);
  EXPECT_NE(pool.CacheBlock(0, 9, BlockPool::kRootContent, a, ""), 0u);
  EXPECT_EQ(pool.CacheBlock(1, 9, BlockPool::kRootContent, b, ""), 0u);
  pool.CheckInvariants();
  EXPECT_FALSE(pool.is_cached(1));
  EXPECT_EQ(pool.FindCached(9, BlockPool::kRootContent, b, ""), -1);
}

TEST(BlockPoolTest, ContentIdsAreNeverReused) {
  BlockPool pool(1);
  const Ids t = {3};
  pool.Allocate(1);
  const uint64_t first = pool.CacheBlock(0, 1, BlockPool::kRootContent, t, "");
  pool.Free(Ids{0});
  pool.Allocate(1);  // evicts
  const uint64_t second = pool.CacheBlock(0, 1, BlockPool::kRootContent, t, "");
  EXPECT_NE(first, second);
  pool.CheckInvariants();
}

}  // namespace
}  // namespace tern
