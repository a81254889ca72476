// `tern bench`: speed of a model (prefill pp and decode tg, llama-bench
// style) or of the kernels alone (`tern bench kernels`; `tern bench serve`,
// a load generator for a server, lives in bench_serve_command.cc), each next to the
// machine's own limits measured in the same run: memory read bandwidth for
// decode (tokens/s <= bandwidth / bytes read per token) and the fp32 FMA peak
// for prefill (tokens/s <= peak / (2 x parameters)).
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cctype>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/elapsed.h"
#include "base/env_settings.h"
#include "base/huge_pages.h"
#include "base/thread_pool.h"
#include "gguf/weight_summary.h"
#include "kernels/kernel_table.h"
#include "kernels/kernels.h"
#include "kernels/machine_probe.h"
#include "kernels/workspace.h"
#include "kv/kv_config.h"
#include "kv/kv_storage.h"
#include "model/forward_batch.h"
#include "model/model.h"
#include "quant/quant.h"
#include "tools/arg_parser.h"
#include "tools/bench_compare.h"
#include "tools/commands.h"
#include "tools/common_flags.h"
#include "tools/kv_dtype_flags.h"

namespace tern {
namespace {

using Clock = std::chrono::steady_clock;


struct Stats {
  double median = 0, min = 0, max = 0;
};

Stats Summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  if (v.empty()) return {};
  return {v[v.size() / 2], v.front(), v.back()};
}

// Resident and peak resident memory of this process, bytes.
void ReadRss(int64_t* rss, int64_t* hwm) {
  std::ifstream in("/proc/self/status");
  std::string line;
  *rss = *hwm = 0;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) *rss = std::stoll(line.substr(6)) * 1024;
    if (line.rfind("VmHWM:", 0) == 0) *hwm = std::stoll(line.substr(6)) * 1024;
  }
}

// Bytes of file mappings this process maps with 2 MiB page entries
// (FilePmdMapped in /proc/self/smaps_rollup; 0 where the kernel does not
// say). For a model, the share of its weights that decode streams without a
// TLB miss every 4 KiB.
int64_t FilePmdMappedBytes() {
  std::ifstream in("/proc/self/smaps_rollup");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("FilePmdMapped:", 0) == 0) return std::stoll(line.substr(14)) * 1024;
  }
  return 0;
}

// The read-bandwidth probe of `tern bench -m`: the yardstick of the decode
// roofline. Like decode, it streams from memory rather than partly from the
// last-level cache: the buffer is as large as the bytes decode reads per
// token, at least 256 MiB and 4x the last-level cache where sysfs reports
// its size, at most 1 GiB unless the cache needs more (on the machine of
// docs/benchmarks.md 64 MiB read at 80-84 GB/s, 256 MiB at 50-61 and 600 MiB
// or 1 GiB at 50-56). Like decode, the pool's threads (the decode's thread
// count) read it matrix by matrix, each thread its slice of each matrix
// (ProbeChunkBytes). Rounds run until the best round settles; a round slowed
// by other work reads low, never high, so the best round is the stable
// estimate of what the memory can deliver and the conservative denominator
// of a roofline fraction (the median swung by tens of percent between runs
// minutes apart).
int64_t ProbeBytes(double bytes_per_token) {
  const int64_t floor = std::max<int64_t>(256ll << 20, 4 * kernels::LastLevelCacheBytes());
  return std::clamp<int64_t>((int64_t)bytes_per_token, floor, std::max<int64_t>(floor, 1ll << 30));
}
// Mean bytes of the layers' weight matrices: the stretch each matmul of a
// decode step splits among the threads.
int64_t ProbeChunkBytes(const gguf::GgufFile& file) {
  int64_t bytes = 0, n = 0;
  for (const auto& t : file.tensors()) {
    if (t.shape.size() < 2 || t.name.rfind("blk.", 0) != 0) continue;
    bytes += (int64_t)t.num_bytes;
    ++n;
  }
  return n > 0 ? bytes / n : 0;
}
kernels::ProbeResult MergeProbes(const kernels::ProbeResult& a, const kernels::ProbeResult& b) {
  std::vector<double> v = a.values;
  v.insert(v.end(), b.values.begin(), b.values.end());
  return kernels::SummarizeRounds(v, a.settled && b.settled);
}
// "best 55.2, median 51.0, worst 48.5 GB/s, spread 12%, 23 rounds (settled)"
std::string DescribeProbe(const kernels::ProbeResult& p, const char* unit, int precision) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "best %.*f, median %.*f, worst %.*f %s, spread %.0f%%, %d rounds%s",
                precision, p.best, precision, p.median, precision, p.worst, unit,
                100 * p.Spread(), p.rounds, p.settled ? " (settled)" : " (cap reached, not settled)");
  return buf;
}

// ---- model benchmark ------------------------------------------------------------

