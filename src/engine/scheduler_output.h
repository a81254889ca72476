// SchedulerOutput and ModelRunnerOutput: the plain records that cross from
// the scheduler to the model runner and back, once per step.
//
// The runner never sees a Request: each ScheduledSequence carries what it
// needs to build the ForwardBatch (tokens, first position, block table) and,
// when the sequence's next token is due, what it needs to sample it (params,
// the request's Rng, the history for penalties). The pointers borrow from the
// scheduler's requests and are valid until UpdateFromOutput.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "kv/kv_cache_manager.h"
#include "sample/rng.h"
#include "sample/sampler.h"
#include "sample/sampling_params.h"

namespace tern {

struct ScheduledSequence {
  std::string request_id;
  std::span<const int32_t> token_ids;    // tokens to compute this step
  int32_t start_position = 0;            // position of token_ids[0]
  std::span<const int32_t> block_table;  // covers [0, start_position + size)
  // The windowed group's table (hybrid models), the same length; else empty.
  std::span<const int32_t> window_block_table;
  bool sample = false;                   // last token's logits pick the next token
  const SamplingParams* sampling = nullptr;  // set when sample
  Rng* rng = nullptr;                        // set when sample
  std::span<const int32_t> history;          // output so far (penalties)
  TokenConstraintState* constraint = nullptr;  // structured output (may be null)

  // Speculative decoding (a decode only): max_spec_tokens slots and budget
  // were reserved for proposals; the proposer (EngineCore) writes
  // [last token, proposals...] into spec_input, points token_ids at it and
  // sets num_spec_tokens (<= max_spec_tokens): the last num_spec_tokens of
  // token_ids are proposals, each with its own logits row.
  int32_t max_spec_tokens = 0;
  int32_t num_spec_tokens = 0;
  std::span<const int32_t> context;  // prompt + output (the proposer's input)
  int32_t num_prompt_tokens = 0;
  std::vector<int32_t>* spec_input = nullptr;
  std::vector<std::vector<TokenProb>>* spec_q = nullptr;  // empty: point masses
  Rng* draft_rng = nullptr;
};

struct SchedulerOutput {
  std::vector<ScheduledSequence> sequences;  // running order
  int32_t num_scheduled_tokens = 0;
  std::vector<std::string> preempted_ids;   // preempted this step
  // Streaming eviction's re-rotated KV blocks: the runner applies them, in
  // order, before the step's forward pass (KvCacheManager::TakeKvMoves).
  std::vector<KvBlockMove> kv_moves;
  double predicted_step_s = 0;  // the step-cost model's prediction
  double target_step_s = 0;     // goodput policy's target (0: none this step)
  bool empty() const { return sequences.empty(); }
};

// Per sequence of the SchedulerOutput, in the same order.
struct SampledOutput {
  int32_t token_id = -1;  // -1: nothing sampled (partial prefill)
  TokenLogprob logprob;   // when the request asked for logprobs
  std::vector<int32_t> forced_token_ids;  // jump-forward: follow token_id unsampled
  // Speculative decoding: emitted tokens are token_id, then spec_token_ids;
  // the first num_accepted of them are accepted proposals, the last one is
  // the target's own (a correction or the bonus token).
  std::vector<int32_t> spec_token_ids;
  std::vector<TokenLogprob> spec_logprobs;  // parallel, when logprobs were asked
  int32_t num_accepted = 0;  // proposals accepted (emitted tokens - 1)
};

struct ModelRunnerOutput {
  std::vector<SampledOutput> sampled;
};

}  // namespace tern
