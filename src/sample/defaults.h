// The defaults every front end shares (`tern generate`, `tern chat`,
// `tern batch`, `tern serve`): one table, so a request means the same thing
// whichever way it arrives. docs/defaults.md lists them for users.
//
// Sampling follows OpenAI's API (and vLLM): temperature 1, no top-k, top-p 1,
// no min-p, no penalties. llama.cpp's CLI habit (--temp 0.8 --top-k 40
// --top-p 0.95 --min-p 0.05) is one set of flags away.
#pragma once

#include <cstdint>

namespace tern::defaults {

inline constexpr float kTemperature = 1.0f;
inline constexpr int32_t kTopK = 0;       // off
inline constexpr float kTopP = 1.0f;      // off
inline constexpr float kMinP = 0.0f;      // off
inline constexpr float kRepetitionPenalty = 1.0f;  // off
inline constexpr float kPresencePenalty = 0.0f;
inline constexpr float kFrequencyPenalty = 0.0f;

// Tokens to generate when the request does not say.
// /v1/completions and `tern batch` lines: 16, as OpenAI's completions API.
inline constexpr int32_t kMaxTokensCompletion = 16;
// /v1/chat/completions, `tern chat` and `tern generate`: until an
// end-of-generation token or the end of the context (-1), as OpenAI's chat
// API and vLLM; the context is --max-model-len (serve, batch) or -c (CLI).
inline constexpr int32_t kMaxTokensUntilContext = -1;

// KV cache element type name for every front end.
inline constexpr const char* kKvCacheDtype = "f16";

}  // namespace tern::defaults
