// Block hashes for the prefix cache: every FULL block of a token sequence gets
//
//   hash[i] = H(hash[i-1], tokens[i*B .. (i+1)*B), extra_key)   (hash[-1] = seed)
//
// so equal hashes mean (almost surely) equal prefixes. The hash is only an
// index: BlockPool stores each cached block's token ids, extra key and parent
// so that a lookup verifies the exact key and a collision can never hand out
// wrong KV. extra_key isolates tenants (cache_salt) and anything else that
// changes the KV of the same tokens.
//
// Thread rules: pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace tern {

using BlockHash = uint64_t;

BlockHash HashBlock(BlockHash parent, std::span<const int32_t> tokens,
                    std::string_view extra_key);

// Appends the hashes of the full blocks of tokens not yet in *hashes
// (hashes->size() blocks are taken as already hashed).
void ExtendBlockHashes(std::span<const int32_t> tokens, int32_t block_size,
                       std::string_view extra_key, std::vector<BlockHash>* hashes);

}  // namespace tern
