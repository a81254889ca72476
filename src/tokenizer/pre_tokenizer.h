// PreTokenizer: splits text into the words a byte-level BPE merges within,
// using the regular expressions published for each tokenizer.ggml.pre name
// (PCRE2 in UTF-8 + Unicode-property mode, JIT-compiled).
//
// The expressions apply in sequence: each one splits every piece left by the
// previous one, and both the matches and the unmatched text between them
// become pieces. The input is first made valid UTF-8 (malformed bytes become
// U+FFFD) and each final piece is mapped to the GPT-2 byte-level alphabet.
//
// Thread rules: immutable after Create(); Split() may run on any thread
// (each call allocates its own match data).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace tern {

class PreTokenizer {
 public:
  // The expressions for a tokenizer.ggml.pre name ("" means "default").
  static StatusOr<std::vector<std::string>> PatternsFor(std::string_view pre);

  static StatusOr<std::unique_ptr<PreTokenizer>> Create(std::string_view pre);
  static StatusOr<std::unique_ptr<PreTokenizer>> FromPatterns(
      const std::vector<std::string>& patterns);

  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  // Words of text, each in the byte-level alphabet, in order.
  std::vector<std::string> Split(std::string_view text) const;
  // The same split without the byte-level mapping (for tests and tools).
  std::vector<std::string> SplitRaw(std::string_view text) const;

 private:
  struct Regex;
  PreTokenizer() = default;
  std::vector<std::unique_ptr<Regex>> regexes_;
};

}  // namespace tern
