// MachineProbe: short measurements of this machine's physical limits, for
// rooflines in `tern bench`: memory read bandwidth (STREAM-style read-only
// sum, each thread's span as 4 streams prefetched 2 KiB ahead, the way the
// decodes read; and triad) and the fp32 FMA peak (kFmaProbeChains
// independent FMA accumulators per thread at the active kernel table's
// vector width: 16 lanes with the AVX-512 table, 8 with AVX2, scalar
// fallback without AVX2), with all threads of the pool working at once.
//
// A round slowed by other work on the machine reads low, never high, so the
// best round is the estimate of what the machine can do. The Settled probes
// run rounds until that best has settled (SettleRule) and report it with the
// median, the worst round and the spread between them, so that a roofline
// fraction says what its denominator was worth.
//
// On a machine shared with other work, wall time undercounts what the code
// can do; BenchTimer with cpu_time = true measures process CPU time divided
// by the number of threads instead (valid for code that does not spin).
//
// Thread rules: uses the given pool exclusively while running.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "base/thread_pool.h"

namespace tern::kernels {

class BenchTimer {
 public:
  BenchTimer(bool cpu_time, int num_threads);
  void Start();
  double Seconds() const;  // since Start()

 private:
  static double Now(bool cpu_time);
  bool cpu_time_;
  int num_threads_;
  double start_ = 0;
};

struct ProbeResult {
  double median = 0;  // GB/s or GFLOP/s
  double best = 0;
  double worst = 0;
  int rounds = 0;        // timed rounds (after one warm-up round)
  bool settled = false;  // stopped by the SettleRule, not by its cap
  std::vector<double> values;  // every timed round, in the order measured
  // (best - worst) / best: how far apart the rounds read.
  double Spread() const { return best > 0 ? (best - worst) / best : 0; }
};

// When a probe stops: after at least min_rounds timed rounds, once the best
// round has not improved by more than `tolerance` (relative) for
// stable_rounds rounds in a row; at max_rounds in any case.
struct SettleRule {
  int min_rounds = 6;
  int stable_rounds = 5;
  int max_rounds = 40;
  double tolerance = 0.01;
};

// Whether the rounds so far (in the order measured) satisfy the rule's
// stopping condition other than the cap.
bool ProbeSettled(const std::vector<double>& rounds, const SettleRule& rule);
// Best, median, worst and count of the rounds (all zero when empty); two
// probes merge as SummarizeRounds(a.values + b.values, a.settled && b.settled).
ProbeResult SummarizeRounds(const std::vector<double>& rounds, bool settled);

// Read bandwidth as decode streams its weights: the buffer is read as
// consecutive chunks of chunk_bytes (a weight matrix; 0 = one chunk), each
// chunk split into one contiguous slice per thread of the pool, all threads
// at once, with no barrier between chunks. Rounds until `rule` settles.
ProbeResult MeasureReadBandwidthSettled(ThreadPool& pool, int64_t buffer_bytes,
                                        int64_t chunk_bytes, const SettleRule& rule,
                                        bool cpu_time = false);
// The read probe's buffer kept for rounds taken one at a time, to pair each
// with other work measured in the same seconds (`tern bench -m`'s paired
// decode fraction): the pattern and the chunked, all-threads pass of
// MeasureReadBandwidthSettled. The pool is used only inside Round().
class ReadProbe {
 public:
  ReadProbe(ThreadPool& pool, int64_t buffer_bytes, int64_t chunk_bytes, bool cpu_time = false);
  ~ReadProbe();
  ReadProbe(const ReadProbe&) = delete;
  ReadProbe& operator=(const ReadProbe&) = delete;
  // One timed pass over the buffer: GB/s.
  double Round();
  // The bytes a round reads (the buffer rounded to whole chunks).
  int64_t bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The FMA peak, rounds until `rule` settles.
ProbeResult MeasureFmaPeakSettled(ThreadPool& pool, const SettleRule& rule, bool cpu_time = false);

// The size of one instance of the last-level cache as sysfs reports it
// (/sys/devices/system/cpu/cpu0/cache, highest level); 0 when it does not.
int64_t LastLevelCacheBytes();

// Reads a buffer of buffer_bytes (far larger than the caches) rounds times.
ProbeResult MeasureReadBandwidth(ThreadPool& pool, int64_t buffer_bytes = 512ll << 20,
                                 int rounds = 9, bool cpu_time = false);
// a[i] = b[i] + s * c[i] over three float arrays of buffer_bytes / 3 each;
// counts 12 bytes per element (two reads, one write).
ProbeResult MeasureTriadBandwidth(ThreadPool& pool, int64_t buffer_bytes = 384ll << 20,
                                  int rounds = 7, bool cpu_time = false);
// fp32 FMA throughput; 2 flops per lane per FMA.
ProbeResult MeasureFmaPeak(ThreadPool& pool, int rounds = 7, bool cpu_time = false);

}  // namespace tern::kernels
