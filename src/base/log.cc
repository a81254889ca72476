#include "base/log.h"

#include <atomic>
#include <cstdio>
#include <mutex>
#include <string>

namespace tern {
namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};
std::mutex g_mu;
}  // namespace

void SetLogLevel(LogLevel level) { g_level = static_cast<int>(level); }
LogLevel GetLogLevel() { return static_cast<LogLevel>(g_level.load()); }

void Log(LogLevel level, const char* fmt, ...) {
  if (static_cast<int>(level) < g_level.load()) return;
  char buf[4096];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  static const char* kTags[] = {"debug", "info", "warn", "error"};
  std::lock_guard<std::mutex> lock(g_mu);
  std::fprintf(stderr, "[%s] %s\n", kTags[static_cast<int>(level)], buf);
}

}  // namespace tern
