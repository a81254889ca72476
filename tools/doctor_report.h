// `tern doctor`'s output: the readable report (stdout), the same as one JSON
// object (--json) and as an HTML page with inline SVG plots (--html FILE:
// roofline, length distribution, KV capacity vs concurrency, and the
// before/after latencies of --verify).
//
// Thread rules: pure functions of the report record.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tools/doctor_diagnosis.h"

namespace tern {

// One `tern bench serve` run of the workload against a `tern serve` (--verify).
struct VerifyRun {
  std::string label;   // "defaults", "recommended"
  std::string flags;   // the serve flags beyond -m/-t/--port
  int completed = 0, failed = 0, good = 0;
  double duration_s = 0;
  double request_goodput = 0;     // good req/s
  double output_throughput = 0;   // tok/s
  double ttft_p50_ms = 0, ttft_p99_ms = 0, tpot_p50_ms = 0, tpot_p99_ms = 0;
  int repeats = 1;     // runs behind the figures (medians when > 1)
  std::string error;   // non-empty: the run failed
};

struct DoctorReport {
  MachineFigures machine;
  ModelFigures model;
  std::string workload_source;  // "file x.jsonl" or "random: ..."
  WorkloadProfile workload;
  std::vector<double> prompt_lens, output_lens;
  DoctorOptions options;
  Diagnosis diagnosis;
  std::string quantization;   // what was measured, or why nothing could be
  std::string speculation;
  std::vector<VerifyRun> verify;
};

std::string ReportText(const DoctorReport& r);
nlohmann::json ReportJson(const DoctorReport& r);
std::string ReportHtml(const DoctorReport& r);

}  // namespace tern
