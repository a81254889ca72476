// `tern doctor`: measures this machine, this model and a workload, then says
// what limits serving it and which flags to use (tools/doctor_diagnosis.h has
// the reasoning; tools/doctor_measure.h the measurements;
// tools/doctor_report.h the text, JSON and HTML). --verify runs the workload
// twice through a spawned `tern serve` and `tern bench serve`: engine
// defaults, then the recommended flags (tools/doctor_runs.h).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/atomic_file.h"
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
#include "tools/doctor_runs.h"

namespace tern {
namespace {

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
  KillChildrenOnSignal();
  report.quantization = Quantization(a, report.model);
  const size_t flags_before = report.diagnosis.flags.size();
  report.speculation = Speculation(a, workload, &report.diagnosis.flags);
  if (report.diagnosis.flags.size() != flags_before) {
    // Speculation changes how the engine runs this workload: say so where
    // the diagnosis compared its flags with the defaults.
    report.diagnosis.defaults_right = false;
    std::string spec;
    for (size_t i = flags_before; i < report.diagnosis.flags.size(); ++i) {
      spec += (spec.empty() ? "" : " ") + report.diagnosis.flags[i].flag + " " +
              report.diagnosis.flags[i].value;
    }
    for (Finding& f : report.diagnosis.findings) {
      if (f.topic != "defaults") continue;
      const std::string prefix = "against the defaults, what changes the schedule: ";
      f.verdict = f.verdict.rfind(prefix, 0) == 0 ? f.verdict + ", speculation (" + spec + ")"
                                                 : prefix + "speculation (" + spec + ")";
    }
  }
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
    if (Status st = WriteFileAtomically(a.html, ReportHtml(report)); !st.ok()) {
      return Fail("--html: " + st.message()), 1;
    }
    std::fprintf(stderr, "tern doctor: wrote %s\n", a.html.c_str());
  }
  for (const VerifyRun& v : report.verify) {
    if (!v.error.empty()) return 1;
  }
  return 0;
}

}  // namespace tern
