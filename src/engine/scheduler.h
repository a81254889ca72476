// Scheduler: continuous batching without phases. Every request has tokens
// (prompt + output so far) and num_computed_tokens; each step closes part of
// every request's gap under one token budget (max_num_batched_tokens).
//
// Two policies decide how prompt tokens share a step with decodes
// (SchedulingPolicy, engine.h). The goodput policy (the engine's default;
// chunked prefill only):
//
//   G1. ScheduleDecodes: every decoding request, in running order (KV via
//       AllocateOrPreempt, as in rule 1 below).
//   G2. The step's time target: target_itl_s, or when 0 (automatic)
//
//         target_itl_factor x decode-only step x queue pressure
//
//       The decode-only step as measured: a second StepCostModel fitted to
//       decode-only steps alone, so that a long run of mixed steps neither
//       forgets it nor extrapolates it from the mixed steps' fit. Queue
//       pressure = prompts waiting or in progress / requests decoding,
//       clamped to [1, kMaxQueuePressure]: while more requests wait for
//       their first token than decode, the steps grow so that the queue
//       drains (TTFT) instead of holding every decode at the tightest ITL;
//       with few prompts waiting (one long prompt among 8 decodes, an
//       unsaturated server) the target stays at factor x decode step.
//       Measured on 2 cores, tinyllama shape Q4_0, 16 closed-loop streams
//       of 256 + 64 tokens: without pressure ~90% of the requests sat in
//       the prefill queue (TTFT p50 30 s, TPOT p50 45 ms). Short new
//       prompts (G4a) do not count: G4a serves them one a step or more
//       whatever the target, and a target stretched for them takes several
//       in one step, which in a closed loop finish and come back together
//       and then queue behind each other (simulated shared-prefix loop with
//       +-10-30% irregular steps: TTFT mean 0.88-0.89 s against 0.96-1.18
//       s counting them; p99 3.2-3.3 s against 2.9-3.1 s). slack =
//       target - that model's prediction of the decode part. Prompt chunks
//       are costed by the model of every step (marginal cost: tokens,
//       attended positions, sampled rows). Both models are StepCostModels
//       fitted online to the engine's measured steps. With nothing
//       decoding there is no target (the budget alone limits).
//   G3. PrefillCandidates: running requests still in their prompt, and (when
//       nothing was preempted) the first kMaxWaitingCandidates waiting ones,
//       each from its longest cached prefix. Ordered by
//         predicted prefill time of what is left - kAgingPerWaitedSecond x
//         seconds since arrival
//       lowest first: shortest remaining prompt first (mean TTFT), with
//       aging so that a long prompt is not starved by a stream of short ones
//       (it overtakes a fresh empty one after ~2x its own prefill time).
//   G4. Each candidate in that order gets the largest chunk whose predicted
//       marginal cost (tokens + attended positions + its sampled row) fits
//       the slack, the budget and max_prefill_tokens_while_decoding (when >
//       0 and anything decodes); the first prompt of a step that is not a
//       short new one (G4a) gets at least 1 token, so prompts always
//       advance. A chunk that leaves its prompt unfinished needs one of
//       max_num_partial_prefills slots (prompts in progress count; one that
//       finishes in this step frees its slot for the next candidate of the
//       same step).
//   G4a. Short new prompts: a waiting prompt with at most kShortPromptTokens
//       to compute after its prefix-cache hit (that the step's tokens can
//       hold whole) comes before the order of G3, is never split (it goes
//       whole or waits), and the first prompt of a step goes whole even
//       beyond the slack: one short prompt a step gets its first token at
//       the end of the first step that starts after it arrives, whatever
//       the target and the aged prompts ahead of it (a full prefix hit, 1
//       token, in particular). A step is then at most the target plus one
//       short prompt. Why: the automatic target's slack is often just short
//       of one such prompt (15-16 decodes of the shared-prefix run below:
//       ~140 ms of slack, 155 ms for 32 tokens at depth 1024), so it was split
//       over 2-3 steps and the next one queued behind it for the partial-
//       prefill slot; and splitting a short prompt saves the decodes
//       nothing (they wait for the same tokens over more steps).
//   G5. With nothing decoding the first candidate goes whole (as far as the
//       budget allows) and more prompts join only while the step's prompt
//       cost stays within the larger of that and a kEfficientStepTokens
//       step: a burst of short prompts on an idle server gets its first
//       tokens group after group (mean and median TTFT about halve), not
//       all at the end of one step that holds every prompt. Simulated on a
//       fixed cost function fitted to this machine's step logs
//       (scheduler_sim_test.cc): 16 streams of a cached 1024-token prefix +
//       32 new tokens, TTFT p50 0.70 s (0.89 s before G4a) against the
//       2.42 s of one step holding the whole burst; 0.64-0.68 s (0.80-0.93
//       s before G4a) with the steps' times and the clients' turnaround
//       made irregular.
//
// The decode-protect policy (SchedulerConfig's default, kept for comparison):
//
//   0. Decode protection (chunked prefill only). While D > 0 requests are
//      decoding at the start of the step, the prefill chunks of the step
//      together may cost at most
//
//        prefill cap = max_prefill_tokens_while_decoding, or when that is 0
//                      (automatic) max(D, 8)
//
//      where a prompt token at position p costs 1 + p / A (A =
//      attention_cost_context_tokens, 512): a chunk of n tokens starting at
//      p0 costs ceil(n x (A + p0) / A), and the largest chunk that fits is
//      cap x A / (A + p0) tokens, at least 1. With D = 0 prefill takes the
//      whole budget at cost 1 per token (a lone long prompt keeps its TTFT).
//      Why (measured on 2 cores, stories110m Q4_0): the budget alone does not
//      protect decodes, because a decode batch of 8 is already compute-bound
//      (step time grows about linearly with its tokens), so every prompt
//      token costs about as much as a decode token, and a prompt token deep
//      in its prompt also attends over all earlier tokens (with the SIMD
//      attention ~1.7 us per earlier token, as much as its matmuls at
//      p ~ 500-600 on this MHA shape; GQA shapes reach that point deeper).
//      So D decodes + D depth-0 prompt tokens cost ~2x a decode-only step,
//      deeper chunks shrink to keep that cost, and the decodes' inter-token
//      latency stays within ~2x, leaving room for the machine's own noise
//      under a 3x bound. (2 x D prompt tokens, the earlier setting, gave
//      2.2-5x once the decode steps themselves got faster.) The floor of 8:
//      below 8 decodes a step is dominated by weight streaming and per-step
//      overhead, so the prompt still advances at 8 tokens per step. The long
//      prompt's TTFT pays for this: it mostly waits for the decodes to finish.
//   1. ScheduleRunning: running requests in arrival order. A decode needs 1
//      token; a prefill takes a chunk of what is left (chunked prefill), but
//      leaves one token of budget for each decode behind it. At most
//      max_num_partial_prefills requests get a chunk that does not finish
//      their prompt, and when that is N > 1 each chunk is capped at
//      (prefill cap) / N so N prompts advance together (a short prompt is
//      not stuck behind a long one). AllocateOrPreempt gets KV slots; when
//      they do not fit it preempts the newest running request (frees its
//      blocks, puts it at the front of waiting; its output is kept and
//      recomputed on resume).
//   2. ScheduleWaiting (only when nothing was preempted): waiting requests in
//      order while max_num_seqs allows, starting from their longest cached
//      prefix; a request that does not fit stops admission (FCFS). Without
//      chunked prefill a prompt is scheduled whole or not at all (the budget
//      is raised to max_model_len so every prompt can be).
//   3. BuildOutput: one ScheduledSequence per scheduled request.
//
// UpdateFromOutput then advances num_computed_tokens, commits full blocks to
// the prefix cache, appends sampled tokens, checks stop conditions (EOS/EOG
// unless ignore_eos, stop_token_ids -> "stop"; max_tokens or max_model_len ->
// "length"; with streaming eviction max_model_len bounds the KV a request
// holds, not its length), frees finished requests and returns the per-request deltas.
//
// Thread rules: owned by the engine thread; never touches tensors.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/engine.h"
#include "engine/request.h"
#include "engine/scheduler_output.h"
#include "engine/step_cost_model.h"
#include "kv/kv_cache_manager.h"

