// ThreadPool: persistent worker threads for splitting one op across cores.
// ParallelFor(n, fn) calls fn(begin, end, thread_index) over a static split of
// [0, n) and returns when all parts are done. The calling thread takes part
// (as thread_index 0), so a pool of N threads starts N-1 workers.
// Between jobs the workers spin briefly on an atomic generation counter
// before they block on a condition variable, so the many short dispatches of
// a forward pass do not pay a sleep/wake-up each; an idle pool sleeps.
//
// Thread rules: ParallelFor may be called from one thread at a time per pool.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tern {

class ThreadPool {
 public:
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  using RangeFn = std::function<void(int64_t begin, int64_t end, int thread_index)>;
  // Splits [0, n) into num_threads contiguous parts (each a multiple of
  // grain, except the last) and runs them in parallel.
  void ParallelFor(int64_t n, const RangeFn& fn, int64_t grain = 1);
  // Runs fn(thread_index) on every thread.
  void RunOnAll(const std::function<void(int thread_index)>& fn);

  // Number of physical cores (falls back to hardware_concurrency).
  static int DefaultNumThreads();

 private:
  void WorkerLoop(int index);

  int num_threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable done_cv_;
  std::atomic<const std::function<void(int)>*> job_{nullptr};
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  int sleepers_ = 0;  // guarded by mu_
};

}  // namespace tern
