// OutputChannel (declared in engine.h), FinishReasonName and
// SchedulingPolicyName.
#include "engine/engine.h"

namespace tern {

const char* FinishReasonName(FinishReason r) {
  switch (r) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kAbort:
      return "abort";
    case FinishReason::kNone:
      break;
  }
  return "none";
}

const char* SchedulingPolicyName(SchedulingPolicy p) {
  return p == SchedulingPolicy::kGoodput ? "goodput" : "decode-protect";
}

void OutputChannel::Push(RequestOutput out) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(out));
  }
  cv_.notify_all();
}

std::optional<RequestOutput> OutputChannel::Pop(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (timeout.count() <= 0) {
    // A poll: no condition-variable wait (that would be a futex call per
    // empty channel, and a busy poller then takes a whole core).
    if (queue_.empty()) return std::nullopt;
  } else if (!cv_.wait_for(lock, timeout, [&] { return !queue_.empty(); })) {
    return std::nullopt;
  }
  RequestOutput out = std::move(queue_.front());
  queue_.pop_front();
  return out;
}

}  // namespace tern
