#include "tools/doctor_measure.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <vector>

#include "base/elapsed.h"
#include "base/env_settings.h"
#include "gguf/weight_summary.h"
#include "kernels/machine_probe.h"
#include "kv/kv_config.h"
#include "kv/kv_storage.h"
#include "model/forward_batch.h"

namespace tern {
namespace {

using Clock = std::chrono::steady_clock;


// Sequences of at most max_len tokens each in their own run of blocks.
class BatchRunner {
 public:
  BatchRunner(Model& model, ThreadPool& pool, int32_t num_seqs, int32_t max_len)
      : model_(model), pool_(pool), blocks_per_seq_((max_len + kBlock - 1) / kBlock),
        kv_(Shape(model.config(), num_seqs * blocks_per_seq_)), rng_(1234) {
    logits_.resize((size_t)num_seqs * model.config().n_vocab);
  }

  // Each of seqs gets n tokens at positions [start, start + n).
  void Run(int32_t seqs, int32_t start, int32_t n) {
    ForwardBatch batch;
    std::uniform_int_distribution<int32_t> tok(0, model_.config().n_vocab - 1);
    for (int32_t s = 0; s < seqs; ++s) {
      ForwardSequence seq;
      seq.first_token = batch.num_tokens();
      seq.num_tokens = n;
      seq.context_len = start + n;
      const int32_t base = s * blocks_per_seq_;
      for (int32_t i = 0; i < n; ++i) {
        batch.token_ids.push_back(tok(rng_));
        batch.positions.push_back(start + i);
        batch.slots.push_back((int64_t)base * kBlock + start + i);
      }
      for (int32_t b = 0; b < (start + n + kBlock - 1) / kBlock; ++b) seq.block_table.push_back(base + b);
      batch.logits_rows.push_back(seq.first_token + n - 1);
      batch.sequences.push_back(std::move(seq));
    }
    model_.Forward(batch, kv_, logits_.data(), &pool_);
  }

  // Prefills seqs sequences to depth, in chunks of 512 tokens.
  void Fill(int32_t seqs, int32_t depth) {
    for (int32_t p = 0; p < depth; p += 512) Run(seqs, p, std::min<int32_t>(512, depth - p));
  }

 private:
  static constexpr int32_t kBlock = 16;
  static KvShape Shape(const ModelConfig& c, int64_t blocks) {
    KvShape s;
    s.num_layers = c.n_layer;
    s.num_kv_heads = c.n_head_kv;
    s.head_dim = c.head_dim;
    s.block_size = kBlock;
    s.num_blocks = blocks;
    s.dtype = DType::kF16;
    s.huge_pages = EnvSettings::FromProcess().kv_huge_pages;
    return s;
  }

  Model& model_;
  ThreadPool& pool_;
  int32_t blocks_per_seq_;
  KvStorage kv_;
  std::mt19937 rng_;
  std::vector<float> logits_;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

MachineFigures MeasureMachine(ThreadPool& pool, int64_t weight_bytes) {
  MachineFigures m;
  m.threads = pool.num_threads();
  // As tern bench: a buffer as large as the weights (256 MiB to 1 GiB), best round.
  const int64_t bytes = std::clamp<int64_t>(weight_bytes, 256ll << 20, 1ll << 30);
  m.read_gb_s = kernels::MeasureReadBandwidth(pool, bytes, 5).best;
  m.fma_gflops = kernels::MeasureFmaPeak(pool, 5).median;
  m.mem_available_bytes = ReadMemAvailableBytes().value_or(0);
  return m;
}

void MeasureModel(Model& model, ThreadPool& pool, const ModelProbeLengths& l,
                  ModelFigures* f) {
  const ModelConfig& c = model.config();
  f->arch = c.arch;
  f->weight_type = gguf::SummarizeWeights(model.file()).MainTypeName();
  f->weight_bytes = model.WeightBytes();
  f->n_layer = c.n_layer;
  f->n_head_kv = c.n_head_kv;
  f->head_dim = c.head_dim;
  f->context_len = c.n_ctx_train;
  f->layer_matmul_params = 0;
  for (const auto& t : model.file().tensors()) {
    if (t.shape.size() >= 2 && t.name.rfind("blk.", 0) == 0) f->layer_matmul_params += t.NumElements();
  }

  const int32_t max_len = std::max({l.pp_tokens, l.pp_long_tokens, l.tg_depth + l.tg_steps}) + 1;
  BatchRunner runner(model, pool, std::max(1, l.batch), max_len);
  runner.Run(1, 0, std::min<int32_t>(l.pp_tokens, 32));  // warm up
  // Prefill: the median prompt, best of 2 (a slow round is other work).
  f->pp_tokens = l.pp_tokens;
  double best = 0;
  for (int rep = 0; rep < 2; ++rep) {
    const auto t0 = Clock::now();
    runner.Run(1, 0, l.pp_tokens);
    best = std::max(best, (double)l.pp_tokens / SecondsSince(t0));
  }
  f->pp_tps = best;
  if (l.pp_long_tokens > 0) {
    f->pp_long_tokens = l.pp_long_tokens;
    for (int rep = 0; rep < 2; ++rep) {
      const auto t0 = Clock::now();
      runner.Run(1, 0, l.pp_long_tokens);
      f->pp_long_tps = std::max(f->pp_long_tps, (double)l.pp_long_tokens / SecondsSince(t0));
    }
  }
  // Decode: every sequence at tg_depth, tg_steps steps; median step.
  // Every sequence filled to tg_depth once; each decode test rewrites the same
  // positions after it.
  runner.Fill(std::max(1, l.batch), l.tg_depth);
  auto decode = [&](int32_t seqs) {
    std::vector<double> steps;
    for (int32_t i = 0; i < l.tg_steps; ++i) {
      const auto t0 = Clock::now();
      runner.Run(seqs, l.tg_depth + i, 1);
      steps.push_back(SecondsSince(t0));
    }
    return (double)seqs / Median(steps);
  };
  // Alternated twice, best of each: other work on the machine only slows a round.
  f->tg_depth = l.tg_depth;
  f->batch = std::max(1, l.batch);
  f->tg_tps = 0;
  f->batch_tg_tps = 0;
  for (int round = 0; round < 2; ++round) {
    f->tg_tps = std::max(f->tg_tps, decode(1));
    if (f->batch > 1) f->batch_tg_tps = std::max(f->batch_tg_tps, decode(f->batch));
  }
  if (f->batch == 1) f->batch_tg_tps = f->tg_tps;
}

}  // namespace tern
