#include "model/streaming_kv.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace tern {
namespace {

int32_t WindowTokens(const StreamingKvConfig& c, int32_t ctx) {
  return c.window_tokens > 0 ? c.window_tokens : ctx / 2;
}

}  // namespace

Status CheckStreamingKv(const StreamingKvConfig& c, int32_t ctx) {
  if (c.sink_tokens < 0) return InvalidArgument("--kv-sink-tokens must not be negative");
  if (c.window_tokens < 0) return InvalidArgument("--kv-window must not be negative");
  const int32_t kept = c.sink_tokens + WindowTokens(c, ctx);
  if (kept >= ctx) {
    return InvalidArgument("--kv-sink-tokens " + std::to_string(c.sink_tokens) + " + --kv-window " +
                           std::to_string(WindowTokens(c, ctx)) +
                           " must be below the context of " + std::to_string(ctx) + " tokens");
  }
  return Status::Ok();
}

int32_t MakeRoom(SequenceRunner& runner, const StreamingKvConfig& c, int32_t needed) {
  const int32_t ctx = runner.max_context();
  const int32_t n = runner.num_computed();
  if (n + needed <= ctx) return 0;
  const int32_t keep_recent = std::min(WindowTokens(c, ctx), std::max(0, n - c.sink_tokens));
  const int32_t drop = n - c.sink_tokens - keep_recent;
  runner.DropTokens(c.sink_tokens, drop);
  return drop;
}

StatusOr<StreamingPerplexity> RunStreamingPerplexity(SequenceRunner& runner,
                                                     std::span<const int32_t> tokens,
                                                     const StreamingKvConfig& config,
                                                     int64_t skip_tokens) {
  TERN_RETURN_IF_ERROR(CheckStreamingKv(config, runner.max_context()));
  StreamingPerplexity out;
  double nll = 0;
  runner.Reset();
  // Chunks up to the room left (all logits kept); logits row i of a chunk
  // starting at token t predicts token t + i + 1.
  const int32_t kChunk = 64;
  size_t t = 0;
  while (t + 1 < tokens.size()) {
    if (runner.num_computed() >= runner.max_context()) out.num_evicted += MakeRoom(runner, config, 1);
    const int32_t room = runner.max_context() - runner.num_computed();
    const int32_t n = (int32_t)std::min<size_t>({(size_t)kChunk, (size_t)room, tokens.size() - 1 - t});
    TERN_RETURN_IF_ERROR(runner.Append(tokens.subspan(t, n), true));
    for (int32_t i = 0; i < n; ++i) {
      const int64_t predicted = (int64_t)t + i + 1;
      if (predicted <= skip_tokens) continue;
      std::span<const float> logits = runner.Logits(i);
      float mx = logits[0];
      for (float x : logits) mx = std::max(mx, x);
      double sum = 0;
      for (float x : logits) sum += std::exp((double)x - mx);
      nll += std::log(sum) + mx - logits[tokens[predicted]];
      ++out.num_scored;
    }
    t += n;
  }
  out.ppl = out.num_scored > 0 ? std::exp(nll / (double)out.num_scored) : 0;
  return out;
}

}  // namespace tern
