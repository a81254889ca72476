// Start-up measurement for adaptive speculation: how long the model's
// forward pass takes for n tokens, at a few n from 1 up (one sequence at
// the start of the KV cache, the best of 3 runs each, of 1 once a run
// takes 0.1 s). Adaptive k reads the
// cost of verifying proposals from this table (a step of B decodes with k
// extra tokens costs about table(B + k)): the step-cost model fitted online
// cannot tell a step's fixed cost from its per-token cost while every step
// has the same shape, and that split is what decides whether proposals pay.
//
// Thread rules: run before the engine serves (it writes KV blocks from 0 up,
// which no request holds yet).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "base/thread_pool.h"
#include "kv/kv_storage.h"
#include "model/model.h"

namespace tern {

// (tokens, seconds) for tokens = 1, 2, 4, ... up to max_tokens (and no more
// than the KV blocks hold), ascending.
std::vector<std::pair<int32_t, double>> MeasureForwardTimes(Model& model, KvStorage& kv,
                                                            int32_t block_size,
                                                            int64_t num_blocks,
                                                            int32_t max_tokens, ThreadPool* pool);

// Seconds for n tokens from such a table: linear between its points, the
// last slope beyond it (0 for an empty table).
double InterpolateStepTime(const std::vector<std::pair<int32_t, double>>& table, double n);

}  // namespace tern
