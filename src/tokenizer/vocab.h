// Vocab: the tokenizer description stored in a GGUF file's tokenizer.ggml.*
// metadata, as one plain record: token texts, scores, types, BPE merges,
// special token ids and flags, with the per-model defaults of the reference
// implementation applied (llama/SentencePiece: add BOS and a space prefix;
// gpt2/byte-level BPE: no BOS unless the key or the pre-tokenizer asks; bert:
// CLS ... SEP).
//
// Invariants after FromGguf()/Validate(): tokens, scores and token_types have
// the same length (> 0); every special id is -1 (none) or a valid index.
// Immutable after construction; any thread may read.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace tern {

namespace gguf {
class GgufFile;
}

enum class VocabType {
  kSpm,  // tokenizer.ggml.model "llama": SentencePiece BPE with scores
  kBpe,  // "gpt2": byte-level BPE with merges
  kWpm,  // "bert": WordPiece
};

// tokenizer.ggml.token_type values.
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

constexpr int32_t kNoToken = -1;

struct Vocab {
  VocabType type = VocabType::kSpm;
  std::string model;  // tokenizer.ggml.model as stored
  std::string pre;    // tokenizer.ggml.pre ("" when absent)
  std::string general_name;  // general.name, lowercased (some rules key on it)

  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<TokenType> token_types;
  std::vector<std::string> merges;  // "left right", rank = index

  int32_t bos_id = kNoToken;
  int32_t eos_id = kNoToken;
  int32_t unk_id = kNoToken;
  int32_t sep_id = kNoToken;
  int32_t pad_id = kNoToken;
  int32_t eot_id = kNoToken;
  int32_t eom_id = kNoToken;
  int32_t mask_id = kNoToken;

  bool add_bos = false;
  bool add_eos = false;
  bool add_sep = false;  // bert: append SEP when adding specials
  bool add_space_prefix = false;
  bool remove_extra_whitespaces = false;  // read and kept; the reference's
                                          // llama/gpt2/bert paths ignore it
  bool ignore_merges = false;  // llama3-style BPE: a word that is a token is kept whole

  int32_t size() const { return (int32_t)tokens.size(); }

  // Reads tokenizer.ggml.* from a GGUF file and validates it.
  static StatusOr<Vocab> FromGguf(const gguf::GgufFile& file);

  // Sets type, flags and default special ids for `model` (and `pre`) the way
  // the reference implementation does before reading the optional keys.
  // Fails for an unknown model name.
  Status ApplyModelDefaults();

  // Checks the invariants above; errors name the offending field.
  Status Validate() const;
};

}  // namespace tern
