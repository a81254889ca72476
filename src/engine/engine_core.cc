#include "engine/engine_core.h"

#include <algorithm>

namespace tern {

EngineCore::EngineCore(std::unique_ptr<Scheduler> scheduler, std::unique_ptr<ModelRunner> runner,
                       std::unique_ptr<Proposer> proposer, const std::string& step_log_path)
    : scheduler_(std::move(scheduler)), runner_(std::move(runner)), proposer_(std::move(proposer)) {
  if (!step_log_path.empty()) {
    step_log_ = std::fopen(step_log_path.c_str(), "a");
    if (step_log_ == nullptr) std::fprintf(stderr, "step log: cannot open %s\n", step_log_path.c_str());
  }
}

EngineCore::~EngineCore() {
  if (step_log_ != nullptr) std::fclose(step_log_);
}

std::vector<RequestDelta> EngineCore::Step() {
  const Clock::time_point start = Clock::now();
  SchedulerOutput scheduled = scheduler_->Schedule(start);
  // Usage peaks right after scheduling, before finished requests free blocks.
  peak_kv_cache_usage_ = std::max(peak_kv_cache_usage_, scheduler_->kv().Usage());
  if (const KvCacheManager* w = scheduler_->kv().window_group()) {
    peak_kv_full_usage_ = std::max(peak_kv_full_usage_, scheduler_->kv().pool().Usage());
    peak_kv_window_usage_ = std::max(peak_kv_window_usage_, w->pool().Usage());
  }
  double propose_s = 0;
  if (proposer_) {
    for (const std::string& id : scheduled.preempted_ids) proposer_->Release(id);
    const Clock::time_point t0 = Clock::now();
    const int64_t proposals = Propose(scheduled);
    propose_s = std::chrono::duration<double>(Clock::now() - t0).count();
    scheduler_->ObserveProposeTime(proposals, propose_s);
  }
  ModelRunnerOutput result = runner_->Execute(scheduled);
  const Clock::time_point end = Clock::now();
  // The target's step alone: the proposer's time is costed per proposal.
  scheduler_->ObserveStepTime(scheduled,
                              std::chrono::duration<double>(end - start).count() - propose_s);
  std::vector<RequestDelta> deltas = scheduler_->UpdateFromOutput(scheduled, result, end);
  if (proposer_) {
    for (const RequestDelta& d : deltas) {
      if (d.output.finished) proposer_->Release(d.request_id);
    }
  }

  last_step_ = StepStats{};
  last_step_.batch_size = (int32_t)scheduled.sequences.size();
  last_step_.num_scheduled_tokens = scheduled.num_scheduled_tokens;
  for (const SampledOutput& s : result.sampled) last_step_.num_sampled_tokens += s.token_id >= 0;
  last_step_.num_preemptions = (int32_t)scheduled.preempted_ids.size();
  last_step_.kv_cache_usage = scheduler_->kv().Usage();
  last_step_.duration_s = std::chrono::duration<double>(end - start).count();
  last_step_.start_s = std::chrono::duration<double>(start - created_).count();
  for (const auto& s : scheduled.sequences) {
    if (s.token_ids.size() > 1 && s.max_spec_tokens == 0) last_step_.num_prefill_tokens += (int32_t)s.token_ids.size();
  }
  if (step_log_ != nullptr) {
    const int32_t prefill_tokens = last_step_.num_prefill_tokens;
    std::fprintf(step_log_,
                 "{\"t_ms\":%.3f,\"batch_size\":%d,\"scheduled_tokens\":%d,"
                 "\"prefill_tokens\":%d,\"sampled_tokens\":%d,\"preemptions\":%d,"
                 "\"kv_usage\":%.4f,\"duration_ms\":%.3f,\"predicted_ms\":%.3f,"
                 "\"target_ms\":%.3f}\n",
                 std::chrono::duration<double, std::milli>(start - created_).count(),
                 last_step_.batch_size, last_step_.num_scheduled_tokens, prefill_tokens,
                 last_step_.num_sampled_tokens, last_step_.num_preemptions,
                 last_step_.kv_cache_usage, last_step_.duration_s * 1e3,
                 scheduled.predicted_step_s * 1e3, scheduled.target_step_s * 1e3);
  }
  return deltas;
}

int64_t EngineCore::Propose(SchedulerOutput& scheduled) {
  std::vector<ProposalRequest> asks;
  std::vector<size_t> index;
  for (size_t i = 0; i < scheduled.sequences.size(); ++i) {
    const ScheduledSequence& s = scheduled.sequences[i];
    if (s.max_spec_tokens <= 0) continue;
    ProposalRequest p;
    p.request_id = s.request_id;
    p.tokens = s.context;
    p.num_prompt_tokens = s.num_prompt_tokens;
    p.max_proposals = s.max_spec_tokens;
    p.sampling = s.sampling;
    p.rng = s.draft_rng;
    asks.push_back(std::move(p));
    index.push_back(i);
  }
  if (asks.empty()) return 0;
  proposer_->Propose(asks);
  int64_t total = 0;
  for (size_t j = 0; j < asks.size(); ++j) {
    ScheduledSequence& s = scheduled.sequences[index[j]];
    ProposalRequest& p = asks[j];
    const int32_t n = std::min<int32_t>((int32_t)p.proposals.size(), s.max_spec_tokens);
    s.spec_input->resize(1);
    s.spec_input->insert(s.spec_input->end(), p.proposals.begin(), p.proposals.begin() + n);
    if (!p.q.empty()) p.q.resize(n);
    *s.spec_q = std::move(p.q);
    s.token_ids = *s.spec_input;
    s.num_spec_tokens = n;
    // The reserved room that went unused leaves the step.
    scheduled.num_scheduled_tokens -= s.max_spec_tokens - n;
    total += n;
  }
  return total;
}

}  // namespace tern
