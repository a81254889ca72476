// Request: one generation as the scheduler tracks it — its tokens (prompt,
// then output), how many have KV (num_computed_tokens), its status, its
// sampling state (params and its own Rng) and its timings.
//
//   token_ids:  [ prompt ............ | output ...... ]
//               [ computed (KV exists) ....... | to compute ]
//                                    num_computed_tokens ^     ^ num_tokens()
//
// Each step the scheduler closes part of the gap between num_computed_tokens
// and num_tokens(); when it closes it, the last token's logits pick the next
// token. Preemption frees the KV and resets num_computed_tokens to 0 (output
// kept), so on resume prompt + output are recomputed and the result is the
// same as if it had never been preempted.
//
// Thread rules: owned by the engine thread.
#pragma once

#include <chrono>
#include <memory>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "kv/block_hash.h"
#include "sample/rng.h"
#include "sample/sampler.h"
#include "sample/sampling_params.h"

namespace tern {

enum class RequestStatus { kWaiting, kRunning, kPreempted, kFinished };

using Clock = std::chrono::steady_clock;

class Request {
 public:
  Request(std::string id, std::vector<int32_t> prompt, SamplingParams sampling,
          std::string cache_salt, Clock::time_point arrival)
      : id_(std::move(id)),
        token_ids_(std::move(prompt)),
        num_prompt_tokens_((int32_t)token_ids_.size()),
        sampling_(std::move(sampling)),
        cache_salt_(std::move(cache_salt)),
        rng_(sampling_.seed),
        draft_rng_(sampling_.seed ^ 0x5bd1e9955bd1e995ull),
        arrival_(arrival) {
    if (sampling_.constraint) constraint_ = sampling_.constraint->NewState();
  }

  const std::string& id() const { return id_; }
  const SamplingParams& sampling() const { return sampling_; }
  const std::string& cache_salt() const { return cache_salt_; }
  Rng& rng() { return rng_; }
  // The proposer's own draws (a draft model sampling its proposals),
  // independent of the acceptance draws from rng().
  Rng& draft_rng() { return draft_rng_; }
  // The structured-output state (null: unconstrained); advanced by the runner.
  TokenConstraintState* constraint() { return constraint_.get(); }

  std::span<const int32_t> token_ids() const { return token_ids_; }
  std::span<const int32_t> prompt_token_ids() const {
    return std::span<const int32_t>(token_ids_).first(num_prompt_tokens_);
  }
  std::span<const int32_t> output_token_ids() const {
    return std::span<const int32_t>(token_ids_).subspan(num_prompt_tokens_);
  }
  int32_t num_tokens() const { return (int32_t)token_ids_.size(); }
  int32_t num_prompt_tokens() const { return num_prompt_tokens_; }
  int32_t num_output_tokens() const { return num_tokens() - num_prompt_tokens_; }
  void AppendToken(int32_t token) { token_ids_.push_back(token); }

  // Hashes of the full blocks of token_ids (prefix cache), extended lazily.
  const std::vector<BlockHash>& BlockHashes(int32_t block_size) {
    ExtendBlockHashes(token_ids_, block_size, cache_salt_, &block_hashes_);
    return block_hashes_;
  }

  int32_t num_computed_tokens = 0;
  int32_t num_cached_tokens = -1;  // prefix-cache hit at first admission; -1 = not yet
  RequestStatus status = RequestStatus::kWaiting;
  FinishReason finish_reason = FinishReason::kNone;
  int32_t num_preemptions = 0;
  int32_t num_forced_tokens = 0;  // appended by jump-forward, not sampled
  int32_t num_evicted_tokens = 0;  // dropped from its KV by streaming eviction (set at finish)

  // Speculative decoding (docs/speculative.md). spec_k: proposals asked for
  // per step (adaptive: follows the measured acceptance; 0 = paused).
  int32_t spec_k = 0;
  std::vector<int32_t> spec_input;  // this step's rows: [last token, proposals...]
  std::vector<std::vector<TokenProb>> spec_q;  // the proposals' q (empty: point masses)
  int64_t spec_num_drafts = 0;         // steps that verified proposals
  int64_t spec_num_draft_tokens = 0;   // proposals verified
  int64_t spec_num_accepted_tokens = 0;
  // Adaptive k: accepted proposals and rejections (0 or 1 a step),
  // exponentially weighted (kSpecAcceptanceDecay per verification step).
  double spec_accepted_w = 0;
  double spec_rejected_w = 0;

  // Timings (steady clock).
  Clock::time_point arrival() const { return arrival_; }
  Clock::time_point first_scheduled{};
  Clock::time_point first_token{};
  Clock::time_point last_token{};
  bool scheduled_once = false;
  std::vector<double> itl_s;  // gaps between consecutive output tokens
  // Output tokens not yet sent on the request's channel.
  int32_t num_sent_tokens = 0;
  std::vector<TokenLogprob> pending_logprobs;

  RequestMetrics Metrics(Clock::time_point now) const;

 private:
  std::string id_;
  std::vector<int32_t> token_ids_;
  int32_t num_prompt_tokens_;
  SamplingParams sampling_;
  std::string cache_salt_;
  Rng rng_;
  Rng draft_rng_;
  Clock::time_point arrival_;
  std::vector<BlockHash> block_hashes_;
  std::unique_ptr<TokenConstraintState> constraint_;
};

}  // namespace tern
