#include "base/thread_pool.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <utility>

namespace tern {

ThreadPool::ThreadPool(int num_threads) : num_threads_(std::max(1, num_threads)) {
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

namespace {

// Iterations of the spin-wait before blocking (each a pause instruction:
// roughly 0.1-0.3 ms in all).
// TERN_POOL_SPIN overrides it (0: block at once).
int SpinIterations() {
  static const int n = [] {
    const char* env = std::getenv("TERN_POOL_SPIN");
    return env != nullptr ? std::atoi(env) : 1 << 13;
  }();
  return n;
}

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

}  // namespace

void ThreadPool::WorkerLoop(int index) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t gen = generation_.load(std::memory_order_acquire);
    for (int i = 0; gen == seen && i < SpinIterations(); ++i) {
      CpuRelax();
      gen = generation_.load(std::memory_order_acquire);
    }
    if (gen == seen) {
      std::unique_lock<std::mutex> lock(mu_);
      ++sleepers_;
      cv_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
      --sleepers_;
      gen = generation_.load(std::memory_order_acquire);
    }
    seen = gen;
    if (stop_.load(std::memory_order_acquire)) return;
    const std::function<void(int)>* job = job_.load(std::memory_order_acquire);
    (*job)(index);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      // Last one: wake the caller if it went to sleep.
      std::lock_guard<std::mutex> lock(mu_);
      done_cv_.notify_one();
    }
  }
}

void ThreadPool::RunOnAll(const std::function<void(int)>& fn) {
  if (num_threads_ == 1) {
    fn(0);
    return;
  }
  job_.store(&fn, std::memory_order_relaxed);
  pending_.store(num_threads_ - 1, std::memory_order_relaxed);
  {
    // The counter moves under the mutex so that a worker deciding to sleep
    // either sees it or is counted in sleepers_ before we look.
    std::lock_guard<std::mutex> lock(mu_);
    generation_.fetch_add(1, std::memory_order_release);
    if (sleepers_ > 0) cv_.notify_all();
  }
  fn(0);
  for (int i = 0; pending_.load(std::memory_order_acquire) != 0 && i < SpinIterations(); ++i) {
    CpuRelax();
  }
  if (pending_.load(std::memory_order_acquire) != 0) {
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [&] { return pending_.load(std::memory_order_acquire) == 0; });
  }
  job_.store(nullptr, std::memory_order_relaxed);
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
  RunOnAll([&](int t) {
    if (t >= parts) return;
    const int64_t c0 = num_chunks * t / parts;
    const int64_t c1 = num_chunks * (t + 1) / parts;
    const int64_t begin = c0 * grain;
    const int64_t end = std::min(n, c1 * grain);
    if (begin < end) fn(begin, end, t);
  });
}

int ThreadPool::DefaultNumThreads() {
  // Count distinct (physical id, core id) pairs in /proc/cpuinfo.
  std::ifstream in("/proc/cpuinfo");
  std::set<std::pair<int, int>> cores;
  std::string line;
  int phys = 0;
  while (std::getline(in, line)) {
    auto value = [&] { return std::stoi(line.substr(line.find(':') + 1)); };
    if (line.rfind("physical id", 0) == 0) phys = value();
    if (line.rfind("core id", 0) == 0) cores.insert({phys, value()});
  }
  int hw = (int)std::thread::hardware_concurrency();
  if (cores.empty()) return std::max(1, hw);
  return std::max(1, std::min<int>((int)cores.size(), hw > 0 ? hw : 1 << 20));
}

}  // namespace tern
