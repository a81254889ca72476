// Helpers the KV cache manager's tests share (kv_cache_manager_test,
// sliding_window_test, streaming_eviction_test): token ranges, the block
// hashes of a token list, a request's block table, freeing every request.
#pragma once

#include <gtest/gtest.h>

#include <initializer_list>
#include <numeric>
#include <string>
#include <string_view>
#include <vector>

#include "kv/kv_cache_manager.h"

namespace tern::kv_test {

using Ids = std::vector<int32_t>;

// begin, begin + 1, ..., begin + n - 1.
inline Ids Range(int32_t begin, int32_t n) {
  Ids v(n);
  std::iota(v.begin(), v.end(), begin);
  return v;
}

inline std::vector<BlockHash> Hashes(const Ids& tokens, int32_t block_size,
                                     std::string_view salt = "") {
  std::vector<BlockHash> h;
  ExtendBlockHashes(tokens, block_size, salt, &h);
  return h;
}

inline Ids Table(const KvCacheManager& m, const std::string& id) {
  auto t = m.BlockTable(id);
  return Ids(t.begin(), t.end());
}

// Frees the requests `ids`; then all num_blocks blocks are free and the
// manager's invariants hold.
inline void FreeAllAndCheck(KvCacheManager& m, std::initializer_list<const char*> ids,
                            int32_t num_blocks) {
  for (const char* id : ids) m.Free(id);
  EXPECT_EQ(m.num_free_blocks(), num_blocks);
  m.CheckInvariants();
}

}  // namespace tern::kv_test
