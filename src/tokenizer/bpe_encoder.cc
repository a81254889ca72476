#include "tokenizer/bpe_encoder.h"

#include <algorithm>
#include <queue>
#include <unordered_map>

#include "tokenizer/unicode.h"

namespace tern {
namespace {

constexpr size_t kMaxCachedWordBytes = 64;

struct WordHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return TokenIndex::Hash(s); }
};

struct Symbol {
  int32_t prev;
  int32_t next;
  uint32_t offset;  // into the word
  uint32_t length;  // 0 once merged into its left neighbour
};

struct Bigram {
  int32_t left;
  int32_t right;
  int32_t rank;
  uint32_t length;
};

// Lowest rank first; on ties the leftmost pair.
struct BigramOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

}  // namespace

StatusOr<std::unique_ptr<BpeEncoder>> BpeEncoder::Create(const Vocab& vocab,
                                                         const TokenIndex& index) {
  std::unique_ptr<BpeEncoder> enc(new BpeEncoder(vocab, index));
  TERN_ASSIGN_OR_RETURN(enc->pre_tokenizer_, PreTokenizer::Create(vocab.pre));
  // A merge "left right" splits at its first space after the first byte, so
  // " x" pieces survive; entries without such a space merge nothing.
  std::vector<int32_t> ranked;
  ranked.reserve(vocab.merges.size());
  for (size_t i = 0; i < vocab.merges.size(); ++i) {
    if (vocab.merges[i].find(' ', 1) != std::string::npos) ranked.push_back((int32_t)i);
  }
  enc->ranks_.BuildSubset(&vocab.merges, ranked, /*keep_first=*/true);
  return enc;
}

int32_t BpeEncoder::Rank(std::string_view left, std::string_view right, std::string* key) const {
  // A left piece with a space after its first byte cannot come from a merge
  // entry (those split at that space), so it has no rank.
  if (left.size() > 1 && left.find(' ', 1) != std::string_view::npos) return -1;
  key->assign(left);
  key->push_back(' ');
  key->append(right);
  return FindToken(ranks_, *key);
}

void BpeEncoder::EncodeWord(std::string_view word, std::vector<int32_t>* out,
                            std::string* key) const {
  if (word.empty()) return;
  std::vector<Symbol> symbols;
  if (vocab_.ignore_merges) {
    const int32_t id = FindToken(index_, word);
    if (id >= 0) {
      out->push_back(id);
      return;
    }
  }
  symbols.reserve(word.size());
  for (size_t offset = 0; offset < word.size();) {
    const size_t len = std::min(Utf8SequenceLength((uint8_t)word[offset]), word.size() - offset);
    const int32_t index = (int32_t)symbols.size();
    offset += len;
    symbols.push_back({index - 1, offset == word.size() ? -1 : index + 1,
                       (uint32_t)(offset - len), (uint32_t)len});
  }
  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
  auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols[left];
    const Symbol& r = symbols[right];
    const int32_t rank =
        Rank(word.substr(l.offset, l.length), word.substr(r.offset, r.length), key);
    if (rank < 0) return;
    queue.push({left, right, rank, l.length + r.length});
  };
  for (int32_t i = 1; i < (int32_t)symbols.size(); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    const Bigram bigram = queue.top();
    queue.pop();
    Symbol& left = symbols[bigram.left];
    Symbol& right = symbols[bigram.right];
    if (left.length == 0 || right.length == 0 || left.length + right.length != bigram.length) {
      continue;  // stale
    }
    left.length += right.length;
    right.length = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = bigram.left;
    try_add(left.prev, bigram.left);
    try_add(bigram.left, left.next);
  }

  for (int32_t i = 0; i != -1; i = symbols[i].next) {
    const std::string_view piece = word.substr(symbols[i].offset, symbols[i].length);
    const int32_t id = FindToken(index_, piece);
    if (id >= 0) {
      out->push_back(id);
      continue;
    }
    for (size_t k = 0; k < piece.size(); ++k) {
      const int32_t byte_id = FindToken(index_, piece.substr(k, 1));
      if (byte_id >= 0) out->push_back(byte_id);
    }
  }
}

void BpeEncoder::Encode(std::string_view text, std::vector<int32_t>* out) const {
  std::string key;
  // Words repeat a lot in real text: remember each distinct word's ids.
  std::unordered_map<std::string, std::pair<uint32_t, uint32_t>, WordHash, std::equal_to<>>
      seen;  // word -> (offset in *out, count) of its first encoding
  for (const std::string& word : pre_tokenizer_->Split(text)) {
    if (auto it = seen.find(word); it != seen.end()) {
      const auto [offset, count] = it->second;
      for (uint32_t k = 0; k < count; ++k) out->push_back((*out)[offset + k]);
      continue;
    }
    const size_t before = out->size();
    EncodeWord(word, out, &key);
    if (word.size() <= kMaxCachedWordBytes) {
      seen.emplace(word, std::make_pair((uint32_t)before, (uint32_t)(out->size() - before)));
    }
  }
}

}  // namespace tern
