// `tern bench -m F --compare-llama DIR`: tern and llama.cpp's llama-bench
// (DIR/llama-bench) alternated on the same file with the same threads, tests
// and KV cache type -- tern, llama-bench, tern, llama-bench, ... for --rounds
// rounds, one engine at a time, never both at once -- then the medians,
// ranges and the ratio tern / llama.cpp per test. The only honest ratio
// between the two engines is one measured in the same minutes on the same
// machine (docs/benchmarks.md).
//
// The parsing and the table are pure functions here, tested on hand-written
// output (tests/bench_compare_test.cc); RunCompareLlama runs the processes.
//
// Thread rules: pure functions, except RunCompareLlama (spawns and waits for
// child processes, one at a time).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace tern {

// One test's tokens/s from one run of one engine.
struct BenchSample {
  std::string test;  // "pp128", "tg32", "pp128+tg32"; " @ d512" when n_depth > 0
  int64_t n_prompt = 0, n_gen = 0, n_depth = 0;
  double tokens_per_second = 0;
  double roofline_fraction = 0;  // tern's (0 for llama-bench)
  double paired_fraction = 0;    // tern's tg paired fraction (0: none)
};

// "pp512", "tg128", "pp512+tg128" (both), with " @ d4096" for a depth.
std::string BenchTestName(int64_t n_prompt, int64_t n_gen, int64_t n_depth);

// llama-bench -o json: an array of objects with n_prompt, n_gen, n_depth and
// samples_ts (per repetition; their median is the sample) or avg_ts. Errors
// name what is missing; *build and *cpu (optional) get build_commit and
// cpu_info of the first object.
StatusOr<std::vector<BenchSample>> ParseLlamaBenchJson(const std::string& text,
                                                       std::string* build = nullptr,
                                                       std::string* cpu = nullptr);
// tern bench --json: one object per line with test ("pp128"/"tg32"),
// n_depth and tokens_per_second.
StatusOr<std::vector<BenchSample>> ParseTernBenchJson(const std::string& text);

// Median (mean of the middle two for an even count), min and max.
struct SampleStats {
  double median = 0, min = 0, max = 0;
  int count = 0;
};
SampleStats SummarizeSamples(std::vector<double> v);

struct CompareRow {
  std::string test;
  std::vector<double> tern, llama;  // tokens/s, one per round, in round order
  std::vector<double> tern_roofline;  // tern's roofline fraction per round
  std::vector<double> tern_paired;    // tern's paired fraction per round (tg)
  SampleStats tern_stats, llama_stats;
  double tern_roofline_median = 0;
  double tern_paired_median = 0;
  double ratio = 0;  // tern median / llama.cpp median; 0 when either is missing
  // tern's round i over llama.cpp's round i, for the rounds both ran the
  // test (each pair ran back to back, so a host whose memory bandwidth
  // drifts over minutes moves both sides of a pair alike), in round order;
  // their median, min and max.
  std::vector<double> round_ratios;
  SampleStats round_ratio_stats;
};

// Rows per test, in the order tests first appear (tern's first), from every
// round's samples of both engines.
std::vector<CompareRow> CompareSamples(const std::vector<std::vector<BenchSample>>& tern_rounds,
                                       const std::vector<std::vector<BenchSample>>& llama_rounds);

// What the table's header says about the run.
struct CompareContext {
  std::string model;
  std::string cpu;        // /proc/cpuinfo model name
  std::string isa;        // tern's kernel table
  int threads = 0;
  int rounds = 0;
  int reps = 0;           // repetitions per engine per round
  std::string kv;         // "f16", "q8_0"
  std::string llama_bench;  // path
  std::string llama_build;  // build_commit
  std::string tern_command, llama_command;
  int cpus = 0;                   // online CPUs
  std::vector<double> other_cpus;  // per run: CPUs busy with other processes
};

// A run counts as quiet when other processes kept at most this many CPUs
// busy on average while it ran (measured from /proc/stat less the run's own
// CPU time; the hypervisor's steal time counts as others').
inline constexpr double kQuietOtherCpus = 0.25;
bool IsQuiet(const std::vector<double>& other_cpus);
// "quiet: ..." or "NOT QUIET: other processes used up to ..." for the table.
std::string QuietNote(const std::vector<double>& other_cpus, int cpus);

// The markdown table with its header lines.
std::string FormatCompareTable(const std::vector<CompareRow>& rows, const CompareContext& c);
// One JSON object per row (one line each when dumped).
std::vector<nlohmann::json> CompareJson(const std::vector<CompareRow>& rows,
                                        const CompareContext& c);

struct CompareOptions {
  std::string llama_dir;  // holds llama-bench
  std::string model_path;
  int64_t pp = 512, tg = 128, depth = 0;
  int threads = 0;  // resolved: > 0
  int reps = 1;     // repetitions per engine per round
  int64_t pairs = 32;  // tern bench --pairs
  int rounds = 3;
  std::string k_dtype = "f16", v_dtype = "f16";
  bool json = false;
};

// The command lines of one round: tern (its own path) and llama-bench.
// Both get the same -m, -p, -n, -d, -t and -r; the KV cache type maps to
// llama-bench's -ctk/-ctv, with -fa 1 when either is quantized.
std::vector<std::string> TernBenchArgs(const CompareOptions& o, const std::string& tern);
std::vector<std::string> LlamaBenchArgs(const CompareOptions& o, const std::string& llama_bench);

// Runs the rounds and prints the table (or JSON lines) to stdout, progress to
// stderr. Non-zero with a message naming the path when llama-bench is
// missing or a run fails.
int RunCompareLlama(const CompareOptions& o);

}  // namespace tern
