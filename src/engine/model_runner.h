// ModelRunner: executes one SchedulerOutput — computes the scheduled tokens'
// KV and samples the next token of every sequence whose next token is due.
// An interface so that scheduler tests can use a fake runner.
//
// ForwardModelRunner is the real one: it flattens all scheduled tokens of all
// requests into one ForwardBatch (slots from the block tables, one logits row
// per sequence that samples), runs Model::Forward once, then samples each row
// with the request's own params and Rng (src/sample).
//
//   sequences: [ a: 5 prompt tokens | b: 1 decode | c: 3-token chunk ]
//   batch:     [ a0 a1 a2 a3 a4 | b0 | c0 c1 c2 ]   logits rows: a4, b0
//                                                   (c's prompt not done)
//
// Thread rules: Execute is called by the engine thread only.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "base/thread_pool.h"
#include "engine/scheduler_output.h"
#include "kv/kv_storage.h"
#include "model/forward_batch.h"
#include "model/model.h"

namespace tern {

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;
  virtual ModelRunnerOutput Execute(const SchedulerOutput& scheduled) = 0;
};

// The flattened batch of a SchedulerOutput (exposed for tests).
ForwardBatch BuildForwardBatch(const SchedulerOutput& scheduled, int32_t block_size);

class ForwardModelRunner : public ModelRunner {
 public:
  // model, kv and pool are borrowed and must outlive the runner.
  ForwardModelRunner(Model* model, KvStorage* kv, ThreadPool* pool);
  ModelRunnerOutput Execute(const SchedulerOutput& scheduled) override;

 private:
  // Streaming eviction: each move's block re-rotated into its destination
  // (Model::RotateKeys), every layer, every slot.
  void ApplyKvMoves(std::span<const KvBlockMove> moves);

  Model* model_;
  KvStorage* kv_;
  ThreadPool* pool_;
  std::vector<float> logits_;
  std::vector<float> masked_;  // one row, for requests with a constraint
  std::vector<float> k_row_, v_row_;  // one slot, for ApplyKvMoves
};

}  // namespace tern
