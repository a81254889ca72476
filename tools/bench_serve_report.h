// What `tern bench serve` measured, and how it is reported. The load
// generator fills one ServeRequestResult per request; SummarizeServeBench
// turns them into the figures `vllm bench serve` users know:
//
//   TTFT  request sent -> first streamed chunk with text
//   TPOT  (E2EL - TTFT) / (output tokens - 1), per request (>= 2 tokens)
//   ITL   every gap between consecutive text chunks, of all requests
//   E2EL  request sent -> last byte of the response
//   goodput  requests/s that met every --goodput bound (TTFT, TPOT, E2EL)
//
// and prints them as a table (stdout), a JSON object (--save-result) and a
// self-contained SVG page (CDFs of TTFT, TPOT, ITL, E2EL on log axes, TTFT
// against the time each request was sent).
//
// Thread rules: pure functions of their arguments.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tern {

struct ServeRequestResult {
  bool success = false;
  std::string error;           // why it failed (HTTP status and body, curl error)
  double start_s = 0;          // when it was sent, seconds since the benchmark began
  double ttft_s = 0;
  double e2el_s = 0;
  std::vector<double> itl_s;   // gaps between consecutive text chunks
  int32_t prompt_tokens = 0;   // the server's usage when it reports one, else ours
  int32_t output_tokens = 0;   // the same
};

// Service-level objectives for goodput, in ms (0 = no bound).
struct GoodputSlo {
  double ttft_ms = 0;
  double tpot_ms = 0;
  double e2el_ms = 0;
  bool any() const { return ttft_ms > 0 || tpot_ms > 0 || e2el_ms > 0; }
};

struct LatencyStats {  // ms
  double mean = 0, std = 0, median = 0, p90 = 0, p99 = 0, max = 0;
  size_t count = 0;
};

struct ServeBenchSummary {
  double duration_s = 0;
  int completed = 0;
  int failed = 0;
  int64_t total_input_tokens = 0;   // successful requests
  int64_t total_output_tokens = 0;
  double request_throughput = 0;      // req/s
  double output_throughput = 0;       // tok/s
  double total_token_throughput = 0;  // (input + output) tok/s
  int good_requests = 0;              // met every SLO (all successful ones without SLOs)
  double request_goodput = 0;         // good req/s
  LatencyStats ttft, tpot, itl, e2el;
};

// A request's TPOT in seconds (0 for fewer than 2 output tokens).
double RequestTpot(const ServeRequestResult& r);
LatencyStats SummarizeLatencies(const std::vector<double>& seconds);
ServeBenchSummary SummarizeServeBench(const std::vector<ServeRequestResult>& results,
                                      double duration_s, const GoodputSlo& slo);

// The result table, vLLM's layout.
std::string FormatServeSummary(const ServeBenchSummary& s, const GoodputSlo& slo);
// The summary fields (vLLM's names: mean_ttft_ms, p99_itl_ms, ...) and the
// per-request arrays (input_lens, output_lens, start_times, ttfts, itls,
// e2els, errors), all times in seconds except the *_ms summaries.
nlohmann::json ServeSummaryJson(const ServeBenchSummary& s,
                                const std::vector<ServeRequestResult>& results);
// An SVG page: title line, then 5 panels.
std::string ServeLatencySvg(const ServeBenchSummary& s,
                            const std::vector<ServeRequestResult>& results,
                            const std::string& title);

}  // namespace tern
