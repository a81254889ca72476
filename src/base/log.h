// Minimal leveled logging to stderr. Thread-safe per line.
#pragma once

#include <cstdarg>

namespace tern {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();
void Log(LogLevel level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace tern

#define TERN_LOG_INFO(...) ::tern::Log(::tern::LogLevel::kInfo, __VA_ARGS__)
#define TERN_LOG_WARN(...) ::tern::Log(::tern::LogLevel::kWarn, __VA_ARGS__)
#define TERN_LOG_ERROR(...) ::tern::Log(::tern::LogLevel::kError, __VA_ARGS__)
#define TERN_LOG_DEBUG(...) ::tern::Log(::tern::LogLevel::kDebug, __VA_ARGS__)
