// The ranges a request's sampling parameters and limits must respect, checked
// in one place for every front end: the server's request parser, the engine
// (Engine::AddRequest), `tern batch` (lines and file-wide flags) and `tern
// generate` / `tern chat` (flags). Each check returns the field at fault and
// what is wrong with it; the front end names the field its own way:
//
//   server   400 "'top_p' must be in (0, 1], got 1.5" (param "top_p")
//   engine   "request req-3: top_p must be in (0, 1], got 1.5"
//   batch    "line 4: 'top_p' must be in (0, 1], got 1.5", "--top-p must be ..."
//   generate "--top-p must be in (0, 1], got 1.5"
//
// Pure functions; safe from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sample/sampling_params.h"

namespace tern {

namespace limits {
inline constexpr double kMaxTemperature = 100;
inline constexpr int32_t kMaxTopK = 1 << 30;
inline constexpr double kMaxRepetitionPenalty = 100;
inline constexpr double kMaxPenalty = 2;  // presence and frequency: [-2, 2]
inline constexpr int32_t kMaxLogprobs = 20;     // top alternatives per token
inline constexpr int32_t kMaxChoices = 16;      // n
inline constexpr int32_t kMaxStopStrings = 4;   // per request (server)
}  // namespace limits

// x as the messages print it (%g: 0.7, 1e-05, 100).
std::string FormatNumber(double x);

// One broken rule: the field by its request name ("top_p", "max_tokens",
// "stop") and what is wrong, without the name ("must be in (0, 1], got 1.5").
struct FieldError {
  std::string field;
  std::string problem;

  // "<name> <problem>", name being how the front end calls the field.
  std::string Text(const std::string& name) const { return name + " " + problem; }
};
using MaybeFieldError = std::optional<FieldError>;

// temperature [0, 100], top_k [0, 2^30] (0 = off), top_p (0, 1], min_p
// [0, 1], repetition_penalty (0, 100], presence and frequency penalties
// [-2, 2]; every value finite.
MaybeFieldError CheckSamplingRanges(const SamplingParams& p);
// Tokens to generate: >= 1.
MaybeFieldError CheckMaxTokens(int64_t max_tokens);
// Top alternatives per token: [0, max] (-1, "none", is the caller's to skip).
MaybeFieldError CheckLogprobs(int64_t logprobs, int64_t max = limits::kMaxLogprobs);
// Choices per request: [1, max].
MaybeFieldError CheckChoices(int64_t n, int64_t max = limits::kMaxChoices);
// At most max stop strings (< 0: no limit), none empty.
MaybeFieldError CheckStopStrings(const std::vector<std::string>& stops, int64_t max = -1);
// A seed given on a command line: >= 0, or -1 = a random seed.
MaybeFieldError CheckSeedFlag(int64_t seed);
// prompt + max_tokens must fit max_model_len (field "max_tokens"; 0 = no
// limit, e.g. streaming KV eviction).
MaybeFieldError CheckContextRoom(int64_t prompt_tokens, int64_t max_tokens, int64_t max_model_len);

// Everything a SamplingParams carries: the ranges, max_tokens and logprobs
// (unless -1). The engine's and `tern batch`'s check of a whole request.
MaybeFieldError CheckSamplingParams(const SamplingParams& p);

// An integer narrowed to int32 for SamplingParams: values outside int32
// become the nearest bound, which the range checks above then refuse.
int32_t ClampToInt32(int64_t v);

}  // namespace tern
