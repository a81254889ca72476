#include "kv/kv_cache_manager.h"

#include <algorithm>

#include "base/check.h"

namespace tern {

KvCacheManager::KvCacheManager(int32_t num_blocks, int32_t block_size,
                               bool enable_prefix_caching)
    : block_size_(block_size), prefix_caching_(enable_prefix_caching), pool_(num_blocks) {
  CHECK_GT(block_size, 0);
}

PrefixHit KvCacheManager::FindCachedPrefix(std::span<const BlockHash> hashes,
                                           std::span<const int32_t> tokens,
                                           std::string_view extra_key) const {
  PrefixHit hit;
  if (!prefix_caching_ || tokens.empty()) return hit;
  // The last token is always recomputed: its logits pick the next token.
  const size_t max_blocks =
      std::min(hashes.size(), (tokens.size() - 1) / (size_t)block_size_);
  uint64_t parent = BlockPool::kRootContent;
  for (size_t i = 0; i < max_blocks; ++i) {
    const int32_t id = pool_.FindCached(hashes[i], parent,
                                        tokens.subspan(i * block_size_, block_size_), extra_key);
    if (id < 0) break;
    parent = pool_.content_id(id);
    hit.block_ids.push_back(id);
    hit.content_ids.push_back(parent);
  }
  hit.num_tokens = (int32_t)hit.block_ids.size() * block_size_;
  return hit;
}

std::optional<std::vector<int32_t>> KvCacheManager::AllocateSlots(
    const std::string& request_id, int32_t num_computed_tokens, int32_t num_new_tokens,
    const PrefixHit& hit) {
  CHECK_GE(num_new_tokens, 0);
  auto it = tables_.find(request_id);
  if (it != tables_.end() && sliding_window_ > 0) FreeOutsideWindow(it->second, num_computed_tokens);
  const size_t have = it == tables_.end() ? 0 : it->second.block_ids.size();
  if (!hit.block_ids.empty()) {
    CHECK_EQ(have, 0u);
    CHECK_EQ(num_computed_tokens, hit.num_tokens);
  }
  const int64_t total = (int64_t)num_computed_tokens + num_new_tokens;
  const int64_t need_blocks = (total + block_size_ - 1) / block_size_;
  const int64_t new_blocks =
      std::max<int64_t>(0, need_blocks - (int64_t)have - (int64_t)hit.block_ids.size());
  // Hit blocks at ref 0 sit in the free queue: taking them shrinks it.
  int64_t hit_free = 0;
  for (int32_t id : hit.block_ids) hit_free += pool_.ref_count(id) == 0;
  if (new_blocks > pool_.num_free_blocks() - hit_free) return std::nullopt;

  Table& table = tables_[request_id];
  if (!hit.block_ids.empty()) {
    pool_.Touch(hit.block_ids);
    table.block_ids = hit.block_ids;
    table.content_ids = hit.content_ids;
  }
  std::vector<int32_t> fresh = pool_.Allocate((int32_t)new_blocks);
  table.block_ids.insert(table.block_ids.end(), fresh.begin(), fresh.end());
  return fresh;
}

void KvCacheManager::FreeOutsideWindow(Table& table, int32_t next_position) {
  // Position next_position sees (next_position - W, next_position]; block i
  // holds [i * block_size, (i + 1) * block_size) and goes when all of it is
  // below the first visible position.
  const int64_t first_visible = (int64_t)next_position - sliding_window_ + 1;
  const int64_t num_gone = std::min<int64_t>(std::max<int64_t>(0, first_visible / block_size_),
                                             (int64_t)table.block_ids.size());
  std::vector<int32_t> released;
  for (int64_t i = 0; i < num_gone; ++i) {
    if (table.block_ids[i] == kFreedBlock) continue;
    released.push_back(table.block_ids[i]);
    table.block_ids[i] = kFreedBlock;
  }
  pool_.Free(released);
  num_window_freed_blocks_ += released.size();
}

void KvCacheManager::CommitFullBlocks(const std::string& request_id,
                                      std::span<const BlockHash> hashes,
                                      std::span<const int32_t> tokens,
                                      int32_t num_computed_tokens,
                                      std::string_view extra_key) {
  if (!prefix_caching_) return;
  auto it = tables_.find(request_id);
  if (it == tables_.end()) return;
  Table& table = it->second;
  const size_t num_full = std::min<size_t>(
      {(size_t)num_computed_tokens / block_size_, hashes.size(), table.block_ids.size()});
  while (!table.chain_broken && table.content_ids.size() < num_full) {
    const size_t i = table.content_ids.size();
    if (table.block_ids[i] == kFreedBlock) {  // released before it was indexed
      table.chain_broken = true;
      break;
    }
    const uint64_t parent = i == 0 ? BlockPool::kRootContent : table.content_ids[i - 1];
    std::span<const int32_t> block_tokens = tokens.subspan(i * block_size_, block_size_);
    // Equal content already cached (another request computed it too): chain
    // through that copy; this request's own block stays uncached.
    const int32_t existing = pool_.FindCached(hashes[i], parent, block_tokens, extra_key);
    uint64_t content = 0;
    if (existing >= 0) {
      content = pool_.content_id(existing);
    } else if (pool_.is_cached(table.block_ids[i])) {
      // Our own block is indexed under a different parent: cannot happen
      // since blocks are indexed once, with the parent they were computed on.
      CHECK(false);
    } else {
      content = pool_.CacheBlock(table.block_ids[i], hashes[i], parent, block_tokens, extra_key);
    }
    if (content == 0) {
      table.chain_broken = true;  // hash taken by another key: stop indexing
      break;
    }
    table.content_ids.push_back(content);
  }
}

void KvCacheManager::Free(const std::string& request_id) {
  auto it = tables_.find(request_id);
  if (it == tables_.end()) return;
  std::vector<int32_t> reversed;
  for (auto b = it->second.block_ids.rbegin(); b != it->second.block_ids.rend(); ++b) {
    if (*b != kFreedBlock) reversed.push_back(*b);
  }
  pool_.Free(reversed);
  tables_.erase(it);
}

int32_t KvCacheManager::TruncateTo(const std::string& request_id, int32_t num_tokens) {
  auto it = tables_.find(request_id);
  if (it == tables_.end()) return 0;
  Table& table = it->second;
  const size_t keep = (size_t)(std::max(0, num_tokens) + block_size_ - 1) / block_size_;
  if (table.block_ids.size() <= keep) return 0;
  CHECK_LE(table.content_ids.size(), keep);
  std::vector<int32_t> reversed;
  for (size_t i = table.block_ids.size(); i > keep; --i) {
    if (table.block_ids[i - 1] != kFreedBlock) reversed.push_back(table.block_ids[i - 1]);
  }
  table.block_ids.resize(keep);
  pool_.Free(reversed);
  return (int32_t)reversed.size();
}

std::span<const int32_t> KvCacheManager::BlockTable(const std::string& request_id) const {
  auto it = tables_.find(request_id);
  if (it == tables_.end()) return {};
  return it->second.block_ids;
}

void KvCacheManager::CheckInvariants() const {
  pool_.CheckInvariants();
  std::vector<int32_t> refs(pool_.num_blocks(), 0);
  for (const auto& [id, table] : tables_) {
    CHECK_LE(table.content_ids.size(), table.block_ids.size());
    for (int32_t b : table.block_ids) {
      if (b == kFreedBlock && sliding_window_ > 0) continue;
      CHECK_GE(b, 0);
      CHECK_LT(b, pool_.num_blocks());
      ++refs[b];
    }
  }
  for (int32_t b = 0; b < pool_.num_blocks(); ++b) CHECK_EQ(refs[b], pool_.ref_count(b));
}

}  // namespace tern
