// StopMatcher: finds OpenAI "stop" strings in generated text that arrives in
// pieces. Text that could still become a stop string (a suffix that is a
// prefix of one) is held back, so a stop string never reaches the client:
//
//   stops {"END"}:   Push("the E") -> "the "   (holds "E")
//                    Push("ND!")   -> ""  matched; the text before "END" was
//                                         already released, so output stops.
//
// Flush() releases the held text when generation ends without a match.
// Thread rules: one matcher per choice, used by one thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tern {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);

  // Appends text; returns what may be released now. After a match, returns
  // the text before the match and matched() turns true; later calls return "".
  std::string Push(std::string_view text);
  // Releases the held-back text (no match happened).
  std::string Flush();

  bool matched() const { return matched_; }
  // Bytes returned so far (Push + Flush).
  size_t released_bytes() const { return released_bytes_; }

 private:
  // Length of the longest suffix of held_ that is a proper prefix of a stop.
  size_t HoldLength() const;

  std::vector<std::string> stops_;
  std::string held_;
  bool matched_ = false;
  size_t released_bytes_ = 0;
};

}  // namespace tern
