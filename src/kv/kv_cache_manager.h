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
// Invariants (CheckInvariants): every block's ref_count equals the number of
// block tables holding it; plus BlockPool's own.
//
// Thread rules: owned by the engine thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kv/block_hash.h"
#include "kv/block_pool.h"

namespace tern {

// The cached prefix found for a request: blocks to share, their content ids.
struct PrefixHit {
  std::vector<int32_t> block_ids;
  std::vector<uint64_t> content_ids;
  int32_t num_tokens = 0;  // block_ids.size() * block_size
};

class KvCacheManager {
 public:
  KvCacheManager(int32_t num_blocks, int32_t block_size, bool enable_prefix_caching);

  int32_t block_size() const { return block_size_; }
  bool prefix_caching() const { return prefix_caching_; }
  const BlockPool& pool() const { return pool_; }
  int32_t num_free_blocks() const { return pool_.num_free_blocks(); }
  double Usage() const { return pool_.Usage(); }

  // Longest cached run of the full blocks of tokens (hashes of those blocks
  // given), using at most tokens.size() - 1 tokens. Empty when caching is off.
  PrefixHit FindCachedPrefix(std::span<const BlockHash> hashes,
                             std::span<const int32_t> tokens,
                             std::string_view extra_key) const;

  // Grows the request's block table to cover num_computed_tokens +
  // num_new_tokens tokens. hit (first call only) is shared first; then
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
  };

  int32_t block_size_;
  bool prefix_caching_;
  BlockPool pool_;
  std::unordered_map<std::string, Table> tables_;
};

}  // namespace tern
