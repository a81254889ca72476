// libFuzzer target: the HTTP/1.1 request parser on arbitrary bytes, fed in
// pieces whose sizes come from the input, with small limits so the limit
// paths run too. Every parsed request's body stays within the limit.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "server/http_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  tern::HttpLimits limits;
  limits.max_header_bytes = 2048;
  limits.max_body_bytes = 4096;
  tern::HttpParser parser(limits);
  const size_t step = 1 + data[0] % 64;
  std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  int requests = 0;
  while (true) {
    const size_t n = std::min(step, rest.size());
    parser.Append(rest.substr(0, n));
    rest.remove_prefix(n);
    tern::HttpRequest r;
    tern::HttpParser::Result res;
    while ((res = parser.Next(&r)) == tern::HttpParser::Result::kRequest) {
      if (r.body.size() > limits.max_body_bytes) std::abort();
      ++requests;
    }
    if (res == tern::HttpParser::Result::kError) {
      if (parser.error_status() < 400 || parser.error_status() > 599) std::abort();
      break;
    }
    if (rest.empty()) break;
  }
  return 0;
}
