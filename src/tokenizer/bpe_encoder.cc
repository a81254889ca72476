#include "tokenizer/bpe_encoder.h"

#include <algorithm>
#include <unordered_map>

#include "tokenizer/pair_merger.h"
#include "tokenizer/unicode.h"

namespace tern {
namespace {

constexpr size_t kMaxCachedWordBytes = 64;

struct WordHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return TokenIndex::Hash(s); }
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
  if (vocab_.ignore_merges) {
    const int32_t id = FindToken(index_, word);
    if (id >= 0) {
      out->push_back(id);
      return;
    }
  }
  PairMerger<int32_t> merger;  // priority: -rank (the lowest rank merges first)
  const std::vector<MergeSymbol>& symbols =
      merger.Merge(word, [&](std::string_view left, std::string_view right) -> std::optional<int32_t> {
        const int32_t rank = Rank(left, right, key);
        if (rank < 0) return std::nullopt;
        return -rank;
      });
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
