// libFuzzer target: every tokenizer type on arbitrary text. The first byte
// picks a vocabulary (SPM, byte-level BPE with each pre-tokenizer in the test
// data, WPM), the second the flags (add_special, parse_special, skip_special);
// the rest is the text. Encoded ids must be valid, and decoding them (whole
// and piece by piece) must not fail.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "base/paths.h"
#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"

namespace {

std::vector<std::unique_ptr<tern::Tokenizer>>* g_tokenizers = nullptr;

void Load(const std::string& path) {
  auto file = tern::gguf::GgufFile::Open(path);
  if (!file.ok()) return;
  auto tok = tern::Tokenizer::FromGguf(**file);
  if (tok.ok()) g_tokenizers->push_back(std::move(tok).value());
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_tokenizers = new std::vector<std::unique_ptr<tern::Tokenizer>>();
  const std::string dir = tern::ModelsDir();
  std::vector<std::string> paths = {dir + "/stories260K.gguf"};
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir + "/vocab", ec)) {
    if (e.path().extension() == ".gguf") paths.push_back(e.path().string());
  }
  std::sort(paths.begin(), paths.end());
  for (const std::string& p : paths) Load(p);
  if (g_tokenizers->empty()) {
    std::fprintf(stderr, "fuzz_tokenizer: no vocabularies under %s (set TERN_MODELS_DIR)\n",
                 dir.c_str());
    std::abort();
  }
  std::fprintf(stderr, "fuzz_tokenizer: %zu vocabularies from %s\n", g_tokenizers->size(),
               dir.c_str());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const tern::Tokenizer& tok = *(*g_tokenizers)[data[0] % g_tokenizers->size()];
  const uint8_t flags = data[1];
  const std::string text(reinterpret_cast<const char*>(data + 2), size - 2);
  const std::vector<int32_t> ids = tok.Encode(text, flags & 1, flags & 2);
  for (int32_t id : ids) {
    if (id < 0 || id >= tok.vocab_size()) std::abort();
  }
  const std::string decoded = tok.Decode(ids, flags & 4);
  std::string pieces;
  for (int32_t id : ids) pieces += tok.TokenToPiece(id, flags & 4);
  (void)decoded;
  return 0;
}
