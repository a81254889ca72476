#include "kv/kv_cache_manager.h"

#include <algorithm>

#include "base/check.h"

namespace tern {

KvCacheManager::KvCacheManager(int32_t num_blocks, int32_t block_size,
                               bool enable_prefix_caching)
    : block_size_(block_size), prefix_caching_(enable_prefix_caching), pool_(num_blocks) {
  CHECK_GT(block_size, 0);
}

void KvCacheManager::SetWindowGroup(int32_t num_blocks, int32_t window_tokens,
                                    int32_t full_layers, int32_t windowed_layers) {
  CHECK(tables_.empty());
  CHECK(!streaming_eviction() && sliding_window_ == 0);
  CHECK_GT(window_tokens, 0);
  CHECK(full_layers > 0 && windowed_layers > 0);
  window_group_ = std::make_unique<KvCacheManager>(num_blocks, block_size_, prefix_caching_);
  window_group_->SetSlidingWindow(window_tokens);
  full_layers_ = full_layers;
  windowed_layers_ = windowed_layers;
}

double KvCacheManager::Usage() const {
  if (!window_group_) return pool_.Usage();
  const BlockPool& w = window_group_->pool();
  const double held = (double)(pool_.num_blocks() - pool_.num_free_blocks()) * full_layers_ +
                      (double)(w.num_blocks() - w.num_free_blocks()) * windowed_layers_;
  const double total = (double)pool_.num_blocks() * full_layers_ +
                       (double)w.num_blocks() * windowed_layers_;
  return total > 0 ? held / total : 0.0;
}

PrefixHit KvCacheManager::FindCachedPrefix(std::span<const BlockHash> hashes,
                                           std::span<const int32_t> tokens,
                                           std::string_view extra_key) const {
  PrefixHit hit;
  if (!prefix_caching_ || tokens.empty()) return hit;
  // The last token is always recomputed: its logits pick the next token.
  size_t max_blocks = std::min(hashes.size(), (tokens.size() - 1) / (size_t)block_size_);
  // Streaming eviction: within the sinks and the window, so that the first
  // allocation (a hit and a chunk) never needs an eviction.
  if (streaming_eviction()) {
    max_blocks = std::min<size_t>(
        max_blocks, (size_t)(StreamSinkTokens() + stream_window_tokens_) / block_size_);
  }
  uint64_t parent = BlockPool::kRootContent;
  for (size_t i = 0; i < max_blocks; ++i) {
    const int32_t id = pool_.FindCached(hashes[i], parent,
                                        tokens.subspan(i * block_size_, block_size_), extra_key);
    if (id < 0) break;
    parent = pool_.content_id(id);
    hit.block_ids.push_back(id);
    hit.content_ids.push_back(parent);
  }
  // Hybrid: as long as the windowed group holds the hit's last window.
  while (window_group_ && !hit.block_ids.empty()) {
    hit.window_block_ids = window_group_->FindWindowHit(hashes, tokens, extra_key,
                                                        hit.content_ids, hit.block_ids.size());
    if (!hit.window_block_ids.empty()) break;
    hit.block_ids.pop_back();
    hit.content_ids.pop_back();
  }
  hit.num_tokens = (int32_t)hit.block_ids.size() * block_size_;
  return hit;
}

std::vector<int32_t> KvCacheManager::FindWindowHit(std::span<const BlockHash> hashes,
                                                   std::span<const int32_t> tokens,
                                                   std::string_view extra_key,
                                                   std::span<const uint64_t> parents,
                                                   size_t num_blocks) const {
  // The next position, num_blocks * block_size, reads from p - W + 1 on.
  const int64_t first_visible = (int64_t)num_blocks * block_size_ - sliding_window_ + 1;
  const size_t first = (size_t)std::max<int64_t>(0, first_visible / block_size_);
  std::vector<int32_t> ids(num_blocks, kFreedBlock);
  for (size_t i = first; i < num_blocks; ++i) {
    ids[i] = pool_.FindCached(hashes[i], i == 0 ? BlockPool::kRootContent : parents[i - 1],
                              tokens.subspan(i * block_size_, block_size_), extra_key);
    if (ids[i] < 0) return {};
  }
  return ids;
}

std::optional<std::vector<int32_t>> KvCacheManager::AllocateSlots(
    const std::string& request_id, int32_t num_computed_tokens, int32_t num_new_tokens,
    const PrefixHit& hit) {
  CHECK_GE(num_new_tokens, 0);
  auto it = tables_.find(request_id);
  // The KV position of the request's next token (its token count less
  // what streaming eviction dropped).
  int32_t kv_len = num_computed_tokens - (it == tables_.end() ? 0 : it->second.evicted);
  if (it != tables_.end() && sliding_window_ > 0) FreeOutsideWindow(it->second, kv_len);
  if (it != tables_.end() && streaming_eviction() &&
      (int64_t)kv_len + num_new_tokens > stream_max_tokens_) {
    if (!EvictForStreaming(request_id, it->second, kv_len, num_new_tokens)) return std::nullopt;
    kv_len = num_computed_tokens - it->second.evicted;
  }
  const size_t have = it == tables_.end() ? 0 : it->second.block_ids.size();
  if (!hit.block_ids.empty()) {
    CHECK_EQ(have, 0u);
    CHECK_EQ(num_computed_tokens, hit.num_tokens);
  }
  const int64_t total = (int64_t)kv_len + num_new_tokens;
  const int64_t need_blocks = (total + block_size_ - 1) / block_size_;
  const int64_t new_blocks =
      std::max<int64_t>(0, need_blocks - (int64_t)have - (int64_t)hit.block_ids.size());
  // Hit blocks at ref 0 sit in the free queue: taking them shrinks it.
  int64_t hit_free = 0;
  std::vector<int32_t> hit_held;  // the windowed group's hit has -1 entries
  for (int32_t id : hit.block_ids) {
    if (id == kFreedBlock) continue;
    hit_free += pool_.ref_count(id) == 0;
    hit_held.push_back(id);
  }
  if (new_blocks > pool_.num_free_blocks() - hit_free) return std::nullopt;
  // Hybrid: the windowed group grows its table alike (releasing what left
  // its window first), or nothing changes.
  if (window_group_) {
    PrefixHit window_hit;
    if (!hit.block_ids.empty()) {
      CHECK_EQ(hit.window_block_ids.size(), hit.block_ids.size());
      window_hit.block_ids = hit.window_block_ids;
      for (int32_t b : hit.window_block_ids) {
        window_hit.content_ids.push_back(b == kFreedBlock ? 0 : window_group_->pool_.content_id(b));
      }
      window_hit.num_tokens = hit.num_tokens;
    }
    if (!window_group_->AllocateSlots(request_id, num_computed_tokens, num_new_tokens,
                                      window_hit)) {
      return std::nullopt;
    }
  }

  Table& table = tables_[request_id];
  if (!hit.block_ids.empty()) {
    pool_.Touch(hit_held);
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

void KvCacheManager::SetStreamingEviction(int32_t sink_tokens, int32_t window_tokens,
                                          int32_t max_tokens) {
  CHECK_GE(sink_tokens, 0);
  CHECK_GT(window_tokens, 0);
  stream_sink_tokens_ = sink_tokens;
  stream_window_tokens_ = window_tokens;
  stream_max_tokens_ = max_tokens;
  CHECK_GE(MaxStreamingChunk(), 1);
}

int32_t KvCacheManager::StreamSinkTokens() const {
  return (stream_sink_tokens_ + block_size_ - 1) / block_size_ * block_size_;
}

int32_t KvCacheManager::MaxStreamingChunk() const {
  if (!streaming_eviction()) return 0;
  return stream_max_tokens_ - StreamSinkTokens() - stream_window_tokens_ - block_size_ + 1;
}

int32_t KvCacheManager::EvictedTokens(const std::string& request_id) const {
  auto it = tables_.find(request_id);
  return it == tables_.end() ? 0 : it->second.evicted;
}

std::vector<KvBlockMove> KvCacheManager::TakeKvMoves() {
  std::vector<KvBlockMove> moves;
  moves.reserve(pending_moves_.size());
  for (const PendingMove& m : pending_moves_) moves.push_back(m.move);
  pending_moves_.clear();
  return moves;
}

bool KvCacheManager::EvictForStreaming(const std::string& request_id, Table& table,
                                       int32_t kv_len, int32_t num_new_tokens) {
  const int32_t bs = block_size_;
  const int32_t sink = StreamSinkTokens();
  const int32_t sink_blocks = sink / bs;
  // Blocks to drop: enough for the new tokens to fit, and down to the
  // window (so that evictions, and their re-rotations, come in batches);
  // only whole computed blocks after the sinks.
  const int32_t droppable = std::max(0, (kv_len - sink) / bs);
  const int32_t needed =
      (int32_t)(((int64_t)kv_len + num_new_tokens - stream_max_tokens_ + bs - 1) / bs);
  const int32_t to_window = std::max(0, (kv_len - sink - stream_window_tokens_) / bs);
  const int32_t drop = std::max(needed, to_window);
  if (drop > droppable || sink_blocks + drop > (int32_t)table.block_ids.size()) return false;
  // The pool must take the copies of shared blocks and the new blocks.
  const size_t first_kept = (size_t)(sink_blocks + drop);
  int64_t released = 0, copies = 0;
  for (size_t i = sink_blocks; i < first_kept; ++i) {
    const int32_t b = table.block_ids[i];
    released += b != kFreedBlock && pool_.ref_count(b) == 1;
  }
  for (size_t i = first_kept; i < table.block_ids.size(); ++i) {
    const int32_t b = table.block_ids[i];
    copies += b != kFreedBlock && pool_.ref_count(b) > 1;
  }
  const int64_t kept_blocks = (int64_t)table.block_ids.size() - drop;
  const int64_t need_blocks = ((int64_t)kv_len - (int64_t)drop * bs + num_new_tokens + bs - 1) / bs;
  const int64_t new_blocks = std::max<int64_t>(0, need_blocks - kept_blocks);
  if (copies + new_blocks > pool_.num_free_blocks() + released) return false;

  std::vector<int32_t> dropped;
  for (size_t i = sink_blocks; i < first_kept; ++i) {
    if (table.block_ids[i] != kFreedBlock) dropped.push_back(table.block_ids[i]);
  }
  pool_.Free(dropped);  // their KV stays exact for their prefix: cache entries kept
  const int32_t delta = -drop * bs;
  for (size_t i = first_kept; i < table.block_ids.size(); ++i) {
    int32_t& b = table.block_ids[i];
    if (b == kFreedBlock) continue;
    if (pool_.ref_count(b) > 1) {  // shared: rotate a copy, the others keep theirs
      const int32_t copy = pool_.Allocate(1)[0];
      pending_moves_.push_back({request_id, {b, copy, delta}});
      pool_.Free(std::span<const int32_t>(&b, 1));
      b = copy;
    } else {
      pool_.Uncache(b);
      pending_moves_.push_back({request_id, {b, b, delta}});
    }
  }
  table.block_ids.erase(table.block_ids.begin() + sink_blocks,
                        table.block_ids.begin() + first_kept);
  table.content_ids.resize(std::min<size_t>(table.content_ids.size(), sink_blocks));
  table.chain_broken = true;  // its tokens no longer match its blocks' positions
  table.evicted += drop * bs;
  num_evicted_tokens_ += (uint64_t)drop * bs;
  return true;
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
  if (window_group_) {
    window_group_->CommitWindowBlocks(request_id, hashes, tokens, num_computed_tokens, extra_key,
                                      table.content_ids);
  }
}

void KvCacheManager::CommitWindowBlocks(const std::string& request_id,
                                        std::span<const BlockHash> hashes,
                                        std::span<const int32_t> tokens,
                                        int32_t num_computed_tokens, std::string_view extra_key,
                                        std::span<const uint64_t> parents) {
  auto it = tables_.find(request_id);
  if (it == tables_.end()) return;
  Table& table = it->second;
  // As far as the full group's chain goes (it names each block's prefix).
  const size_t num_full = std::min<size_t>({(size_t)num_computed_tokens / block_size_,
                                            hashes.size(), table.block_ids.size(),
                                            parents.size()});
  while (table.content_ids.size() < num_full) {
    const size_t i = table.content_ids.size();
    const int32_t b = table.block_ids[i];
    const uint64_t parent = i == 0 ? BlockPool::kRootContent : parents[i - 1];
    std::span<const int32_t> block_tokens = tokens.subspan(i * block_size_, block_size_);
    uint64_t content = 0;
    if (b == kFreedBlock) {
      // Released before it was indexed: a hole, the chain goes on.
    } else if (const int32_t existing = pool_.FindCached(hashes[i], parent, block_tokens, extra_key);
               existing >= 0) {
      content = pool_.content_id(existing);  // equal content cached already
    } else if (!pool_.is_cached(b)) {
      content = pool_.CacheBlock(b, hashes[i], parent, block_tokens, extra_key);  // 0: collision
    } else {
      content = pool_.content_id(b);
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
  if (window_group_) window_group_->Free(request_id);
  // Its pending re-rotations are moot (and its blocks may be reused).
  std::erase_if(pending_moves_,
                [&](const PendingMove& m) { return m.request_id == request_id; });
}

int32_t KvCacheManager::TruncateTo(const std::string& request_id, int32_t num_tokens) {
  auto it = tables_.find(request_id);
  if (it == tables_.end()) return 0;
  const int32_t window_released =
      window_group_ ? window_group_->TruncateTo(request_id, num_tokens) : 0;
  Table& table = it->second;
  const size_t keep = (size_t)(std::max(0, num_tokens) + block_size_ - 1) / block_size_;
  if (table.block_ids.size() <= keep) return window_released;
  CHECK_LE(table.content_ids.size(), keep);
  std::vector<int32_t> reversed;
  for (size_t i = table.block_ids.size(); i > keep; --i) {
    if (table.block_ids[i - 1] != kFreedBlock) reversed.push_back(table.block_ids[i - 1]);
  }
  table.block_ids.resize(keep);
  pool_.Free(reversed);
  return (int32_t)reversed.size() + window_released;
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
  if (window_group_) {
    // Both groups hold a table of the same length for every request.
    window_group_->CheckInvariants();
    CHECK_EQ(window_group_->num_requests(), num_requests());
    for (const auto& [id, table] : tables_) {
      CHECK_EQ(window_group_->BlockTable(id).size(), table.block_ids.size());
    }
  }
}

}  // namespace tern
