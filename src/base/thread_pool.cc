#include "base/thread_pool.h"

#include <algorithm>
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
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::WorkerLoop(int index) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int)>* job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
    }
    (*job)(index);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--pending_ == 0) done_cv_.notify_one();
    }
  }
}

void ThreadPool::RunOnAll(const std::function<void(int)>& fn) {
  if (num_threads_ == 1) {
    fn(0);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &fn;
    pending_ = num_threads_ - 1;
    ++generation_;
  }
  cv_.notify_all();
  fn(0);
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [&] { return pending_ == 0; });
  job_ = nullptr;
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
