#include "base/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <numeric>
#include <set>
#include <tuple>
#include <vector>

#include "base/cpu_cores.h"

namespace tern {
namespace {

// The static split ParallelFor documents: part t of num_chunks chunks.
std::tuple<int64_t, int64_t> Part(int64_t n, int64_t grain, int parts, int t) {
  const int64_t chunks = (n + grain - 1) / grain;
  return {chunks * t / parts * grain, std::min(n, chunks * (t + 1) / parts * grain)};
}

TEST(ThreadPoolTest, ParallelForCoversEveryIndexOnceInTheDocumentedParts) {
  for (int threads : {1, 2, 3, 5, 8}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 7, 64, 1000}) {
      for (int64_t grain : {1, 8}) {
        std::vector<std::atomic<int>> hits(n);
        std::mutex mu;
        std::set<std::tuple<int64_t, int64_t, int>> ranges;
        pool.ParallelFor(
            n,
            [&](int64_t b, int64_t e, int t) {
              for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
              std::lock_guard<std::mutex> lock(mu);
              ranges.insert({b, e, t});
            },
            grain);
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << threads << " " << n;
        const int parts = (int)std::min<int64_t>(threads, (n + grain - 1) / grain);
        for (const auto& [b, e, t] : ranges) {
          ASSERT_LT(t, parts);
          const auto [pb, pe] = Part(n, grain, parts, t);
          EXPECT_EQ(b, pb);
          EXPECT_EQ(e, pe);
        }
      }
    }
  }
}

// Whoever runs a slot, each slot runs once per job and never on two
// threads at once, also when the pool has more threads than cores (given
// here as 1: the caller alone is meant to be awake).
TEST(ThreadPoolTest, RunOnAllRunsEachSlotOnceAtATime) {
  for (int cores : {1, 2, 64}) {
    ThreadPool pool(6, cores);
    std::vector<std::atomic<int>> running(6), runs(6);
    for (int job = 0; job < 500; ++job) {
      pool.RunOnAll([&](int t) {
        ASSERT_EQ(running[t].fetch_add(1), 0);
        runs[t].fetch_add(1);
        running[t].fetch_sub(1);
      });
    }
    for (int t = 0; t < 6; ++t) EXPECT_EQ(runs[t].load(), 500) << "cores " << cores;
  }
}

// With one core, workers are not meant to run: they go to sleep, are not
// woken for jobs, and the caller runs their slots (the same parts).
TEST(ThreadPoolTest, ThreadsThatRunTakeTheSlotsOfOnesThatDoNot) {
  ThreadPool pool(4, /*cores=*/1);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // workers asleep
  std::vector<std::thread::id> ran_on(4);
  std::vector<int64_t> sums(4, 0);
  pool.ParallelFor(100, [&](int64_t b, int64_t e, int t) {
    ran_on[t] = std::this_thread::get_id();
    for (int64_t i = b; i < e; ++i) sums[t] += i;
  });
  for (int t = 0; t < 4; ++t) {
    EXPECT_EQ(ran_on[t], std::this_thread::get_id()) << "slot " << t;
    const auto [b, e] = Part(100, 1, 4, t);
    EXPECT_EQ(sums[t], (b + e - 1) * (e - b) / 2) << "slot " << t;
  }
}

// Many short dispatches with 4x and 16x more threads than the cores this
// process has: correct results, and within a budget far above what the
// pool needs (under 0.5 s on a 2-core machine under load 20) but below
// what a pool of spinning threads that wait for each other took there (~31
// and ~220 s). The one timed test of the pool: oversubscription is a speed
// collapse, not a wrong result.
TEST(ThreadPoolTest, OversubscribedPoolFinishesManyShortJobs) {
  const int cores = AvailableCores();
  for (int factor : {4, 16}) {
    ThreadPool pool(cores * factor);
    std::vector<int64_t> data(4096);
    std::iota(data.begin(), data.end(), 0);
    const int64_t want = 4095 * 4096 / 2;
    const auto start = std::chrono::steady_clock::now();
    for (int job = 0; job < 20000; ++job) {
      std::vector<int64_t> sums(pool.num_threads(), 0);
      pool.ParallelFor((int64_t)data.size(), [&](int64_t b, int64_t e, int t) {
        for (int64_t i = b; i < e; ++i) sums[t] += data[i];
      });
      ASSERT_EQ(std::accumulate(sums.begin(), sums.end(), int64_t{0}), want) << "job " << job;
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(seconds, 30.0) << pool.num_threads() << " threads on " << cores << " cores";
  }
}

TEST(ThreadPoolTest, DefaultIsTheAvailableCores) {
  EXPECT_EQ(ThreadPool::DefaultNumThreads(), AvailableCores());
  EXPECT_GE(AvailableCores(), 1);
}

TEST(ThreadPoolTest, IdlePoolSleepsAndWakesForTheNextJob) {
  ThreadPool pool(3, 3);
  std::atomic<int> sum{0};
  pool.RunOnAll([&](int t) { sum.fetch_add(t); });
  // Long enough for every spin window to run out.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  pool.RunOnAll([&](int t) { sum.fetch_add(t); });
  EXPECT_EQ(sum.load(), 6);
}

}  // namespace
}  // namespace tern
