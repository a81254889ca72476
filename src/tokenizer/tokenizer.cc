#include "tokenizer/tokenizer.h"

#include <string.h>

#include <algorithm>
#include <cctype>

#include "gguf/gguf_file.h"
#include "tokenizer/bpe_encoder.h"
#include "tokenizer/spm_encoder.h"
#include "tokenizer/unicode.h"
#include "tokenizer/wpm_encoder.h"

namespace tern {
namespace {

constexpr std::string_view kSpaceMarker = "\xe2\x96\x81";  // U+2581
constexpr uint8_t kLstrip = 1;
constexpr uint8_t kRstrip = 2;

// Texts of end-of-turn tokens across model families; these are treated as
// control tokens that end generation, as the reference implementation does.
constexpr std::string_view kEotTexts[] = {
    "<|eot_id|>",    "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
    "<|end_of_text|>", "<EOT>",    "_<EOT>",  "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
    "<end_of_utterance>"};
constexpr std::string_view kEogTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<end_of_turn>",
    "<|endoftext|>", "<|eom_id|>", "<EOT>", "_<EOT>", "<|end_of_text|>", "<end_of_utterance>"};

void ReplaceAll(std::string* s, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(s->size());
  size_t pos = 0;
  while (true) {
    const size_t hit = s->find(from, pos);
    if (hit == std::string::npos) break;
    out.append(*s, pos, hit - pos);
    out.append(to);
    pos = hit + from.size();
  }
  out.append(*s, pos, std::string::npos);
  *s = std::move(out);
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

bool IsAsciiSpace(char c) { return std::isspace((unsigned char)c) != 0; }

// "<s>", "</s>", "<|endoftext|>", "[SEP]", "<start_of_turn>": a bracketed
// word without spaces, the shape of special-token texts across families.
bool LooksLikeSpecialToken(std::string_view text) {
  if (text.size() < 3) return false;
  const bool angle = text.front() == '<' && text.back() == '>';
  const bool square = text.front() == '[' && text.back() == ']';
  if (!angle && !square) return false;
  for (char c : text.substr(1, text.size() - 2)) {
    if (IsAsciiSpace(c) || c == '<' || c == '>' || c == '[' || c == ']') return false;
  }
  return true;
}

}  // namespace

Tokenizer::Tokenizer(Vocab vocab) : vocab_(std::move(vocab)) {}
Tokenizer::~Tokenizer() = default;

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Create(Vocab vocab) {
  TERN_RETURN_IF_ERROR(vocab.Validate());
  std::unique_ptr<Tokenizer> tok(new Tokenizer(std::move(vocab)));
  TERN_RETURN_IF_ERROR(tok->Init());
  return tok;
}

StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromGguf(const gguf::GgufFile& file) {
  TERN_ASSIGN_OR_RETURN(Vocab vocab, Vocab::FromGguf(file));
  auto tokenizer = Create(std::move(vocab));
  if (!tokenizer.ok()) return tokenizer.status().WithContext(file.path());
  return tokenizer;
}

Status Tokenizer::Init() {
  const int32_t n = vocab_.size();
  for (int32_t i = 0; i < n; ++i) {
    std::string& text = vocab_.tokens[i];
    if (text.empty()) text = "[EMPTY_" + std::to_string(i) + "]";
  }
  index_.Build(&vocab_.tokens);  // a later duplicate wins
  FindEndOfGenerationTokens();
  BuildSpecialTokenList();
  switch (vocab_.type) {
    case VocabType::kSpm:
      spm_ = std::make_unique<SpmEncoder>(vocab_, index_);
      break;
    case VocabType::kBpe: {
      TERN_ASSIGN_OR_RETURN(bpe_, BpeEncoder::Create(vocab_, index_));
      break;
    }
    case VocabType::kWpm:
      wpm_ = std::make_unique<WpmEncoder>(vocab_, index_);
      break;
  }
  return Status::Ok();
}

void Tokenizer::FindEndOfGenerationTokens() {
  auto make_control = [&](int32_t id) {
    TokenType& t = vocab_.token_types[id];
    if (t != TokenType::kControl) t = TokenType::kControl;
  };
  if (vocab_.eot_id == kNoToken) {
    for (std::string_view text : kEotTexts) {
      const int32_t id = FindToken(index_, text);
      if (id >= 0) {
        vocab_.eot_id = id;
        make_control(id);
        break;
      }
    }
  }
  if (vocab_.eom_id == kNoToken) {
    const int32_t id = FindToken(index_, "<|eom_id|>");
    if (id >= 0) {
      vocab_.eom_id = id;
      make_control(id);
    }
  }
  for (std::string_view text : kEogTexts) {
    const int32_t id = FindToken(index_, text);
    if (id >= 0) {
      eog_ids_.push_back(id);
      make_control(id);
    }
  }
  for (int32_t id : {vocab_.eos_id, vocab_.eot_id, vocab_.eom_id}) {
    if (id >= 0) eog_ids_.push_back(id);
  }
  std::sort(eog_ids_.begin(), eog_ids_.end());
  eog_ids_.erase(std::unique(eog_ids_.begin(), eog_ids_.end()), eog_ids_.end());
}

void Tokenizer::BuildSpecialTokenList() {
  const int32_t n = vocab_.size();
  for (int32_t i = 0; i < n; ++i) {
    const TokenType t = vocab_.token_types[i];
    if (t == TokenType::kControl || t == TokenType::kUserDefined || t == TokenType::kUnknown) {
      special_tokens_.push_back(i);
    }
  }
  std::stable_sort(special_tokens_.begin(), special_tokens_.end(), [&](int32_t a, int32_t b) {
    return vocab_.tokens[a].size() > vocab_.tokens[b].size();
  });
  // Text that only looks like a special token stays plain text unless the
  // caller asks to parse specials, whatever type the vocabulary gives it:
  // some vocabularies mark "</s>" or "<pad>" user-defined, which would
  // otherwise be matched in any input.
  parse_special_only_.assign(n, 0);
  for (int32_t id : special_tokens_) {
    const TokenType t = vocab_.token_types[id];
    if (t == TokenType::kControl || t == TokenType::kUnknown ||
        LooksLikeSpecialToken(vocab_.tokens[id])) {
      parse_special_only_[id] = 1;
    }
  }
  for (int32_t id : {vocab_.bos_id, vocab_.eos_id, vocab_.unk_id, vocab_.sep_id, vocab_.pad_id,
                     vocab_.eot_id, vocab_.eom_id, vocab_.mask_id}) {
    if (id >= 0 && id < n) parse_special_only_[id] = 1;
  }
  strip_flags_.assign(n, 0);
  // Phi-3 models strip whitespace after their special tokens.
  const std::string& name = vocab_.general_name;
  if (name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos) {
    for (int32_t id : special_tokens_) strip_flags_[id] |= kRstrip;
    if (int32_t id = FindToken(index_, "</s>"); id >= 0) strip_flags_[id] |= kRstrip;
    for (std::string_view text : {"<unk>", "<s>", "<|endoftext|>"}) {
      if (int32_t id = FindToken(index_, text); id >= 0) strip_flags_[id] &= ~kRstrip;
    }
  }
}

std::vector<Tokenizer::Fragment> Tokenizer::SplitSpecial(std::string_view text,
                                                         bool parse_special) const {
  std::vector<Fragment> fragments = {{-1, 0, text.size()}};
  std::vector<Fragment> next;
  for (int32_t id : special_tokens_) {
    if (!parse_special && parse_special_only_[id]) continue;
    const std::string& special = vocab_.tokens[id];
    next.clear();
    bool changed = false;
    for (const Fragment& f : fragments) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      size_t begin = f.begin;
      size_t end = f.end;
      while (begin < end) {
        const void* hit = memmem(text.data() + begin, end - begin, special.data(), special.size());
        if (hit == nullptr) {
          next.push_back({-1, begin, end});
          break;
        }
        changed = true;
        const size_t match = (const char*)hit - text.data();
        size_t left_end = match;
        if (strip_flags_[id] & kLstrip) {
          while (left_end > begin && IsAsciiSpace(text[left_end - 1])) --left_end;
        }
        if (left_end > begin) next.push_back({-1, begin, left_end});
        next.push_back({id, 0, 0});
        begin = match + special.size();
        if (strip_flags_[id] & kRstrip) {
          while (begin < end && IsAsciiSpace(text[begin])) ++begin;
        }
      }
    }
    if (changed) fragments.swap(next);
  }
  return fragments;
}