namespace tern {

// Goodput policy: how many waiting requests are considered per step, and how
// much a second of waiting shortens a prompt's predicted prefill time.
inline constexpr int kMaxWaitingCandidates = 64;
inline constexpr double kAgingPerWaitedSecond = 0.5;
// Goodput policy, automatic target: the most the queue pressure (prompts
// waiting / requests decoding) stretches the step target.
inline constexpr double kMaxQueuePressure = 4.0;
// Goodput policy, nothing decoding (G5): the tokens of a step whose fixed
// cost is small next to its tokens' (a 64-token step's 11 ms overhead is 4%
// of its 260 ms on 2 cores, tinyllama shape).
inline constexpr int32_t kEfficientStepTokens = 64;
// Goodput policy (G4a): a waiting prompt with at most this many tokens to
// compute (after its prefix-cache hit) is a short new prompt: it is never
// split, and the first of a step goes whole beyond the step's slack (a
// 64-token chunk at depth 1024 costs ~300 ms on 2 cores, tinyllama shape,
// about 3 decode steps of 16).
inline constexpr int32_t kShortPromptTokens = 64;

// Automatic decode protection: prefill tokens per step while D requests
// decode = kAutoPrefillTokensPerDecode x max(D, kAutoPrefillDecodeFloor).
inline constexpr int32_t kAutoPrefillTokensPerDecode = 1;
inline constexpr int32_t kAutoPrefillDecodeFloor = 8;
inline constexpr int32_t kAutoAttentionCostContextTokens = 512;

// Adaptive speculation (docs/speculative.md): a request's acceptance is
// estimated from its last ~10 verification steps (weights decay by this
// factor a step), pulled toward the engine-wide acceptance with the weight
// of kSpecPriorSteps steps.
inline constexpr double kSpecAcceptanceDecay = 0.9;
inline constexpr double kSpecPriorSteps = 2;

struct SchedulerConfig {
  int32_t max_num_seqs = 64;
  int32_t max_num_batched_tokens = 512;
  int32_t max_model_len = 2048;
  bool enable_chunked_prefill = true;
  int32_t max_num_partial_prefills = 1;
  // Prefill tokens per step, all prompts together, while any request
  // decodes: 0 = automatic (max(decoding requests, 8), see above); N > 0 = N (a
  // value >= max_num_batched_tokens turns the protection off).
  int32_t max_prefill_tokens_while_decoding = 0;
  // While the cap above applies, a prompt token at position p counts
  // 1 + p / attention_cost_context_tokens against it: the context length at
  // which a token's attention costs as much as its weight matmuls (measured,
  // see above). 0 = count every prompt token as 1.
  int32_t attention_cost_context_tokens = kAutoAttentionCostContextTokens;
  std::vector<int32_t> eog_token_ids;  // end-of-generation ids of the model
  SchedulingPolicy policy = SchedulingPolicy::kDecodeProtect;
  // Goodput policy: step-time target while requests decode, seconds; 0 =
  // target_itl_factor x the predicted decode-only step.
  double target_itl_s = 0;
  double target_itl_factor = kAutoTargetItlFactor;
  // Fixed step-cost coefficients (tests); unset = fitted online.
  std::optional<StepCostCoefficients> fixed_step_cost;
  // Speculative decoding: proposals per decode step (k; 0 = off). Each
  // speculating decode takes 1 + k tokens of the budget and KV slots for
  // them; when those do not fit it decodes plainly (never preempts for
  // proposals).
  int32_t num_spec_tokens = 0;
  // Adaptive: each step, each decode's k is the one that maximises the
  // predicted tokens per second of the whole batch (its acceptance estimate,
  // the marginal cost of a verified token from spec_step_times, the measured
  // proposer cost per proposal); 0 pauses it. Off: always num_spec_tokens.
  bool spec_adaptive = false;
  // Adaptive: the model's forward time for n tokens, measured at start-up
  // (spec/step_calibration.h), ascending (tokens, seconds). Empty: the
  // step-cost model's prediction instead.
  std::vector<std::pair<int32_t, double>> spec_step_times;
};

// Counters since start.
struct SchedulerStats {
  uint64_t prompt_tokens_total = 0;      // prompt tokens of admitted requests (cached included)
  uint64_t generation_tokens_total = 0;
  uint64_t forced_tokens_total = 0;
  uint64_t prefix_cache_queries_total = 0;  // tokens
  uint64_t prefix_cache_hits_total = 0;     // tokens
  uint64_t num_preemptions_total = 0;
  uint64_t num_steps_total = 0;
  std::map<std::string, uint64_t> request_success_total;  // by finish reason
  // Speculative decoding (vLLM's names): verification steps with proposals,
  // proposals verified, proposals accepted, and accepted by position
  // (index i: the (i+1)-th proposal of a step was accepted).
  uint64_t spec_num_drafts_total = 0;
  uint64_t spec_num_draft_tokens_total = 0;
  uint64_t spec_num_accepted_tokens_total = 0;
  std::vector<uint64_t> spec_accepted_per_position;
  uint64_t spec_rollback_blocks_total = 0;  // blocks returned by rollbacks
  uint64_t spec_num_rejections_total = 0;   // verification steps that rejected a proposal
};

// New output of one request in one step.
struct RequestDelta {
  std::string request_id;
  RequestOutput output;
};

class Scheduler {
 public:
  Scheduler(const SchedulerConfig& config, std::unique_ptr<KvCacheManager> kv);

