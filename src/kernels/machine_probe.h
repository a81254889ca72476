// MachineProbe: short measurements of this machine's physical limits, for
// rooflines in `tern bench`: memory read bandwidth (STREAM-style read-only
// sum and triad) and the fp32 FMA peak (8 independent FMA accumulators per
// thread at the active kernel table's vector width: 16 lanes with the
// AVX-512 table, 8 with AVX2, scalar fallback without AVX2). Each figure is the median of
// several rounds, with all threads of the pool working at once.
//
// On a machine shared with other work, wall time undercounts what the code
// can do; BenchTimer with cpu_time = true measures process CPU time divided
// by the number of threads instead (valid for code that does not spin).
//
// Thread rules: uses the given pool exclusively while running.
#pragma once

#include <cstdint>

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
};

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
