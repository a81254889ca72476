// `tern doctor`: measures this machine, this model and a workload, then says
// what limits serving it and which flags to use (tools/doctor_diagnosis.h has
// the reasoning; tools/doctor_measure.h the measurements;
// tools/doctor_report.h the text, JSON and HTML). --verify runs the workload
// twice through a spawned `tern serve` and `tern bench serve`: engine
// defaults, then the recommended flags.
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/thread_pool.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"
#include "tools/arg_parser.h"
#include "tools/commands.h"
#include "tools/common_flags.h"
#include "tools/doctor_diagnosis.h"
#include "tools/doctor_measure.h"
#include "tools/doctor_report.h"

extern char** environ;

namespace tern {
namespace {

struct DoctorArgs {
  std::string model_path;
  int threads = 0;
  std::string workload;
  std::string dataset;  // "random" or "" (with --workload)
  int64_t num_prompts = 64;
  int64_t input_len = 256;
  int64_t output_len = 128;
  double range_ratio = 0;
  int64_t prefix_len = 0;
  int64_t num_prefixes = 1;
  int64_t seed = 0;
  int64_t concurrency = 16;
  double request_rate = 0;
  std::string kv_budget;
  double slo_ttft_ms = 0;
  double slo_tpot_ms = 0;
  std::string eval_text;
  std::string draft_model;
  bool json = false;
  std::string html;
  bool verify = false;
  int64_t verify_repeats = 1;
};

void Fail(const std::string& msg) { std::fprintf(stderr, "tern doctor: %s\n", msg.c_str()); }

// ---- the workload ------------------------------------------------------------------

StatusOr<std::vector<WorkloadRequest>> ReadWorkload(const std::string& path,
                                                   const Tokenizer& tokenizer, int32_t n_vocab) {
  std::ifstream in(path);
  if (!in) return InvalidArgument("--workload: cannot open " + path);
  std::vector<WorkloadRequest> out;
  std::string line;
  for (int lineno = 1; std::getline(in, line); ++lineno) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(lineno) + ": ";
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return InvalidArgument(where + "not a JSON object");
    WorkloadRequest r;
    const auto p = j.find("prompt");
    if (p == j.end()) return InvalidArgument(where + "no \"prompt\"");
    if (p->is_string()) {
      r.prompt = tokenizer.Encode(p->get<std::string>(), true, false);
    } else if (p->is_array()) {
      for (const auto& id : *p) {
        if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= n_vocab) {
          return InvalidArgument(where + "\"prompt\" ids must be integers in [0, " +
                                 std::to_string(n_vocab) + ")");
        }
        r.prompt.push_back(id.get<int32_t>());
      }
    } else {
      return InvalidArgument(where + "\"prompt\" must be a string or an array of token ids");
    }
    if (r.prompt.empty()) return InvalidArgument(where + "empty prompt");
    const auto o = j.find("output_len");
    if (o == j.end() || !o->is_number_integer() || o->get<int64_t>() < 1) {
      return InvalidArgument(where + "\"output_len\" must be an integer >= 1");
    }
    r.output_len = o->get<int32_t>();
    out.push_back(std::move(r));
  }
  if (out.empty()) return InvalidArgument("--workload: " + path + " holds no requests");
  return out;
}

// Random prompts: num_prefixes shared prefixes of prefix_len tokens (requests
// spread over them in turn), then unique tokens; lengths uniform in
// len x [1 - ratio, 1 + ratio].
std::vector<WorkloadRequest> RandomWorkload(const DoctorArgs& a, int32_t n_vocab) {
  std::mt19937_64 rng((uint64_t)a.seed);
  const int32_t lo_id = std::min(n_vocab - 1, 16);
  std::uniform_int_distribution<int32_t> tok(lo_id, n_vocab - 1);
  auto len = [&](int64_t n) {
    const int64_t lo = std::max<int64_t>(1, (int64_t)((double)n * (1 - a.range_ratio)));
    const int64_t hi = std::max<int64_t>(lo, (int64_t)((double)n * (1 + a.range_ratio)));
    return (int32_t)std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  std::vector<std::vector<int32_t>> prefixes((size_t)std::max<int64_t>(1, a.num_prefixes));
  for (auto& p : prefixes) {
    for (int64_t i = 0; i < a.prefix_len; ++i) p.push_back(tok(rng));
  }
  std::vector<WorkloadRequest> out;
  for (int64_t i = 0; i < a.num_prompts; ++i) {
    WorkloadRequest r;
    r.prompt = prefixes[(size_t)i % prefixes.size()];
    const int32_t n = len(a.input_len);
    for (int32_t k = 0; k < n; ++k) r.prompt.push_back(tok(rng));
    r.output_len = len(a.output_len);
    out.push_back(std::move(r));
  }
  return out;
}

std::string RandomSource(const DoctorArgs& a) {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "random: input %lld (+%lld shared over %lld prefixes), output %lld, range %.2f, "
                "seed %lld",
                (long long)a.input_len, (long long)a.prefix_len, (long long)a.num_prefixes,
                (long long)a.output_len, a.range_ratio, (long long)a.seed);
  return buf;
}