  const SchedulerConfig& config() const { return config_; }
  // Adds a request to the back of the waiting queue. Its id must be new.
  void AddRequest(std::unique_ptr<Request> request);
  bool Contains(const std::string& request_id) const { return requests_.count(request_id) > 0; }
  // Finishes a waiting or running request now (abort, stop string) and
  // frees its KV; its final output, or nullopt for an unknown id.
  std::optional<RequestDelta> FinishRequest(const std::string& request_id, FinishReason reason,
                                            Clock::time_point now);

  SchedulerOutput Schedule(Clock::time_point now);
  std::vector<RequestDelta> UpdateFromOutput(const SchedulerOutput& scheduled,
                                             const ModelRunnerOutput& result,
                                             Clock::time_point now);
  // Feeds the measured duration of the step that ran `scheduled` to the
  // step-cost model (call before UpdateFromOutput).
  void ObserveStepTime(const SchedulerOutput& scheduled, double seconds);
  const StepCostModel& cost_model() const { return cost_model_; }
  const StepCostModel& decode_cost_model() const { return decode_cost_model_; }

  bool HasWork() const { return !running_.empty() || !waiting_.empty(); }
  int num_running() const { return (int)running_.size(); }
  int num_waiting() const { return (int)waiting_.size(); }
  const KvCacheManager& kv() const { return *kv_; }
  const SchedulerStats& stats() const { return stats_; }

