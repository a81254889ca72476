// KvCacheManager: each request's block table over a shared BlockPool, and
// the prefix cache on top of it.
//
// A request's block table covers its tokens [0, num_tokens): position p lives
// in block table[p / block_size] at offset p % block_size. The scheduler asks
// AllocateSlots(request, ...) before computing new tokens; nullopt means "does
// not fit" (an expected outcome: the scheduler preempts), never an error, and
// changes nothing.
//
// Prefix caching (when enabled): once a request's full block has its KV
// computed, CommitFullBlocks indexes it by its chained BlockHash. A new
// request asks FindCachedPrefix for the longest run of its full blocks already
// cached — capped so that at least its last token is recomputed (its logits
// are needed) — and passes the hit to its first AllocateSlots, which shares
// those blocks. Free() releases a table last block first, so when blocks of a
// finished request are evicted its tail goes before its shared head.
//
// Sliding window (SetSlidingWindow, for models whose every layer attends
// through a window of W positions): before a request's new tokens get slots,
// the blocks wholly before the window of its first new token are released,
// and their table entries become kFreedBlock (-1); the table keeps its length
// so position p still maps to entry p / block_size:
//
//   next position p = 13, W = 6, block_size 4: p sees positions 8..13
//   table [ -1 | -1 | b5 | b8 ]      positions 0-3 and 4-7 are never read again
//
// A released block keeps its prefix-cache entry (its KV is still exact for
// its prefix), so another request may share it back from the free queue.
//
// Hybrid models (SetWindowGroup: some layers windowed, the others global, as
// gemma2/gemma3): the windowed layers' K/V live in a second group of blocks
// (KvShape::window_group_layers) with its own pool and its own table per
// request, held by a second KvCacheManager with the sliding window set. This
// manager's pool and tables are the global ("full") layers': they keep every
// position. AllocateSlots grows both tables to the same length (or neither);
// the window group releases its blocks before the window as above:
//
//   W = 6, block_size 4, next position 13:
//   full table   [ b0 | b1 | b2 | b3 ]    every block kept
//   window table [ -1 | -1 | w5 | w8 ]    released outside the window
//
// Free and TruncateTo act on both; Usage() weighs each pool's held blocks by
// its layers' bytes.
//
// Prefix caching on a hybrid model: the windowed group indexes its blocks
// under the same hashes, each keyed by the full group's content id of the
// block before it (the full group's chain names the prefix; the windowed
// group's own chain has holes where blocks were released). A hit is the
// full group's longest cached run, shortened until the windowed group also
// holds every block of its last window (what the next token reads there);
// the windowed table starts with -1 entries before that window.
//
// Streaming eviction (SetStreamingEviction, opt-in for any model): a request
// never holds more than max_tokens positions. When its next tokens would pass
// that, whole blocks after its sink blocks (the first ceil(S / block_size)
// blocks) are dropped from its table, leaving at least window_tokens recent
// positions; the blocks after the dropped ones move down in position, so
// their keys are re-rotated by -dropped (KvBlockMove, applied by the model
// runner before the step's forward pass, as Model::RotateKeys):
//
//   block_size 4, sinks 4, window 6, max 16; 16 computed, 1 new token:
//   table [ s0 | a | b | c ]  ->  [ s0 | c' ]   a, b dropped (8 tokens),
//                                               c re-rotated by -8 (c' = c
//                                               in place, or a copy when c
//                                               is shared with another table)
//
// The request's token i (i >= its evicted count + sinks) then lives at KV
// position i - EvictedTokens(id). Re-rotated blocks leave the prefix cache
// (their content no longer matches their hash) and the request indexes no
// more blocks; dropped blocks keep their entries (their KV is still exact
// for their prefix). A cached prefix is reused only within the sinks plus
// the window, so a new request's first allocation never evicts.
//
// Invariants (CheckInvariants): every block's ref_count equals the number of
// block tables holding it; plus BlockPool's own.
//
// Thread rules: owned by the engine thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kv/block_hash.h"
#include "kv/block_pool.h"

