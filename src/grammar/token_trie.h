// TokenTrie: the vocabulary's token pieces (decoded bytes) as a trie, so a
// grammar state is checked against every token by one walk that shares work
// between tokens with a common prefix:
//
//   root ─'{'─ n1 [tok "{"] ─'"'─ n2 [tok "{\""]
//        └'"'─ n3 [tok "\""] ─'n'─ n4 ─'a'─ n5 [tok "\"na"]
//
// Nodes are laid out breadth first, so a node's children are one contiguous
// run of `nodes`. Tokens with an empty piece (control tokens, end of
// generation) are not in the trie; end-of-generation ids are kept aside.
//
// Thread rules: immutable after construction.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tern::grammar {

class TokenTrie {
 public:
  struct Node {
    uint8_t byte = 0;
    int32_t children_begin = 0, children_end = 0;  // into nodes
    int32_t tokens_begin = 0, tokens_end = 0;      // into token_ids
  };

  // pieces[id]: the bytes token id decodes to ("" for tokens a grammar never
  // produces); eog_ids: end-of-generation tokens.
  TokenTrie(const std::vector<std::string>& pieces, std::vector<int32_t> eog_ids);

  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<int32_t>& token_ids() const { return token_ids_; }
  const std::vector<int32_t>& eog_ids() const { return eog_ids_; }
  const std::string& piece(int32_t id) const { return pieces_[id]; }
  int32_t vocab_size() const { return (int32_t)pieces_.size(); }
  size_t max_piece_bytes() const { return max_piece_bytes_; }

  // The longest token whose piece is a prefix of text (-1: none).
  int32_t LongestPrefixToken(std::string_view text, size_t* len) const;

 private:
  std::vector<Node> nodes_;  // nodes_[0]: root
  std::vector<int32_t> token_ids_;
  std::vector<int32_t> eog_ids_;
  std::vector<std::string> pieces_;
  size_t max_piece_bytes_ = 0;
};

}  // namespace tern::grammar
