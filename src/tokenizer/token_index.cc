#include "tokenizer/token_index.h"

#include <algorithm>

namespace tern {

void TokenIndex::Build(const std::vector<std::string>* texts, bool keep_first) {
  std::vector<int32_t> ids(texts->size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = (int32_t)i;
  BuildSubset(texts, ids, keep_first);
}

void TokenIndex::BuildSubset(const std::vector<std::string>* texts,
                             const std::vector<int32_t>& ids, bool keep_first) {
  texts_ = texts;
  size_t capacity = 16;
  while (capacity < ids.size() * 2) capacity *= 2;
  slots_.assign(capacity, kEmpty);
  mask_ = capacity - 1;
  max_length_ = 0;
  for (int32_t id : ids) Insert(id, keep_first);
}

void TokenIndex::Insert(int32_t id, bool keep_first) {
  const std::string& text = (*texts_)[id];
  max_length_ = std::max(max_length_, text.size());
  const uint64_t h = Hash(text);
  const uint64_t tagged = (h >> 32) << 32 | (uint32_t)id;
  for (size_t i = h & mask_;; i = (i + 1) & mask_) {
    uint64_t& slot = slots_[i];
    if (slot == kEmpty) {
      slot = tagged;
      return;
    }
    const int32_t other = (int32_t)(uint32_t)slot;
    if ((*texts_)[other] == text) {
      if (!keep_first) slot = tagged;
      return;
    }
  }
}

}  // namespace tern