namespace tern {

// One KV block rewritten by streaming eviction: every slot of src_block,
// keys rotated by delta positions, written to the same slot of dst_block
// (dst == src: in place).
struct KvBlockMove {
  int32_t src_block = 0;
  int32_t dst_block = 0;
  int32_t delta = 0;
};

// The cached prefix found for a request: blocks to share, their content ids.
struct PrefixHit {
  std::vector<int32_t> block_ids;
  std::vector<uint64_t> content_ids;
  int32_t num_tokens = 0;  // block_ids.size() * block_size
  // Hybrid models: the windowed group's blocks of the same positions, -1
  // for those before the window of the first token after the hit.
  std::vector<int32_t> window_block_ids;
};

class KvCacheManager {
 public:
  // A table entry whose block was released outside the sliding window.
  static constexpr int32_t kFreedBlock = -1;

  KvCacheManager(int32_t num_blocks, int32_t block_size, bool enable_prefix_caching);

  // Every layer of the model attends only to the last window_tokens
  // positions: release blocks outside it while requests run. 0 = off.
  void SetSlidingWindow(int32_t window_tokens) { sliding_window_ = window_tokens; }
  int32_t sliding_window() const { return sliding_window_; }
  // Blocks released outside the window so far (both groups).
  uint64_t num_window_freed_blocks() const {
    return num_window_freed_blocks_ + (window_group_ ? window_group_->num_window_freed_blocks() : 0);
  }

  // Hybrid models (see above): a second group of num_blocks blocks for the
  // windowed layers, releasing blocks outside window_tokens; full_layers and
  // windowed_layers weigh the pools in Usage(). Call before any allocation;
  // not with streaming eviction or this manager's own sliding window. With
  // prefix caching, the windowed group caches too (see above).
  void SetWindowGroup(int32_t num_blocks, int32_t window_tokens, int32_t full_layers,
                      int32_t windowed_layers);
  // The windowed layers' group (null when the model has one group).
  const KvCacheManager* window_group() const { return window_group_.get(); }
  // The request's table in the windowed group (empty without one).
  std::span<const int32_t> WindowBlockTable(const std::string& request_id) const {
    return window_group_ ? window_group_->BlockTable(request_id) : std::span<const int32_t>();
  }

  // Streaming eviction (see above): sinks + a recent window within
  // max_tokens positions per request. Requires sink_tokens rounded up to
  // the block size + window_tokens + block_size <= max_tokens, and chunks
  // of at most max_tokens - that + 1 new tokens (MaxStreamingChunk).
  void SetStreamingEviction(int32_t sink_tokens, int32_t window_tokens, int32_t max_tokens);
  bool streaming_eviction() const { return stream_max_tokens_ > 0; }
  // The most new tokens one AllocateSlots may ask for with streaming
  // eviction on (the engine caps its step budget to it); 0 when off.
  int32_t MaxStreamingChunk() const;
  // Tokens dropped from the request's KV so far (0 for unknown ids).
  int32_t EvictedTokens(const std::string& request_id) const;
  // Tokens dropped by streaming eviction, all requests, since start.
  uint64_t num_evicted_tokens() const { return num_evicted_tokens_; }
  // The block rewrites recorded since the last call (apply before the next
  // forward pass, in order).
  std::vector<KvBlockMove> TakeKvMoves();

  int32_t block_size() const { return block_size_; }
  bool prefix_caching() const { return prefix_caching_; }
  const BlockPool& pool() const { return pool_; }
  int32_t num_free_blocks() const { return pool_.num_free_blocks(); }
  // Fraction of the KV bytes held by requests (both groups, by their bytes).
  double Usage() const;

  // Longest cached run of the full blocks of tokens (hashes of those blocks
  // given), using at most tokens.size() - 1 tokens. Empty when caching is off.
  PrefixHit FindCachedPrefix(std::span<const BlockHash> hashes,
                             std::span<const int32_t> tokens,
                             std::string_view extra_key) const;