void Tokenizer::EncodeText(std::string_view text, bool first_or_after_special,
                           std::vector<int32_t>* out) const {
  switch (vocab_.type) {
    case VocabType::kSpm: {
      std::string escaped;
      if (vocab_.add_space_prefix && first_or_after_special) escaped = " ";
      escaped.append(text);
      ReplaceAll(&escaped, " ", kSpaceMarker);
      spm_->Encode(escaped, out);
      break;
    }
    case VocabType::kBpe:
      bpe_->Encode(text, out);
      break;
    case VocabType::kWpm:
      wpm_->Encode(text, out);
      break;
  }
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text, bool add_special,
                                       bool parse_special) const {
  std::vector<int32_t> out;
  if (add_special && vocab_.add_bos && vocab_.bos_id >= 0) out.push_back(vocab_.bos_id);
  if (!text.empty()) {
    bool prev_special = true;  // the space prefix goes on the first text fragment
    for (const Fragment& f : SplitSpecial(text, parse_special)) {
      if (f.token >= 0) {
        out.push_back(f.token);
        prev_special = true;
      } else {
        EncodeText(text.substr(f.begin, f.end - f.begin), prev_special, &out);
        prev_special = false;
      }
    }
  }
  if (add_special) {
    if (vocab_.type == VocabType::kWpm) {
      if (vocab_.add_sep && vocab_.sep_id >= 0) out.push_back(vocab_.sep_id);
    } else if (vocab_.add_eos && vocab_.eos_id >= 0) {
      out.push_back(vocab_.eos_id);
    }
  }
  return out;
}