// ---- subprocesses --------------------------------------------------------------------

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

// ---- quantization and speculation -----------------------------------------------------

// The last line that opens a JSON object (a tool's --json output after its progress lines).
std::string LastJsonLine(const std::string& text) {
  std::istringstream in(text);
  std::string line, last;
  while (std::getline(in, line)) {
    if (!line.empty() && line[0] == '{') last = line;
  }
  return last;
}

std::string Quantization(const DoctorArgs& a, const ModelFigures& m) {
  if (a.eval_text.empty()) {
    return "no recommendation: a weight format is chosen on your own text, and none was given "
           "(--eval-text FILE runs tern quantize + tern eval-quant for the candidates: KL and ppl "
           "vs these weights)";
  }
  if (m.weight_type != "F32" && m.weight_type != "F16" && m.weight_type != "BF16") {
    return "no recommendation: the weights are already " + m.weight_type +
           "; quantizing them again compounds the error (quantize from the F16/BF16 original and "
           "rerun with it)";
  }
  std::string out;
  const std::string self = SelfPath();
  for (const char* type : {"Q8_0", "Q4_K_M"}) {
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
  return out + "KV cache: this build's --kv-cache-dtype takes f16 and f32 only, no quantized KV "
               "to evaluate; regress on your own eval after switching weights";
}

std::string Speculation(const DoctorArgs& a, ThreadPool& pool, const ModelFigures& target,
                        int32_t target_vocab) {
  if (a.draft_model.empty()) {
    return "no recommendation: speculation pays only when a draft's proposals are accepted, and "
           "acceptance is observable only with a draft (--draft-model F); this build has no "
           "n-gram proposer";
  }
  auto draft = Model::Load(a.draft_model);
  if (!draft.ok()) return "the draft model failed to load: " + draft.status().ToString();
  if ((*draft)->config().n_vocab != target_vocab) {
    return "no recommendation: the draft's vocabulary (" + std::to_string((*draft)->config().n_vocab) +
           " tokens) differs from the model's (" + std::to_string(target_vocab) +
           "); a draft must share the tokenizer";
  }
  ModelFigures f;
  ModelProbeLengths l;
  l.pp_tokens = 32;
  l.tg_depth = target.tg_depth;
  l.batch = 1;
  MeasureModel(**draft, pool, l, &f);
  const double c = target.tg_tps > 0 ? target.tg_tps / std::max(f.tg_tps, 1e-9) : 1;
  char buf[600];
  // Expected tokens per target step with k drafts at acceptance alpha:
  // (1 - alpha^(k+1)) / (1 - alpha); cost per step 1 + k c (in target steps).
  auto speedup = [&](double alpha, int k) {
    return (1 - std::pow(alpha, k + 1)) / (1 - alpha) / (1 + k * c);
  };
  std::snprintf(buf, sizeof buf,
                "draft decodes %.1f tok/s vs the model's %.1f (cost ratio c = %.3f); with 4 drafts "
                "per step the speed-up is %.2fx at 60%% acceptance, %.2fx at 80%%, break-even "
                "needs acceptance where (1-a^5)/(1-a) > 1 + 4c. This build has no speculative "
                "decoding, so acceptance cannot be measured here: turn it on only where the "
                "server reports acceptance (tern:spec_decode_* on /metrics, the dashboard's tile)",
                f.tg_tps, target.tg_tps, c, speedup(0.6, 4), speedup(0.8, 4));
  return buf;
}

}  // namespace

