// The stats of a loaded engine serving requests, as the server's renderers
// read them (server_metrics_test, stats_json_test). Test data only.
#pragma once

#include "engine/engine.h"

namespace tern::testdata {

// 3 requests running and 1 waiting; a quarter of 204 KV blocks of 16 tokens
// in use; 16 of 80 prompt tokens found in the prefix cache; 5 requests
// finished by length (none by stop or abort); no speculation, no step
// timeline.
inline EngineStats LoadedEngineStats() {
  return {.num_running = 3, .num_waiting = 1, .kv_cache_usage = 0.25,
          .kv_cache_capacity_tokens = 204 * 16, .prompt_tokens_total = 100,
          .generation_tokens_total = 50, .prefix_cache_queries_total = 80,
          .prefix_cache_hits_total = 16, .num_preemptions_total = 2,
          .kv_evicted_tokens_total = 4096, .request_success_total = {{"length", 5}},
          .spec_accepted_per_position = {},  // no speculation
          .num_kv_blocks = 204, .block_size = 16, .kv_cache_bytes = 1 << 20,
          .recent_steps = {}};
}

}  // namespace tern::testdata
