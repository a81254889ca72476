// Engine: the serving core. Owns the model, the KV cache and the scheduler,
// and runs the step loop on its own thread. Front ends (tern batch, tern
// serve, tests) submit requests and read each request's outputs from its own
// channel; no HTTP or JSON enters here.
//
// Thread rules: AddRequest, Abort, GetStats and Shutdown may be called from
// any thread. Everything else belongs to the engine thread.
//
// (Public surface agreed with the server; the engine's owner may add to it.)
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <map>

#include "base/status.h"
#include "metrics/step_stats.h"
#include "model/model_config.h"
#include "sample/sampling_params.h"
#include "spec/proposer.h"
#include "tensor/dtype.h"

namespace tern {

enum class FinishReason { kNone, kStop, kLength, kAbort };
const char* FinishReasonName(FinishReason r);  // "stop", "length", "abort"

struct TokenLogprob {
  int32_t token_id = 0;
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;  // top-n alternatives
};

// Per-request timing and counts, filled by the engine (seconds since epoch
// are not used: all times are steady-clock offsets from arrival).
struct RequestMetrics {
  double queue_s = 0;        // arrival -> first scheduled
  double ttft_s = 0;         // arrival -> first token
  double tpot_s = 0;         // mean time per output token after the first
  double e2e_s = 0;          // arrival -> finished
  std::vector<double> itl_s; // gaps between consecutive tokens
  int32_t prompt_tokens = 0;
  int32_t generated_tokens = 0;
  int32_t cached_tokens = 0;  // prompt tokens found in the prefix cache
  int32_t num_preemptions = 0;
  int32_t forced_tokens = 0;  // of generated_tokens: jump-forward, not sampled
  // Tokens dropped from the request's KV by streaming eviction (its earlier
  // context the last tokens no longer saw); 0 without eviction.
  int32_t evicted_tokens = 0;
  // Speculative decoding: verification steps with proposals, proposals
  // verified, proposals accepted. Acceptance rate = accepted / draft tokens;
  // mean accepted length = (accepted + drafts) / drafts tokens per step.
  int64_t spec_num_drafts = 0;
  int64_t spec_num_draft_tokens = 0;
  int64_t spec_num_accepted_tokens = 0;
};

// One message on a request's channel: new tokens since the last message.
struct RequestOutput {
  std::vector<int32_t> new_token_ids;
  std::vector<TokenLogprob> logprobs;  // parallel to new_token_ids when asked
  bool finished = false;
  FinishReason finish_reason = FinishReason::kNone;
  RequestMetrics metrics;  // complete when finished
};

// A queue of outputs for one request, written by the engine thread and read
// by its consumer. The one natural shared_ptr between threads.
class OutputChannel {
 public:
  void Push(RequestOutput out);
  // Blocks until an output is available or timeout passes (nullopt).
  std::optional<RequestOutput> Pop(std::chrono::milliseconds timeout);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<RequestOutput> queue_;
};

struct EngineRequest {
  std::string request_id;   // unique; empty = engine assigns
  std::vector<int32_t> prompt_token_ids;
  SamplingParams sampling;
  std::string cache_salt;   // isolates prefix-cache entries per tenant
};

// How a step mixes prompt tokens with decodes (docs/engine.md).
//   kGoodput: decodes first, then as many prompt tokens (shortest remaining
//     prompt first, with aging) as keep the predicted step time within the
//     ITL target, from a step-cost model fitted to this machine's own steps.
//   kDecodeProtect: the earlier fixed rule: max(decoding requests, 8) prompt
//     tokens per step while anything decodes, deeper tokens counting more.
enum class SchedulingPolicy { kGoodput, kDecodeProtect };
const char* SchedulingPolicyName(SchedulingPolicy p);  // "goodput", "decode-protect"

// KV eviction for sequences longer than max_model_len (docs/engine.md).
//   kNone: a request's prompt + max_tokens must fit max_model_len; it
//     finishes with "length" there.
//   kStreaming: attention sinks + a recent window (StreamingLLM): when a
//     request's KV would pass max_model_len positions, whole blocks after its
//     first kv_sink_tokens (rounded up to a block) are dropped, keeping at
//     least kv_window_tokens recent positions, and the keys after them are
//     re-rotated to their new positions. Requests never fail for length;
//     RequestMetrics::evicted_tokens says how much context was dropped.
enum class KvEviction { kNone, kStreaming };
// The most proposals a step may verify per sequence (--num-speculative-tokens).
inline constexpr int32_t kMaxSpeculativeTokens = 64;

// The automatic ITL target: this many times the predicted decode-only step.
inline constexpr double kAutoTargetItlFactor = 2.0;

struct EngineConfig {
  std::string model_path;
  int num_threads = 0;                  // 0 = physical cores
  int32_t max_num_seqs = 64;            // running requests at once
  int32_t max_model_len = 0;            // 0 = model context, capped by KV memory
  int32_t max_num_batched_tokens = 512; // tokens per step (the step's budget)
  int32_t block_size = 16;              // token slots per KV block
  int64_t kv_cache_memory_bytes = 0;    // 0 = use memory_utilization
  double memory_utilization = 0.9;      // of MemAvailable after the weights
  DType kv_cache_dtype = DType::kF16;   // K's (and V's unless kv_cache_dtype_v):
                                        // f16, bf16, f32, q8_0, q4_0
  std::optional<DType> kv_cache_dtype_v;  // V's when it differs from K's
  bool enable_chunked_prefill = true;
  int32_t max_num_partial_prefills = 1; // long prompts chunked at once
  int32_t max_prefill_tokens_while_decoding = 0;  // 0 = auto (SchedulerConfig)
  SchedulingPolicy scheduling_policy = SchedulingPolicy::kGoodput;
  double target_itl_ms = 0;             // goodput: step-time target; 0 = auto
  double target_itl_factor = kAutoTargetItlFactor;  // auto target = factor x decode step
  bool enable_prefix_caching = true;
  KvEviction kv_eviction = KvEviction::kNone;
  int32_t kv_sink_tokens = 4;    // streaming: first tokens always kept
  int32_t kv_window_tokens = 0;  // streaming: recent tokens kept; 0 = max_model_len / 2
  // Speculative decoding (docs/speculative.md): kNone = off; kNgram = prompt
  // lookup with n-grams of ngram_max down to ngram_min tokens; kDraft =
  // proposals from speculative_model (same vocabulary). num_speculative_tokens
  // = k, proposals verified per decode step (1..kMaxSpeculativeTokens).
  SpecMethod speculative_method = SpecMethod::kNone;
  std::string speculative_model;
  int32_t num_speculative_tokens = 0;
  int32_t ngram_max = 4;
  int32_t ngram_min = 1;
  // On: each request's k follows its measured acceptance (down to 0) and
  // speculation pauses while the running batch is compute-bound (the
  // thresholds come from the model's forward times measured at start-up,
  // docs/speculative.md).
  // Off: every decode step proposes num_speculative_tokens.
  bool speculative_adaptive = true;
  bool verbose = false;                 // one status line every few seconds
  // One JSON line per step appended here (docs/engine.md); "" = none.
  // --step-log FILE, else TERN_STEP_LOG (base/env_settings.h).
  std::string step_log_path;
  // The KV cache in 2 MiB pages where the kernel gives them; false with
  // TERN_KV_HUGEPAGES=0 (base/env_settings.h).
  bool kv_huge_pages = true;
  // One forward pass of a token before the engine starts (WarmUp in
  // engine.cc): the first request does not pay for paging in the weights.
  bool warmup = true;
};

// A snapshot of the engine's counters (all totals since start).
struct EngineStats {
  int num_running = 0;
  int num_waiting = 0;
  double kv_cache_usage = 0;        // 0..1, blocks held by requests
  double peak_kv_cache_usage = 0;   // max over steps
  // Hybrid windowed models (num_kv_window_blocks > 0): the peak usage of
  // each group's own pool, the global layers' and the windowed layers'.
  double peak_kv_full_usage = 0;
  double peak_kv_window_usage = 0;
  int64_t kv_cache_capacity_tokens = 0;  // token slots of the KV cache (blocks x block size)
  uint64_t prompt_tokens_total = 0;      // prompt tokens of admitted requests (cached included)
  uint64_t generation_tokens_total = 0;  // tokens sampled
  uint64_t forced_tokens_total = 0;      // of those: jump-forward (structured output)
  uint64_t prefix_cache_queries_total = 0;  // tokens looked up
  uint64_t prefix_cache_hits_total = 0;     // tokens found
  uint64_t num_preemptions_total = 0;
  uint64_t num_steps_total = 0;
  uint64_t kv_evicted_tokens_total = 0;  // dropped by streaming eviction
  std::map<std::string, uint64_t> request_success_total;  // by finish reason
  // Speculative decoding (all 0 when off): verification steps with
  // proposals, proposals, accepted proposals, accepted by position.
  uint64_t spec_num_drafts_total = 0;
  uint64_t spec_num_draft_tokens_total = 0;
  uint64_t spec_num_accepted_tokens_total = 0;
  std::vector<uint64_t> spec_accepted_per_position;
  // Last step: requests in the batch and tokens scheduled.
  int32_t last_step_batch_size = 0;
  int32_t last_step_num_tokens = 0;
  // The KV cache's size and the limits it was planned for (fixed at start).
  int64_t num_kv_blocks = 0;         // the global layers' on hybrid models
  int64_t num_kv_window_blocks = 0;  // hybrid: the windowed layers' own (else 0)
  int32_t block_size = 0;
  int64_t kv_cache_bytes = 0;
  int32_t max_model_len = 0;
  int32_t max_num_seqs = 0;
  // The last kRecentSteps steps, oldest first (the dashboard's step timeline).
  static constexpr size_t kRecentSteps = 240;
  std::deque<StepStats> recent_steps;
};

class Model;
class Tokenizer;
class EngineCore;

// The serving engine: model + tokenizer + KV cache + scheduler, stepped by
// its own thread. Create() starts the thread; the destructor calls Shutdown().
class Engine {
 public:
  // Loads model and tokenizer, sizes the KV cache (an error names the numbers
  // when the budget cannot hold one max_model_len sequence), starts the loop.
  static StatusOr<std::unique_ptr<Engine>> Create(const EngineConfig& config);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a request. InvalidArgument (message with the numbers) for an empty
  // prompt, a token id outside the vocabulary, prompt + max_tokens >
  // max_model_len (without streaming eviction), a duplicate id, bad sampling values; Unavailable after
  // Shutdown. An empty request_id gets one assigned ("req-N").
  StatusOr<std::shared_ptr<OutputChannel>> AddRequest(EngineRequest request);
  // Finishes the request with reason "abort"; its KV blocks are freed within
  // one step. Unknown or finished ids are ignored.
  void Abort(const std::string& request_id);
  // The same, with reason "stop": front ends call it when they see a stop
  // string in the detokenized text (the engine only knows token ids).
  void FinishWithStop(const std::string& request_id);

