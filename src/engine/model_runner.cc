#include "engine/model_runner.h"

#include <span>

#include "base/check.h"
#include "sample/sampler.h"
#include "spec/verify.h"

namespace tern {

ForwardBatch BuildForwardBatch(const SchedulerOutput& scheduled, int32_t block_size) {
  ForwardBatch batch;
  batch.token_ids.reserve(scheduled.num_scheduled_tokens);
  batch.positions.reserve(scheduled.num_scheduled_tokens);
  batch.slots.reserve(scheduled.num_scheduled_tokens);
  for (const ScheduledSequence& s : scheduled.sequences) {
    ForwardSequence seq;
    seq.first_token = batch.num_tokens();
    seq.num_tokens = (int32_t)s.token_ids.size();
    seq.context_len = s.start_position + seq.num_tokens;
    const int32_t num_blocks = (seq.context_len + block_size - 1) / block_size;
    CHECK_LE(num_blocks, (int32_t)s.block_table.size());
    seq.block_table.assign(s.block_table.begin(), s.block_table.begin() + num_blocks);
    // Hybrid models: the windowed layers' own table and slots (every
    // sequence of a step has one, or none has).
    const bool window = !s.window_block_table.empty();
    if (!batch.sequences.empty()) {
      CHECK_EQ(window, !batch.sequences[0].window_block_table.empty());
    }
    if (window) {
      CHECK_LE(num_blocks, (int32_t)s.window_block_table.size());
      seq.window_block_table.assign(s.window_block_table.begin(),
                                    s.window_block_table.begin() + num_blocks);
    }
    for (int32_t i = 0; i < seq.num_tokens; ++i) {
      const int32_t pos = s.start_position + i;
      batch.token_ids.push_back(s.token_ids[i]);
      batch.positions.push_back(pos);
      batch.slots.push_back((int64_t)s.block_table[pos / block_size] * block_size +
                            pos % block_size);
      if (window) {
        batch.window_slots.push_back((int64_t)s.window_block_table[pos / block_size] * block_size +
                                     pos % block_size);
      }
    }
    if (s.sample) {
      // A speculating sequence: one row for its last token and one per proposal.
      for (int32_t i = s.num_spec_tokens; i >= 0; --i) {
        batch.logits_rows.push_back(batch.num_tokens() - 1 - i);
      }
    }
    batch.sequences.push_back(std::move(seq));
  }
  return batch;
}

void ForwardModelRunner::ApplyKvMoves(std::span<const KvBlockMove> moves) {
  if (moves.empty()) return;
  CHECK(!kv_->has_window_group());  // streaming eviction keeps one group
  const int64_t bs = kv_->shape().block_size;
  const int64_t elems = kv_->slot_elems();
  k_row_.resize(elems);
  v_row_.resize(elems);
  for (const KvBlockMove& m : moves) {
    for (int layer = 0; layer < kv_->shape().num_layers; ++layer) {
      for (int64_t i = 0; i < bs; ++i) {
        kv_->ReadSlot(layer, (int64_t)m.src_block * bs + i, k_row_.data(), v_row_.data());
        model_->RotateKeys(layer, k_row_.data(), m.delta, kv_->shape().KDtype());
        kv_->WriteSlot(layer, (int64_t)m.dst_block * bs + i, k_row_.data(), v_row_.data());
      }
    }
  }
}

ForwardModelRunner::ForwardModelRunner(Model* model, KvStorage* kv, ThreadPool* pool)
    : model_(model), kv_(kv), pool_(pool) {}

ModelRunnerOutput ForwardModelRunner::Execute(const SchedulerOutput& scheduled) {
  ModelRunnerOutput out;
  out.sampled.resize(scheduled.sequences.size());
  ApplyKvMoves(scheduled.kv_moves);
  if (scheduled.sequences.empty()) return out;
  const ForwardBatch batch = BuildForwardBatch(scheduled, kv_->shape().block_size);
  const int32_t n_vocab = model_->config().n_vocab;
  logits_.resize((size_t)batch.logits_rows.size() * n_vocab);
  model_->Forward(batch, *kv_, logits_.data(), pool_);

  size_t row = 0;
  for (size_t k = 0; k < scheduled.sequences.size(); ++k) {
    const ScheduledSequence& s = scheduled.sequences[k];
    if (!s.sample) continue;
    const SamplingParams& params = *s.sampling;
    if (s.max_spec_tokens > 0) {
      // Verification of the proposals (spec/verify.h); never with a constraint.
      CHECK(s.constraint == nullptr);
      const int32_t n = s.num_spec_tokens;
      std::span<const float> rows(logits_.data() + row * n_vocab, (size_t)(n + 1) * n_vocab);
      row += n + 1;
      const VerifyResult v = VerifyProposals(rows, n_vocab, s.token_ids.subspan(1, n),
                                             *s.spec_q, params, s.history, *s.rng);
      SampledOutput& o = out.sampled[k];
      o.token_id = v.tokens[0];
      o.spec_token_ids.assign(v.tokens.begin() + 1, v.tokens.end());
      o.num_accepted = v.num_accepted;
      if (params.logprobs >= 0) {
        for (size_t i = 0; i < v.tokens.size(); ++i) {
          SampledToken t;
          ComputeLogprobs(rows.subspan(i * n_vocab, n_vocab), v.tokens[i], params.logprobs, &t);
          TokenLogprob lp;
          lp.token_id = v.tokens[i];
          lp.logprob = t.logprob;
          for (const TokenAlternative& a : t.top) lp.top.emplace_back(a.token_id, a.logprob);
          if (i == 0) o.logprob = std::move(lp);
          else o.spec_logprobs.push_back(std::move(lp));
        }
      }
      continue;
    }
    std::span<const float> logits(logits_.data() + row * n_vocab, n_vocab);
    ++row;
    // One draw per sampled token, greedy or not, so a request's random
    // stream does not depend on anything but its own tokens.
    const double u = s.rng->Uniform();
    if (s.constraint) {
      // Structured output: forbidden tokens masked, then jump-forward.
      const int32_t remaining = params.max_tokens - (int32_t)s.history.size();
      masked_.assign(logits.begin(), logits.end());
      s.constraint->MaskLogits(masked_, remaining);
      logits = masked_;
    }
    SampledToken t = SampleToken(logits, params, s.history, u);
    out.sampled[k].token_id = t.token_id;
    if (s.constraint) {
      s.constraint->Accept(t.token_id);
      const int32_t remaining = params.max_tokens - (int32_t)s.history.size() - 1;
      out.sampled[k].forced_token_ids = s.constraint->ForcedTokens(remaining);
    }
    if (params.logprobs >= 0) {
      TokenLogprob& lp = out.sampled[k].logprob;
      lp.token_id = t.token_id;
      lp.logprob = t.logprob;
      for (const TokenAlternative& a : t.top) lp.top.emplace_back(a.token_id, a.logprob);
    }
  }
  return out;
}

}  // namespace tern
