#include "kv/block_hash.h"

namespace tern {
namespace {

constexpr BlockHash kRootHash = 0x6a09e667f3bcc908ULL;

inline uint64_t Mix(uint64_t h, uint64_t v) {
  // splitmix64 finaliser over the running state.
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebULL;
  h ^= h >> 31;
  return h;
}

}  // namespace

BlockHash HashBlock(BlockHash parent, std::span<const int32_t> tokens,
                    std::string_view extra_key) {
  uint64_t h = Mix(kRootHash, parent);
  h = Mix(h, tokens.size());
  for (int32_t t : tokens) h = Mix(h, (uint32_t)t);
  h = Mix(h, extra_key.size());
  for (unsigned char c : extra_key) h = Mix(h, c);
  return h;
}

void ExtendBlockHashes(std::span<const int32_t> tokens, int32_t block_size,
                       std::string_view extra_key, std::vector<BlockHash>* hashes) {
  const size_t num_full = tokens.size() / block_size;
  while (hashes->size() < num_full) {
    const size_t i = hashes->size();
    const BlockHash parent = i == 0 ? kRootHash : (*hashes)[i - 1];
    hashes->push_back(HashBlock(parent, tokens.subspan(i * block_size, block_size), extra_key));
  }
}

}  // namespace tern
