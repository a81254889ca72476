// SequenceRunner: runs one sequence through a Model with its own KvStorage
// laid out contiguously (block i of the sequence is block i of the storage).
// The simplest driver of Model::Forward, for `tern generate`, perplexity and
// tests; the paged engine builds ForwardBatches itself.
//
// Invariant: positions [0, num_computed()) have K/V in the storage.
// Thread rules: one thread at a time.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "kv/kv_storage.h"
#include "model/model.h"

namespace tern {

class SequenceRunner {
 public:
  // max_context: KV capacity in tokens. max_batch_tokens: tokens per
  // Forward call (a longer Append is split into chunks).
  SequenceRunner(Model& model, int32_t max_context, DType kv_dtype, ThreadPool* pool,
                 int32_t max_batch_tokens = 512);
  // K and V of different dtypes (kv_dtype is K's).
  SequenceRunner(Model& model, int32_t max_context, DType kv_dtype, DType kv_dtype_v,
                 ThreadPool* pool, int32_t max_batch_tokens = 512);

  int32_t max_context() const { return max_context_; }
  int32_t num_computed() const { return num_computed_; }
  // Forgets all tokens (the KV bytes are simply overwritten later).
  void Reset() { num_computed_ = 0; }
  // Drops positions [first, first + count): the K/V of every later position
  // moves down by count and its keys are re-rotated to the new position
  // (Model::RotateKeys), so the sequence continues as if those tokens had
  // never been there (streaming eviction; see model/streaming_kv.h).
  void DropTokens(int32_t first, int32_t count);

  // Runs tokens at positions num_computed() onward. all_logits: keep the
  // logits of every appended token, else of the last one only. Fails (and
  // runs nothing) when the tokens do not fit in max_context.
  Status Append(std::span<const int32_t> tokens, bool all_logits);

  // Logits of the i-th kept row of the last Append: [n_vocab].
  std::span<const float> Logits(int32_t i) const;
  int32_t num_logits_rows() const { return num_rows_; }
  // The KV storage (slot == position), for tests.
  const KvStorage& kv() const { return kv_; }

 private:
  Model& model_;
  int32_t max_context_;
  int32_t max_batch_tokens_;
  ThreadPool* pool_;
  KvStorage kv_;
  int32_t num_computed_ = 0;
  std::vector<float> logits_;  // [num_rows_, n_vocab]
  int32_t num_rows_ = 0;
  std::vector<int32_t> block_table_;
};

}  // namespace tern
