// `tern doctor`'s reasoning, as pure functions of measured figures: what the
// machine, the model and the workload measured (plain records filled by
// tools/doctor_command.cc) go in, a Diagnosis with every verdict, the numbers
// behind it and the flags to apply comes out. Nothing here measures, reads a
// file or prints, so the logic is tested on fixed figures
// (tests/doctor_cli_test.cc).
//
// The model of the engine used throughout:
//   prefill roofline     tok/s <= FMA peak / (2 x layer matmul parameters)
//   decode roofline      tok/s <= bandwidth / (weight bytes + KV bytes/token x depth)
//   decode step at batch B   t(B) = a + b x B   (a, b fitted to the measured
//                        batch-1 and batch-N decode: a ~ weights, b ~ per-sequence work)
//   KV bytes per request = 2 x layers x kv_heads x head_dim x bytes/elem x tokens
//
// Thread rules: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tern {

struct MachineFigures {
  double read_gb_s = 0;          // memory read bandwidth (best round)
  double fma_gflops = 0;         // fp32 FMA peak, all threads
  int threads = 0;
  int64_t mem_available_bytes = 0;
};

struct ModelFigures {
  std::string path;
  std::string arch;
  std::string weight_type;
  int64_t weight_bytes = 0;
  int64_t layer_matmul_params = 0;     // parameters of the blk.* matrices
  // The KV row's shape: KvBytesPerToken (kv/kv_config.h, the one formula)
  // sizes a token's K and V for each dtype the plan weighs.
  int32_t n_layer = 0;
  int32_t n_head_kv = 0;
  int32_t head_dim = 0;
  int32_t context_len = 0;             // trained context (0 = unknown)
  // Measured on this machine:
  int32_t pp_tokens = 0;
  double pp_tps = 0;          // one prompt of pp_tokens (the median prompt), tokens/s
  int32_t pp_long_tokens = 0; // the p95 prompt, when much longer than the median (else 0)
  double pp_long_tps = 0;
  int32_t tg_depth = 0;
  double tg_tps = 0;          // one sequence decoding at tg_depth, tokens/s
  int32_t batch = 0;
  double batch_tg_tps = 0;    // batch sequences decoding at once, tokens/s of all together
};

struct LengthStats {
  double mean = 0, p50 = 0, p95 = 0, max = 0;
};

struct WorkloadRequest {
  std::vector<int32_t> prompt;
  int32_t output_len = 0;
};

struct WorkloadProfile {
  int num_requests = 0;
  LengthStats prompt, output, total;  // tokens; total = prompt + output
  int32_t block_size = 16;
  // Prompt tokens in full blocks whose chained hash an earlier request
  // already had (what a warm prefix cache serves) / all prompt tokens.
  double shared_prefix_share = 0;
  int64_t distinct_shared_tokens = 0;  // tokens of the distinct blocks that were hit
};

// The workload's lengths and prefix sharing (block hashes as the engine's
// prefix cache computes them, without a cache salt).
WorkloadProfile ProfileWorkload(const std::vector<WorkloadRequest>& requests, int32_t block_size);
LengthStats SummarizeLengths(std::vector<double> values);

struct DoctorOptions {
  int concurrency = 16;            // requests the user wants in flight at once
  double request_rate = 0;         // req/s of the workload (0 = all at once)
  int64_t kv_budget_bytes = 0;     // memory the KV cache may take (0: from free memory)
  double memory_utilization = 0.9; // of free memory after the weights, as the engine plans
  double slo_ttft_ms = 0;          // 0 = derived from the measurements
  double slo_tpot_ms = 0;
  int32_t max_num_batched_tokens = 512;  // the engine's step budget
  // KV dtypes this build's --kv-cache-dtype takes, smallest first.
  std::vector<std::string> kv_dtypes = {"f16", "bf16", "f32", "q8_0", "q4_0"};
};

// One answer of the report: a verdict and the numbers (and formulas) behind it.
struct Finding {
  std::string topic;    // "bound", "memory", "max-model-len", ...
  std::string verdict;  // one line
  std::vector<std::string> details;
};

struct FlagValue {
  std::string flag;     // "--max-num-seqs"
  std::string value;    // "" for a switch
  std::string why;
};

struct Diagnosis {
  // Where the time goes.
  bool prefill_bound = false;
  double prefill_s_per_request = 0;  // compute per request, after prefix hits
  double decode_s_per_request = 0;   // at the recommended batch
  double prefill_roofline_tps = 0, prefill_fraction = 0;
  double decode_roofline_tps = 0, decode_fraction = 0;
  double step_a_s = 0, step_b_s = 0;  // decode step t(B) = a + b B
  // Memory.
  bool capacity_limited = false;
  int64_t kv_bytes_per_token = 0;
  int64_t kv_bytes_per_request = 0;   // at the p95 total length
  int64_t kv_needed_bytes = 0;        // concurrency x per request
  int64_t kv_budget_bytes = 0;
  int64_t fit_concurrency = 0;        // requests of p95 length the budget holds
  // Service objectives used (given or derived).
  double slo_ttft_ms = 0, slo_tpot_ms = 0;
  // Predicted median TTFT from prefill alone: a burst of `concurrency`
  // arrivals (request_rate 0) queues behind half of the others' prompts.
  double ttft_estimate_ms = 0;
  // The last request of a burst waits for every prompt before it (arrivals x
  // mean prefill); with Poisson arrivals, one prompt's prefill.
  double ttft_tail_ms = 0;
  // Recommendations.
  int32_t max_model_len = 0;
  int32_t max_num_seqs = 0;
  int64_t kv_cache_memory_bytes = 0;
  std::string kv_dtype = "f16";
  bool prefix_caching = true;
  double expected_hit_rate = 0;
  double target_itl_ms = 0;           // 0 = leave the automatic target
  bool chunked_prefill = true;
  bool defaults_right = false;        // no recommendation changes the schedule
  std::vector<Finding> findings;
  std::vector<FlagValue> flags;
};

// Decode step time at batch b under the fitted model.
double DecodeStepSeconds(const Diagnosis& d, int b);

Diagnosis Diagnose(const MachineFigures& machine, const ModelFigures& model,
                   const WorkloadProfile& workload, const DoctorOptions& options);

// "--max-model-len 320 --max-num-seqs 8 ..." (the flags to give tern serve).
std::string FlagsLine(const Diagnosis& d);

}  // namespace tern
