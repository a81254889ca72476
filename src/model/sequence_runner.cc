#include "model/sequence_runner.h"

#include <algorithm>
#include <string>

#include "base/check.h"

namespace tern {
namespace {

constexpr int32_t kBlockSize = 16;

KvShape MakeShape(const ModelConfig& c, int32_t max_context, DType dtype, DType v_dtype) {
  KvShape s;
  s.num_layers = c.n_layer;
  s.num_kv_heads = c.n_head_kv;
  s.head_dim = c.head_dim;
  s.block_size = kBlockSize;
  s.num_blocks = (max_context + kBlockSize - 1) / kBlockSize;
  s.dtype = dtype;
  s.v_dtype = v_dtype;
  return s;
}

}  // namespace

SequenceRunner::SequenceRunner(Model& model, int32_t max_context, DType kv_dtype,
                               ThreadPool* pool, int32_t max_batch_tokens)
    : SequenceRunner(model, max_context, kv_dtype, kv_dtype, pool, max_batch_tokens) {}

SequenceRunner::SequenceRunner(Model& model, int32_t max_context, DType kv_dtype,
                               DType kv_dtype_v, ThreadPool* pool, int32_t max_batch_tokens)
    : model_(model),
      max_context_(max_context),
      max_batch_tokens_(std::max(1, max_batch_tokens)),
      pool_(pool),
      kv_(MakeShape(model.config(), max_context, kv_dtype, kv_dtype_v)) {
  block_table_.resize(kv_.shape().num_blocks);
  for (size_t i = 0; i < block_table_.size(); ++i) block_table_[i] = (int32_t)i;
}

Status SequenceRunner::Append(std::span<const int32_t> tokens, bool all_logits) {
  const int64_t end = (int64_t)num_computed_ + (int64_t)tokens.size();
  if (end > max_context_) {
    return OutOfRange("sequence of " + std::to_string(end) + " tokens exceeds the context of " +
                      std::to_string(max_context_) + " tokens");
  }
  const int32_t n_vocab = model_.config().n_vocab;
  for (int32_t id : tokens) {
    if (id < 0 || id >= n_vocab) {
      return InvalidArgument("token id " + std::to_string(id) + " is outside the vocabulary of " +
                             std::to_string(n_vocab));
    }
  }
  num_rows_ = tokens.empty() ? 0 : (all_logits ? (int32_t)tokens.size() : 1);
  logits_.resize((size_t)num_rows_ * n_vocab);
  size_t done = 0;
  while (done < tokens.size()) {
    const int32_t n = (int32_t)std::min<size_t>(max_batch_tokens_, tokens.size() - done);
    ForwardBatch batch;
    for (int32_t i = 0; i < n; ++i) {
      const int32_t pos = num_computed_ + i;
      batch.token_ids.push_back(tokens[done + i]);
      batch.positions.push_back(pos);
      batch.slots.push_back(pos);  // contiguous: slot == position
    }
    ForwardSequence seq;
    seq.first_token = 0;
    seq.num_tokens = n;
    seq.context_len = num_computed_ + n;
    seq.block_table.assign(block_table_.begin(),
                           block_table_.begin() + (seq.context_len + kBlockSize - 1) / kBlockSize);
    batch.sequences.push_back(std::move(seq));
    float* out = nullptr;
    if (all_logits) {
      for (int32_t i = 0; i < n; ++i) batch.logits_rows.push_back(i);
      out = logits_.data() + done * n_vocab;
    } else if (done + n == tokens.size()) {
      batch.logits_rows.push_back(n - 1);
      out = logits_.data();
    }
    model_.Forward(batch, kv_, out, pool_);
    num_computed_ += n;
    done += n;
  }
  return Status::Ok();
}

void SequenceRunner::DropTokens(int32_t first, int32_t count) {
  CHECK(first >= 0 && count >= 0 && first + count <= num_computed_);
  if (count == 0) return;
  const int64_t elems = kv_.slot_elems();
  std::vector<float> k(elems), v(elems);
  for (int layer = 0; layer < kv_.shape().num_layers; ++layer) {
    for (int32_t pos = first + count; pos < num_computed_; ++pos) {
      kv_.ReadSlot(layer, pos, k.data(), v.data());  // slot == position
      model_.RotateKeys(layer, k.data(), -count, kv_.shape().KDtype());
      kv_.WriteSlot(layer, pos - count, k.data(), v.data());
    }
  }
  num_computed_ -= count;
}

std::span<const float> SequenceRunner::Logits(int32_t i) const {
  CHECK(i >= 0 && i < num_rows_);
  const size_t n_vocab = model_.config().n_vocab;
  return {logits_.data() + i * n_vocab, n_vocab};
}

}  // namespace tern