  // Output generation: a counter the engine bumps after each step that
  // delivered outputs. Blocks until it differs from `seen` or the timeout
  // passes; returns the current value. Lets a front end that reads many
  // channels sleep until there is something to read, instead of polling.
  uint64_t WaitForOutputs(uint64_t seen, std::chrono::milliseconds timeout) const;

  EngineStats GetStats() const;
  const ModelConfig& model_config() const;
  // The loaded model (its file, for start-up summaries); read-only.
  const Model& model() const;
  const Tokenizer& tokenizer() const;
  // Compute threads of the step loop (EngineConfig::num_threads, or the
  // default when that is 0).
  int num_threads() const;
  int32_t max_model_len() const;
  // --kv-eviction streaming: max_model_len bounds each request's KV, not
  // its length.
  bool streaming_kv_eviction() const;
  // "KV cache: N blocks = T tokens (X GiB); max concurrency at max_model_len L = C"
  std::string KvSummary() const;
  // "speculative decoding: ngram (n-grams 4..1), k 4, adaptive; forward time
  // measured at start-up: 1 tok 0.05 ms 2 tok ..." or "" when off.
  std::string SpeculativeSummary() const;

  // Stops the loop; requests still running finish with "abort". Idempotent.
  void Shutdown();

 private:
  struct Impl;
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tern