  // Proposals r may verify this step: 0 with speculation off, for a request
  // with a structured-output constraint (its mask depends on every token
  // before), and when its output or max_model_len has no room.
  int32_t NumSpecTokens(const Request& r) const;
  // Feeds the proposer's measured time for num_proposals proposals (the
  // adaptive choice's cost per proposal; call before UpdateFromOutput).
  void ObserveProposeTime(int64_t num_proposals, double seconds);
  // Adaptive speculation: the k that maximises predicted batch throughput
  //   (B - 1 + E(k)) / (T + k (c_verify + c_propose)),  E(k) = sum_{i<=k} alpha^i
  // for one of B decodes in a step predicted to take T seconds. Exposed for tests.
  // batch: tokens the step emits without this request's proposals (B, plus
  // what the proposals of requests already planned are expected to add).
  static int32_t BestSpecTokens(double alpha, int32_t max_k, double batch, double step_s,
                                double verify_s, double propose_s);
  // The acceptance estimate of r (per proposal, its recent steps pulled
  // toward the engine-wide rate).
  double SpecAcceptance(const Request& r) const;

  // CHECKs the KV manager's invariants and that only running requests hold
  // blocks, each covering its computed tokens.
  void CheckInvariants() const;

 private:
  struct StepState {
    int32_t budget = 0;
    int32_t prefill_cap = 0;     // prefill cost this step may take (all prompts)
    int32_t prefill_budget = 0;  // what is left of prefill_cap (may go below 0)
    bool protect_decodes = false;  // prefill_cap < budget: deep prompt tokens cost more
    int32_t num_partial_prefills = 0;
    bool preempted = false;
  };

  // A prompt that may get a chunk this step (goodput policy).
  struct PrefillCandidate {
    Request* request = nullptr;
    bool waiting = false;
    PrefixHit hit;          // waiting only
    int32_t start = 0;      // first position to compute
    int32_t remaining = 0;  // tokens left to compute
    double key = 0;         // lower goes first
  };

