#include "sample/request_checks.h"

#include <cmath>
#include <cstdio>
#include <limits>

namespace tern {

std::string FormatNumber(double x) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", x);
  return buf;
}

namespace {

std::string Num(double x) { return FormatNumber(x); }

FieldError Bad(const char* field, const std::string& rule, const std::string& got) {
  return {field, rule + ", got " + got};
}

// lo <= x <= hi (lo_open: lo < x), and finite.
MaybeFieldError InRange(const char* field, double x, double lo, double hi, bool lo_open,
                        const std::string& rule) {
  const bool ok = std::isfinite(x) && (lo_open ? x > lo : x >= lo) && x <= hi;
  if (ok) return std::nullopt;
  return Bad(field, rule, Num(x));
}

MaybeFieldError Between(const char* field, double x, double lo, double hi) {
  return InRange(field, x, lo, hi, false, "must be between " + Num(lo) + " and " + Num(hi));
}

}  // namespace

MaybeFieldError CheckSamplingRanges(const SamplingParams& p) {
  if (auto e = Between("temperature", p.temperature, 0, limits::kMaxTemperature)) return e;
  if (p.top_k < 0 || p.top_k > limits::kMaxTopK) {
    return Bad("top_k", "must be between 0 and " + std::to_string(limits::kMaxTopK) + " (0 = off)",
               std::to_string(p.top_k));
  }
  if (auto e = InRange("top_p", p.top_p, 0, 1, true, "must be in (0, 1]")) return e;
  if (auto e = Between("min_p", p.min_p, 0, 1)) return e;
  if (auto e = InRange("repetition_penalty", p.repetition_penalty, 0, limits::kMaxRepetitionPenalty,
                       true, "must be in (0, " + Num(limits::kMaxRepetitionPenalty) + "] (1 = off)")) {
    return e;
  }
  if (auto e = Between("presence_penalty", p.presence_penalty, -limits::kMaxPenalty,
                       limits::kMaxPenalty)) {
    return e;
  }
  return Between("frequency_penalty", p.frequency_penalty, -limits::kMaxPenalty,
                 limits::kMaxPenalty);
}

MaybeFieldError CheckMaxTokens(int64_t max_tokens) {
  if (max_tokens >= 1) return std::nullopt;
  return Bad("max_tokens", "must be >= 1", std::to_string(max_tokens));
}

MaybeFieldError CheckLogprobs(int64_t logprobs, int64_t max) {
  if (logprobs >= 0 && logprobs <= max) return std::nullopt;
  return Bad("logprobs", "must be between 0 and " + std::to_string(max), std::to_string(logprobs));
}

MaybeFieldError CheckChoices(int64_t n, int64_t max) {
  if (n >= 1 && n <= max) return std::nullopt;
  return Bad("n", "must be between 1 and " + std::to_string(max), std::to_string(n));
}

MaybeFieldError CheckStopStrings(const std::vector<std::string>& stops, int64_t max) {
  if (max >= 0 && (int64_t)stops.size() > max) {
    return Bad("stop", "may hold at most " + std::to_string(max) + " strings",
               std::to_string(stops.size()));
  }
  for (const std::string& s : stops) {
    if (s.empty()) return FieldError{"stop", "strings must not be empty"};
  }
  return std::nullopt;
}

MaybeFieldError CheckSeedFlag(int64_t seed) {
  if (seed >= -1) return std::nullopt;
  return Bad("seed", "must be >= 0 (or -1 = random)", std::to_string(seed));
}

MaybeFieldError CheckContextRoom(int64_t prompt_tokens, int64_t max_tokens,
                                 int64_t max_model_len) {
  const int64_t total = prompt_tokens + max_tokens;
  if (max_model_len <= 0 || total <= max_model_len) return std::nullopt;
  return FieldError{"max_tokens", "prompt (" + std::to_string(prompt_tokens) +
                                      " tokens) + max_tokens (" + std::to_string(max_tokens) +
                                      ") = " + std::to_string(total) + " exceeds max_model_len " +
                                      std::to_string(max_model_len)};
}

MaybeFieldError CheckSamplingParams(const SamplingParams& p) {
  if (auto e = CheckMaxTokens(p.max_tokens)) return e;
  if (auto e = CheckSamplingRanges(p)) return e;
  if (p.logprobs != -1) return CheckLogprobs(p.logprobs);
  return std::nullopt;
}

int32_t ClampToInt32(int64_t v) {
  constexpr int64_t lo = std::numeric_limits<int32_t>::min();
  constexpr int64_t hi = std::numeric_limits<int32_t>::max();
  return (int32_t)(v < lo ? lo : v > hi ? hi : v);
}

}  // namespace tern
