// StepStats: what one engine step did, as a plain record the engine fills
// and exporters (verbose line, server metrics, benchmarks) read.
#pragma once

#include <cstdint>

namespace tern {

struct StepStats {
  int32_t batch_size = 0;            // sequences in the step
  int32_t num_scheduled_tokens = 0;  // tokens computed
  int32_t num_sampled_tokens = 0;    // tokens generated
  int32_t num_prefill_tokens = 0;    // tokens of sequences given more than one (prompt chunks)
  int32_t num_preemptions = 0;       // requests preempted in the step
  double kv_cache_usage = 0;         // 0..1 after the step
  double duration_s = 0;             // wall time of the step
  double start_s = 0;                // step start, seconds since the engine core was made
};

}  // namespace tern
