// libFuzzer target: the GGUF reader on arbitrary bytes. A file that opens
// must have every tensor inside the buffer; its vocabulary (if any) loads
// and tokenizes, or is refused with a message.
#include <cstddef>
#include <cstdint>
#include <span>

#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = tern::gguf::GgufFile::FromBuffer(std::span<const uint8_t>(data, size), "fuzz.gguf");
  if (!file.ok()) return 0;
  const tern::gguf::GgufFile& f = **file;
  for (const tern::gguf::TensorInfo& t : f.tensors()) {
    volatile uint8_t sink = 0;
    if (t.num_bytes > 0) sink = t.data[0] ^ t.data[t.num_bytes - 1];
    (void)sink;
  }
  // The tokenizer metadata of a file that opens: a vocabulary either loads
  // and round-trips a short text, or is refused with a message.
  auto tokenizer = tern::Tokenizer::FromGguf(f);
  if (tokenizer.ok()) {
    const std::vector<int32_t> ids = (*tokenizer)->Encode("Hello world </s>", true, true);
    (void)(*tokenizer)->Decode(ids);
  }
  return 0;
}
