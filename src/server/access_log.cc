#include "server/access_log.h"

#include <cinttypes>
#include <cstdio>
#include <ctime>

namespace tern {
namespace {

// "-" for empty; spaces and control bytes -> '?', so the line splits on spaces.
std::string Value(const std::string& s) {
  if (s.empty()) return "-";
  std::string out = s;
  for (char& c : out) {
    if ((unsigned char)c <= 0x20 || c == 0x7f) c = '?';
  }
  return out;
}

std::string Utc(std::chrono::system_clock::time_point t) {
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
  const std::time_t secs = (std::time_t)(ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(ms % 1000));
  return buf;
}

std::string Millis(double ms) {
  if (ms < 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", ms);
  return buf;
}

}  // namespace

std::string FormatAccessLog(const AccessLogEntry& e) {
  char counts[160];
  std::snprintf(counts, sizeof(counts),
                "status=%d prompt_tokens=%" PRId64 " completion_tokens=%" PRId64
                " cached_tokens=%" PRId64,
                e.status, e.prompt_tokens, e.completion_tokens, e.cached_tokens);
  return "access time=" + Utc(e.time) + " id=" + Value(e.request_id) +
         " client=" + Value(e.client) + " method=" + Value(e.method) + " path=" + Value(e.path) +
         " " + counts + " ttft_ms=" + Millis(e.ttft_ms) +
         " duration_ms=" + Millis(e.duration_ms) + " finish=" + Value(e.finish_reason);
}

}  // namespace tern
