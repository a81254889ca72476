#include "tools/bench_compare.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "kernels/kernels.h"

extern char** environ;

namespace tern {
namespace {

using json = nlohmann::json;

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The last lines of a process's stderr, for an error message.
std::string Tail(const std::string& text, int lines) {
  size_t pos = text.size();
  while (pos > 0 && (text[pos - 1] == '\n' || text[pos - 1] == ' ')) --pos;
  const size_t end = pos;
  for (int i = 0; i < lines && pos > 0; ++i) {
    const size_t nl = text.rfind('\n', pos - 1);
    if (nl == std::string::npos) {
      pos = 0;
      break;
    }
    pos = nl;
  }
  return text.substr(pos == 0 ? 0 : pos + 1, end - (pos == 0 ? 0 : pos + 1));
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string SelfPath() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, (size_t)n) : "tern";
}

std::string CpuName() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) {
        size_t b = colon + 1;
        while (b < line.size() && line[b] == ' ') ++b;
        return line.substr(b);
      }
    }
  }
  return "unknown CPU";
}

std::string Join(const std::vector<std::string>& args) {
  std::string s;
  for (const std::string& a : args) {
    if (!s.empty()) s += ' ';
    const bool plain = !a.empty() && a.find_first_of(" '\"\\$`*?&|;<>()") == std::string::npos;
    s += plain ? a : "'" + a + "'";
  }
  return s;
}

struct ProcessResult {
  int exit_code = -1;  // 128 + signal when killed
  std::string out, err;
  double seconds = 0;
  // CPUs kept busy by everything but the child while it ran (-1 unknown).
  double other_cpus = -1;
};

// Busy CPU seconds of the whole machine since boot: /proc/stat's cpu line
// (user, nice, system, irq, softirq and steal -- the time the hypervisor gave
// to other guests); -1 when unreadable.
double MachineBusySeconds() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  unsigned long long user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0,
                     steal = 0;
  if (!(in >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq) || cpu != "cpu") {
    return -1;
  }
  in >> steal;  // absent on old kernels
  const long hz = sysconf(_SC_CLK_TCK);
  return (double)(user + nice + system + irq + softirq + steal) / (double)(hz > 0 ? hz : 100);
}

