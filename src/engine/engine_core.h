// EngineCore: the engine's step without a thread — scheduler + model runner.
// Step() = Schedule -> ModelRunner::Execute -> UpdateFromOutput, and returns
// every request's new output. Engine drives it from its loop thread; tests
// drive it directly with a fake runner.
//
// step_log_path (EngineConfig::step_log_path: --step-log FILE or
// TERN_STEP_LOG=FILE) appends one JSON line per step to FILE (start time
// in ms since the engine core was made, batch size, scheduled and sampled
// tokens, prefill tokens, preemptions, KV usage, duration in ms): the raw
// record behind ITL and TTFT figures, for finding which steps were slow.
//
// Thread rules: one thread at a time (the engine thread).
#pragma once

#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/model_runner.h"
#include "engine/scheduler.h"
#include "metrics/step_stats.h"
#include "spec/proposer.h"

namespace tern {

class EngineCore {
 public:
  // proposer: speculative decoding's (null: off); it fills the proposals of
  // the decodes the scheduler reserved room for, before the runner runs.
  EngineCore(std::unique_ptr<Scheduler> scheduler, std::unique_ptr<ModelRunner> runner,
             std::unique_ptr<Proposer> proposer = nullptr,
             const std::string& step_log_path = "");
  ~EngineCore();
  EngineCore(const EngineCore&) = delete;
  EngineCore& operator=(const EngineCore&) = delete;

  void AddRequest(std::unique_ptr<Request> request) {
    scheduler_->AddRequest(std::move(request));
  }
  std::optional<RequestDelta> Finish(const std::string& id, FinishReason reason) {
    if (proposer_) proposer_->Release(id);
    return scheduler_->FinishRequest(id, reason, Clock::now());
  }
  bool HasWork() const { return scheduler_->HasWork(); }

  // Runs one step; the deltas of every request that produced tokens or
  // finished.
  std::vector<RequestDelta> Step();

  Scheduler& scheduler() { return *scheduler_; }
  const Scheduler& scheduler() const { return *scheduler_; }
  const StepStats& last_step() const { return last_step_; }
  const Proposer* proposer() const { return proposer_.get(); }
  double peak_kv_cache_usage() const { return peak_kv_cache_usage_; }
  // Hybrid models: each group's pool (KvCacheManager::window_group).
  double peak_kv_full_usage() const { return peak_kv_full_usage_; }
  double peak_kv_window_usage() const { return peak_kv_window_usage_; }

 private:
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<ModelRunner> runner_;
  std::unique_ptr<Proposer> proposer_;
  // Asks the proposer for the proposals of every speculating decode and
  // points its token_ids at [last token, proposals...].
  // Returns the proposals made.
  int64_t Propose(SchedulerOutput& scheduled);
  StepStats last_step_;
  double peak_kv_cache_usage_ = 0;
  double peak_kv_full_usage_ = 0;
  double peak_kv_window_usage_ = 0;
  std::FILE* step_log_ = nullptr;  // step_log_path, open for appending
  Clock::time_point created_ = Clock::now();
};

}  // namespace tern
