// Engine: the serving core. Owns the model, the KV cache and the scheduler,
// and runs the step loop on its own thread. Front ends (tern batch, tern
// serve, tests) submit requests and read each request's outputs from its own
// channel; no HTTP or JSON enters here.
//
// Thread rules: AddRequest, Abort, GetStats and Shutdown may be called from
// any thread. Everything else belongs to the engine thread.
//
// (Public surface agreed with the server; the engine's owner may add to it.)
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "sample/sampling_params.h"

namespace tern {

enum class FinishReason { kNone, kStop, kLength, kAbort };
const char* FinishReasonName(FinishReason r);  // "stop", "length", "abort"

struct TokenLogprob {
  int32_t token_id = 0;
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;  // top-n alternatives
};

// Per-request timing and counts, filled by the engine (seconds since epoch
// are not used: all times are steady-clock offsets from arrival).
struct RequestMetrics {
  double queue_s = 0;        // arrival -> first scheduled
  double ttft_s = 0;         // arrival -> first token
  double tpot_s = 0;         // mean time per output token after the first
  double e2e_s = 0;          // arrival -> finished
  std::vector<double> itl_s; // gaps between consecutive tokens
  int32_t prompt_tokens = 0;
  int32_t generated_tokens = 0;
  int32_t cached_tokens = 0;  // prompt tokens found in the prefix cache
  int32_t num_preemptions = 0;
};

// One message on a request's channel: new tokens since the last message.
struct RequestOutput {
  std::vector<int32_t> new_token_ids;
  std::vector<TokenLogprob> logprobs;  // parallel to new_token_ids when asked
  bool finished = false;
  FinishReason finish_reason = FinishReason::kNone;
  RequestMetrics metrics;  // complete when finished
};

// A queue of outputs for one request, written by the engine thread and read
// by its consumer. The one natural shared_ptr between threads.
class OutputChannel {
 public:
  void Push(RequestOutput out);
  // Blocks until an output is available or timeout passes (nullopt).
  std::optional<RequestOutput> Pop(std::chrono::milliseconds timeout);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<RequestOutput> queue_;
};

struct EngineRequest {
  std::string request_id;   // unique; empty = engine assigns
  std::vector<int32_t> prompt_token_ids;
  SamplingParams sampling;
  std::string cache_salt;   // isolates prefix-cache entries per tenant
};

}  // namespace tern
