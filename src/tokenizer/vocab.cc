#include "tokenizer/vocab.h"

#include <algorithm>
#include <cctype>
#include <initializer_list>

#include "gguf/gguf_file.h"

namespace tern {
namespace {

bool IsOneOf(const std::string& s, std::initializer_list<const char*> names) {
  for (const char* n : names) {
    if (s == n) return true;
  }
  return false;
}

// Pre-tokenizer names whose reference behaviour adds BOS and keeps a word
// whole when it is itself a token (the Llama-3 family).
bool IsLlama3StylePre(const std::string& pre) {
  return IsOneOf(pre, {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral",
                       "midm-2.0", "lfm2", "tekken"});
}

// Reads one special-token id key: absent keeps *id; -1 / 0xFFFFFFFF means none.
Status ReadTokenId(const gguf::GgufFile& file, const char* key, int32_t num_tokens,
                   int32_t* id) {
  const gguf::Value* v = file.Find(key);
  if (v == nullptr) return Status::Ok();
  std::optional<int64_t> x = v->AsInt();
  if (!x) return InvalidArgument(std::string(key) + ": expected an integer");
  if (*x == -1 || *x == 0xFFFFFFFFll) {
    *id = kNoToken;
    return Status::Ok();
  }
  if (*x < 0 || *x >= num_tokens) {
    return OutOfRange(std::string(key) + " = " + std::to_string(*x) +
                      " is outside the vocabulary of " + std::to_string(num_tokens) +
                      " tokens");
  }
  *id = (int32_t)*x;
  return Status::Ok();
}

Status ReadBool(const gguf::GgufFile& file, const char* key, bool* out) {
  const gguf::Value* v = file.Find(key);
  if (v == nullptr) return Status::Ok();
  std::optional<bool> b = v->AsBool();
  if (!b) return InvalidArgument(std::string(key) + ": expected a bool");
  *out = *b;
  return Status::Ok();
}

Status ReadArrays(const gguf::GgufFile& file, Vocab* vocab) {
  std::optional<std::vector<std::string>> tokens = file.GetStringArray("tokenizer.ggml.tokens");
  if (!tokens) {
    return NotFound("tokenizer.ggml.tokens: missing or not an array of strings");
  }
  vocab->tokens = std::move(*tokens);
  const size_t n = vocab->tokens.size();
  if (file.Find("tokenizer.ggml.scores") != nullptr) {
    std::optional<std::vector<float>> scores = file.GetFloatArray("tokenizer.ggml.scores");
    if (!scores) return InvalidArgument("tokenizer.ggml.scores: not an array of numbers");
    vocab->scores = std::move(*scores);
  } else {
    vocab->scores.assign(n, 0.0f);
  }
  if (file.Find("tokenizer.ggml.token_type") != nullptr) {
    std::optional<std::vector<int64_t>> types = file.GetIntArray("tokenizer.ggml.token_type");
    if (!types) return InvalidArgument("tokenizer.ggml.token_type: not an array of integers");
    vocab->token_types.clear();
    for (size_t i = 0; i < types->size(); ++i) {
      const int64_t t = (*types)[i];
      if (t < 0 || t > 6) {
        return InvalidArgument("tokenizer.ggml.token_type[" + std::to_string(i) +
                               "] = " + std::to_string(t) + " is not a known token type");
      }
      vocab->token_types.push_back((TokenType)t);
    }
  } else {
    vocab->token_types.assign(n, TokenType::kNormal);
  }
  if (file.Find("tokenizer.ggml.merges") != nullptr) {
    std::optional<std::vector<std::string>> merges = file.GetStringArray("tokenizer.ggml.merges");
    if (!merges) return InvalidArgument("tokenizer.ggml.merges: not an array of strings");
    vocab->merges = std::move(*merges);
  }
  return Status::Ok();
}

}  // namespace

Status Vocab::ApplyModelDefaults() {
  if (model == "llama") {
    type = VocabType::kSpm;
    bos_id = 1;
    eos_id = 2;
    unk_id = 0;
    sep_id = pad_id = kNoToken;
    add_bos = true;
    add_eos = false;
    add_space_prefix = true;
  } else if (model == "gpt2") {
    type = VocabType::kBpe;
    bos_id = 11;  // the reference's historical default (Falcon)
    eos_id = 11;
    unk_id = sep_id = pad_id = kNoToken;
    add_bos = false;
    add_eos = false;
    add_space_prefix = false;
    if (IsLlama3StylePre(pre) || pre == "chameleon") add_bos = true;
    ignore_merges = IsLlama3StylePre(pre);
    if (pre == "chatglm-bpe") bos_id = kNoToken;
  } else if (model == "bert") {
    type = VocabType::kWpm;
    bos_id = 101;  // [CLS]
    eos_id = kNoToken;
    unk_id = 100;
    sep_id = 102;
    pad_id = 0;
    mask_id = 103;
    add_bos = true;
    add_eos = false;
    add_sep = true;
    add_space_prefix = false;
  } else if (model == "no_vocab" || model == "none") {
    return Unimplemented("tokenizer.ggml.model = '" + model + "': the file has no vocabulary");
  } else {
    return Unimplemented("tokenizer.ggml.model = '" + model +
                         "' is not supported (supported: llama, gpt2, bert)");
  }
  // Defaults that do not fit this vocabulary mean "none".
  for (int32_t* id : {&bos_id, &eos_id, &unk_id, &sep_id, &pad_id, &mask_id}) {
    if (*id >= size()) *id = kNoToken;
  }
  return Status::Ok();
}

Status Vocab::Validate() const {
  const size_t n = tokens.size();
  if (n == 0) return InvalidArgument("tokenizer.ggml.tokens: empty vocabulary");
  if (n > (size_t)INT32_MAX) return InvalidArgument("tokenizer.ggml.tokens: too many tokens");
  if (scores.size() != n) {
    return InvalidArgument("tokenizer.ggml.scores has " + std::to_string(scores.size()) +
                           " entries but tokenizer.ggml.tokens has " + std::to_string(n));
  }
  if (token_types.size() != n) {
    return InvalidArgument("tokenizer.ggml.token_type has " +
                           std::to_string(token_types.size()) +
                           " entries but tokenizer.ggml.tokens has " + std::to_string(n));
  }
  if (type == VocabType::kBpe && merges.empty()) {
    return InvalidArgument("tokenizer.ggml.merges: missing or empty for a gpt2 (BPE) vocabulary");
  }
  const std::pair<const char*, int32_t> ids[] = {
      {"bos", bos_id}, {"eos", eos_id}, {"unk", unk_id}, {"sep", sep_id},
      {"pad", pad_id}, {"eot", eot_id}, {"eom", eom_id}, {"mask", mask_id}};
  for (const auto& [name, id] : ids) {
    if (id != kNoToken && (id < 0 || id >= (int32_t)n)) {
      return OutOfRange(std::string(name) + " token id " + std::to_string(id) +
                        " is outside the vocabulary of " + std::to_string(n) + " tokens");
    }
  }
  return Status::Ok();
}

StatusOr<Vocab> Vocab::FromGguf(const gguf::GgufFile& file) {
  Vocab vocab;
  std::optional<std::string> model = file.GetString("tokenizer.ggml.model");
  if (!model) return NotFound(file.path() + ": tokenizer.ggml.model: missing (no vocabulary)");
  vocab.model = *model;
  vocab.pre = file.GetString("tokenizer.ggml.pre").value_or("");
  vocab.general_name = file.GetString("general.name").value_or("");
  std::transform(vocab.general_name.begin(), vocab.general_name.end(),
                 vocab.general_name.begin(), [](unsigned char c) { return std::tolower(c); });

  auto with_path = [&](const Status& s) { return s.WithContext(file.path()); };
  if (Status s = ReadArrays(file, &vocab); !s.ok()) return with_path(s);
  if (vocab.tokens.empty()) return with_path(InvalidArgument("tokenizer.ggml.tokens: empty"));
  if (Status s = vocab.ApplyModelDefaults(); !s.ok()) return with_path(s);

  const int32_t n = vocab.size();
  const std::pair<const char*, int32_t*> id_keys[] = {
      {"tokenizer.ggml.bos_token_id", &vocab.bos_id},
      {"tokenizer.ggml.eos_token_id", &vocab.eos_id},
      {"tokenizer.ggml.unknown_token_id", &vocab.unk_id},
      {"tokenizer.ggml.seperator_token_id", &vocab.sep_id},
      {"tokenizer.ggml.separator_token_id", &vocab.sep_id},
      {"tokenizer.ggml.padding_token_id", &vocab.pad_id},
      {"tokenizer.ggml.eot_token_id", &vocab.eot_id},
      {"tokenizer.ggml.eom_token_id", &vocab.eom_id},
      {"tokenizer.ggml.mask_token_id", &vocab.mask_id},
  };
  for (const auto& [key, id] : id_keys) {
    if (Status s = ReadTokenId(file, key, n, id); !s.ok()) return with_path(s);
  }
  if (file.Find("tokenizer.ggml.bos_token_id") == nullptr) {
    // Some converters store the BERT [CLS] id under its own key.
    if (Status s = ReadTokenId(file, "tokenizer.ggml.cls_token_id", n, &vocab.bos_id); !s.ok()) {
      return with_path(s);
    }
  }
  const std::pair<const char*, bool*> bool_keys[] = {
      {"tokenizer.ggml.add_bos_token", &vocab.add_bos},
      {"tokenizer.ggml.add_eos_token", &vocab.add_eos},
      {"tokenizer.ggml.add_sep_token", &vocab.add_sep},
      {"tokenizer.ggml.add_space_prefix", &vocab.add_space_prefix},
      {"tokenizer.ggml.remove_extra_whitespaces", &vocab.remove_extra_whitespaces},
  };
  for (const auto& [key, out] : bool_keys) {
    if (Status s = ReadBool(file, key, out); !s.ok()) return with_path(s);
  }
  if (Status s = vocab.Validate(); !s.ok()) return with_path(s);
  return vocab;
}

}  // namespace tern
