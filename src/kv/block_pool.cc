#include "kv/block_pool.h"

#include <algorithm>

#include "base/check.h"

namespace tern {

BlockPool::BlockPool(int32_t num_blocks) : blocks_(num_blocks) {
  CHECK_GE(num_blocks, 0);
  for (int32_t i = 0; i < num_blocks; ++i) PushTail(i);
}

double BlockPool::Usage() const {
  if (blocks_.empty()) return 0;
  return 1.0 - (double)num_free_ / (double)blocks_.size();
}

void BlockPool::PushTail(int32_t id) {
  Block& b = blocks_[id];
  b.prev = tail_;
  b.next = kNone;
  if (tail_ != kNone) {
    blocks_[tail_].next = id;
  } else {
    head_ = id;
  }
  tail_ = id;
  ++num_free_;
}

void BlockPool::Unlink(int32_t id) {
  Block& b = blocks_[id];
  if (b.prev != kNone) {
    blocks_[b.prev].next = b.next;
  } else {
    head_ = b.next;
  }
  if (b.next != kNone) {
    blocks_[b.next].prev = b.prev;
  } else {
    tail_ = b.prev;
  }
  b.prev = b.next = kNone;
  --num_free_;
}

void BlockPool::Evict(int32_t id) {
  Block& b = blocks_[id];
  if (b.content_id == 0) return;
  auto it = index_.find(b.hash);
  CHECK(it != index_.end() && it->second == id);
  index_.erase(it);
  b.content_id = 0;
  b.hash = 0;
  b.parent_content = 0;
  b.tokens.clear();
  b.extra_key.clear();
  ++num_evictions_;
}

std::vector<int32_t> BlockPool::Allocate(int32_t n) {
  CHECK_GE(n, 0);
  CHECK_LE(n, num_free_);
  std::vector<int32_t> out;
  out.reserve(n);
  for (int32_t i = 0; i < n; ++i) {
    const int32_t id = head_;
    Unlink(id);
    Evict(id);
    blocks_[id].ref_count = 1;
    out.push_back(id);
  }
  return out;
}

void BlockPool::Touch(std::span<const int32_t> block_ids) {
  for (int32_t id : block_ids) {
    Block& b = blocks_[id];
    if (b.ref_count == 0) Unlink(id);
    ++b.ref_count;
  }
}

void BlockPool::Free(std::span<const int32_t> block_ids) {
  for (int32_t id : block_ids) {
    Block& b = blocks_[id];
    CHECK_GT(b.ref_count, 0);
    if (--b.ref_count == 0) PushTail(id);
  }
}

int32_t BlockPool::FindCached(BlockHash hash, uint64_t parent_content,
                              std::span<const int32_t> tokens,
                              std::string_view extra_key) const {
  auto it = index_.find(hash);
  if (it == index_.end()) return kNone;
  const Block& b = blocks_[it->second];
  // The hash is only an index: compare the exact key.
  if (b.parent_content != parent_content || b.extra_key != extra_key ||
      !std::equal(b.tokens.begin(), b.tokens.end(), tokens.begin(), tokens.end())) {
    return kNone;
  }
  return it->second;
}

uint64_t BlockPool::CacheBlock(int32_t block_id, BlockHash hash, uint64_t parent_content,
                               std::span<const int32_t> tokens, std::string_view extra_key) {
  Block& b = blocks_[block_id];
  CHECK_GT(b.ref_count, 0);
  CHECK_EQ(b.content_id, 0u);
  if (index_.count(hash)) return 0;
  b.content_id = next_content_id_++;
  b.hash = hash;
  b.parent_content = parent_content;
  b.tokens.assign(tokens.begin(), tokens.end());
  b.extra_key.assign(extra_key);
  index_.emplace(hash, block_id);
  return b.content_id;
}

void BlockPool::ResetCache() {
  for (int32_t id = 0; id < num_blocks(); ++id) {
    if (blocks_[id].content_id != 0) Evict(id);
  }
}

std::vector<int32_t> BlockPool::FreeQueue() const {
  std::vector<int32_t> out;
  for (int32_t id = head_; id != kNone; id = blocks_[id].next) out.push_back(id);
  return out;
}

void BlockPool::CheckInvariants() const {
  // Walk the queue forwards: links consistent, only ref-0 blocks, no cycle.
  int32_t count = 0;
  int32_t prev = kNone;
  for (int32_t id = head_; id != kNone; id = blocks_[id].next) {
    CHECK_GE(id, 0);
    CHECK_LT(id, num_blocks());
    CHECK_EQ(blocks_[id].prev, prev);
    CHECK_EQ(blocks_[id].ref_count, 0);
    prev = id;
    ++count;
    CHECK_LE(count, num_blocks());
  }
  CHECK_EQ(tail_, prev);
  CHECK_EQ(count, num_free_);
  int32_t num_zero = 0;
  int32_t num_cached = 0;
  for (const Block& b : blocks_) {
    CHECK_GE(b.ref_count, 0);
    if (b.ref_count == 0) ++num_zero;
    if (b.content_id != 0) {
      ++num_cached;
      CHECK_LT(b.content_id, next_content_id_);
      CHECK_EQ((int64_t)b.tokens.size() > 0, true);
    }
  }
  CHECK_EQ(num_zero, num_free_);
  CHECK_EQ(num_cached, (int32_t)index_.size());
  for (const auto& [hash, id] : index_) {
    CHECK_EQ(blocks_[id].hash, hash);
    CHECK_NE(blocks_[id].content_id, 0u);
  }
}

}  // namespace tern