struct ModelBenchOptions {
  std::string model_path;
  int64_t pp = 512;
  int64_t tg = 128;
  int64_t depth = 0;  // tokens already in the KV cache before each test
  int threads = 0;
  int reps = 3;
  bool json = false;
  KvDtypeFlags kv;
  std::string compare_llama;  // --compare-llama DIR
  int64_t rounds = -1;        // --rounds, with --compare-llama (-1: not given, 3)
  int64_t pairs = 32;         // --pairs: decode steps paired with probe rounds (0: none)
};

// Multiply-accumulate parameters touched per token by the matmuls, without
// the output matrix (which prefill applies to the last token only).
int64_t LayerMatmulParams(const gguf::GgufFile& file) {
  int64_t n = 0;
  for (const auto& t : file.tensors()) {
    if (t.shape.size() < 2 || t.name.rfind("blk.", 0) != 0) continue;
    n += t.NumElements();
  }
  return n;
}

class ModelBench {
 public:
  ModelBench(Model& model, ThreadPool& pool, int32_t max_context, DType k, DType v)
      : model_(model), pool_(pool), kv_(MakeShape(model.config(), max_context, k, v)) {
    const int32_t nb = (int32_t)kv_.shape().num_blocks;
    table_.resize(nb);
    for (int32_t i = 0; i < nb; ++i) table_[i] = i;
    logits_.resize(model.config().n_vocab);
  }

  // One batch of n tokens at positions [start, start + n); logits of the last.
  void Run(int32_t start, int32_t n, std::mt19937& rng) {
    ForwardBatch batch;
    std::uniform_int_distribution<int32_t> tok(0, model_.config().n_vocab - 1);
    for (int32_t i = 0; i < n; ++i) {
      batch.token_ids.push_back(tok(rng));
      batch.positions.push_back(start + i);
      batch.slots.push_back(start + i);
    }
    ForwardSequence seq;
    seq.first_token = 0;
    seq.num_tokens = n;
    seq.context_len = start + n;
    const int32_t bs = kv_.shape().block_size;
    seq.block_table.assign(table_.begin(), table_.begin() + (start + n + bs - 1) / bs);
    batch.sequences.push_back(std::move(seq));
    batch.logits_rows.push_back(n - 1);
    model_.Forward(batch, kv_, logits_.data(), &pool_);
  }

  const KvStorage& kv() const { return kv_; }

 private:
  static KvShape MakeShape(const ModelConfig& c, int32_t max_context, DType k, DType v) {
    KvShape s;
    s.num_layers = c.n_layer;
    s.num_kv_heads = c.n_head_kv;
    s.head_dim = c.head_dim;
    s.block_size = 16;
    s.num_blocks = (max_context + 15) / 16;
    s.dtype = k;
    s.v_dtype = v;
    s.huge_pages = EnvSettings::FromProcess().kv_huge_pages;
    return s;
  }

  Model& model_;
  ThreadPool& pool_;
  KvStorage kv_;
  std::vector<int32_t> table_;
  std::vector<float> logits_;
};

struct TestResult {
  std::string test;
  Stats tps;
  double bytes_per_token = 0;
  double bandwidth_gb_s = 0;
  double fma_peak_gflops = 0;
  double roofline_fraction = 0;
  // tg only, with --pairs: the decode's fraction of the read bandwidth
  // measured in the same seconds (the paired steps after tg's repetitions).
  int paired = 0;
  double paired_p25 = 0, paired_median = 0, paired_p75 = 0;
  double paired_decode_gb_s = 0, paired_probe_gb_s = 0;
};

// The q-quantile of v (nearest rank; 0 when empty).
double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, (size_t)(q * (double)(v.size() - 1) + 0.5))];
}

