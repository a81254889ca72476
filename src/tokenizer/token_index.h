// TokenIndex: text -> id over a list of strings it does not own (a vocabulary's
// token texts or BPE merges), as a flat open-addressing hash table: lookups by
// std::string_view, no allocation, one probe sequence in a power-of-two array.
// When a text occurs twice the later id wins unless keep_first is set.
//
// Thread rules: immutable after Build(); Find() may run on any thread. The
// strings must outlive the index and must not change.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tern {

class TokenIndex {
 public:
  void Build(const std::vector<std::string>* texts, bool keep_first = false);
  // Adds texts[id] (texts as given to Build); used to index a subset.
  void BuildSubset(const std::vector<std::string>* texts, const std::vector<int32_t>& ids,
                   bool keep_first);

  // The id of text, or -1.
  int32_t Find(std::string_view text) const {
    if (slots_.empty()) return -1;
    const uint64_t h = Hash(text);
    const uint32_t tag = (uint32_t)(h >> 32);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const uint64_t slot = slots_[i];
      if (slot == kEmpty) return -1;
      const int32_t id = (int32_t)(uint32_t)slot;
      if ((uint32_t)(slot >> 32) == tag && (*texts_)[id] == text) return id;
    }
  }
  size_t max_length() const { return max_length_; }

  static uint64_t Hash(std::string_view s) {
    uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
    for (char c : s) h = (h ^ (uint8_t)c) * 0x100000001b3ull;
    return h ^ (h >> 29);
  }

 private:
  static constexpr uint64_t kEmpty = ~0ull;
  void Insert(int32_t id, bool keep_first);

  const std::vector<std::string>* texts_ = nullptr;
  std::vector<uint64_t> slots_;  // (hash tag << 32) | id, or kEmpty
  size_t mask_ = 0;
  size_t max_length_ = 0;
};

// Returns the id of text, or -1.
inline int32_t FindToken(const TokenIndex& index, std::string_view text) {
  return index.Find(text);
}

}  // namespace tern