// Runs args[0] (a path) to completion with stdout and stderr captured in
// temporary files; -1 when it cannot start.
ProcessResult RunProcess(const std::vector<std::string>& args) {
  ProcessResult r;
  const char* tmp = std::getenv("TMPDIR");
  const std::string base = std::string(tmp && *tmp ? tmp : "/tmp") + "/tern-compare-" +
                           std::to_string(getpid());
  const std::string out_path = base + ".out", err_path = base + ".err";
  std::vector<char*> argv;
  for (const std::string& s : args) argv.push_back(const_cast<char*>(s.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&fa, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  const double busy0 = MachineBusySeconds();
  const auto t0 = std::chrono::steady_clock::now();
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    r.err = std::string("cannot start: ") + std::strerror(rc);
  } else {
    int status = 0;
    rusage ru{};
    while (wait4(pid, &status, 0, &ru) < 0 && errno == EINTR) {
    }
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double busy1 = MachineBusySeconds();
    const double child = (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
                         (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
    if (busy0 >= 0 && busy1 >= 0 && wall > 0) {
      r.other_cpus = std::max(0.0, (busy1 - busy0 - child) / wall);
    }
    r.out = ReadAll(out_path);
    r.err = ReadAll(err_path);
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::remove(out_path.c_str());
  std::remove(err_path.c_str());
  return r;
}

bool IsQuantized(const std::string& dtype) { return dtype != "f16" && dtype != "f32" && dtype != "bf16"; }

}  // namespace

std::string BenchTestName(int64_t n_prompt, int64_t n_gen, int64_t n_depth) {
  std::string s;
  if (n_prompt > 0) s = "pp" + std::to_string(n_prompt);
  if (n_gen > 0) s += (s.empty() ? "tg" : "+tg") + std::to_string(n_gen);
  if (n_depth > 0) s += " @ d" + std::to_string(n_depth);
  return s;
}

StatusOr<std::vector<BenchSample>> ParseLlamaBenchJson(const std::string& text, std::string* build,
                                                       std::string* cpu) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument("llama-bench output is not JSON (expected -o json)");
  if (!j.is_array()) return InvalidArgument("llama-bench output is not a JSON array");
  if (j.empty()) return InvalidArgument("llama-bench output has no tests");
  std::vector<BenchSample> out;
  for (size_t i = 0; i < j.size(); ++i) {
    const json& t = j[i];
    const std::string where = "llama-bench output, test " + std::to_string(i);
    if (!t.is_object()) return InvalidArgument(where + ": not an object");
    BenchSample s;
    for (auto [field, dst] : {std::pair<const char*, int64_t*>{"n_prompt", &s.n_prompt},
                              {"n_gen", &s.n_gen}, {"n_depth", &s.n_depth}}) {
      if (!t.contains(field)) {
        if (std::string(field) == "n_depth") continue;  // builds before -d
        return InvalidArgument(where + ": no '" + field + "'");
      }
      if (!t[field].is_number_integer() || t[field].get<int64_t>() < 0) {
        return InvalidArgument(where + ": '" + field + "' is not a count");
      }
      *dst = t[field].get<int64_t>();
    }
    if (s.n_prompt == 0 && s.n_gen == 0) return InvalidArgument(where + ": n_prompt and n_gen are 0");
    std::vector<double> ts;
    if (t.contains("samples_ts") && t["samples_ts"].is_array()) {
      for (const json& v : t["samples_ts"]) {
        if (!v.is_number()) return InvalidArgument(where + ": 'samples_ts' holds a non-number");
        ts.push_back(v.get<double>());
      }
    }
    if (!ts.empty()) {
      s.tokens_per_second = Median(ts);
    } else if (t.contains("avg_ts") && t["avg_ts"].is_number()) {
      s.tokens_per_second = t["avg_ts"].get<double>();
    } else {
      return InvalidArgument(where + ": neither 'samples_ts' nor 'avg_ts'");
    }
    if (!(s.tokens_per_second > 0)) return InvalidArgument(where + ": tokens/s is not positive");
    s.test = BenchTestName(s.n_prompt, s.n_gen, s.n_depth);
    if (i == 0) {
      if (build && t.contains("build_commit") && t["build_commit"].is_string()) {
        *build = t["build_commit"].get<std::string>();
      }
      if (cpu && t.contains("cpu_info") && t["cpu_info"].is_string()) {
        *cpu = t["cpu_info"].get<std::string>();
      }
    }
    out.push_back(std::move(s));
  }
  return out;
}

StatusOr<std::vector<BenchSample>> ParseTernBenchJson(const std::string& text) {
  std::vector<BenchSample> out;
  std::istringstream in(text);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = "tern bench output, line " + std::to_string(n);
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return InvalidArgument(where + ": not a JSON object");
    if (!j.contains("test") || !j["test"].is_string()) return InvalidArgument(where + ": no 'test'");
    if (!j.contains("tokens_per_second") || !j["tokens_per_second"].is_number()) {
      return InvalidArgument(where + ": no 'tokens_per_second'");
    }
    BenchSample s;
    const std::string test = j["test"].get<std::string>();
    const bool pp = test.rfind("pp", 0) == 0, tg = test.rfind("tg", 0) == 0;
    const std::string digits = test.size() > 2 ? test.substr(2) : "";
    if ((!pp && !tg) || digits.empty() ||
        digits.find_first_not_of("0123456789") != std::string::npos) {
      return InvalidArgument(where + ": test '" + test + "' is neither ppN nor tgN");
    }
    (pp ? s.n_prompt : s.n_gen) = std::stoll(digits);
    if (j.contains("n_depth") && j["n_depth"].is_number_integer()) {
      s.n_depth = j["n_depth"].get<int64_t>();
    }
    s.tokens_per_second = j["tokens_per_second"].get<double>();
    if (j.contains("roofline_fraction") && j["roofline_fraction"].is_number()) {
      s.roofline_fraction = j["roofline_fraction"].get<double>();
    }
    if (j.contains("paired_fraction") && j["paired_fraction"].is_number()) {
      s.paired_fraction = j["paired_fraction"].get<double>();
    }
    s.test = BenchTestName(s.n_prompt, s.n_gen, s.n_depth);
    out.push_back(std::move(s));
  }
  if (out.empty()) return InvalidArgument("tern bench output has no tests");
  return out;
}

SampleStats SummarizeSamples(std::vector<double> v) {
  SampleStats s;
  if (v.empty()) return s;
  s.median = Median(v);
  s.min = *std::min_element(v.begin(), v.end());
  s.max = *std::max_element(v.begin(), v.end());
  s.count = (int)v.size();
  return s;
}

std::vector<CompareRow> CompareSamples(const std::vector<std::vector<BenchSample>>& tern_rounds,
                                       const std::vector<std::vector<BenchSample>>& llama_rounds) {
  std::vector<CompareRow> rows;
  auto row = [&](const std::string& test) -> CompareRow& {
    for (CompareRow& r : rows) {
      if (r.test == test) return r;
    }
    rows.push_back(CompareRow{});
    rows.back().test = test;
    return rows.back();
  };
  // Per test, each engine's tokens/s by round index (for the pairs).
  std::map<std::string, std::map<size_t, double>> tern_at, llama_at;
  for (size_t i = 0; i < tern_rounds.size(); ++i) {
    for (const BenchSample& s : tern_rounds[i]) {
      row(s.test).tern.push_back(s.tokens_per_second);
      tern_at[s.test][i] = s.tokens_per_second;
      if (s.roofline_fraction > 0) row(s.test).tern_roofline.push_back(s.roofline_fraction);
      if (s.paired_fraction > 0) row(s.test).tern_paired.push_back(s.paired_fraction);
    }
  }
  for (size_t i = 0; i < llama_rounds.size(); ++i) {
    for (const BenchSample& s : llama_rounds[i]) {
      row(s.test).llama.push_back(s.tokens_per_second);
      llama_at[s.test][i] = s.tokens_per_second;
    }
  }
  for (CompareRow& r : rows) {
    for (const auto& [i, t] : tern_at[r.test]) {
      const auto l = llama_at[r.test].find(i);
      if (l != llama_at[r.test].end() && l->second > 0) r.round_ratios.push_back(t / l->second);
    }
    r.round_ratio_stats = SummarizeSamples(r.round_ratios);
    r.tern_stats = SummarizeSamples(r.tern);
    r.llama_stats = SummarizeSamples(r.llama);
    r.tern_roofline_median = SummarizeSamples(r.tern_roofline).median;
    r.tern_paired_median = SummarizeSamples(r.tern_paired).median;
    r.ratio = r.tern_stats.count > 0 && r.llama_stats.count > 0 && r.llama_stats.median > 0
                  ? r.tern_stats.median / r.llama_stats.median
                  : 0;
  }
  return rows;
}

namespace {

// "median (min-max)", the median followed by unit; "-" for no samples.
std::string FormatStats(const SampleStats& s, const char* unit = "") {
  if (s.count == 0) return "-";
  char buf[96];
  if (s.count == 1) {
    std::snprintf(buf, sizeof buf, "%.2f%s", s.median, unit);
  } else {
    std::snprintf(buf, sizeof buf, "%.2f%s (%.2f-%.2f)", s.median, unit, s.min, s.max);
  }
  return buf;
}

}  // namespace

bool IsQuiet(const std::vector<double>& other_cpus) {
  for (double v : other_cpus) {
    if (v > kQuietOtherCpus) return false;
  }
  return true;
}

std::string QuietNote(const std::vector<double>& other_cpus, int cpus) {
  if (other_cpus.empty()) return "other processes' CPU use: unknown (no /proc/stat)";
  const double most = *std::max_element(other_cpus.begin(), other_cpus.end());
  char buf[512];
  if (IsQuiet(other_cpus)) {
    std::snprintf(buf, sizeof buf,
                  "quiet: other processes used at most %.2f of %d CPUs during the runs", most,
                  cpus);
  } else {
    std::snprintf(buf, sizeof buf,
                  "NOT QUIET: other processes used up to %.2f of %d CPUs (median %.2f) during the "
                  "runs; the figures measure the machine's load as much as the engines (an "
                  "engine that spins on its thread barrier, as llama.cpp does, slows down the "
                  "most); rerun on a quiet machine before quoting a ratio",
                  most, cpus, SummarizeSamples(other_cpus).median);
  }
  return buf;
}

std::string FormatCompareTable(const std::vector<CompareRow>& rows, const CompareContext& c) {
  std::string s;
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "%s, %d threads, KV cache %s; tern kernel table %s; llama.cpp %s\n"
                "%d rounds alternated (tern, llama-bench, ...), %d repetition%s per engine per "
                "round; tok/s median (min-max) over the rounds\n\n",
                c.cpu.c_str(), c.threads, c.kv.c_str(), c.isa.c_str(),
                c.llama_build.empty() ? "(build unknown)" : ("build " + c.llama_build).c_str(),
                c.rounds, c.reps, c.reps == 1 ? "" : "s");
  s += buf;
  s += "| test | tern tok/s | llama.cpp tok/s | tern / llama.cpp | per round | tern roofline |\n"
       "|---|---|---|---|---|---|\n";
  for (const CompareRow& r : rows) {
    char ratio[32] = "-", roof[64] = "-";
    if (r.ratio > 0) std::snprintf(ratio, sizeof ratio, "%.2fx", r.ratio);
    if (r.tern_roofline_median > 0 && r.tern_paired_median > 0) {
      std::snprintf(roof, sizeof roof, "%.0f%% (paired %.0f%%)", 100 * r.tern_roofline_median,
                    100 * r.tern_paired_median);
    } else if (r.tern_roofline_median > 0) {
      std::snprintf(roof, sizeof roof, "%.0f%%", 100 * r.tern_roofline_median);
    }
    s += "| " + r.test + " | " + FormatStats(r.tern_stats) + " | " + FormatStats(r.llama_stats) +
         " | " + ratio + " | " + FormatStats(r.round_ratio_stats, "x") + " | " + roof + " |\n";
  }
  s += "\n(per round: the median (min-max) of tern's round over llama.cpp's round, each pair "
       "run back to back, which a host whose memory bandwidth drifts over minutes moves less "
       "than the ratio of the medians; tern roofline: the median over the rounds of tern "
       "bench's roofline fraction, pp of the FMA peak, tg of the read bandwidth, each against "
       "its probe's best round; paired: tg's fraction of the bandwidth read in the same "
       "seconds, decode steps alternated with probe rounds, see tern bench --help)\n";
  s += "\n" + QuietNote(c.other_cpus, c.cpus) + "\n";
  s += "model: " + c.model + "\n";
  s += "tern: " + c.tern_command + "\n";
  s += "llama.cpp: " + c.llama_command + "\n";
  return s;
}

