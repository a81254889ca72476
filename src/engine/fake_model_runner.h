// FakeModelRunner (tests only): a deterministic stand-in for the model that
// still depends on the KV cache the way attention does. Each slot holds a
// 64-bit "KV" value chained from the previous position's KV:
//
//   kv[slot(p)] = Mix(kv[slot(p-1)], token[p], p)      (p = 0: Mix(seed0, ...))
//
// read through the block table, so a wrong block table, a stale block, a
// wrong prefix-cache hit or a bad recompute after preemption all change the
// value. The next token is Mix(kv[slot(last)], rng.Next()) % vocab: it uses
// the request's own Rng exactly once per sampled token, like real sampling.
// A speculating sequence (proposals at the end of its tokens) is verified
// greedily the same way: the token after row i is Mix(kv[slot(row i)],
// rng.Next()) % vocab, accepted while it equals the next proposal, so the
// emitted tokens equal those of decoding one at a time.
#pragma once

#include <cstdint>
#include <vector>

#include "base/check.h"
#include "engine/model_runner.h"

namespace tern {

class FakeModelRunner : public ModelRunner {
 public:
  FakeModelRunner(int64_t num_blocks, int32_t block_size, int32_t vocab)
      : kv_(num_blocks * block_size, 0xdeadbeefULL), block_size_(block_size), vocab_(vocab) {}

  static uint64_t Mix(uint64_t a, uint64_t b) {
    uint64_t h = a ^ (b + 0x9e3779b97f4a7c15ULL + (a << 6) + (a >> 2));
    h ^= h >> 31;
    h *= 0x7fb5d329728ea185ULL;
    h ^= h >> 27;
    return h;
  }

  ModelRunnerOutput Execute(const SchedulerOutput& scheduled) override {
    ModelRunnerOutput out;
    out.sampled.resize(scheduled.sequences.size());
    const ForwardBatch batch = BuildForwardBatch(scheduled, block_size_);
    for (size_t k = 0; k < scheduled.sequences.size(); ++k) {
      const ScheduledSequence& s = scheduled.sequences[k];
      const ForwardSequence& seq = batch.sequences[k];
      int64_t last_slot = -1;
      for (int32_t i = 0; i < seq.num_tokens; ++i) {
        const int32_t t = seq.first_token + i;
        const int32_t pos = batch.positions[t];
        CHECK_EQ(pos, s.start_position + i);
        const uint64_t prev = pos == 0 ? 0x1234567ULL : kv_[SlotOf(seq, pos - 1)];
        last_slot = batch.slots[t];
        CHECK_EQ(last_slot, SlotOf(seq, pos));
        kv_[last_slot] = Mix(Mix(prev, (uint64_t)batch.token_ids[t]), (uint64_t)pos);
      }
      tokens_computed_ += seq.num_tokens;
      if (!s.sample) continue;
      if (s.max_spec_tokens > 0) {
        const int32_t n = s.num_spec_tokens;
        std::vector<int32_t> emitted;
        for (int32_t i = 0; i <= n; ++i) {
          const int32_t pos = s.start_position + i;
          const int32_t t = (int32_t)(Mix(kv_[SlotOf(seq, pos)], s.rng->Next()) % vocab_);
          emitted.push_back(t);
          if (i == n || t != s.token_ids[1 + i]) break;
        }
        out.sampled[k].token_id = emitted[0];
        out.sampled[k].spec_token_ids.assign(emitted.begin() + 1, emitted.end());
        out.sampled[k].num_accepted = (int32_t)emitted.size() - 1;
        continue;
      }
      out.sampled[k].token_id = (int32_t)(Mix(kv_[last_slot], s.rng->Next()) % vocab_);
    }
    return out;
  }

  int64_t tokens_computed() const { return tokens_computed_; }

 private:
  int64_t SlotOf(const ForwardSequence& seq, int32_t pos) const {
    return (int64_t)seq.block_table[pos / block_size_] * block_size_ + pos % block_size_;
  }

  std::vector<uint64_t> kv_;
  int32_t block_size_;
  int32_t vocab_;
  int64_t tokens_computed_ = 0;
};

}  // namespace tern
