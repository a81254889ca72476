// Tokenizer: text <-> token ids for a GGUF vocabulary, matching the reference
// implementation token for token (SentencePiece-style "llama", byte-level BPE
// "gpt2" with the pre-tokenizer named by tokenizer.ggml.pre, WordPiece "bert").
//
// Special tokens: control (type 3) and unknown (type 2) token texts, the
// role tokens (BOS, EOS, SEP, PAD, ...) and user-defined tokens shaped like a
// special token ("</s>", "<pad>", "[MASK]") are recognised in the input only
// when parse_special is true, for every vocabulary type; other user-defined
// tokens (type 4) are always recognised, as the reference does. Longer
// special texts are matched first, splitting the text into fragments.
//
// Decoding: a piece is the token's bytes (U+2581 -> space, <0xNN> -> the raw
// byte, byte-level BPE alphabet -> bytes). Control and unknown tokens render
// as their text unless skip_special. When the vocabulary adds a space prefix,
// the first piece after an optional leading BOS loses one leading space, so
// Decode(Encode(x)) == x for lossless vocabularies.
//
// Thread rules: immutable after Create(); every method may run on any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "tokenizer/token_index.h"
#include "tokenizer/vocab.h"

namespace tern {

namespace gguf {
class GgufFile;
}

class SpmEncoder;
class BpeEncoder;
class WpmEncoder;

class Tokenizer {
 public:
  static StatusOr<std::unique_ptr<Tokenizer>> Create(Vocab vocab);
  // Vocab::FromGguf + Create; errors are prefixed with the file's path.
  static StatusOr<std::unique_ptr<Tokenizer>> FromGguf(const gguf::GgufFile& file);
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // add_special: BOS/EOS (bert: CLS/SEP) as the vocabulary asks.
  std::vector<int32_t> Encode(std::string_view text, bool add_special,
                              bool parse_special) const;
  // Out-of-range ids decode to nothing.
  std::string Decode(std::span<const int32_t> ids, bool skip_special = false) const;
  // The bytes of one token (no leading-space rule).
  std::string TokenToPiece(int32_t id, bool skip_special = false) const;

  bool IsEog(int32_t id) const;
  bool IsControl(int32_t id) const;
  bool IsValid(int32_t id) const { return id >= 0 && id < vocab_size(); }
  int32_t bos_id() const { return vocab_.bos_id; }
  int32_t eos_id() const { return vocab_.eos_id; }
  bool add_bos() const { return vocab_.add_bos && vocab_.bos_id >= 0; }
  bool add_space_prefix() const { return vocab_.add_space_prefix; }
  int32_t vocab_size() const { return vocab_.size(); }
  const std::string& TokenText(int32_t id) const;
  TokenType GetTokenType(int32_t id) const;
  // Token id of an exact token text, or -1.
  int32_t FindTokenId(std::string_view text) const { return FindToken(index_, text); }
  const Vocab& vocab() const { return vocab_; }
  const std::vector<int32_t>& eog_ids() const { return eog_ids_; }

 private:
  struct Fragment {
    int32_t token;  // -1: text [begin, end)
    size_t begin;
    size_t end;
  };

  explicit Tokenizer(Vocab vocab);
  Status Init();
  void FindEndOfGenerationTokens();
  void BuildSpecialTokenList();
  std::vector<Fragment> SplitSpecial(std::string_view text, bool parse_special) const;
  void EncodeText(std::string_view text, bool first_or_after_special,
                  std::vector<int32_t>* out) const;

  Vocab vocab_;
  TokenIndex index_;
  std::vector<uint8_t> strip_flags_;       // per token: 1 lstrip, 2 rstrip
  // Per token: matched in the input only when parse_special (control,
  // unknown, a role token such as BOS/EOS/SEP/PAD, or a user-defined token
  // shaped like a special one: "<...>", "[...]").
  std::vector<uint8_t> parse_special_only_;
  std::vector<int32_t> special_tokens_;    // longest text first
  std::vector<int32_t> eog_ids_;           // sorted
  std::unique_ptr<SpmEncoder> spm_;
  std::unique_ptr<BpeEncoder> bpe_;
  std::unique_ptr<WpmEncoder> wpm_;
};

}  // namespace tern
