// `tern doctor`'s measurements: this machine's limits (memory read
// bandwidth, FMA peak: kernels/machine_probe) and the model's speed at the
// workload's own lengths — one prompt of the median length (prefill), one
// sequence decoding at the p95 depth, and a batch of sequences decoding at
// once — in short runs on a private KV cache (no engine, no scheduler), so
// the figures are the model's, not a serving policy's.
//
// Thread rules: uses the given pool exclusively while running.
#pragma once

#include <cstdint>

#include "base/thread_pool.h"
#include "model/model.h"
#include "tools/doctor_diagnosis.h"

namespace tern {

struct ModelProbeLengths {
  int32_t pp_tokens = 128;  // prompt length of the prefill test
  int32_t pp_long_tokens = 0;  // a second, longer prefill test (0 = none)
  int32_t tg_depth = 128;   // KV depth of the decode tests
  int32_t tg_steps = 16;    // decode steps timed
  int32_t batch = 8;        // sequences of the batched decode test
};

MachineFigures MeasureMachine(ThreadPool& pool, int64_t weight_bytes);
// Fills the measured fields of *figures (pp_*, tg_*, batch*) and the static ones.
void MeasureModel(Model& model, ThreadPool& pool, const ModelProbeLengths& lengths,
                  ModelFigures* figures);

}  // namespace tern
