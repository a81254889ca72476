#include "kernels/machine_probe.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/huge_pages.h"
#include "kernels/cpu_features.h"
#include "kernels/kernels.h"
#include "kernels/x86/probe_avx2.h"

namespace tern::kernels {
namespace {

using Clock = std::chrono::steady_clock;

// The FMA peak is measured at the vector width of the active kernel table.
bool UseAvx512Fma() {
  static const bool use = [] {
    const std::string isa = ActiveIsa();
    return isa == "avx512vnni" || isa == "amx";
  }();
  return use;
}

bool HaveAvx2() {
  static const bool have = DetectCpuFeatures().HasAvx2Fma();
  return have;
}

// Float buffer, pages touched by the thread that reads them. In 2 MiB pages
// where the kernel allows, as the model's weights are mapped (gguf_file.cc):
// a probe through 4 KiB pages would pay TLB misses that the weight streams
// do not, and understate the bandwidth they can have.
struct AlignedBuffer {
  explicit AlignedBuffer(int64_t n) : memory((size_t)n * 4), data((float*)memory.data()), n(n) {}
  HugePageBuffer memory;
  float* data;
  int64_t n;
};

// A warm-up round, then timed rounds until the rule settles or caps.
ProbeResult RunRounds(const SettleRule& rule, const std::function<double()>& round) {
  round();
  std::vector<double> v;
  bool settled = false;
  while ((int)v.size() < std::max(1, rule.max_rounds)) {
    v.push_back(round());
    if (ProbeSettled(v, rule)) {
      settled = true;
      break;
    }
  }
  return SummarizeRounds(v, settled);
}

// A rule of exactly n rounds (the fixed-round probes).
SettleRule FixedRounds(int n) {
  SettleRule r;
  r.min_rounds = r.max_rounds = std::max(1, n);
  r.stable_rounds = 0;
  return r;
}

// Distinct values in every page, like model weights: pages of one repeated
// value could be merged or compressed below a virtual machine and read
// faster than the weights ever are.
float Pattern(int64_t i) {
  const uint32_t h = (uint32_t)i * 2654435761u;
  return (float)(h >> 8) * (1.0f / 16777216.0f);
}

// Per-thread slice [begin, end) of n elements, in multiples of 32.
void Slice(int64_t n, int t, int num_threads, int64_t* begin, int64_t* end) {
  const int64_t chunks = n / 32;
  *begin = chunks * t / num_threads * 32;
  *end = chunks * (t + 1) / num_threads * 32;
}

float ScalarReadSum(const float* d, int64_t n) {
  float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  for (int64_t i = 0; i < n; i += 4) {
    s0 += d[i];
    s1 += d[i + 1];
    s2 += d[i + 2];
    s3 += d[i + 3];
  }
  return s0 + s1 + s2 + s3;
}

// Times one parallel pass; returns seconds.
double TimedPass(ThreadPool& pool, bool cpu_time, const std::function<void(int)>& fn) {
  BenchTimer timer(cpu_time, pool.num_threads());
  timer.Start();
  pool.RunOnAll(fn);
  return timer.Seconds();
}

}  // namespace

BenchTimer::BenchTimer(bool cpu_time, int num_threads)
    : cpu_time_(cpu_time), num_threads_(num_threads < 1 ? 1 : num_threads) {}

double BenchTimer::Now(bool cpu_time) {
  if (!cpu_time) {
    return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
  }
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void BenchTimer::Start() { start_ = Now(cpu_time_); }

double BenchTimer::Seconds() const {
  const double s = Now(cpu_time_) - start_;
  return cpu_time_ ? s / num_threads_ : s;
}

bool ProbeSettled(const std::vector<double>& rounds, const SettleRule& rule) {
  if (rounds.empty() || (int)rounds.size() < rule.min_rounds) return false;
  double best = rounds[0];
  size_t last_gain = 0;  // the round that last raised the best by more than the tolerance
  for (size_t i = 1; i < rounds.size(); ++i) {
    if (rounds[i] > best * (1.0 + rule.tolerance)) last_gain = i;
    best = std::max(best, rounds[i]);
  }
  return (int)(rounds.size() - 1 - last_gain) >= rule.stable_rounds;
}

ProbeResult SummarizeRounds(const std::vector<double>& rounds, bool settled) {
  ProbeResult r;
  if (rounds.empty()) return r;
  std::vector<double> v = rounds;
  std::sort(v.begin(), v.end());
  r.median = v[v.size() / 2];
  r.best = v.back();
  r.worst = v.front();
  r.rounds = (int)v.size();
  r.settled = settled;
  r.values = rounds;
  return r;
}

int64_t LastLevelCacheBytes() {
  int64_t best_level = 0, bytes = 0;
  for (int i = 0; i < 16; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i);
    std::ifstream level_in(dir + "/level"), size_in(dir + "/size");
    int64_t level = 0;
    std::string size;
    if (!(level_in >> level) || !(size_in >> size) || size.empty()) continue;
    int64_t n = std::atoll(size.c_str());
    if (size.back() == 'K') n <<= 10;
    if (size.back() == 'M') n <<= 20;
    if (level >= best_level) best_level = level, bytes = n;
  }
  return bytes;
}

struct ReadProbe::Impl {
  Impl(ThreadPool& p, int64_t total, int64_t chunk, bool cpu)
      : pool(p), chunk(chunk), chunks(total / chunk), cpu_time(cpu), buf(chunks * chunk) {}
  ThreadPool& pool;
  int64_t chunk, chunks;
  bool cpu_time;
  AlignedBuffer buf;
  std::atomic<float> sink{0};
};

ReadProbe::ReadProbe(ThreadPool& pool, int64_t buffer_bytes, int64_t chunk_bytes, bool cpu_time) {
  const int nt = pool.num_threads();
  // Chunks of whole 32-float groups per thread; the buffer whole chunks.
  const int64_t group = 32ll * nt;
  const int64_t total = std::max<int64_t>(buffer_bytes / 4 / group, 1) * group;
  int64_t chunk = chunk_bytes > 0 ? std::max<int64_t>(chunk_bytes / 4 / group, 1) * group : total;
  chunk = std::min(chunk, total);
  impl_ = std::make_unique<Impl>(pool, total, chunk, cpu_time);
  Impl& m = *impl_;
  pool.RunOnAll([&](int t) {
    for (int64_t c = 0; c < m.chunks; ++c) {
      int64_t b, e;
      Slice(m.chunk, t, nt, &b, &e);
      for (int64_t i = c * m.chunk + b; i < c * m.chunk + e; ++i) m.buf.data[i] = Pattern(i);
    }
  });
}

ReadProbe::~ReadProbe() = default;

int64_t ReadProbe::bytes() const { return impl_->buf.n * 4; }

double ReadProbe::Round() {
  Impl& m = *impl_;
  const int nt = m.pool.num_threads();
  const double s = TimedPass(m.pool, m.cpu_time, [&](int t) {
    int64_t b, e;
    Slice(m.chunk, t, nt, &b, &e);
    float v = 0;
    for (int64_t c = 0; c < m.chunks; ++c) {
      const float* d = m.buf.data + c * m.chunk + b;
      v += HaveAvx2() ? Avx2ReadSum(d, e - b) : ScalarReadSum(d, e - b);
    }
    m.sink.store(v, std::memory_order_relaxed);
  });
  return (double)bytes() / s / 1e9;
}

ProbeResult MeasureReadBandwidthSettled(ThreadPool& pool, int64_t buffer_bytes,
                                        int64_t chunk_bytes, const SettleRule& rule,
                                        bool cpu_time) {
  ReadProbe probe(pool, buffer_bytes, chunk_bytes, cpu_time);
  return RunRounds(rule, [&] { return probe.Round(); });
}

ProbeResult MeasureReadBandwidth(ThreadPool& pool, int64_t buffer_bytes, int rounds,
                                 bool cpu_time) {
  return MeasureReadBandwidthSettled(pool, buffer_bytes, 0, FixedRounds(rounds), cpu_time);
}

ProbeResult MeasureTriadBandwidth(ThreadPool& pool, int64_t buffer_bytes, int rounds,
                                  bool cpu_time) {
  const int nt = pool.num_threads();
  const int64_t n = buffer_bytes / 3 / 4 / 32 * 32;
  AlignedBuffer a(n), b(n), c(n);
  pool.RunOnAll([&](int t) {
    int64_t lo, hi;
    Slice(n, t, nt, &lo, &hi);
    for (int64_t i = lo; i < hi; ++i) a.data[i] = 0.0f, b.data[i] = Pattern(i), c.data[i] = Pattern(~i);
  });
  return RunRounds(FixedRounds(rounds), [&] {
    const double s = TimedPass(pool, cpu_time, [&](int t) {
      int64_t lo, hi;
      Slice(n, t, nt, &lo, &hi);
      if (HaveAvx2()) {
        Avx2Triad(a.data + lo, b.data + lo, c.data + lo, 0.5f, hi - lo);
      } else {
        for (int64_t i = lo; i < hi; ++i) a.data[i] = b.data[i] + 0.5f * c.data[i];
      }
    });
    return (double)n * 12 / s / 1e9;
  });
}

ProbeResult MeasureFmaPeakSettled(ThreadPool& pool, const SettleRule& rule, bool cpu_time) {
  const int64_t iterations = 20'000'000;
  std::atomic<float> sink{0};
  const double lanes = UseAvx512Fma() ? 16.0 * kFmaProbeChains : (HaveAvx2() ? 8.0 * kFmaProbeChains : 8.0);
  return RunRounds(rule, [&] {
    const double s = TimedPass(pool, cpu_time, [&](int) {
      float v;
      if (UseAvx512Fma()) {
        v = Avx512FmaLoop(iterations);
      } else if (HaveAvx2()) {
        v = Avx2FmaLoop(iterations);
      } else {
        float acc[8] = {0, 1, 2, 3, 4, 5, 6, 7};
        for (int64_t it = 0; it < iterations; ++it)
          for (float& x : acc) x = x * 0.999999f + 1e-7f;
        v = acc[0];
      }
      sink.store(v, std::memory_order_relaxed);
    });
    return lanes * 2.0 * iterations * pool.num_threads() / s / 1e9;
  });
}

ProbeResult MeasureFmaPeak(ThreadPool& pool, int rounds, bool cpu_time) {
  return MeasureFmaPeakSettled(pool, FixedRounds(rounds), cpu_time);
}

}  // namespace tern::kernels