int RunDoctor(int argc, char** argv) {
  DoctorArgs a;
  ArgParser p(
      "doctor -m MODEL [--workload FILE.jsonl | --dataset random --input-len N --output-len N ...] "
      "[--concurrency N] [--eval-text FILE] [--draft-model F] [--json] [--html FILE] [--verify]",
      "Measures this machine (memory bandwidth, FMA peak), this model (prefill and decode at the "
      "workload's lengths, short runs) and the workload (lengths, p95, shared prefixes, KV per "
      "request), then answers: prefill- or decode-bound and how far from each roofline; "
      "capacity- or bandwidth-limited; recommended --max-model-len, --max-num-seqs, "
      "--kv-cache-memory/dtype, prefix caching, --target-itl-ms; quantization (with --eval-text) "
      "and speculation (with --draft-model). --verify reruns the workload through tern serve with "
      "the defaults and with the recommended flags and prints goodput before and after.");
  AddModelFlag(p, &a.model_path, "GGUF model (required)");
  AddThreadsFlag(p, &a.threads);
  p.AddString("--workload", "FILE", &a.workload,
              "JSONL, one {\"prompt\": \"text\" or [ids], \"output_len\": N} per line (the format "
              "of tern bench serve --dataset-name file; default: --dataset random)");
  p.AddString("--dataset", "NAME", &a.dataset, "random: generated prompts (default when no --workload)");
  p.AddInt("--num-prompts", "N", &a.num_prompts, "random: requests (default 64)");
  p.AddInt("--input-len", "N", &a.input_len, "random: unique prompt tokens (default 256)");
  p.AddInt("--output-len", "N", &a.output_len, "random: output tokens (default 128)");
  p.AddDouble("--range-ratio", "F", &a.range_ratio,
              "random: lengths uniform in len x [1-F, 1+F] (default 0)");
  p.AddInt("--prefix-len", "N", &a.prefix_len, "random: shared prefix tokens before each prompt (default 0)");
  p.AddInt("--num-prefixes", "N", &a.num_prefixes, "random: distinct shared prefixes (default 1)");
  p.AddInt("--seed", "N", &a.seed, "random: seed (default 0)");
  p.AddInt("--concurrency", "N", &a.concurrency, "requests you want in flight at once (default 16)");
  p.AddDouble("--request-rate", "R", &a.request_rate,
              "arrivals per second of the workload, for the TTFT estimate and --verify "
              "(default 0 = all at once)");
  p.AddString("--kv-cache-memory", "SIZE", &a.kv_budget,
              "memory the KV cache may take, e.g. 2GiB (default: 0.9 x (free memory - weights))");
  p.AddDouble("--slo-ttft-ms", "MS", &a.slo_ttft_ms,
              "time-to-first-token bound for goodput (default: max(1000, 4 x the p95 prompt's prefill))");
  p.AddDouble("--slo-tpot-ms", "MS", &a.slo_tpot_ms,
              "time-per-output-token bound for goodput (default: max(50, 2 x the decode step))");
  p.AddString("--eval-text", "FILE", &a.eval_text,
              "your text: quantization candidates are quantized and compared with tern eval-quant "
              "(default: none, no quantization advice)");
  p.AddString("--draft-model", "FILE", &a.draft_model, "draft model for speculation (default: none)");
  p.AddFlag("--json", &a.json, "print the report as one JSON object (default: readable text)");
  p.AddString("--html", "FILE", &a.html, "also write an HTML report with plots (default: none)");
  p.AddFlag("--verify", &a.verify,
            "run the workload through tern serve + tern bench serve with the defaults and with the "
            "recommended flags; print both (default: off)");
  p.AddInt("--verify-repeats", "N", &a.verify_repeats,
           "--verify: runs per side, alternated defaults/recommended; medians reported (default 1)");
  if (int rc = ParseOrExit(p, argc, argv, "doctor"); rc >= 0) return rc;
  if (a.verify_repeats < 1) return Fail("--verify-repeats must be >= 1"), 1;
  if (a.model_path.empty()) return Fail("-m MODEL is required"), 1;
  if (!a.workload.empty() && !a.dataset.empty()) return Fail("give --workload or --dataset, not both"), 1;
  if (!a.dataset.empty() && a.dataset != "random") {
    return Fail("--dataset must be 'random', got '" + a.dataset + "'"), 1;
  }
  if (a.num_prompts < 1 || a.input_len < 1 || a.output_len < 1 || a.prefix_len < 0 ||
      a.num_prefixes < 1 || a.concurrency < 1) {
    return Fail("--num-prompts, --input-len, --output-len, --num-prefixes and --concurrency must "
                "be >= 1, --prefix-len >= 0"),
           1;
  }
  if (!(a.range_ratio >= 0 && a.range_ratio < 1)) return Fail("--range-ratio must be in [0, 1)"), 1;
  if (!(a.request_rate >= 0) || !(a.slo_ttft_ms >= 0) || !(a.slo_tpot_ms >= 0)) {
    return Fail("--request-rate, --slo-ttft-ms and --slo-tpot-ms must be >= 0"), 1;
  }
  DoctorOptions opt;
  opt.concurrency = (int)a.concurrency;
  opt.request_rate = a.request_rate;
  opt.slo_ttft_ms = a.slo_ttft_ms;
  opt.slo_tpot_ms = a.slo_tpot_ms;
  if (!a.kv_budget.empty()) {
    StatusOr<int64_t> b = ParseByteSize(a.kv_budget);
    if (!b.ok() || *b <= 0) return Fail("--kv-cache-memory: not a positive size: " + a.kv_budget), 1;
    opt.kv_budget_bytes = *b;
  }

  auto loaded = Model::Load(a.model_path);
  if (!loaded.ok()) return Fail(loaded.status().ToString()), 1;
  std::unique_ptr<Model> model = std::move(loaded).value();
  auto vocab = Vocab::FromGguf(model->file());
  if (!vocab.ok()) return Fail(vocab.status().ToString()), 1;
  auto tokenizer = Tokenizer::Create(std::move(vocab).value());
  if (!tokenizer.ok()) return Fail(tokenizer.status().ToString()), 1;
  const int32_t n_vocab = model->config().n_vocab;

  DoctorReport report;
  report.options = opt;
  std::vector<WorkloadRequest> workload;
  if (!a.workload.empty()) {
    auto w = ReadWorkload(a.workload, **tokenizer, n_vocab);
    if (!w.ok()) return Fail(w.status().message()), 1;
    workload = std::move(w).value();
    report.workload_source = "file " + a.workload;
  } else {
    workload = RandomWorkload(a, n_vocab);
    report.workload_source = RandomSource(a);
  }
  report.workload = ProfileWorkload(workload, 16);
  for (const WorkloadRequest& r : workload) {
    report.prompt_lens.push_back((double)r.prompt.size());
    report.output_lens.push_back(r.output_len);
  }
  const WorkloadProfile& w = report.workload;
  if (model->config().n_ctx_train > 0 && w.total.max > model->config().n_ctx_train) {
    return Fail("the workload's longest request (" + std::to_string((int64_t)w.total.max) +
                " tokens) exceeds the model's context " + std::to_string(model->config().n_ctx_train)),
           1;
  }

  ThreadPool pool(a.threads > 0 ? a.threads : ThreadPool::DefaultNumThreads());
  std::fprintf(stderr, "tern doctor: measuring the machine (bandwidth, FMA peak)\n");
  report.machine = MeasureMachine(pool, model->WeightBytes());
  ModelProbeLengths lengths;
  lengths.pp_tokens = std::clamp<int32_t>((int32_t)w.prompt.p50, 16, 2048);
  if (w.prompt.p95 >= 1.25 * w.prompt.p50) {
    lengths.pp_long_tokens = std::clamp<int32_t>((int32_t)w.prompt.p95, 16, 4096);
  }
  lengths.tg_depth = std::clamp<int32_t>((int32_t)(w.prompt.p95 + w.output.p95 / 2), 1, 4096);
  lengths.batch = (int32_t)std::min<int64_t>(a.concurrency, 8);
  std::fprintf(stderr, "tern doctor: measuring the model (prefill %d tokens, decode at depth %d, "
               "batch 1 and %d)\n", lengths.pp_tokens, lengths.tg_depth, lengths.batch);
  report.model.path = a.model_path;
  MeasureModel(*model, pool, lengths, &report.model);
  report.diagnosis = Diagnose(report.machine, report.model, w, opt);
  // From here on children run (tern quantize, eval-quant, serve, bench serve).
  signal(SIGINT, KillChildrenAndExit);
  signal(SIGTERM, KillChildrenAndExit);
  report.quantization = Quantization(a, report.model);
  report.speculation = Speculation(a, pool, report.model, n_vocab);
  if (a.verify) {
    model.reset();  // the spawned servers load their own
    report.verify = Verify(a, workload, report.diagnosis);
  }

  if (a.json) {
    std::printf("%s\n", ReportJson(report).dump(2).c_str());
  } else {
    std::printf("%s", ReportText(report).c_str());
  }
  if (!a.html.empty()) {
    std::ofstream out(a.html);
    out << ReportHtml(report);
    if (!out) return Fail("--html: cannot write " + a.html), 1;
    std::fprintf(stderr, "tern doctor: wrote %s\n", a.html.c_str());
  }
  for (const VerifyRun& v : report.verify) {
    if (!v.error.empty()) return 1;
  }
  return 0;
}

}  // namespace tern
