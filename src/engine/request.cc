#include "engine/request.h"

namespace tern {
namespace {

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

RequestMetrics Request::Metrics(Clock::time_point now) const {
  RequestMetrics m;
  m.prompt_tokens = num_prompt_tokens_;
  m.generated_tokens = num_output_tokens();
  m.cached_tokens = std::max(0, num_cached_tokens);
  m.num_preemptions = num_preemptions;
  m.forced_tokens = num_forced_tokens;
  m.evicted_tokens = num_evicted_tokens;
  m.spec_num_drafts = spec_num_drafts;
  m.spec_num_draft_tokens = spec_num_draft_tokens;
  m.spec_num_accepted_tokens = spec_num_accepted_tokens;
  if (scheduled_once) m.queue_s = Seconds(first_scheduled - arrival_);
  if (m.generated_tokens > 0) {
    m.ttft_s = Seconds(first_token - arrival_);
    if (m.generated_tokens > 1) {
      m.tpot_s = Seconds(last_token - first_token) / (m.generated_tokens - 1);
    }
  }
  m.e2e_s = Seconds(now - arrival_);
  m.itl_s = itl_s;
  return m;
}

}  // namespace tern
