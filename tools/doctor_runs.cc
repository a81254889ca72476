#include "tools/doctor_runs.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

extern char** environ;

namespace tern {
namespace {

std::string SelfPath() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, (size_t)n) : "tern";
}

// Children alive now (a tern serve and its client at most), killed if the
// doctor is interrupted so no server outlives it.
volatile sig_atomic_t g_children[4] = {0, 0, 0, 0};

void KillChildrenAndExit(int sig) {
  for (auto& pid : g_children) {
    if (pid > 0) kill((pid_t)pid, SIGKILL);
  }
  _exit(128 + sig);
}

void Track(pid_t pid, bool alive) {
  for (auto& slot : g_children) {
    if (alive && slot == 0) {
      slot = pid;
      return;
    }
    if (!alive && slot == pid) {
      slot = 0;
      return;
    }
  }
}

// Starts argv with stdout and stderr to log_path; returns the pid or -1.
pid_t Spawn(const std::vector<std::string>& args, const std::string& log_path) {
  std::vector<char*> argv;
  for (const std::string& s : args) argv.push_back(const_cast<char*>(s.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return -1;
  Track(pid, true);
  return pid;
}

int WaitExit(pid_t pid) {
  int status = 0;
  const pid_t got = waitpid(pid, &status, 0);
  Track(pid, false);
  if (got < 0) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  int port = 0;
  if (bind(fd, (sockaddr*)&addr, sizeof addr) == 0 && getsockname(fd, (sockaddr*)&addr, &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir && *dir ? dir : "/tmp") + "/tern-doctor-" + std::to_string(getpid()) + "-" + name;
}

std::vector<std::string> SplitFlags(const std::string& flags) {
  std::vector<std::string> out;
  std::istringstream in(flags);
  std::string w;
  while (in >> w) out.push_back(w);
  return out;
}

// One verify run: tern serve with flags, the workload through tern bench serve.
VerifyRun RunOnce(const DoctorArgs& a, const std::string& label, const std::string& flags,
                  const std::string& dataset, int64_t num_requests, const Diagnosis& d) {
  VerifyRun v;
  v.label = label;
  v.flags = flags;
  const std::string self = SelfPath();
  const int port = FreePort();
  const std::string serve_log = TempPath(label + "-serve.log");
  std::vector<std::string> serve = {self, "serve", "-m", a.model_path, "--host", "127.0.0.1",
                                    "--port", std::to_string(port)};
  if (a.threads > 0) serve.insert(serve.end(), {"-t", std::to_string(a.threads)});
  for (const std::string& f : SplitFlags(flags)) serve.push_back(f);
  const pid_t server = Spawn(serve, serve_log);
  if (server < 0) {
    v.error = "could not start tern serve";
    return v;
  }
  bool ready = false;
  for (int i = 0; i < 1200 && !ready; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ready = ReadFile(serve_log).find("ready on") != std::string::npos;
    int status = 0;
    if (waitpid(server, &status, WNOHANG) == server) {
      Track(server, false);
      break;
    }
  }
  if (!ready) {
    kill(server, SIGKILL);
    WaitExit(server);
    v.error = "tern serve did not start (log: " + serve_log + ")";
    return v;
  }
  const std::string result = TempPath(label + "-bench.json");
  const std::string bench_log = TempPath(label + "-bench.log");
  char ttft[64], tpot[64];
  std::snprintf(ttft, sizeof ttft, "ttft:%g", d.slo_ttft_ms);
  std::snprintf(tpot, sizeof tpot, "tpot:%g", d.slo_tpot_ms);
  std::vector<std::string> bench = {
      self, "bench", "serve", "-m", a.model_path, "--base-url",
      "http://127.0.0.1:" + std::to_string(port), "--dataset-name", "file", "--dataset-path",
      dataset, "--prompt-format", "ids", "--ignore-eos", "--num-prompts",
      std::to_string(num_requests), "--max-concurrency", std::to_string(a.concurrency),
      "--request-rate", a.request_rate > 0 ? std::to_string(a.request_rate) : "inf", "--goodput",
      ttft, tpot, "--save-result", result, "--plot", TempPath(label + "-bench.svg"),
      "--label", label};
  const pid_t client = Spawn(bench, bench_log);
  const int rc = client < 0 ? -1 : WaitExit(client);
  kill(server, SIGTERM);
  WaitExit(server);
  if (rc != 0) {
    v.error = "tern bench serve exited with " + std::to_string(rc) + " (log: " + bench_log + ")";
    return v;
  }
  nlohmann::json j = nlohmann::json::parse(ReadFile(result), nullptr, false);
  if (j.is_discarded()) {
    v.error = "no result in " + result;
    return v;
  }
  v.completed = j.value("completed", 0);
  v.failed = j.value("failed", 0);
  v.good = j.value("good_requests", 0);
  v.duration_s = j.value("duration", 0.0);
  v.request_goodput = j.value("request_goodput", 0.0);
  v.output_throughput = j.value("output_throughput", 0.0);
  v.ttft_p50_ms = j.value("median_ttft_ms", 0.0);
  v.ttft_p99_ms = j.value("p99_ttft_ms", 0.0);
  v.tpot_p50_ms = j.value("median_tpot_ms", 0.0);
  v.tpot_p99_ms = j.value("p99_tpot_ms", 0.0);
  for (const std::string& p : {serve_log, result, bench_log, TempPath(label + "-bench.svg")}) {
    std::remove(p.c_str());
  }
  return v;
}

// The median of each figure over repeated runs (the first error, if any run failed).
VerifyRun MedianRun(const std::vector<VerifyRun>& runs) {
  VerifyRun out = runs.front();
  for (const VerifyRun& r : runs) {
    if (!r.error.empty()) return r;
  }
  auto median = [&](auto field) {
    std::vector<double> v;
    for (const VerifyRun& r : runs) v.push_back((double)(r.*field));
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  out.completed = (int)median(&VerifyRun::completed);
  out.failed = (int)median(&VerifyRun::failed);
  out.good = (int)median(&VerifyRun::good);
  out.duration_s = median(&VerifyRun::duration_s);
  out.request_goodput = median(&VerifyRun::request_goodput);
  out.output_throughput = median(&VerifyRun::output_throughput);
  out.ttft_p50_ms = median(&VerifyRun::ttft_p50_ms);
  out.ttft_p99_ms = median(&VerifyRun::ttft_p99_ms);
  out.tpot_p50_ms = median(&VerifyRun::tpot_p50_ms);
  out.tpot_p99_ms = median(&VerifyRun::tpot_p99_ms);
  out.repeats = (int)runs.size();
  return out;
}

// The last line that opens a JSON object (a tool's --json output after its progress lines).
std::string LastJsonLine(const std::string& text) {
  std::istringstream in(text);
  std::string line, last;
  while (std::getline(in, line)) {
    if (!line.empty() && line[0] == '{') last = line;
  }
  return last;
}

}  // namespace

void KillChildrenOnSignal() {
  signal(SIGINT, KillChildrenAndExit);
  signal(SIGTERM, KillChildrenAndExit);
}

std::vector<VerifyRun> Verify(const DoctorArgs& a, const std::vector<WorkloadRequest>& workload,
                              const Diagnosis& d) {
  const std::string dataset = TempPath("workload.jsonl");
  {
    std::ofstream out(dataset);
    for (const WorkloadRequest& r : workload) {
      out << nlohmann::json{{"prompt", r.prompt}, {"output_len", r.output_len}}.dump() << "\n";
    }
  }
  // The defaults keep the user's memory limit: the question is what the flags add within it.
  const std::string limit = a.kv_budget.empty() ? "" : "--kv-cache-memory " + a.kv_budget;
  const std::string flags[2] = {limit, FlagsLine(d)};
  const char* labels[2] = {"defaults", "recommended"};
  // Alternated A B A B ...: a machine busy with other work slows both sides alike.
  std::vector<VerifyRun> all[2];
  for (int64_t rep = 0; rep < a.verify_repeats; ++rep) {
    for (int side = 0; side < 2; ++side) {
      std::fprintf(stderr, "tern doctor: --verify %lld/%lld: %zu requests, %s\n", (long long)rep + 1,
                   (long long)a.verify_repeats, workload.size(), labels[side]);
      all[side].push_back(RunOnce(a, labels[side], flags[side], dataset, (int64_t)workload.size(), d));
    }
  }
  std::remove(dataset.c_str());
  std::vector<VerifyRun> runs;
  for (int side = 0; side < 2; ++side) runs.push_back(MedianRun(all[side]));
  return runs;
}

std::string Quantization(const DoctorArgs& a, const ModelFigures& m) {
  if (a.eval_text.empty()) {
    return "no recommendation: weight and KV-cache formats are chosen on your own text, and none "
           "was given (--eval-text FILE runs tern quantize + tern eval-quant for the candidates: "
           "KL and ppl vs these weights and an f16 cache)";
  }
  std::string out;
  std::vector<const char*> weight_types = {"Q8_0", "Q4_K_M"};
  if (m.weight_type != "F32" && m.weight_type != "F16" && m.weight_type != "BF16") {
    out = "weights: no recommendation, they are already " + m.weight_type +
          " (quantizing them again compounds the error: quantize from the F16/BF16 original and "
          "rerun with it); ";
    weight_types.clear();
  }
  const std::string self = SelfPath();
  for (const char* type : weight_types) {
    const std::string q = TempPath(std::string(type) + ".gguf");
    const std::string log = TempPath("quantize.log");
    std::fprintf(stderr, "tern doctor: quantizing to %s and evaluating on %s\n", type, a.eval_text.c_str());
    pid_t pid = Spawn({self, "quantize", a.model_path, q, type}, log);
    if (pid < 0 || WaitExit(pid) != 0) {
      out += std::string(type) + ": tern quantize failed (" + ReadFile(log).substr(0, 200) + "); ";
      std::remove(log.c_str());
      continue;
    }
    const std::string eval = TempPath("eval.json");
    pid = Spawn({self, "eval-quant", "-m", a.model_path, "-q", q, "-f", a.eval_text, "--json",
                 "--chunks", "4", "-c", "256"},
                eval);
    const int rc = pid < 0 ? -1 : WaitExit(pid);
    const std::string text = ReadFile(eval);
    nlohmann::json j = nlohmann::json::parse(LastJsonLine(text), nullptr, false);
    std::remove(q.c_str());
    std::remove(eval.c_str());
    std::remove(log.c_str());
    if (rc != 0 || j.is_discarded()) {
      out += std::string(type) + ": tern eval-quant failed; ";
      continue;
    }
    char buf[400];
    const double kl = j.value("kl_mean", 0.0), ratio = j.value("size_ratio", 1.0);
    const double top1 = j.value("top1_agreement", 0.0);
    std::snprintf(buf, sizeof buf,
                  "%s: KL mean %.4f, p99 %.4f, ppl %.3f -> %.3f, top-1 agreement %.1f%%, size x%.2f "
                  "(decode reads that much less per token: up to %.1fx faster where "
                  "bandwidth-bound) -> %s; ",
                  type, kl, j.value("kl_p99", 0.0), j.value("ppl_base", 0.0), j.value("ppl_quant", 0.0),
                  100 * j.value("top1_agreement", 0.0), ratio, 1.0 / std::max(ratio, 1e-6),
                  kl < 0.01 && top1 >= 0.9 ? "candidate (KL < 0.01, top-1 >= 90%)"
                                            : "not recommended (needs KL < 0.01 and top-1 >= 90%)");
    out += buf;
  }
  // KV cache types on the same text: the base is these weights with an f16
  // cache, the candidate the same weights with a quantized cache.
  const struct {
    const char* name;
    std::vector<std::string> flags;
  } kv_candidates[] = {{"KV q8_0", {"--kv-cache-dtype", "q8_0"}},
                       {"KV K q8_0 / V q4_0", {"--kv-cache-dtype-k", "q8_0", "--kv-cache-dtype-v", "q4_0"}}};
  for (const auto& kv : kv_candidates) {
    std::fprintf(stderr, "tern doctor: evaluating a %s cache on %s\n", kv.name, a.eval_text.c_str());
    const std::string eval = TempPath("eval-kv.json");
    std::vector<std::string> args = {self, "eval-quant", "-m", a.model_path, "-f", a.eval_text, "--json",
                                     "--chunks", "4", "-c", "256"};
    args.insert(args.end(), kv.flags.begin(), kv.flags.end());
    const pid_t pid = Spawn(args, eval);
    const int rc = pid < 0 ? -1 : WaitExit(pid);
    nlohmann::json j = nlohmann::json::parse(LastJsonLine(ReadFile(eval)), nullptr, false);
    std::remove(eval.c_str());
    if (rc != 0 || j.is_discarded()) {
      out += std::string(kv.name) + ": tern eval-quant failed; ";
      continue;
    }
    const double kl = j.value("kl_mean", 0.0), top1 = j.value("top1_agreement", 0.0);
    char buf[400];
    std::snprintf(buf, sizeof buf,
                  "%s: KL mean %.4f, ppl %.3f -> %.3f, top-1 agreement %.1f%% -> %s; ", kv.name, kl,
                  j.value("ppl_base", 0.0), j.value("ppl_quant", 0.0), 100 * top1,
                  kl < 0.01 && top1 >= 0.9
                      ? "candidate (KL < 0.01, top-1 >= 90%: the same --kv-cache-memory holds more tokens)"
                      : "not recommended (needs KL < 0.01 and top-1 >= 90%)");
    out += buf;
  }
  return out + "regress on your own eval after switching";
}

namespace {

struct BatchRun {
  double tok_s = 0;
  double acceptance = -1;  // -1: no speculation
  double accepted_length = 0;
  std::string error;
};

BatchRun RunBatch(const DoctorArgs& a, const std::string& input, int64_t concurrency,
                  const std::vector<std::string>& extra, const std::string& label) {
  BatchRun r;
  const std::string out = TempPath(label + "-out.jsonl");
  const std::string summary = TempPath(label + "-summary.json");
  const std::string log = TempPath(label + "-batch.log");
  std::vector<std::string> args = {SelfPath(), "batch", "-m", a.model_path, "-i", input, "-o", out,
                                   "--summary-json", summary, "--max-num-seqs",
                                   std::to_string(concurrency)};
  if (a.threads > 0) args.insert(args.end(), {"-t", std::to_string(a.threads)});
  if (!a.kv_budget.empty()) args.insert(args.end(), {"--kv-cache-memory", a.kv_budget});
  args.insert(args.end(), extra.begin(), extra.end());
  const pid_t pid = Spawn(args, log);
  const int rc = pid < 0 ? -1 : WaitExit(pid);
  nlohmann::json j = nlohmann::json::parse(ReadFile(summary), nullptr, false);
  if (rc != 0 || j.is_discarded()) {
    std::string text = ReadFile(log);
    while (!text.empty() && text.back() == '\n') text.pop_back();
    const size_t nl = text.rfind('\n');
    r.error = "tern batch exited with " + std::to_string(rc) + ": " +
              (nl == std::string::npos ? text : text.substr(nl + 1));
  } else {
    r.tok_s = j.value("output_tokens_per_s", 0.0);
    if (j.contains("speculative")) {
      r.acceptance = j["speculative"].value("acceptance_rate", 0.0);
      r.accepted_length = j["speculative"].value("mean_accepted_length", 1.0);
    }
  }
  for (const std::string& f : {out, summary, log}) std::remove(f.c_str());
  return r;
}

}  // namespace

std::string Speculation(const DoctorArgs& a, const std::vector<WorkloadRequest>& workload,
                        std::vector<FlagValue>* flags) {
  if (workload.empty()) return "no recommendation: no requests to measure";
  // A sample: every k-th request, up to 16.
  const size_t n = std::min<size_t>(16, workload.size());
  const size_t stride = workload.size() / n;
  const std::string input = TempPath("spec-sample.jsonl");
  int64_t sample_tokens = 0;
  {
    std::ofstream out(input);
    for (size_t i = 0; i < n; ++i) {
      const WorkloadRequest& r = workload[i * stride];
      const int32_t max_tokens = std::clamp<int32_t>(r.output_len, 1, 96);
      sample_tokens += max_tokens;
      out << nlohmann::json{{"prompt", r.prompt}, {"max_tokens", max_tokens}, {"temperature", 0},
                            {"ignore_eos", true}}.dump()
          << "\n";
    }
  }
  const int64_t concurrency = std::min<int64_t>(a.concurrency, (int64_t)n);
  struct Proposer {
    std::string name;
    std::vector<std::string> flags;
  };
  std::vector<Proposer> proposers = {{"n-gram", {"--speculative-method", "ngram"}}};
  if (!a.draft_model.empty()) {
    proposers.push_back({"draft " + a.draft_model, {"--speculative-model", a.draft_model}});
  }
  // Alternated: none, each proposer, none, each proposer (adaptive k, the
  // default a server would run).
  std::vector<double> base;
  std::vector<std::vector<BatchRun>> runs(proposers.size());
  for (int rep = 0; rep < 2; ++rep) {
    std::fprintf(stderr, "tern doctor: speculation %d/2: %zu sampled requests (%lld output tokens), "
                 "%lld at once, without and with %s\n", rep + 1, n, (long long)sample_tokens,
                 (long long)concurrency, a.draft_model.empty() ? "n-gram" : "n-gram and the draft");
    const BatchRun none = RunBatch(a, input, concurrency, {}, "spec-none");
    if (!none.error.empty()) {
      std::remove(input.c_str());
      return "not measured: " + none.error;
    }
    base.push_back(none.tok_s);
    for (size_t p = 0; p < proposers.size(); ++p) {
      runs[p].push_back(RunBatch(a, input, concurrency, proposers[p].flags, "spec-" + std::to_string(p)));
    }
  }
  std::remove(input.c_str());
  const double base_tok_s = (base[0] + base[1]) / 2;
  std::string out;
  char buf[600];
  std::snprintf(buf, sizeof buf, "measured on %zu sampled requests (greedy, %lld at once): %.1f output "
                "tok/s without speculation; ", n, (long long)concurrency, base_tok_s);
  out += buf;
  double best_ratio = 1.05;
  const Proposer* best = nullptr;
  for (size_t p = 0; p < proposers.size(); ++p) {
    const std::vector<BatchRun>& r = runs[p];
    if (!r[0].error.empty() || !r[1].error.empty()) {
      out += proposers[p].name + ": " + (r[0].error.empty() ? r[1].error : r[0].error) + "; ";
      continue;
    }
    const double tok_s = (r[0].tok_s + r[1].tok_s) / 2;
    // The ratio a proposer is judged by is its worse round against the run
    // beside it: a gain inside the run-to-run noise does not turn it on.
    double ratio = base_tok_s > 0 ? tok_s / base_tok_s : 0;
    for (int rep = 0; rep < 2; ++rep) {
      ratio = std::min(ratio, base[rep] > 0 ? r[rep].tok_s / base[rep] : 0.0);
    }
    std::snprintf(buf, sizeof buf, "%s: acceptance %.0f%%, %.2f tokens per verifying step, %.1f tok/s "
                  "(worse round %.2fx); ", proposers[p].name.c_str(), 100 * std::max(0.0, r[1].acceptance),
                  r[1].accepted_length, tok_s, ratio);
    out += buf;
    if (ratio >= best_ratio) {
      best_ratio = ratio;
      best = &proposers[p];
    }
  }
  if (best == nullptr) {
    return out + "-> leave speculation off (no proposer speeds this workload up by 5% or more in both rounds)";
  }
  std::string line;
  for (size_t i = 0; i < best->flags.size(); i += 2) {
    flags->push_back({best->flags[i], best->flags[i + 1],
                      "speculation measured " + std::to_string(best_ratio).substr(0, 4) + "x faster"});
    line += (line.empty() ? "" : " ") + best->flags[i] + " " + best->flags[i + 1];
  }
  return out + "-> turn on " + best->name + " (" + line + ")";
}

}  // namespace tern