std::vector<json> CompareJson(const std::vector<CompareRow>& rows, const CompareContext& c) {
  std::vector<json> out;
  auto engine = [](const SampleStats& st, const std::vector<double>& v) {
    json e;
    e["median"] = st.median;
    e["min"] = st.min;
    e["max"] = st.max;
    e["rounds"] = v;
    return e;
  };
  for (const CompareRow& r : rows) {
    json j;
    j["test"] = r.test;
    j["model"] = c.model;
    j["cpu"] = c.cpu;
    j["isa"] = c.isa;
    j["threads"] = c.threads;
    j["kv_cache_dtype"] = c.kv;
    j["rounds"] = c.rounds;
    j["reps"] = c.reps;
    j["llama_bench"] = c.llama_bench;
    j["llama_build_commit"] = c.llama_build;
    j["online_cpus"] = c.cpus;
    if (!c.other_cpus.empty()) {
      j["other_cpus_max"] = *std::max_element(c.other_cpus.begin(), c.other_cpus.end());
      j["other_cpus_median"] = SummarizeSamples(c.other_cpus).median;
    }
    j["quiet"] = IsQuiet(c.other_cpus);
    j["tern"] = engine(r.tern_stats, r.tern);
    j["llama"] = engine(r.llama_stats, r.llama);
    if (r.tern_roofline_median > 0) j["tern_roofline_fraction"] = r.tern_roofline_median;
    if (r.tern_paired_median > 0) j["tern_paired_fraction"] = r.tern_paired_median;
    if (r.ratio > 0) {
      j["ratio"] = r.ratio;
    } else {
      j["ratio"] = nullptr;
    }
    j["round_ratios"] = r.round_ratios;
    if (r.round_ratio_stats.count > 0) {
      j["round_ratio_median"] = r.round_ratio_stats.median;
      j["round_ratio_min"] = r.round_ratio_stats.min;
      j["round_ratio_max"] = r.round_ratio_stats.max;
    } else {
      j["round_ratio_median"] = nullptr;
    }
    out.push_back(std::move(j));
  }
  return out;
}

