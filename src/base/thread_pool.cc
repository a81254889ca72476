#include "base/thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>

#include "base/cpu_cores.h"

namespace tern {
namespace {

// The longest spin window before a wait blocks, in nanoseconds; the window
// shrinks to kMinSpinNs while spins keep timing out. Set at start-up by
// ThreadPool::SetMaxSpinMicros (TERN_POOL_SPIN, base/env_settings.h).
std::atomic<int64_t> g_max_spin_ns{200'000};

int64_t MaxSpinNs() { return g_max_spin_ns.load(std::memory_order_relaxed); }
constexpr int64_t kMinSpinNs = 5'000;
// `pause` for this long at the start of a spin, then sched_yield.
constexpr int64_t kPauseNs = 2'000;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  sched_yield();
#endif
}

// Spins until done() or `*window_ns` passes: pauses first, then yields the
// core to whatever else wants it. Adapts the window (halves on a timeout,
// doubles on success) and returns done().
template <class Done>
bool SpinUntil(const Done& done, int64_t* window_ns) {
  if (*window_ns <= 0) return done();
  const int64_t start = NowNs();
  int64_t now = start;
  for (int i = 0;; ++i) {
    if (done()) {
      *window_ns = std::min(MaxSpinNs(), *window_ns * 2);
      return true;
    }
    if ((i & 15) == 0) now = NowNs();
    if (now - start >= *window_ns) break;
    if (now - start < kPauseNs) {
      CpuRelax();
    } else {
      sched_yield();
      now = NowNs();
    }
  }
  *window_ns = std::max(std::min(kMinSpinNs, MaxSpinNs()), *window_ns / 2);
  return done();
}

}  // namespace

ThreadPool::ThreadPool(int num_threads) : ThreadPool(num_threads, AvailableCores()) {}

ThreadPool::ThreadPool(int num_threads, int cores)
    : num_threads_(std::max(1, num_threads)),
      max_awake_(std::min(num_threads_, std::max(1, cores)) - 1),
      slots_(new Slot[num_threads_]),
      caller_spin_ns_(MaxSpinNs()) {
  awake_.store(num_threads_ - 1);
  for (int i = 1; i < num_threads_; ++i) {
    workers_.emplace_back([this, i] { WorkerLoop(i); });
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
    generation_.fetch_add(1);
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::RunSlots(int first, uint64_t gen) {
  const int n = job_slots_.load(std::memory_order_acquire);
  for (int k = 0; k < n; ++k) {
    const int s = (first + k) % n;
    uint64_t expected = gen - 1;
    if (slots_[s].claimed.load(std::memory_order_relaxed) != expected) continue;
    if (!slots_[s].claimed.compare_exchange_strong(expected, gen, std::memory_order_acquire)) {
      continue;
    }
    // The job cannot finish while this slot runs, so job_ is still its own.
    (*job_.load(std::memory_order_acquire))(s);
    if (done_.fetch_add(1, std::memory_order_seq_cst) + 1 == n &&
        caller_sleeping_.load(std::memory_order_seq_cst)) {
      std::lock_guard<std::mutex> lock(mu_);
      done_cv_.notify_one();
    }
  }
}

uint64_t ThreadPool::WaitForJob(uint64_t seen, int64_t* spin_ns) {
  auto changed = [&] { return generation_.load(std::memory_order_acquire) != seen; };
  // More workers awake than cores to run them: this one sleeps at once.
  const bool spin = awake_.load(std::memory_order_relaxed) <= max_awake_;
  if (spin && SpinUntil(changed, spin_ns)) return generation_.load(std::memory_order_acquire);
  std::unique_lock<std::mutex> lock(mu_);
  awake_.fetch_sub(1, std::memory_order_relaxed);
  sleepers_.fetch_add(1, std::memory_order_seq_cst);
  // A job published since `seen` is taken at once; after that only a
  // wake-up gets it out: a sleeper that was not woken sleeps through the
  // jobs that the threads awake run without it.
  uint64_t gen = generation_.load(std::memory_order_seq_cst);
  while (gen == seen && !stop_.load(std::memory_order_acquire)) {
    cv_.wait(lock);
    gen = generation_.load(std::memory_order_acquire);
  }
  sleepers_.fetch_sub(1, std::memory_order_relaxed);
  awake_.fetch_add(1, std::memory_order_relaxed);
  return gen;
}

void ThreadPool::WorkerLoop(int index) {
  uint64_t seen = 0;
  int64_t spin_ns = MaxSpinNs();
  for (;;) {
    const uint64_t gen = WaitForJob(seen, &spin_ns);
    if (stop_.load(std::memory_order_acquire)) return;
    seen = gen;
    RunSlots(index, gen);
  }
}

void ThreadPool::WaitForSlots(int num_slots) {
  auto finished = [&] { return done_.load(std::memory_order_acquire) == num_slots; };
  if (SpinUntil(finished, &caller_spin_ns_)) return;
  std::unique_lock<std::mutex> lock(mu_);
  caller_sleeping_.store(true, std::memory_order_seq_cst);
  done_cv_.wait(lock, [&] { return done_.load(std::memory_order_seq_cst) == num_slots; });
  caller_sleeping_.store(false, std::memory_order_relaxed);
}

void ThreadPool::Run(int num_slots, const std::function<void(int)>& fn) {
  const uint64_t gen = generation_.load(std::memory_order_relaxed) + 1;
  job_.store(&fn, std::memory_order_relaxed);
  job_slots_.store(num_slots, std::memory_order_relaxed);
  done_.store(0, std::memory_order_relaxed);
  // Slots this job does not use count as claimed.
  for (int s = num_slots; s < num_threads_; ++s) {
    slots_[s].claimed.store(gen, std::memory_order_relaxed);
  }
  generation_.store(gen, std::memory_order_seq_cst);
  // Wake sleepers up to the workers this job can use and the cores can run.
  // A worker about to sleep either saw the new generation or is counted
  // in sleepers_ here (both sides are sequentially consistent).
  if (sleepers_.load(std::memory_order_seq_cst) > 0) {
    std::lock_guard<std::mutex> lock(mu_);
    const int sleepers = sleepers_.load(std::memory_order_relaxed);
    const int wake = std::min(
        sleepers, std::min(num_slots - 1, max_awake_) - awake_.load(std::memory_order_relaxed));
    if (wake >= sleepers) {
      cv_.notify_all();
    } else {
      for (int i = 0; i < wake; ++i) cv_.notify_one();
    }
  }
  RunSlots(0, gen);
  WaitForSlots(num_slots);
  job_.store(nullptr, std::memory_order_relaxed);
}

void ThreadPool::RunOnAll(const std::function<void(int)>& fn) {
  if (num_threads_ == 1) {
    fn(0);
    return;
  }
  Run(num_threads_, fn);
}

void ThreadPool::ParallelFor(int64_t n, const RangeFn& fn, int64_t grain) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t num_chunks = (n + grain - 1) / grain;
  const int parts = (int)std::min<int64_t>(num_threads_, num_chunks);
  if (parts <= 1) {
    fn(0, n, 0);
    return;
  }
  Run(parts, [&](int t) {
    const int64_t c0 = num_chunks * t / parts;
    const int64_t c1 = num_chunks * (t + 1) / parts;
    const int64_t begin = c0 * grain;
    const int64_t end = std::min(n, c1 * grain);
    if (begin < end) fn(begin, end, t);
  });
}

int ThreadPool::DefaultNumThreads() { return AvailableCores(); }

void ThreadPool::SetMaxSpinMicros(int64_t us) {
  g_max_spin_ns.store(std::max<int64_t>(0, us) * 1000, std::memory_order_relaxed);
}

}  // namespace tern
