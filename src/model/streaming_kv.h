// Streaming KV eviction (attention sinks + a recent window, as StreamingLLM):
// unbounded generation in a bounded KV. When the next tokens do not fit in
// the runner's context, the oldest tokens after the first sink_tokens are
// dropped so that sink_tokens + window_tokens remain:
//
//   before:  [ s s s s | o o o o o o o o o o | r r r r r r ]   full
//   after:   [ s s s s | r r r r r r ]   positions 0..9, room for more
//             sinks      recent window_tokens, keys re-rotated to their
//                        new positions (SequenceRunner::DropTokens)
//
// Positions stay contiguous (0 .. kept - 1): the model never sees a position
// past the context it runs with. The kept K/V were computed with the dropped
// tokens in view; only their positions change. sink_tokens = 0 gives plain
// window eviction, which loses the first tokens that the attention of most
// models leans on (the perplexity comparison is in docs/engine.md).
//
// Thread rules: as SequenceRunner (one thread).
#pragma once

#include <cstdint>
#include <span>

#include "base/status.h"
#include "model/sequence_runner.h"

namespace tern {

struct StreamingKvConfig {
  int32_t sink_tokens = 4;
  // Recent tokens kept after an eviction; 0 = half the context.
  int32_t window_tokens = 0;
};

// Checks the config against a context of ctx tokens (sinks + window must
// leave room for at least one new token). InvalidArgument names the flags.
Status CheckStreamingKv(const StreamingKvConfig& config, int32_t ctx);

// Makes room for `needed` more tokens (needed <= the room an eviction
// leaves); returns the number of tokens dropped (0 when they already fit).
int32_t MakeRoom(SequenceRunner& runner, const StreamingKvConfig& config, int32_t needed);

struct StreamingPerplexity {
  double ppl = 0;
  int64_t num_scored = 0;
  int64_t num_evicted = 0;
};

// Perplexity of tokens fed as one stream through the streaming KV of runner
// (its context is the cache): each token's log-probability given what the
// cache holds when it comes; the first skip_tokens predictions are not
// scored (the cache is still filling).
StatusOr<StreamingPerplexity> RunStreamingPerplexity(SequenceRunner& runner,
                                                     std::span<const int32_t> tokens,
                                                     const StreamingKvConfig& config,
                                                     int64_t skip_tokens);

}  // namespace tern