std::string Tokenizer::TokenToPiece(int32_t id, bool skip_special) const {
  if (!IsValid(id)) return "";
  const std::string& text = vocab_.tokens[id];
  switch (vocab_.token_types[id]) {
    case TokenType::kControl:
    case TokenType::kUnknown:
      return skip_special ? "" : text;
    case TokenType::kUserDefined:
      return text;
    case TokenType::kNormal:
      if (vocab_.type == VocabType::kBpe) return ByteLevelDecode(text);
      {
        std::string piece = text;
        ReplaceAll(&piece, kSpaceMarker, " ");
        return piece;
      }
    case TokenType::kByte:
      if (vocab_.type != VocabType::kBpe && text.size() == 6 && text.starts_with("<0x") &&
          text[5] == '>') {
        const int hi = HexDigit(text[3]), lo = HexDigit(text[4]);
        if (hi >= 0 && lo >= 0) return std::string(1, (char)(hi * 16 + lo));
      }
      return vocab_.type == VocabType::kBpe ? ByteLevelDecode(text) : text;
    case TokenType::kUnused:
    case TokenType::kUndefined:
      return "";
  }
  return "";
}

std::string Tokenizer::Decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string out;
  size_t start = 0;
  if (!ids.empty() && vocab_.bos_id >= 0 && ids[0] == vocab_.bos_id) {
    out += TokenToPiece(ids[0], skip_special);
    start = 1;
  }
  for (size_t i = start; i < ids.size(); ++i) {
    std::string piece = TokenToPiece(ids[i], skip_special);
    if (i == start && vocab_.add_space_prefix && !piece.empty() && piece[0] == ' ') {
      piece.erase(0, 1);
    }
    out += piece;
  }
  return out;
}

bool Tokenizer::IsEog(int32_t id) const {
  return std::binary_search(eog_ids_.begin(), eog_ids_.end(), id);
}

bool Tokenizer::IsControl(int32_t id) const {
  return IsValid(id) && vocab_.token_types[id] == TokenType::kControl;
}

const std::string& Tokenizer::TokenText(int32_t id) const {
  static const std::string kEmpty;
  return IsValid(id) ? vocab_.tokens[id] : kEmpty;
}

TokenType Tokenizer::GetTokenType(int32_t id) const {
  return IsValid(id) ? vocab_.token_types[id] : TokenType::kUndefined;
}

}  // namespace tern
