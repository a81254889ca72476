#include "server/stop_matcher.h"

#include <algorithm>

namespace tern {

StopMatcher::StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {
  std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
}

size_t StopMatcher::HoldLength() const {
  size_t best = 0;
  for (const std::string& stop : stops_) {
    size_t max_len = std::min(stop.size() - 1, held_.size());
    for (size_t len = max_len; len > best; --len) {
      if (held_.compare(held_.size() - len, len, stop, 0, len) == 0) {
        best = len;
        break;
      }
    }
  }
  return best;
}

std::string StopMatcher::Push(std::string_view text) {
  if (matched_) return "";
  held_.append(text);
  size_t first = std::string::npos;
  for (const std::string& stop : stops_) first = std::min(first, held_.find(stop));
  std::string out;
  if (first != std::string::npos) {
    matched_ = true;
    out = held_.substr(0, first);
    held_.clear();
  } else {
    size_t keep = HoldLength();
    out = held_.substr(0, held_.size() - keep);
    held_.erase(0, held_.size() - keep);
  }
  released_bytes_ += out.size();
  return out;
}

std::string StopMatcher::Flush() {
  std::string out;
  out.swap(held_);
  released_bytes_ += out.size();
  return out;
}

}  // namespace tern