  // G4a: a waiting prompt with at most kShortPromptTokens left.
  static bool IsShortNewPrompt(const PrefillCandidate& c) {
    return c.waiting && c.remaining <= kShortPromptTokens;
  }
  // Schedule without the KV moves (the policy's rules above).
  SchedulerOutput SchedulePolicy(Clock::time_point now);
  // The KV position of r's next token to compute: num_computed_tokens less
  // the tokens streaming eviction dropped from its KV.
  int32_t KvPosition(const Request& r) const;
  SchedulerOutput ScheduleGoodput(Clock::time_point now);
  // Adaptive speculation: sets spec_k of every decoding request.
  void PlanSpeculation();
  double propose_s_per_token_ = 0;  // EWMA; 0 until measured
  void ScheduleDecodes(StepState& step, StepShape& shape, SchedulerOutput& out);
  std::vector<PrefillCandidate> PrefillCandidates(const StepState& step,
                                                  Clock::time_point now) const;
  // Largest n <= limit whose chunk at start fits slack (seconds).
  int32_t ChunkWithin(int32_t start, int32_t limit, int32_t remaining, double slack) const;
  // Predicted seconds a chunk adds to a step (no per-step cost).
  double MarginalCost(const StepShape& chunk) const;
  // Predicted time of a step of these decodes alone: the decode-only model
  // within the batch sizes it has measured, extended beyond them by the
  // marginal cost of the model of every step.
  double PredictDecodes(const StepShape& shape) const;
  // Goodput G2: prompts waiting or in progress per decoding request, short
  // new prompts among cands (G4a) not counted, clamped to [1,
  // kMaxQueuePressure].
  double QueuePressure(int32_t num_decodes, const std::vector<PrefillCandidate>& cands) const;
  // Moves r from waiting to running, from its cached prefix.
  void Admit(Request& r, const PrefixHit& hit, Clock::time_point now);
  void ScheduleRunning(StepState& step, SchedulerOutput& out);
  void ScheduleWaiting(StepState& step, SchedulerOutput& out, Clock::time_point now);
  // Prefill tokens per step while num_decodes requests decode (rule 0).
  int32_t PrefillCap(int32_t num_decodes) const;
  // Largest prefill chunk starting at start_position: the step's prefill
  // cap shared by max_num_partial_prefills, no more than what is left of it,
  // in tokens at their depth cost (at least 1 while any cost is left).
  int32_t PrefillChunkCap(const StepState& step, int32_t start_position) const;
  // What a chunk costs against prefill_budget: num_tokens at depth 0,
  // x (1 + start_position / attention_cost_context_tokens) while protecting.
  int32_t PrefillCost(const StepState& step, int32_t start_position, int32_t num_tokens) const;
  // Tokens to compute for a running request this step (0 = skip it).
  int32_t RunningChunk(const Request& r, const StepState& step, int32_t reserved) const;
  bool AllocateOrPreempt(Request& r, int32_t num_new_tokens, SchedulerOutput& out);
  void Preempt(Request& r, SchedulerOutput& out);
  void BuildOutput(Request& r, int32_t num_new_tokens, SchedulerOutput& out,
                   int32_t max_spec_tokens = 0) const;
  // A decode of r with up to k proposals (k reduced to 0 when its slots do
  // not fit); false when r itself was preempted. Returns the tokens taken.
  bool ScheduleDecode(Request& r, int32_t k, SchedulerOutput& out, int32_t* num_tokens);
  // Applies a verification's result: accepted tokens appended (each checked
  // for stop), KV of rejected positions rolled back.
  FinishReason ApplySpeculative(Request& r, const ScheduledSequence& s,
                                const SampledOutput& sampled, Clock::time_point now);
  void AppendSampled(Request& r, int32_t token, const TokenLogprob* logprob, Clock::time_point now,
                     bool same_step);

  FinishReason CheckStop(const Request& r, int32_t token) const;
  FinishReason AppendForced(Request& r, std::span<const int32_t> forced);
  RequestDelta TakeDelta(Request& r, Clock::time_point now);
  void Finish(Request& r, FinishReason reason);

  SchedulerConfig config_;
  std::unique_ptr<KvCacheManager> kv_;
  std::unordered_map<std::string, std::unique_ptr<Request>> requests_;
  std::deque<Request*> waiting_;
  std::vector<Request*> running_;  // admission order: newest last
  SchedulerStats stats_;
  StepCostModel cost_model_;         // every step
  StepCostModel decode_cost_model_;  // decode-only steps: the automatic target's base
  int32_t decode_seen_tokens_ = 0;   // the largest decode-only step observed (tokens)
};

}  // namespace tern
