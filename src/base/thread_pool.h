// ThreadPool: persistent worker threads for splitting one op across cores.
// ParallelFor(n, fn) calls fn(begin, end, slot) over a static split of
// [0, n) into num_threads parts and returns when all parts are done.
//
// Parts are claimed, not assigned: a job is num_threads slots, and each
// thread that runs (the caller and the workers) claims slots that are still
// free, its own first (worker i's is slot i, the caller's slot 0). A
// worker the OS has descheduled, or that is still waking up, does not hold
// the job back: the threads that run take its slot, and it finds none left
// when it comes. A slot runs once per job, on one thread, so a slot index
// may key per-slot scratch; which OS thread runs it may change from job to
// job. The split itself depends only on num_threads, so results never
// depend on who ran what.
//
// Waiting (a worker for the next job, the caller for the last slot) spins
// for a short while, then blocks: `pause` for the first microseconds, then
// sched_yield so that a thread that has work on the same core (another
// worker, the caller, another process) gets it, then a condition variable.
// The spin window adapts: it halves each time it passes without the awaited
// event and doubles back when the event comes within it (TERN_POOL_SPIN=N
// sets the longest window in microseconds; 0 blocks at once). At most
// AvailableCores() - 1 workers stay awake (spinning or working); the others
// sleep and are not woken for jobs, so `-t` beyond the cores costs a little
// wake-up bookkeeping, not a convoy of threads that wait for each other.
//
// Thread rules: ParallelFor / RunOnAll may be called from one thread at a
// time per pool.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace tern {

class ThreadPool {
 public:
  explicit ThreadPool(int num_threads);
  // As above with `cores` taken as the cores available (tests).
  ThreadPool(int num_threads, int cores);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }
  // Threads that run a job at once: min(num_threads, cores). Work that
  // balances itself (shares plus stealing) wants this many shares; the
  // slots beyond it mostly find the work taken.
  int max_parallel() const { return max_awake_ + 1; }

  using RangeFn = std::function<void(int64_t begin, int64_t end, int thread_index)>;
  // Splits [0, n) into num_threads contiguous parts (each a multiple of
  // grain, except the last) and runs them in parallel; thread_index is the
  // part (slot) number.
  void ParallelFor(int64_t n, const RangeFn& fn, int64_t grain = 1);
  // Runs fn(slot) for every slot in [0, num_threads), in parallel as far as
  // the threads run.
  void RunOnAll(const std::function<void(int thread_index)>& fn);

  // Threads a command uses without -t: AvailableCores().
  static int DefaultNumThreads();
  // The longest a waiting thread spins before it blocks (default 200 us; 0:
  // block at once), for every pool of the process. Set once at start-up,
  // before pools run: tools/main.cc applies TERN_POOL_SPIN (EnvSettings).
  static void SetMaxSpinMicros(int64_t us);

 private:
  struct alignas(64) Slot {
    // The generation (job) that claimed the slot last. Before job g is
    // published every slot holds g - 1; claiming is a CAS g - 1 -> g.
    std::atomic<uint64_t> claimed{0};
  };

  void Run(int num_slots, const std::function<void(int)>& fn);
  // Claims and runs free slots of job `gen`, slot `first` first.
  void RunSlots(int first, uint64_t gen);
  void WorkerLoop(int index);
  // Waits for a generation other than `seen` (or for stop_) and returns it.
  uint64_t WaitForJob(uint64_t seen, int64_t* spin_ns);
  void WaitForSlots(int num_slots);

  int num_threads_;
  int max_awake_;  // workers that may stay awake between jobs
  std::unique_ptr<Slot[]> slots_;
  std::vector<std::thread> workers_;
  std::atomic<const std::function<void(int)>*> job_{nullptr};
  std::atomic<int> job_slots_{0};
  alignas(64) std::atomic<uint64_t> generation_{0};
  alignas(64) std::atomic<int> done_{0};  // slots of the current job finished
  alignas(64) std::mutex mu_;
  std::condition_variable cv_;       // workers wait here for a job
  std::condition_variable done_cv_;  // the caller waits here for the last slot
  std::atomic<int> sleepers_{0};     // workers in cv_ (changes under mu_)
  std::atomic<int> awake_{0};        // workers not in cv_ (changes under mu_)
  std::atomic<bool> caller_sleeping_{false};
  std::atomic<bool> stop_{false};
  int64_t caller_spin_ns_;  // the caller's adaptive spin window
};

}  // namespace tern
