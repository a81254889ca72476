// Helpers shared by the tokenizer tests: the .inp/.out test-vector format and
// loading a tokenizer from a GGUF vocabulary file.
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "base/paths.h"
#include "base/status.h"
#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

namespace tern::testing_util {

struct VocabCase {
  std::string text;
  std::vector<int32_t> ids;
};

inline bool ReadWholeFile(const std::string& path, std::string* out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  std::ostringstream ss;
  ss << f.rdbuf();
  *out = ss.str();
  return true;
}

// Splits X.inp on "\n__ggml_vocab_test__\n" (a trailing separator ends the
// last case, it does not start an empty one) and pairs each input with the
// ids on the same line of X.out.
inline StatusOr<std::vector<VocabCase>> LoadVocabCases(const std::string& inp_path,
                                                       const std::string& out_path) {
  std::string inp, out;
  if (!ReadWholeFile(inp_path, &inp)) return NotFound("cannot read " + inp_path);
  if (!ReadWholeFile(out_path, &out)) return NotFound("cannot read " + out_path);
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> inputs;
  size_t pos = 0;
  while (true) {
    const size_t hit = inp.find(sep, pos);
    if (hit == std::string::npos) {
      if (pos < inp.size()) inputs.push_back(inp.substr(pos));
      break;
    }
    inputs.push_back(inp.substr(pos, hit - pos));
    pos = hit + sep.size();
  }
  std::vector<std::vector<int32_t>> expected;
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream nums(line);
    std::vector<int32_t> ids;
    long long x;
    while (nums >> x) ids.push_back((int32_t)x);
    expected.push_back(std::move(ids));
  }
  if (inputs.size() != expected.size()) {
    return DataLoss(inp_path + " has " + std::to_string(inputs.size()) + " inputs but " +
                    out_path + " has " + std::to_string(expected.size()) + " lines");
  }
  std::vector<VocabCase> cases;
  for (size_t i = 0; i < inputs.size(); ++i) cases.push_back({inputs[i], expected[i]});
  return cases;
}

inline StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& gguf_path) {
  TERN_ASSIGN_OR_RETURN(std::unique_ptr<gguf::GgufFile> file, gguf::GgufFile::Open(gguf_path));
  TERN_ASSIGN_OR_RETURN(Vocab vocab, Vocab::FromGguf(*file));
  return Tokenizer::Create(std::move(vocab));
}

inline std::string VocabDir() { return ModelsDir() + "/vocab"; }

// The .gguf vocabularies under VocabDir(), sorted; empty when it is absent.
inline std::vector<std::string> VocabGgufFiles() {
  std::vector<std::string> paths;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(VocabDir(), ec)) {
    std::string path = entry.path().string();
    if (path.ends_with(".gguf")) paths.push_back(std::move(path));
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

// In a test body: skips the test when `path` does not exist, fails it when the
// tokenizer there does not load, else declares `const Tokenizer& tok`.
#define TOKENIZER_OR_SKIP(tok, path)                                                 \
  if (!std::filesystem::exists(path)) GTEST_SKIP() << (path) << " not available";   \
  auto tok##_loaded = ::tern::testing_util::LoadTokenizer(path);                     \
  ASSERT_TRUE(tok##_loaded.ok()) << tok##_loaded.status().message();                 \
  const ::tern::Tokenizer& tok = **tok##_loaded

inline std::string IdsToString(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += " " + std::to_string(id);
  return s;
}

// The printable form of a test input for failure messages.
inline std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else out += c;
  }
  return out;
}

}  // namespace tern::testing_util
