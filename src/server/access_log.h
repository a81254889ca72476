// AccessLogEntry: one served HTTP request as `tern serve -v` logs it, and
// its one-line key=value form (grep-able, one line per request):
//
//   access time=2026-12-02T16:50:01.234Z id=cmpl-3f2a... client=127.0.0.1:51234
//   method=POST path=/v1/completions status=200 prompt_tokens=5
//   completion_tokens=16 cached_tokens=0 ttft_ms=12.3 duration_ms=80.5 finish=length
//
// (one line in the log). Fields without a value print "-": id for routes
// that create no completion, ttft_ms when no token was generated, finish
// outside completions. Values never hold spaces or control bytes (those are
// written as '?'), so `key=value` splits on spaces. Plain record and a pure
// function; safe from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace tern {

struct AccessLogEntry {
  std::chrono::system_clock::time_point time;  // when the request arrived
  std::string request_id;                      // "cmpl-...", "chatcmpl-..." or ""
  std::string client;                          // "127.0.0.1:51234" or ""
  std::string method;
  std::string path;
  int status = 0;  // 0: nothing was sent (the client went away first)
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;
  double ttft_ms = -1;  // arrival -> first generated token; < 0: none
  double duration_ms = 0;
  std::string finish_reason;  // "stop", "length", "abort", several joined by ','; "" = none
};

std::string FormatAccessLog(const AccessLogEntry& entry);

}  // namespace tern