int RunModelBench(const ModelBenchOptions& o) {
  auto loaded = Model::Load(o.model_path);
  if (!loaded.ok()) {
    std::fprintf(stderr, "tern bench: %s\n", loaded.status().ToString().c_str());
    return 1;
  }
  std::unique_ptr<Model> model = std::move(loaded).value();
  const ModelConfig& cfg = model->config();
  const int threads = o.threads > 0 ? o.threads : ThreadPool::DefaultNumThreads();
  ThreadPool pool(threads);
  const std::string type = gguf::SummarizeWeights(model->file()).MainTypeName();
  const int32_t max_context = (int32_t)(o.depth + std::max(o.pp, o.tg)) + 1;
  if (max_context > cfg.n_ctx_train && cfg.n_ctx_train > 0) {
    std::fprintf(stderr, "tern bench: note: %d tokens exceed the training context %d\n",
                 max_context, cfg.n_ctx_train);
  }
  if (Status st = CheckKvDtypesFit(o.kv, cfg, o.model_path); !st.ok()) {
    std::fprintf(stderr, "tern bench: %s\n", st.ToString().c_str());
    return 1;
  }
  ModelBench bench(*model, pool, max_context, o.kv.k_dtype, o.kv.v_dtype);
  std::mt19937 rng(1234);
  std::fprintf(stderr, "tern bench: %s (%s, %s), %d threads, isa %s, KV cache %s\n",
               o.model_path.c_str(), cfg.arch.c_str(), type.c_str(), threads,
               kernels::ActiveIsa(), o.kv.Name().c_str());

  // Warm up: pages of the mapping, scratch buffers, the pool.
  bench.Run(0, (int32_t)std::min<int64_t>(std::max<int64_t>(o.pp, 1), 32), rng);
  bench.Run(0, 1, rng);
  // The context every test starts from: depth tokens in the KV cache
  // (prefilled once; the tests write only positions from depth on).
  const int32_t depth = (int32_t)o.depth;
  if (depth > 0) {
    std::fprintf(stderr, "tern bench: filling the KV cache to depth %d\n", depth);
    const auto t0 = Clock::now();
    for (int32_t p0 = 0; p0 < depth; p0 += 512) {
      bench.Run(p0, std::min<int32_t>(512, depth - p0), rng);
    }
    std::fprintf(stderr, "tern bench: depth %d filled in %.1f s\n", depth, SecondsSince(t0));
  }

  const kernels::SettleRule settle;
  const kernels::ProbeResult fma = kernels::MeasureFmaPeakSettled(pool, settle);
  const int64_t layer_params = LayerMatmulParams(model->file());
  const double kv_bytes_per_pos = (double)KvBytesPerToken(cfg.n_layer, cfg.n_head_kv,
                                                         cfg.head_dim, o.kv.k_dtype, o.kv.v_dtype);
  std::vector<TestResult> results;

  // Weights once per token plus the KV read at the mean depth of tg
  // (positions depth .. depth + tg - 1); windowed layers read at most their
  // window's positions.
  const double mean_depth = (double)depth + (double)(std::max<int64_t>(o.tg, 1) - 1) / 2.0;
  const int windowed = cfg.sliding_window > 0 ? cfg.NumWindowedLayers() : 0;
  // KV positions a layer reads on average at depth p.
  const auto kv_positions_at = [&](double p) {
    return ((double)(cfg.n_layer - windowed) * p +
            (double)windowed * std::min(p, (double)cfg.sliding_window)) /
           (double)cfg.n_layer;
  };
  // Bytes a decode step reads at depth p: every weight once and the KV.
  const auto decode_bytes_at = [&](double p) {
    return (double)model->WeightBytes() + kv_bytes_per_pos * kv_positions_at(p);
  };
  const double tg_bytes_per_token = decode_bytes_at(mean_depth) + 0.5;
  const int64_t probe_bytes = ProbeBytes(tg_bytes_per_token);
  const int64_t probe_chunk = ProbeChunkBytes(model->file());
  // Probed before the tests and after them; the rounds of both count.
  const kernels::ProbeResult bw_before =
      kernels::MeasureReadBandwidthSettled(pool, probe_bytes, probe_chunk, settle);

  if (o.pp > 0) {
    TestResult r;
    r.test = "pp" + std::to_string(o.pp);
    std::vector<double> tps;
    for (int rep = 0; rep < o.reps; ++rep) {
      const auto t0 = Clock::now();
      bench.Run(depth, (int32_t)o.pp, rng);
      tps.push_back((double)o.pp / SecondsSince(t0));
    }
    r.tps = Summarize(tps);
    r.bytes_per_token = (double)model->WeightBytes() / (double)o.pp;
    results.push_back(r);
  }
  if (o.tg > 0) {
    TestResult r;
    r.test = "tg" + std::to_string(o.tg);
    std::vector<double> tps;
    for (int rep = 0; rep < o.reps; ++rep) {
      const auto t0 = Clock::now();
      for (int32_t i = 0; i < (int32_t)o.tg; ++i) bench.Run(depth + i, 1, rng);
      tps.push_back((double)o.tg / SecondsSince(t0));
    }
    r.tps = Summarize(tps);
    r.bytes_per_token = tg_bytes_per_token;
    if (o.pairs > 0) {
      // The paired fraction: on a machine whose memory bandwidth drifts by
      // tens of percent within minutes (other tenants of the host), a
      // decode step and a probe round over as many bytes, taken one right
      // after the other (the order alternating), see the same memory; the
      // median of their ratios is the decode's share of what the memory
      // delivered in those seconds, free of the drift that the best round
      // of probes taken before and after the tests cannot follow.
      kernels::ReadProbe probe(pool, probe_bytes, probe_chunk);
      probe.Round();  // pages and caches
      std::vector<double> ratio, step_gb_s, probe_gb_s;
      for (int64_t i = 0; i < o.pairs; ++i) {
        const int32_t pos = depth + (int32_t)(i % o.tg);
        double step_s = 0, gb_s = 0;
        const auto step = [&] {
          const auto t0 = Clock::now();
          bench.Run(pos, 1, rng);
          step_s = SecondsSince(t0);
        };
        if (i % 2 == 0) {
          step();
          gb_s = probe.Round();
        } else {
          gb_s = probe.Round();
          step();
        }
        step_gb_s.push_back(decode_bytes_at(pos) / step_s / 1e9);
        probe_gb_s.push_back(gb_s);
        ratio.push_back(step_gb_s.back() / gb_s);
      }
      r.paired = (int)o.pairs;
      r.paired_p25 = Quantile(ratio, 0.25);
      r.paired_median = Quantile(ratio, 0.5);
      r.paired_p75 = Quantile(ratio, 0.75);
      r.paired_decode_gb_s = Quantile(step_gb_s, 0.5);
      r.paired_probe_gb_s = Quantile(probe_gb_s, 0.5);
    }
    results.push_back(r);
  }
  const kernels::ProbeResult bw = MergeProbes(
      bw_before, kernels::MeasureReadBandwidthSettled(pool, probe_bytes, probe_chunk, settle));
  for (TestResult& r : results) {
    r.bandwidth_gb_s = bw.best;
    r.fma_peak_gflops = fma.best;
    if (r.test.rfind("pp", 0) == 0) {
      // Prefill roofline: 2 flops per layer parameter per token.
      r.roofline_fraction = r.tps.median * 2.0 * (double)layer_params / (fma.best * 1e9);
    } else {
      r.roofline_fraction = r.tps.median / (bw.best * 1e9 / r.bytes_per_token);
    }
  }

  int64_t rss = 0, hwm = 0;
  ReadRss(&rss, &hwm);
  const double file_bytes = (double)model->file().file_size();
  // The file's pages mapped 2 MiB at a time, and the weights copied into
  // the kernels' own layout (2 MiB pages).
  const int64_t packed_bytes = model->PackedWeightBytes();
  const int64_t huge_bytes = FilePmdMappedBytes() + packed_bytes;
  const double huge_share = std::min(1.0, (double)huge_bytes / std::max(1.0, file_bytes));
  if (o.json) {
    for (const TestResult& r : results) {
      nlohmann::json j;
      j["test"] = r.test;
      j["n_depth"] = o.depth;
      j["kv_cache_dtype"] = o.kv.Name();
      j["model"] = o.model_path;
      j["arch"] = cfg.arch;
      j["type"] = type;
      j["threads"] = threads;
      j["isa"] = kernels::ActiveIsa();
      j["reps"] = o.reps;
      j["tokens_per_second"] = r.tps.median;
      j["min"] = r.tps.min;
      j["max"] = r.tps.max;
      j["bytes_per_token"] = (int64_t)r.bytes_per_token;
      j["bandwidth_gb_s"] = r.bandwidth_gb_s;
      j["bandwidth_median_gb_s"] = bw.median;
      j["bandwidth_worst_gb_s"] = bw.worst;
      j["bandwidth_spread"] = bw.Spread();
      j["bandwidth_rounds"] = bw.rounds;
      j["bandwidth_settled"] = bw.settled;
      j["bandwidth_probe_bytes"] = probe_bytes;
      j["bandwidth_probe_chunk_bytes"] = probe_chunk;
      j["fma_peak_gflops"] = r.fma_peak_gflops;
      j["fma_median_gflops"] = fma.median;
      j["fma_worst_gflops"] = fma.worst;
      j["fma_spread"] = fma.Spread();
      j["fma_rounds"] = fma.rounds;
      j["fma_settled"] = fma.settled;
      j["roofline_fraction"] = r.roofline_fraction;
      if (r.paired > 0) {
        j["paired_pairs"] = r.paired;
        j["paired_fraction"] = r.paired_median;
        j["paired_fraction_p25"] = r.paired_p25;
        j["paired_fraction_p75"] = r.paired_p75;
        j["paired_decode_gb_s"] = r.paired_decode_gb_s;
        j["paired_probe_gb_s"] = r.paired_probe_gb_s;
      }
      j["file_bytes"] = (int64_t)file_bytes;
      j["rss_bytes"] = rss;
      j["peak_rss_bytes"] = hwm;
      j["weights_2mib_pages_fraction"] = huge_share;
      std::printf("%s\n", j.dump().c_str());
    }
    return 0;
  }
  std::printf("| model | type | size | threads | test | tok/s (min-max) | roofline |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  for (const TestResult& r : results) {
    const bool pp = r.test.rfind("pp", 0) == 0;
    char roof[128];
    if (pp) {
      std::snprintf(roof, sizeof roof, "%.0f%% of %.0f GFLOP/s FMA peak (spread %.0f%%)",
                    100 * r.roofline_fraction, r.fma_peak_gflops, 100 * fma.Spread());
    } else {
      std::snprintf(roof, sizeof roof, "%.0f%% of %.1f GB/s (spread %.0f%%) / %s per token",
                    100 * r.roofline_fraction, r.bandwidth_gb_s, 100 * bw.Spread(),
                    FormatBytes(r.bytes_per_token).c_str());
    }
    std::printf("| %s | %s | %s | %d | %s | %.2f (%.2f-%.2f) | %s |\n", cfg.arch.c_str(),
                type.c_str(), FormatBytes(file_bytes).c_str(), threads,
                (r.test + (depth > 0 ? " @ d" + std::to_string(depth) : "")).c_str(),
                r.tps.median, r.tps.min, r.tps.max, roof);
  }
  std::printf("resident memory %s (peak %s); file %s + KV %s\n", FormatBytes((double)rss).c_str(),
              FormatBytes((double)hwm).c_str(), FormatBytes(file_bytes).c_str(),
              FormatBytes((double)bench.kv().total_bytes()).c_str());
  std::printf("bandwidth: read probe over %s in %s chunks (one per weight matrix, split among "
              "the %d threads), before and after the tests: %s\n",
              FormatBytes((double)probe_bytes).c_str(), FormatBytes((double)probe_chunk).c_str(),
              threads, DescribeProbe(bw, "GB/s", 1).c_str());
  std::printf("FMA peak: %d threads: %s\n", threads, DescribeProbe(fma, "GFLOP/s", 0).c_str());
  for (const TestResult& r : results) {
    if (r.paired == 0) continue;
    std::printf("%s paired with the read probe: %.0f%% of the bandwidth read in the same seconds "
                "(quartiles %.0f-%.0f%%; %d pairs of one decode step and one probe round over "
                "%s, alternated; medians: decode %.1f GB/s, probe %.1f GB/s)\n",
                r.test.c_str(), 100 * r.paired_median, 100 * r.paired_p25, 100 * r.paired_p75,
                r.paired, FormatBytes((double)probe_bytes).c_str(), r.paired_decode_gb_s,
                r.paired_probe_gb_s);
  }
  std::printf("weights in 2 MiB pages: %.0f%%%s%s\n", 100 * huge_share,
              packed_bytes > 0 ? (" (" + FormatBytes((double)packed_bytes) +
                                  " of them copied into the kernels' 16-row tiles at load)")
                                     .c_str()
                               : "",
              huge_share < 0.9 ? " (the rest of the file sits in 4 KiB pages of the page "
                                 "cache; dropped from the cache, it loads in 2 MiB pages and "
                                 "decode misses the TLB less, see README)"
                               : "");
  return 0;
}

