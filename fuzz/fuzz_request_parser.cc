// libFuzzer target: the OpenAI request parser (completions, chat
// completions, tokenize, detokenize) on arbitrary bodies. The first byte
// picks the endpoint; an error must be a 4xx with a message.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "server/request_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  tern::RequestLimits limits;
  limits.vocab_size = 512;
  std::optional<tern::ApiError> err;
  switch (data[0] % 4) {
    case 0: {
      tern::CompletionRequest r;
      err = tern::ParseCompletionRequest(body, tern::ApiEndpoint::kCompletions, limits, &r);
      break;
    }
    case 1: {
      tern::CompletionRequest r;
      err = tern::ParseCompletionRequest(body, tern::ApiEndpoint::kChatCompletions, limits, &r);
      break;
    }
    case 2: {
      tern::TokenizeRequest r;
      err = tern::ParseTokenizeRequest(body, &r);
      break;
    }
    default: {
      tern::DetokenizeRequest r;
      err = tern::ParseDetokenizeRequest(body, limits, &r);
      break;
    }
  }
  if (err && (err->http_status < 400 || err->http_status > 499 || err->message.empty())) {
    std::abort();
  }
  return 0;
}