std::vector<std::string> TernBenchArgs(const CompareOptions& o, const std::string& tern) {
  return {tern, "bench", "-m", o.model_path,
          "-p", std::to_string(o.pp), "-n", std::to_string(o.tg),
          "-d", std::to_string(o.depth), "-t", std::to_string(o.threads),
          "-r", std::to_string(o.reps), "--pairs", std::to_string(o.pairs),
          "--kv-cache-dtype-k", o.k_dtype, "--kv-cache-dtype-v", o.v_dtype, "--json"};
}

std::vector<std::string> LlamaBenchArgs(const CompareOptions& o, const std::string& llama_bench) {
  std::vector<std::string> args = {llama_bench, "-m", o.model_path,
                                   "-p", std::to_string(o.pp), "-n", std::to_string(o.tg)};
  // -d only when asked: llama-bench builds before it reject the flag.
  if (o.depth > 0) args.insert(args.end(), {"-d", std::to_string(o.depth)});
  args.insert(args.end(), {"-t", std::to_string(o.threads), "-r", std::to_string(o.reps),
                           "-ctk", o.k_dtype, "-ctv", o.v_dtype});
  // llama.cpp quantizes the V cache only with flash attention.
  if (IsQuantized(o.k_dtype) || IsQuantized(o.v_dtype)) args.insert(args.end(), {"-fa", "1"});
  args.insert(args.end(), {"-o", "json"});
  return args;
}

