// LogprobFile: the log-probabilities a perplexity run saw at its scored
// positions, saved so a later run (e.g. a quantized model on the same text
// and context) can report its KL divergence from this base.
//
// Binary layout, little-endian, no padding:
//
//   offset 0   char[8]  magic "TERNLPF1"
//          8   uint32   n_vocab
//         12   uint32   ctx (window length of the run)
//         16   uint64   n_positions
//         24   int32    token_ids[n_positions]   token each position predicts
//          .   float32  logprobs[n_positions][n_vocab]   log-softmax rows
//
// Thread rules: plain data and pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace tern {

struct LogprobFile {
  int32_t n_vocab = 0;
  int32_t ctx = 0;
  std::vector<int32_t> token_ids;   // [n_positions]
  std::vector<float> logprobs;      // [n_positions, n_vocab]

  int64_t num_positions() const { return (int64_t)token_ids.size(); }
};

Status WriteLogprobFile(const std::string& path, const LogprobFile& file);
StatusOr<LogprobFile> ReadLogprobFile(const std::string& path);

// How a run's distributions differ from a base run's.
struct KlStats {
  double mean_kl = 0;          // mean over positions of KL(base || current), nats
  double p99_kl = 0;           // 99th percentile
  double max_kl = 0;
  double top1_agreement = 0;   // fraction of positions with the same argmax
  double base_ppl = 0;         // exp(mean NLL) of each run on the same tokens
  double ppl = 0;
};

// Whether a run with n_vocab, ctx that scores token_ids lines up with base
// (the same vocabulary size, context, and scored token ids: the same text,
// tokenizer, --ctx and --chunks). Cheap: run it before evaluating anything.
// The message says what differs (for token ids: the count, or the first
// position that differs and both ids).
Status CheckSameRun(const LogprobFile& base, int32_t n_vocab, int32_t ctx,
                    const std::vector<int32_t>& token_ids);

// Fails with CheckSameRun's message when the runs do not line up.
StatusOr<KlStats> CompareLogprobs(const LogprobFile& base, const LogprobFile& current);

}  // namespace tern
