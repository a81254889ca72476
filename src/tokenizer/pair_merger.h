// The pair-merge loop shared by the SentencePiece (SpmEncoder) and byte-level
// BPE (BpeEncoder) encoders: the text is split into UTF-8 characters, kept as
// a linked list of symbols; the best adjacent pair (highest priority; ties:
// leftmost) whose concatenation the encoder accepts is merged, and the new
// neighbours are queued, until no pair is left. A queued pair whose side was
// merged away or grew since is skipped when popped (lazy invalidation), so
// the whole merge is O(n log n).
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "tokenizer/unicode.h"

namespace tern {

struct MergeSymbol {
  int32_t prev;
  int32_t next;     // -1 at the end
  uint32_t offset;  // into the text
  uint32_t length;  // 0 once merged into its left neighbour
};

// Priority: ordered by `<` (a larger one merges first).
template <typename Priority>
class PairMerger {
 public:
  // Merges the characters of text. priority(left, right) gives the priority
  // of merging two adjacent pieces, or nullopt where they must not merge.
  // Returns the symbols; the pieces are those reached from index 0 by `next`.
  template <typename PriorityFn>
  const std::vector<MergeSymbol>& Merge(std::string_view text, PriorityFn priority) {
    symbols_.clear();
    heap_.clear();
    for (size_t offset = 0; offset < text.size();) {
      const size_t len = std::min(Utf8SequenceLength((uint8_t)text[offset]), text.size() - offset);
      const int32_t index = (int32_t)symbols_.size();
      offset += len;
      symbols_.push_back({index - 1, offset == text.size() ? -1 : index + 1,
                          (uint32_t)(offset - len), (uint32_t)len});
    }
    auto try_add = [&](int32_t left, int32_t right) {
      if (left < 0 || right < 0) return;
      const MergeSymbol& l = symbols_[left];
      const MergeSymbol& r = symbols_[right];
      const std::optional<Priority> p =
          priority(text.substr(l.offset, l.length), text.substr(r.offset, r.length));
      if (!p) return;
      heap_.push_back({left, right, *p, l.length + r.length});
      std::push_heap(heap_.begin(), heap_.end(), Order());
    };
    for (int32_t i = 1; i < (int32_t)symbols_.size(); ++i) try_add(i - 1, i);
    while (!heap_.empty()) {
      std::pop_heap(heap_.begin(), heap_.end(), Order());
      const Candidate pair = heap_.back();
      heap_.pop_back();
      MergeSymbol& left = symbols_[pair.left];
      MergeSymbol& right = symbols_[pair.right];
      if (left.length == 0 || right.length == 0 || left.length + right.length != pair.length) {
        continue;  // stale
      }
      left.length += right.length;
      right.length = 0;
      left.next = right.next;
      if (right.next >= 0) symbols_[right.next].prev = pair.left;
      try_add(left.prev, pair.left);
      try_add(pair.left, left.next);
    }
    return symbols_;
  }

 private:
  struct Candidate {
    int32_t left;
    int32_t right;
    Priority priority;
    uint32_t length;  // of both sides when queued
  };
  // Max-heap: the highest priority on top; on ties the leftmost pair.
  struct Order {
    bool operator()(const Candidate& a, const Candidate& b) const {
      return a.priority < b.priority || (!(b.priority < a.priority) && a.left > b.left);
    }
  };

  std::vector<MergeSymbol> symbols_;
  std::vector<Candidate> heap_;
};

}  // namespace tern
