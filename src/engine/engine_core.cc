#include "engine/engine_core.h"

#include <algorithm>

namespace tern {

std::vector<RequestDelta> EngineCore::Step() {
  const Clock::time_point start = Clock::now();
  SchedulerOutput scheduled = scheduler_->Schedule(start);
  // Usage peaks right after scheduling, before finished requests free blocks.
  peak_kv_cache_usage_ = std::max(peak_kv_cache_usage_, scheduler_->kv().Usage());
  ModelRunnerOutput result = runner_->Execute(scheduled);
  const Clock::time_point end = Clock::now();
  std::vector<RequestDelta> deltas = scheduler_->UpdateFromOutput(scheduled, result, end);

  last_step_ = StepStats{};
  last_step_.batch_size = (int32_t)scheduled.sequences.size();
  last_step_.num_scheduled_tokens = scheduled.num_scheduled_tokens;
  for (const SampledOutput& s : result.sampled) last_step_.num_sampled_tokens += s.token_id >= 0;
  last_step_.num_preemptions = (int32_t)scheduled.preempted_ids.size();
  last_step_.kv_cache_usage = scheduler_->kv().Usage();
  last_step_.duration_s = std::chrono::duration<double>(end - start).count();
  return deltas;
}

}  // namespace tern
