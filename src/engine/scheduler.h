// Scheduler: continuous batching without phases. Every request has tokens
// (prompt + output so far) and num_computed_tokens; each step closes part of
// every request's gap under one token budget (max_num_batched_tokens):
//
//   1. ScheduleRunning: running requests in arrival order. A decode needs 1
//      token; a prefill takes a chunk of what is left (chunked prefill), but
//      leaves one token of budget for each decode behind it. At most
//      max_num_partial_prefills requests get a chunk that does not finish
//      their prompt, and when that is N > 1 each chunk is capped at budget / N
//      so N prompts advance together (a short prompt is not stuck behind a
//      long one). AllocateOrPreempt gets KV slots; when they do not fit it
//      preempts the newest running request (frees its blocks, puts it at the
//      front of waiting; its output is kept and recomputed on resume).
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
// "length"), frees finished requests and returns the per-request deltas.
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
#include "kv/kv_cache_manager.h"

namespace tern {

struct SchedulerConfig {
  int32_t max_num_seqs = 64;
  int32_t max_num_batched_tokens = 512;
  int32_t max_model_len = 2048;
  bool enable_chunked_prefill = true;
  int32_t max_num_partial_prefills = 1;
  std::vector<int32_t> eog_token_ids;  // end-of-generation ids of the model
};

// Counters since start.
struct SchedulerStats {
  uint64_t prompt_tokens_total = 0;      // prompt tokens of admitted requests (cached included)
  uint64_t generation_tokens_total = 0;
  uint64_t prefix_cache_queries_total = 0;  // tokens
  uint64_t prefix_cache_hits_total = 0;     // tokens
  uint64_t num_preemptions_total = 0;
  uint64_t num_steps_total = 0;
  std::map<std::string, uint64_t> request_success_total;  // by finish reason
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

  bool HasWork() const { return !running_.empty() || !waiting_.empty(); }
  int num_running() const { return (int)running_.size(); }
  int num_waiting() const { return (int)waiting_.size(); }
  const KvCacheManager& kv() const { return *kv_; }
  const SchedulerStats& stats() const { return stats_; }

  // CHECKs the KV manager's invariants and that only running requests hold
  // blocks, each covering its computed tokens.
  void CheckInvariants() const;

 private:
  struct StepState {
    int32_t budget = 0;
    int32_t num_partial_prefills = 0;
    bool preempted = false;
  };

  void ScheduleRunning(StepState& step, SchedulerOutput& out);
  void ScheduleWaiting(StepState& step, SchedulerOutput& out, Clock::time_point now);
  // Largest prefill chunk: the budget shared by max_num_partial_prefills.
  int32_t PrefillChunkCap() const;
  // Tokens to compute for a running request this step (0 = skip it).
  int32_t RunningChunk(const Request& r, const StepState& step, int32_t reserved) const;
  bool AllocateOrPreempt(Request& r, int32_t num_new_tokens, SchedulerOutput& out);
  void Preempt(Request& r, SchedulerOutput& out);
  void BuildOutput(Request& r, int32_t num_new_tokens, SchedulerOutput& out) const;

  FinishReason CheckStop(const Request& r, int32_t token) const;
  RequestDelta TakeDelta(Request& r, Clock::time_point now);
  void Finish(Request& r, FinishReason reason);

  SchedulerConfig config_;
  std::unique_ptr<KvCacheManager> kv_;
  std::unordered_map<std::string, std::unique_ptr<Request>> requests_;
  std::deque<Request*> waiting_;
  std::vector<Request*> running_;  // admission order: newest last
  SchedulerStats stats_;
};

}  // namespace tern