// ---- kernel benchmark ------------------------------------------------------------

struct KernelBenchOptions {
  int threads = 0;
  int64_t tokens = 128;
  int64_t rows = 5632;
  int64_t cols = 2048;
  bool json = false;
  bool cpu_time = false;
  bool panel16 = false;
  std::string types;
};

std::vector<DType> ParseTypes(const std::string& list) {
  std::vector<DType> out;
  if (list.empty()) {
    return {DType::kF32,  DType::kF16,  DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_1,
            DType::kQ5_0, DType::kQ5_1, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K};
  }
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = std::min(list.find(',', start), list.size());
    const std::string name = list.substr(start, comma - start);
    if (auto t = ParseDType(name)) out.push_back(*t);
    else std::fprintf(stderr, "tern bench: unknown type '%s' skipped\n", name.c_str());
    start = comma + 1;
  }
  return out;
}

// Largest |simd - ref| relative to sum |w x| over a small random matmul.
double ErrorVsReference(DType t, int64_t cols, std::mt19937& rng) {
  const kernels::KernelTable& active = kernels::ActiveKernelTable();
  const int64_t rows = 37, tokens = 5;
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> wf(rows * cols), x(tokens * cols);
  for (auto& v : wf) v = nd(rng) * 0.02f;
  for (auto& v : x) v = nd(rng);
  std::vector<uint8_t> w(rows * RowBytes(t, cols));
  for (int64_t r = 0; r < rows; ++r) {
    quant::QuantizeRow(t, wf.data() + r * cols, w.data() + r * RowBytes(t, cols), cols);
    quant::DequantizeRow(t, w.data() + r * RowBytes(t, cols), wf.data() + r * cols, cols);
  }
  std::vector<float> a(rows * tokens), b(rows * tokens);
  const kernels::WeightView view{t, w.data(), rows, cols};
  kernels::MatMulWith(kernels::RefKernelTable(), view, x.data(), tokens, a.data(), nullptr,
                      nullptr);
  kernels::MatMulWith(active, view, x.data(), tokens, b.data(), nullptr, nullptr);
  double worst = 0;
  for (int64_t i = 0; i < tokens; ++i) {
    for (int64_t r = 0; r < rows; ++r) {
      double abs_sum = 0;
      for (int64_t k = 0; k < cols; ++k) abs_sum += std::fabs(wf[r * cols + k] * x[i * cols + k]);
      worst = std::max(worst, std::fabs((double)a[i * rows + r] - b[i * rows + r]) / abs_sum);
    }
  }
  return worst;
}