int RunCompareLlama(const CompareOptions& o) {
  std::string dir = o.llama_dir;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const std::string llama = dir + "/llama-bench";
  struct stat st {};
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    std::fprintf(stderr,
                 "tern bench: --compare-llama %s: not a directory (give the bin directory of a "
                 "llama.cpp build, the one holding llama-bench)\n",
                 o.llama_dir.c_str());
    return 1;
  }
  if (stat(llama.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || access(llama.c_str(), X_OK) != 0) {
    std::fprintf(stderr, "tern bench: --compare-llama: no executable llama-bench at %s\n",
                 llama.c_str());
    return 1;
  }
  const std::vector<std::string> tern_args = TernBenchArgs(o, SelfPath());
  const std::vector<std::string> llama_args = LlamaBenchArgs(o, llama);

  CompareContext c;
  c.model = o.model_path;
  c.cpu = CpuName();
  c.cpus = (int)std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
  c.isa = kernels::ActiveIsa();
  c.threads = o.threads;
  c.rounds = o.rounds;
  c.reps = o.reps;
  c.kv = o.k_dtype == o.v_dtype ? o.k_dtype : "K " + o.k_dtype + ", V " + o.v_dtype;
  c.llama_bench = llama;
  c.tern_command = Join(tern_args);
  c.llama_command = Join(llama_args);

  std::vector<std::vector<BenchSample>> tern_rounds, llama_rounds;
  for (int round = 1; round <= o.rounds; ++round) {
    // One engine at a time: each waits for the other to exit.
    for (const bool is_tern : {true, false}) {
      const auto& args = is_tern ? tern_args : llama_args;
      const char* name = is_tern ? "tern" : "llama-bench";
      std::fprintf(stderr, "tern bench: round %d/%d: %s ...", round, o.rounds, name);
      std::fflush(stderr);
      const ProcessResult r = RunProcess(args);
      if (r.exit_code != 0) {
        std::fprintf(stderr, " failed\ntern bench: --compare-llama: %s %s (%s)\n%s\n", name,
                     r.exit_code < 0 ? "could not start" : ("exited with " + std::to_string(r.exit_code)).c_str(),
                     Join(args).c_str(), Tail(r.err, 8).c_str());
        return 1;
      }
      std::string build;
      auto parsed = is_tern ? ParseTernBenchJson(r.out) : ParseLlamaBenchJson(r.out, &build);
      if (!parsed.ok()) {
        std::fprintf(stderr, " failed\ntern bench: --compare-llama: %s (%s): %s\n%s\n", name,
                     Join(args).c_str(), parsed.status().message().c_str(),
                     Tail(r.err, 8).c_str());
        return 1;
      }
      if (!build.empty()) c.llama_build = build;
      std::string summary;
      for (const BenchSample& s : *parsed) {
        char buf[96];
        std::snprintf(buf, sizeof buf, " %s %.2f", s.test.c_str(), s.tokens_per_second);
        summary += buf;
      }
      std::fprintf(stderr, "%s tok/s (%.1f s", summary.c_str(), r.seconds);
      if (r.other_cpus >= 0) {
        std::fprintf(stderr, "; other processes used %.2f CPUs", r.other_cpus);
        c.other_cpus.push_back(r.other_cpus);
      }
      std::fprintf(stderr, ")\n");
      (is_tern ? tern_rounds : llama_rounds).push_back(std::move(parsed).value());
    }
  }
  const std::vector<CompareRow> rows = CompareSamples(tern_rounds, llama_rounds);
  if (!IsQuiet(c.other_cpus)) std::fprintf(stderr, "tern bench: %s\n", QuietNote(c.other_cpus, c.cpus).c_str());
  if (o.json) {
    for (const json& j : CompareJson(rows, c)) std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("%s", FormatCompareTable(rows, c).c_str());
  }
  return 0;
}

}  // namespace tern
