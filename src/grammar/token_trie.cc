#include "grammar/token_trie.h"

#include <algorithm>
#include <map>

namespace tern::grammar {

TokenTrie::TokenTrie(const std::vector<std::string>& pieces, std::vector<int32_t> eog_ids)
    : eog_ids_(std::move(eog_ids)), pieces_(pieces) {
  // A pointer trie first, then flattened breadth first.
  struct Build {
    std::map<uint8_t, int32_t> children;
    std::vector<int32_t> tokens;
  };
  std::vector<Build> tmp(1);
  for (int32_t id = 0; id < (int32_t)pieces.size(); ++id) {
    const std::string& p = pieces[id];
    if (p.empty() || std::count(eog_ids_.begin(), eog_ids_.end(), id)) continue;
    max_piece_bytes_ = std::max(max_piece_bytes_, p.size());
    int32_t node = 0;
    for (char c : p) {
      auto it = tmp[node].children.find((uint8_t)c);
      if (it == tmp[node].children.end()) {
        tmp.emplace_back();
        it = tmp[node].children.emplace((uint8_t)c, (int32_t)tmp.size() - 1).first;
      }
      node = it->second;
    }
    tmp[node].tokens.push_back(id);
  }
  // BFS order: queue[i] is the pointer-trie node that becomes nodes_[i].
  std::vector<int32_t> queue = {0};
  nodes_.resize(tmp.size());
  for (size_t i = 0; i < queue.size(); ++i) {
    const Build& b = tmp[queue[i]];
    Node& n = nodes_[i];
    n.children_begin = (int32_t)queue.size();
    for (const auto& [byte, child] : b.children) {
      nodes_[queue.size()].byte = byte;
      queue.push_back(child);
    }
    n.children_end = (int32_t)queue.size();
    n.tokens_begin = (int32_t)token_ids_.size();
    token_ids_.insert(token_ids_.end(), b.tokens.begin(), b.tokens.end());
    n.tokens_end = (int32_t)token_ids_.size();
  }
}

int32_t TokenTrie::LongestPrefixToken(std::string_view text, size_t* len) const {
  int32_t best = -1;
  int32_t node = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const Node& n = nodes_[node];
    int32_t next = -1;
    for (int32_t c = n.children_begin; c < n.children_end; ++c) {
      if (nodes_[c].byte == (uint8_t)text[i]) {
        next = c;
        break;
      }
    }
    if (next < 0) break;
    node = next;
    if (nodes_[node].tokens_end > nodes_[node].tokens_begin) {
      best = token_ids_[nodes_[node].tokens_begin];
      *len = i + 1;
    }
  }
  return best;
}

}  // namespace tern::grammar