int RunKernelBench(const KernelBenchOptions& o) {
  const int threads = o.threads > 0 ? o.threads : ThreadPool::DefaultNumThreads();
  ThreadPool pool(threads);
  kernels::Workspace workspace;  // the kernels' scratch, as a model holds one
  std::fprintf(stderr, "tern bench kernels: isa %s, %d threads, matrix %" PRId64 " x %" PRId64
               ", prefill %" PRId64 " tokens\n",
               kernels::ActiveIsa(), threads, o.rows, o.cols, o.tokens);
  // Settled probes (ProbeBytes's floor; chunks of the benchmarked matrix).
  const kernels::SettleRule settle;
  const int64_t read_bytes = std::max<int64_t>(512ll << 20, 4 * kernels::LastLevelCacheBytes());
  const auto read = kernels::MeasureReadBandwidthSettled(
      pool, read_bytes, RowBytes(DType::kQ4_0, o.cols) * o.rows, settle, o.cpu_time);
  const auto triad = kernels::MeasureTriadBandwidth(pool, 384ll << 20, 7, o.cpu_time);
  const auto fma = kernels::MeasureFmaPeakSettled(pool, settle, o.cpu_time);
  kernels::BenchTimer timer(o.cpu_time, threads);
  std::mt19937 rng(42);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  if (o.json) {
    nlohmann::json j;
    j["test"] = "machine";
    j["threads"] = threads;
    j["read_gb_s"] = read.median;
    j["read_best_gb_s"] = read.best;
    j["read_spread"] = read.Spread();
    j["read_rounds"] = read.rounds;
    j["triad_gb_s"] = triad.median;
    j["fma_peak_gflops"] = fma.median;
    j["fma_best_gflops"] = fma.best;
    j["fma_spread"] = fma.Spread();
    j["fma_rounds"] = fma.rounds;
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("memory read %.1f GB/s (best %.1f, spread %.0f%%, %d rounds), triad %.1f GB/s, "
                "FMA peak %.0f GFLOP/s (best %.0f, spread %.0f%%, %d rounds), %d threads\n\n",
                read.median, read.best, 100 * read.Spread(), read.rounds, triad.median,
                fma.median, fma.best, 100 * fma.Spread(), fma.rounds, threads);
    std::printf("| type | decode GB/s | of read bw | decode us | prefill GFLOP/s | of FMA peak "
                "| max err vs ref |\n|---|---|---|---|---|---|---|\n");
  }
  std::vector<float> x(o.tokens * o.cols);
  for (auto& v : x) v = nd(rng);
  std::vector<float> y(o.tokens * o.rows);
  for (DType t : ParseTypes(o.types)) {
    if (o.cols % BlockSize(t) != 0 || !quant::CanQuantize(t)) continue;
    // Quantize 64 distinct rows, tile them; enough copies of the matrix that
    // decode streams from memory, not from the caches.
    const int64_t row_bytes = RowBytes(t, o.cols);
    const int64_t matrix_bytes = row_bytes * o.rows;
    std::vector<uint8_t> distinct(64 * row_bytes);
    std::vector<float> src(o.cols);
    for (int64_t r = 0; r < 64; ++r) {
      for (auto& v : src) v = nd(rng) * 0.02f;
      quant::QuantizeRow(t, src.data(), distinct.data() + r * row_bytes, o.cols);
    }
    const int64_t copies =
        std::clamp<int64_t>((768ll << 20) / std::max<int64_t>(matrix_bytes, 1), 1, 64);
    // In 2 MiB pages where the kernel allows, as a model's weights are mapped.
    HugePageBuffer w((size_t)(copies * matrix_bytes));
    for (int64_t r = 0; r < copies * o.rows; ++r) {
      std::memcpy(w.data() + r * row_bytes, distinct.data() + (r % 64) * row_bytes, row_bytes);
    }
    // --panel16: each copy in the table's 16-row tiles, as a model's
    // weights are packed at load (LlamaModel::PackForKernels).
    const bool packed = o.panel16 && kernels::CanPackPanel16(t) && o.rows % 16 == 0;
    if (packed) {
      std::vector<uint8_t> tmp((size_t)matrix_bytes);
      for (int64_t c = 0; c < copies; ++c) {
        uint8_t* m = w.data() + c * matrix_bytes;
        std::memcpy(tmp.data(), m, (size_t)matrix_bytes);
        kernels::PackPanel16(kernels::WeightView{t, tmp.data(), o.rows, o.cols}, m);
      }
    }
    auto view = [&](int64_t c) {
      return kernels::WeightView{t, w.data() + c * matrix_bytes, o.rows, o.cols,
                                 packed ? kernels::WeightLayout::kPanel16
                                        : kernels::WeightLayout::kRowMajor};
    };
    // Decode: one token per matmul, cycling through the copies.
    kernels::MatMul(view(0), x.data(), 1, y.data(), &pool, &workspace);
    std::vector<double> per_call;
    for (int round = 0; round < 5; ++round) {
      const int64_t calls = std::max<int64_t>(copies, 8);
      timer.Start();
      for (int64_t i = 0; i < calls; ++i) {
        kernels::MatMul(view(i % copies), x.data(), 1, y.data(), &pool, &workspace);
      }
      per_call.push_back(timer.Seconds() / (double)calls);
    }
    const double decode_s = Summarize(per_call).median;
    const double decode_gbs = (double)matrix_bytes / decode_s / 1e9;
    // Prefill: tokens per matmul.
    std::vector<double> gflops;
    for (int round = 0; round < 3; ++round) {
      timer.Start();
      kernels::MatMul(view(round % copies), x.data(), o.tokens, y.data(), &pool, &workspace);
      gflops.push_back(2.0 * o.rows * o.cols * o.tokens / timer.Seconds() / 1e9);
    }
    const double prefill = Summarize(gflops).median;
    const double err = ErrorVsReference(t, std::max<int64_t>(256, BlockSize(t)), rng);
    if (o.json) {
      nlohmann::json j;
      j["test"] = "kernel";
      j["type"] = DTypeName(t);
      j["isa"] = kernels::ActiveIsa();
      j["panel16"] = packed;
      j["threads"] = threads;
      j["rows"] = o.rows;
      j["cols"] = o.cols;
      j["decode_gb_s"] = decode_gbs;
      j["decode_us"] = decode_s * 1e6;
      j["decode_fraction"] = decode_gbs / read.best;
      j["prefill_tokens"] = o.tokens;
      j["prefill_gflops"] = prefill;
      j["prefill_fraction"] = prefill / fma.best;
      j["max_rel_err_vs_ref"] = err;
      std::printf("%s\n", j.dump().c_str());
    } else {
      std::printf("| %s%s | %.1f | %.0f%% | %.0f | %.1f | %.0f%% | %.1e |\n", DTypeName(t),
                  packed ? " (16-row tiles)" : "",
                  decode_gbs, 100 * decode_gbs / read.best, decode_s * 1e6, prefill,
                  100 * prefill / fma.best, err);
    }
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int RunBench(int argc, char** argv) {
  if (argc >= 1 && std::strcmp(argv[0], "serve") == 0) return RunBenchServe(argc - 1, argv + 1);
  if (argc >= 1 && std::strcmp(argv[0], "grammar") == 0) return RunBenchGrammar(argc - 1, argv + 1);
  if (argc >= 1 && std::strcmp(argv[0], "kernels") == 0) {
    KernelBenchOptions o;
    ArgParser p("bench kernels [-t N] [-p TOKENS] [--type LIST] [--json]",
                "Measures memory bandwidth, the FMA peak and every MatMul kernel on a "
                "tinyllama-sized matrix (decode GB/s, prefill GFLOP/s, error vs the scalar "
                "reference).");
    AddThreadsFlag(p, &o.threads);
    p.AddInt("-p,--tokens", "N", &o.tokens, "prefill tokens per matmul (default 128)");
    p.AddInt("--rows", "N", &o.rows, "matrix rows (default 5632)");
    p.AddInt("--cols", "N", &o.cols, "matrix columns (default 2048)");
    p.AddString("--type", "LIST", &o.types, "comma-separated types (default: all)");
    p.AddFlag("--json", &o.json, "one JSON object per line");
    p.AddFlag("--cpu-time", &o.cpu_time,
              "time by process CPU time / threads (for a busy machine; default wall time)");
    p.AddFlag("--panel16", &o.panel16,
              "weights in the table's 16-row tiles where it has them (kPanel16, as a model "
              "packs them at load; default: the rows as quantized)");
    if (int rc = ParseOrExit(p, argc - 1, argv + 1, "bench kernels"); rc >= 0) return rc;
    if (o.rows <= 0 || o.cols <= 0 || o.tokens <= 0) {
      std::fprintf(stderr, "tern bench kernels: --rows, --cols and -p must be positive\n");
      return 1;
    }
    return RunKernelBench(o);
  }
  ModelBenchOptions o;
  ArgParser p("bench -m MODEL [-p 512] [-n 128] [-d DEPTH] [-t N] [-r REPS] [--pairs 32] "
              "[--json] [--compare-llama DIR [--rounds 3]]",
              "Prefill (pp: p tokens in one batch) and decode (tg: n steps of one token) speed "
              "of a model, with the roofline measured in the same run: tg against memory "
              "bandwidth / bytes read per token, pp against the fp32 FMA peak. The probes "
              "use the -t threads; the bandwidth probe reads, before and after the tests, "
              "a buffer as large as the bytes read per token (256 MiB to 1 GiB, and at least "
              "4x the last-level cache) matrix by matrix as decode does; each probe runs "
              "rounds until its best round has not improved by more than 1% for 5 rounds "
              "(at most 40), and the fractions are against the best round; the spread "
              "(best - worst) / best is printed next to them. After tg, decode steps alternate "
              "with probe rounds (--pairs): a fraction against the bandwidth of the same "
              "seconds, which a host whose bandwidth drifts moves less. `tern bench kernels` "
              "benchmarks "
              "the kernels alone; `tern bench serve` loads an OpenAI-compatible server.");
  AddModelFlag(p, &o.model_path, "GGUF model (required)");
  p.AddInt("-p,--n-prompt", "N", &o.pp, "prefill tokens (default 512; 0 skips)");
  p.AddInt("-n,--n-gen", "N", &o.tg, "decode steps (default 128; 0 skips)");
  p.AddInt("-d,--depth", "N", &o.depth,
           "tokens already in the KV cache when each test starts (default 0): speed at a "
           "long context, where attention reads the KV of every earlier position");
  AddThreadsFlag(p, &o.threads);
  p.AddInt("-r,--repetitions", "N", &o.reps, "repetitions (default 3)");
  p.AddFlag("--json", &o.json, "one JSON object per line per test");
  p.AddInt("--pairs", "N", &o.pairs,
           "after tg, N decode steps each paired with one read-probe round (the order "
           "alternating): the decode's fraction of the bandwidth read in the same seconds, "
           "median and quartiles over the pairs, which a host whose bandwidth drifts moves "
           "far less than the fraction against the best probe round (default 32; 0 skips)");
  AddKvDtypeFlags(p, &o.kv, "f16");
  p.AddString("--compare-llama", "DIR", &o.compare_llama,
              "side by side with llama.cpp: DIR is a llama.cpp build's bin directory holding "
              "llama-bench; tern bench and llama-bench run alternated (tern, llama-bench, "
              "tern, ...; one at a time) on the same -m file with the same -p, -n, -d, -t, -r "
              "and KV cache type (llama-bench -ctk/-ctv, with -fa 1 when quantized) for "
              "--rounds rounds; prints per test the medians and ranges over the rounds and "
              "the ratio tern / llama.cpp, and the median (range) of the per-round ratios (tern's "
              "round i over llama.cpp's round i, run back to back: on a host whose memory "
              "bandwidth drifts, the steadier figure) (--json: one object per test)");
  p.AddInt("--rounds", "N", &o.rounds,
           "rounds of the alternation with --compare-llama (default 3)");
  if (int rc = ParseOrExit(p, argc, argv, "bench"); rc >= 0) return rc;
  if (o.model_path.empty()) {
    std::fprintf(stderr, "tern bench: -m MODEL is required (or `tern bench kernels`)\n");
    return 1;
  }
  if (o.pp < 0 || o.tg < 0 || o.depth < 0 || o.reps < 1) {
    std::fprintf(stderr, "tern bench: -p, -n and -d must be >= 0 and -r >= 1\n");
    return 1;
  }
  if (o.pairs < 0 || o.pairs > 10000) {
    std::fprintf(stderr, "tern bench: --pairs must be 0 to 10000\n");
    return 1;
  }
  if (o.depth + std::max(o.pp, o.tg) > (1 << 24)) {
    std::fprintf(stderr, "tern bench: -d plus the larger of -p and -n must be at most %d tokens\n",
                 1 << 24);
    return 1;
  }
  if (o.compare_llama.empty() && o.rounds != -1) {
    std::fprintf(stderr, "tern bench: --rounds goes with --compare-llama DIR (-r sets repetitions)\n");
    return 1;
  }
  if (!o.compare_llama.empty()) {
    if (o.rounds == -1) o.rounds = 3;
    if (o.rounds < 1 || o.rounds > 1000) {
      std::fprintf(stderr, "tern bench: --rounds must be 1 to 1000\n");
      return 1;
    }
    if (o.pp == 0 && o.tg == 0) {
      std::fprintf(stderr, "tern bench: --compare-llama needs -p or -n above 0\n");
      return 1;
    }
    CompareOptions c;
    c.llama_dir = o.compare_llama;
    c.model_path = o.model_path;
    c.pp = o.pp;
    c.tg = o.tg;
    c.depth = o.depth;
    c.threads = o.threads > 0 ? o.threads : ThreadPool::DefaultNumThreads();
    c.reps = o.reps;
    c.pairs = o.pairs;
    c.rounds = (int)o.rounds;
    c.k_dtype = KvDtypeName(o.kv.k_dtype);
    c.v_dtype = KvDtypeName(o.kv.v_dtype);
    c.json = o.json;
    return RunCompareLlama(c);
  }
  return RunModelBench(o);
}

}  // namespace tern
