// What `tern doctor` runs as child processes of its own binary: --verify
// (`tern serve` on a free loopback port + `tern bench serve` on the workload,
// engine defaults vs the recommended flags, alternated) and the quantization
// candidates (`tern quantize` + `tern eval-quant` on the user's text).
// Children are tracked so that SIGINT/SIGTERM kills them with the doctor.
//
// Thread rules: the main thread only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tools/doctor_diagnosis.h"
#include "tools/doctor_report.h"

namespace tern {

// The command's flags (tools/doctor_command.cc registers them).
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

// From now on SIGINT/SIGTERM kill the running children and exit 128 + signal.
void KillChildrenOnSignal();

// The workload through tern serve + tern bench serve: [defaults, recommended],
// each the median of a.verify_repeats alternated runs.
std::vector<VerifyRun> Verify(const DoctorArgs& a, const std::vector<WorkloadRequest>& workload,
                              const Diagnosis& d);

// The quantization answer: candidates measured on a.eval_text, or why none.
std::string Quantization(const DoctorArgs& a, const ModelFigures& m);

// The speculation answer, measured: a sample of the workload (up to 16
// requests, up to 96 output tokens each, greedy) through `tern batch` at the
// workload's concurrency without speculation and with each viable proposer
// (n-gram always; the draft model with a.draft_model), alternated twice.
// Appends the flags of a proposer that speeds the sample up by >= 5% to
// *flags (to be applied and --verify'd with the others).
std::string Speculation(const DoctorArgs& a, const std::vector<WorkloadRequest>& workload,
                        std::vector<FlagValue>* flags);

}  // namespace tern
