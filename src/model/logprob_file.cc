#include "model/logprob_file.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>

#include "base/atomic_file.h"

namespace tern {
namespace {

constexpr char kMagic[8] = {'T', 'E', 'R', 'N', 'L', 'P', 'F', '1'};

struct FileCloser {
  void operator()(FILE* f) const { std::fclose(f); }
};
using FilePtr = std::unique_ptr<FILE, FileCloser>;

int32_t ArgmaxRow(const float* row, int32_t n) {
  int32_t best = 0;
  for (int32_t i = 1; i < n; ++i) {
    if (row[i] > row[best]) best = i;
  }
  return best;
}

}  // namespace

Status WriteLogprobFile(const std::string& path, const LogprobFile& file) {
  AtomicFile f(path);
  TERN_RETURN_IF_ERROR(f.Create());
  const uint32_t n_vocab = file.n_vocab, ctx = file.ctx;
  const uint64_t n = file.token_ids.size();
  TERN_RETURN_IF_ERROR(f.Write(kMagic, 8));
  TERN_RETURN_IF_ERROR(f.Write(&n_vocab, 4));
  TERN_RETURN_IF_ERROR(f.Write(&ctx, 4));
  TERN_RETURN_IF_ERROR(f.Write(&n, 8));
  TERN_RETURN_IF_ERROR(f.Write(file.token_ids.data(), 4 * n));
  TERN_RETURN_IF_ERROR(f.Write(file.logprobs.data(), 4 * file.logprobs.size()));
  return f.Commit();
}

StatusOr<LogprobFile> ReadLogprobFile(const std::string& path) {
  FilePtr f(std::fopen(path.c_str(), "rb"));
  if (!f) return NotFound(path + ": cannot open: " + std::strerror(errno));
  char magic[8];
  uint32_t n_vocab = 0, ctx = 0;
  uint64_t n = 0;
  if (std::fread(magic, 1, 8, f.get()) != 8 || std::memcmp(magic, kMagic, 8) != 0) {
    return DataLoss(path + ": not a logprob file (bad magic)");
  }
  if (std::fread(&n_vocab, 4, 1, f.get()) != 1 || std::fread(&ctx, 4, 1, f.get()) != 1 ||
      std::fread(&n, 8, 1, f.get()) != 1) {
    return DataLoss(path + ": truncated header");
  }
  std::fseek(f.get(), 0, SEEK_END);
  const long size = std::ftell(f.get());
  std::fseek(f.get(), 24, SEEK_SET);
  if (n_vocab == 0 || n_vocab > (1u << 24) ||
      (double)n * (4.0 + 4.0 * n_vocab) + 24 != (double)size) {
    return DataLoss(path + ": size " + std::to_string(size) + " does not match its header (" +
                    std::to_string(n) + " positions x " + std::to_string(n_vocab) + " vocab)");
  }
  LogprobFile out;
  out.n_vocab = (int32_t)n_vocab;
  out.ctx = (int32_t)ctx;
  out.token_ids.resize(n);
  out.logprobs.resize(n * n_vocab);
  if (std::fread(out.token_ids.data(), 4, n, f.get()) != n ||
      std::fread(out.logprobs.data(), 4, out.logprobs.size(), f.get()) != out.logprobs.size()) {
    return DataLoss(path + ": truncated data");
  }
  return out;
}

Status CheckSameRun(const LogprobFile& base, int32_t n_vocab, int32_t ctx,
                    const std::vector<int32_t>& token_ids) {
  if (base.n_vocab != n_vocab) {
    return InvalidArgument("vocabulary sizes differ: base " + std::to_string(base.n_vocab) +
                           ", this model " + std::to_string(n_vocab));
  }
  if (base.ctx != ctx) {
    return InvalidArgument("context sizes differ: base " + std::to_string(base.ctx) +
                           ", this run " + std::to_string(ctx));
  }
  if (base.token_ids.size() != token_ids.size()) {
    return InvalidArgument("the base run scored " + std::to_string(base.num_positions()) +
                           " positions, this run would score " + std::to_string(token_ids.size()) +
                           ": use the same text, tokenizer, --ctx and --chunks");
  }
  const auto [b, c] = std::mismatch(base.token_ids.begin(), base.token_ids.end(), token_ids.begin());
  if (b != base.token_ids.end()) {
    return InvalidArgument("token ids differ from the base run at scored position " +
                           std::to_string(b - base.token_ids.begin()) + " of " +
                           std::to_string(base.num_positions()) + " (base " + std::to_string(*b) +
                           ", this run " + std::to_string(*c) +
                           "): use the same text and tokenizer");
  }
  return Status::Ok();
}

StatusOr<KlStats> CompareLogprobs(const LogprobFile& base, const LogprobFile& current) {
  TERN_RETURN_IF_ERROR(CheckSameRun(base, current.n_vocab, current.ctx, current.token_ids));
  const int64_t n = base.num_positions();
  const int32_t v = base.n_vocab;
  KlStats stats;
  if (n == 0) return stats;
  std::vector<double> kl(n);
  double base_nll = 0, nll = 0;
  int64_t agree = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float* p = &base.logprobs[i * v];
    const float* q = &current.logprobs[i * v];
    double sum = 0;
    for (int32_t k = 0; k < v; ++k) {
      if (std::isfinite(p[k])) sum += std::exp((double)p[k]) * ((double)p[k] - q[k]);
    }
    kl[i] = std::max(0.0, sum);
    agree += ArgmaxRow(p, v) == ArgmaxRow(q, v);
    base_nll -= p[base.token_ids[i]];
    nll -= q[base.token_ids[i]];
  }
  double total = 0;
  for (double x : kl) total += x;
  stats.mean_kl = total / n;
  std::vector<double> sorted = kl;
  std::sort(sorted.begin(), sorted.end());
  stats.p99_kl = sorted[std::min<int64_t>(n - 1, (int64_t)std::ceil(0.99 * n) - 1)];
  stats.max_kl = sorted.back();
  stats.top1_agreement = (double)agree / n;
  stats.base_ppl = std::exp(base_nll / n);
  stats.ppl = std::exp(nll / n);
  return stats;
}

}  // namespace tern