  // Grows the request's block table to cover num_computed_tokens +
  // num_new_tokens tokens (first releasing the blocks outside the sliding
  // window of position num_computed_tokens, when a window is set; with
  // streaming eviction the counts are the request's tokens, and its KV
  // positions are those less EvictedTokens). hit (first call only) is shared first; then
  // num_computed_tokens must equal hit.num_tokens. Returns the newly
  // allocated block ids, or nullopt (nothing changed) when the pool is short.
  std::optional<std::vector<int32_t>> AllocateSlots(const std::string& request_id,
                                                    int32_t num_computed_tokens,
                                                    int32_t num_new_tokens,
                                                    const PrefixHit& hit = {});

  // Indexes the request's full blocks whose KV is computed (the first
  // num_computed_tokens of tokens) that are not indexed yet. hashes covers at
  // least those blocks. No-op when caching is off.
  void CommitFullBlocks(const std::string& request_id, std::span<const BlockHash> hashes,
                        std::span<const int32_t> tokens, int32_t num_computed_tokens,
                        std::string_view extra_key);

  // Releases the request's blocks (last block first). Unknown ids: no-op.
  void Free(const std::string& request_id);

  // Shrinks the request's block table to the blocks covering its first
  // num_tokens tokens and returns the rest to the pool (last first): the
  // rollback of rejected speculative tokens. Blocks already indexed in the
  // prefix cache are never dropped (they cover computed, accepted tokens, so
  // num_tokens never reaches below them). Returns the blocks released.
  int32_t TruncateTo(const std::string& request_id, int32_t num_tokens);

  // The request's block table (empty for unknown ids).
  std::span<const int32_t> BlockTable(const std::string& request_id) const;
  int32_t num_requests() const { return (int32_t)tables_.size(); }

  void CheckInvariants() const;

 private:
  struct Table {
    std::vector<int32_t> block_ids;
    // Content id of each indexed leading block (the chain's parents).
    std::vector<uint64_t> content_ids;
    bool chain_broken = false;  // a hash collision stopped indexing
    int32_t evicted = 0;        // tokens dropped by streaming eviction
  };
  struct PendingMove {
    std::string request_id;
    KvBlockMove move;
  };

  // Releases the blocks of table wholly before the window of position
  // next_position.
  void FreeOutsideWindow(Table& table, int32_t next_position);
  // The windowed group (called on it by the full group's manager): the ids
  // of blocks [0, num_blocks) of tokens for a hit of num_blocks blocks,
  // -1 before the window of position num_blocks * block_size; empty when
  // one of the window's blocks is not cached. parents: the full group's
  // content ids of those blocks.
  std::vector<int32_t> FindWindowHit(std::span<const BlockHash> hashes,
                                     std::span<const int32_t> tokens,
                                     std::string_view extra_key,
                                     std::span<const uint64_t> parents,
                                     size_t num_blocks) const;
  // The windowed group: indexes the request's computed full blocks under
  // the full group's chain (parents, that group's content ids of the table).
  void CommitWindowBlocks(const std::string& request_id, std::span<const BlockHash> hashes,
                          std::span<const int32_t> tokens, int32_t num_computed_tokens,
                          std::string_view extra_key, std::span<const uint64_t> parents);
  // Streaming eviction before num_new_tokens more at KV position kv_len:
  // false (nothing changed) when the pool cannot take the copies and the
  // new blocks together.
  bool EvictForStreaming(const std::string& request_id, Table& table, int32_t kv_len,
                         int32_t num_new_tokens);
  int32_t StreamSinkTokens() const;  // sink tokens rounded up to whole blocks

  int32_t block_size_;
  bool prefix_caching_;
  int32_t sliding_window_ = 0;
  uint64_t num_window_freed_blocks_ = 0;
  int32_t stream_sink_tokens_ = 0;
  int32_t stream_window_tokens_ = 0;
  int32_t stream_max_tokens_ = 0;  // 0 = streaming eviction off
  uint64_t num_evicted_tokens_ = 0;
  std::vector<PendingMove> pending_moves_;
  // Hybrid models: the windowed layers' group, and the layer counts that
  // weigh the two pools in Usage().
  std::unique_ptr<KvCacheManager> window_group_;
  int32_t full_layers_ = 0;
  int32_t windowed_layers_ = 0;
  BlockPool pool_;
  std::unordered_map<std::string, Table> tables_;
};

}  // namespace tern
