// BlockPool: the KV cache's blocks (pages of block_size token slots) with
// reference counts, a free queue, and the prefix cache's index.
//
// Every block is either held (ref_count > 0, by one or more requests' block
// tables) or free (ref_count == 0, in the free queue). The free queue is a
// doubly linked list threaded through the blocks, ordered by when they were
// freed; Allocate takes from the head (least recently freed), Free appends
// to the tail:
//
//   head -> [b7] <-> [b2] <-> [b9] <-> ... <-> [b4] <- tail
//           oldest free                newest free
//
// With prefix caching a block may also be *cached*: its KV is complete and it
// is indexed by its BlockHash together with its exact key (parent content,
// token ids, extra key). A cached block stays cached while free, so a later
// request can take it back (Touch) until Allocate reaches it at the head of
// the queue and evicts it (drops it from the index). Cached content gets a
// content id that is never reused; a block's key names its parent by content
// id, so an evicted parent can never be confused with new content.
//
// Invariants (CheckInvariants): a block is in the free queue iff its
// ref_count is 0; the queue's links are consistent and its length is
// num_free_blocks(); every index entry points at a cached block with that
// hash; cached blocks are exactly the index's values.
//
// Thread rules: owned by the engine thread (through KvCacheManager).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kv/block_hash.h"

namespace tern {

class BlockPool {
 public:
  // Content id of "no parent" (the first block of a sequence).
  static constexpr uint64_t kRootContent = 0;

  explicit BlockPool(int32_t num_blocks);

  int32_t num_blocks() const { return (int32_t)blocks_.size(); }
  // Blocks with ref_count 0 (cached or not): what Allocate can hand out.
  int32_t num_free_blocks() const { return num_free_; }
  int32_t num_cached_blocks() const { return (int32_t)index_.size(); }
  // Fraction of blocks held by requests.
  double Usage() const;

  // Takes n blocks from the head of the free queue, evicting cached ones;
  // each gets ref_count 1. CHECKs n <= num_free_blocks().
  std::vector<int32_t> Allocate(int32_t n);
  // Adds a reference to each block (prefix-cache hits); a block at ref 0
  // leaves the free queue.
  void Touch(std::span<const int32_t> block_ids);
  // Drops a reference from each block, in the given order; blocks reaching
  // 0 are appended to the free queue's tail in that order (so pass a
  // request's blocks last-first to have its tail evicted first).
  void Free(std::span<const int32_t> block_ids);

  // The cached block whose exact key matches, or -1.
  int32_t FindCached(BlockHash hash, uint64_t parent_content, std::span<const int32_t> tokens,
                     std::string_view extra_key) const;
  // Indexes a held block whose KV is complete; returns its content id, or 0
  // when the hash is already taken (by equal content, which the caller should
  // have found with FindCached, or by a colliding key: not cached then).
  uint64_t CacheBlock(int32_t block_id, BlockHash hash, uint64_t parent_content,
                      std::span<const int32_t> tokens, std::string_view extra_key);
  // Drops every cached block from the index (e.g. after weights change).
  void ResetCache();
  // Drops one block from the index (its KV was rewritten in place: streaming
  // eviction re-rotated its keys). No-op for an uncached block.
  void Uncache(int32_t block_id) { Evict(block_id); }

  int32_t ref_count(int32_t block_id) const { return blocks_[block_id].ref_count; }
  bool is_cached(int32_t block_id) const { return blocks_[block_id].content_id != 0; }
  uint64_t content_id(int32_t block_id) const { return blocks_[block_id].content_id; }
  // The free queue from head (next to be allocated) to tail. For tests.
  std::vector<int32_t> FreeQueue() const;
  // Total cached blocks evicted so far.
  uint64_t num_evictions() const { return num_evictions_; }

  // CHECK-fails with the values printed when an invariant is broken.
  void CheckInvariants() const;

 private:
  static constexpr int32_t kNone = -1;

  struct Block {
    int32_t ref_count = 0;
    int32_t prev = kNone;  // free queue links
    int32_t next = kNone;
    // Prefix cache key (content_id != 0 iff cached).
    uint64_t content_id = 0;
    BlockHash hash = 0;
    uint64_t parent_content = 0;
    std::vector<int32_t> tokens;
    std::string extra_key;
  };

  void PushTail(int32_t id);
  void Unlink(int32_t id);
  void Evict(int32_t id);

  std::vector<Block> blocks_;
  int32_t head_ = kNone;
  int32_t tail_ = kNone;
  int32_t num_free_ = 0;
  std::unordered_map<BlockHash, int32_t> index_;
  uint64_t next_content_id_ = 1;
  uint64_t num_evictions_ = 0;
};

}  // namespace tern
