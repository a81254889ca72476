#include "server/completion_handler.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <random>

#include "sample/request_checks.h"
#include "server/request_parser.h"
#include "server/structured_output.h"

namespace tern {
namespace {

std::string RandomHex(int num_chars) {
  thread_local std::mt19937_64 rng(std::random_device{}());
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < num_chars; ++i) out += kHex[rng() & 15];
  return out;
}

ApiError FromStatus(const Status& s, const std::string& param) {
  switch (s.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
      return ApiError::Invalid(s.message(), param);
    case StatusCode::kResourceExhausted:
      return ApiError::TooManyRequests(s.message());
    case StatusCode::kUnavailable:
      return ApiError::Unavailable(s.message());
    default:
      return ApiError::Internal(s.message());
  }
}

}  // namespace

CompletionHandler::CompletionHandler(const CompletionContext& ctx, CompletionRequest request,
                                     HttpExchange* exchange)
    : ctx_(ctx), request_(std::move(request)), exchange_(exchange) {
  id_ = std::string(is_chat() ? "chatcmpl-" : "cmpl-") + RandomHex(24);
  created_ = (int64_t)std::time(nullptr);
}

CompletionHandler::~CompletionHandler() {
  AbortUnfinished();
  if (reserved_ > 0) ctx_.pending_requests->fetch_sub(reserved_);
}

std::optional<ApiError> CompletionHandler::BuildPrompts(std::vector<std::vector<int32_t>>* prompts,
                                                        std::vector<std::string>* echo_texts) {
  ServingBackend& b = *ctx_.backend;
  if (is_chat()) {
    StatusOr<std::vector<int32_t>> ids = b.EncodeChatWithTools(request_.messages, request_.tools, true);
    if (!ids.ok()) return FromStatus(ids.status(), "messages");
    prompts->push_back(std::move(ids).value());
    echo_texts->push_back("");
  } else {
    for (const PromptInput& p : request_.prompts) {
      if (p.is_tokens) {
        prompts->push_back(p.token_ids);
        echo_texts->push_back(request_.echo ? b.Decode(p.token_ids) : "");
      } else {
        prompts->push_back(b.Encode(p.text, /*add_special=*/true, /*parse_special=*/true));
        echo_texts->push_back(p.text);
      }
    }
  }
  for (const auto& ids : *prompts) {
    if (ids.empty()) return ApiError::Invalid("the prompt is empty (0 tokens)", "prompt");
  }
  return std::nullopt;
}

std::optional<ApiError> CompletionHandler::CheckLength(size_t prompt_len,
                                                       int32_t* max_tokens) const {
  const int64_t limit = ctx_.backend->max_model_len();
  const char* param = is_chat() ? "messages" : "prompt";
  if (ctx_.backend->streaming_kv_eviction()) {
    // Any length: the engine drops old KV blocks. Without max_tokens, the
    // endpoint's default, or one context's worth when that is "until the
    // context ends".
    const int32_t d = DefaultMaxTokens(request_.endpoint);
    *max_tokens = request_.max_tokens ? *request_.max_tokens : d < 0 ? (int32_t)limit : d;
    return std::nullopt;
  }
  // The rule is sample/request_checks.h's; the words are OpenAI's (clients
  // match on "maximum context length").
  if (CheckContextRoom((int64_t)prompt_len, 1, limit)) {
    return ApiError::Invalid("This model's maximum context length is " + std::to_string(limit) +
                                 " tokens. However, your prompt has " + std::to_string(prompt_len) +
                                 " tokens, which leaves no room for the completion.",
                             param);
  }
  const int64_t room = limit - (int64_t)prompt_len;
  if (!request_.max_tokens) {
    // The endpoint's default (16, or until the context ends), never past the context.
    const int32_t d = DefaultMaxTokens(request_.endpoint);
    *max_tokens = (int32_t)(d < 0 ? room : std::min<int64_t>(d, room));
    return std::nullopt;
  }
  const int32_t asked = *request_.max_tokens;
  if (CheckContextRoom((int64_t)prompt_len, asked, limit)) {
    return ApiError::Invalid("This model's maximum context length is " + std::to_string(limit) +
                                 " tokens. However, you requested " +
                                 std::to_string((int64_t)prompt_len + asked) + " tokens (" +
                                 std::to_string(prompt_len) + " in the prompt, " +
                                 std::to_string(asked) +
                                 " for the completion). Please reduce the prompt or max_tokens.",
                             "max_tokens");
  }
  *max_tokens = asked;
  return std::nullopt;
}

std::optional<ApiError> CompletionHandler::Submit(const std::vector<std::vector<int32_t>>& prompts,
                                                  const std::vector<std::string>& echo_texts) {
  const int32_t num = (int32_t)prompts.size() * request_.n;
  int32_t before = ctx_.pending_requests->fetch_add(num);
  reserved_ = num;
  if (before + num > ctx_.max_pending_requests) {
    return ApiError::TooManyRequests("too many requests in flight (limit " +
                                     std::to_string(ctx_.max_pending_requests) + "); retry later");
  }
  choices_.resize(num);
  for (size_t p = 0; p < prompts.size(); ++p) {
    int32_t max_tokens = 0;
    if (auto e = CheckLength(prompts[p].size(), &max_tokens)) return e;
    std::shared_ptr<const TokenConstraint> constraint;
    OutputConstraintSpec spec = request_.constraint;
    if (is_chat() && request_.tools.active()) {
      OutputConstraintSpec tool_spec = ToolCallConstraint(request_.tools, ctx_.backend->tool_call_format());
      if (tool_spec.kind != OutputConstraintSpec::Kind::kNone) {
        if (spec.kind != OutputConstraintSpec::Kind::kNone) {
          return ApiError::Invalid("'" + spec.param + "' cannot be combined with tool_choice \"required\" or a named function",
                                   spec.param);
        }
        spec = std::move(tool_spec);
      }
    }
    if (auto e = ResolveConstraint(spec, max_tokens, ctx_.backend->constraints(), &constraint)) {
      return e;
    }
    for (int32_t j = 0; j < request_.n; ++j) {
      Choice& c = choices_[p * request_.n + j];
      c.index = (int32_t)(p * request_.n + j);
      c.engine_id = id_ + "-" + std::to_string(c.index);
      c.prompt_ids = prompts[p];
      c.echo_text = echo_texts[p];
      c.stop = std::make_unique<StopMatcher>(request_.stop);
      c.max_tokens = max_tokens;
      c.constraint = constraint;
      c.detok = ctx_.backend->NewTextStream(c.prompt_ids);
      if (is_chat() && request_.tools.active()) {
        c.tools = std::make_unique<ToolCallStream>(ctx_.backend->tool_call_format());
      }
    }
  }
  for (Choice& c : choices_) {
    EngineRequest req;
    req.request_id = c.engine_id;
    req.prompt_token_ids = c.prompt_ids;
    req.sampling = request_.sampling;
    req.sampling.max_tokens = c.max_tokens;
    req.sampling.logprobs = request_.logprobs;
    req.sampling.constraint = c.constraint;
    if (req.sampling.has_seed) req.sampling.seed += (uint64_t)(c.index % request_.n);
    req.cache_salt = request_.cache_salt;
    StatusOr<std::shared_ptr<OutputChannel>> ch = ctx_.backend->AddRequest(std::move(req));
    if (!ch.ok()) {
      AbortUnfinished();
      return FromStatus(ch.status(), "");
    }
    c.channel = std::move(ch).value();
  }
  return std::nullopt;
}

void CompletionHandler::FinishChoice(Choice& c, const std::string& reason) {
  c.client_done = true;
  c.finish_reason = reason;
}

void CompletionHandler::Consume(Choice& c, const RequestOutput& out) {
  ServingBackend& b = *ctx_.backend;
  if (!out.new_token_ids.empty() && first_token_time_ == Clock::time_point{}) {
    first_token_time_ = Clock::now();
  }
  for (size_t i = 0; i < out.new_token_ids.size() && !c.client_done; ++i) {
    const int32_t id = out.new_token_ids[i];
    ++c.completion_tokens;
    const std::string piece = b.TokenPiece(id);
    const std::string decoded = c.detok->Add(id);
    if (request_.logprobs >= 0 && i < out.logprobs.size()) {
      LogprobEntry e{piece,
                     out.logprobs[i].logprob,
                     {},
                     (int32_t)((request_.echo ? c.echo_text.size() : 0) + c.raw_bytes)};
      for (const auto& [tid, lp] : out.logprobs[i].top) e.top.emplace_back(b.TokenPiece(tid), lp);
      c.logprobs.push_back(e);
      c.delta_logprobs.push_back(std::move(e));
    }
    c.raw_bytes += decoded.size();
    std::string released = c.stop->Push(decoded);
    if (c.tools) released = c.tools->Push(released);
    c.text += released;
    c.delta += released;
    if (c.stop->matched()) {
      b.FinishWithStop(c.engine_id);
      FinishChoice(c, FinishReasonName(FinishReason::kStop));
    }
  }
  if (!out.finished) return;
  c.engine_done = true;
  c.cached_tokens = out.metrics.cached_tokens;
  c.evicted_tokens = out.metrics.evicted_tokens;
  ctx_.metrics->Observe(out.metrics);
  if (c.client_done) return;
  std::string rest = c.stop->Push(c.detok->Flush());
  if (!c.stop->matched()) rest += c.stop->Flush();
  std::string reason =
      FinishReasonName(c.stop->matched() ? FinishReason::kStop : out.finish_reason);
  if (c.tools) {
    rest = c.tools->Push(rest);
    ParsedToolOutput parsed = c.tools->Finish();
    rest += parsed.content;
    c.tool_calls = parsed.calls;
    c.delta_tool_calls = std::move(parsed.calls);
    if (!c.tool_calls.empty() && reason == FinishReasonName(FinishReason::kStop)) reason = "tool_calls";
  }
  c.text += rest;
  c.delta += rest;
  FinishChoice(c, reason);
}

bool CompletionHandler::SendChunk(Choice& c) {
  ChoiceResult r{c.index, std::move(c.delta), c.client_done ? c.finish_reason : "",
                 request_.logprobs >= 0, std::move(c.delta_logprobs)};
  r.tool_calls = std::move(c.delta_tool_calls);
  c.delta_tool_calls.clear();
  c.delta.clear();
  c.delta_logprobs.clear();
  const std::string data = is_chat() ? ChatChunkJson(Meta(), r, false, request_.include_usage)
                                     : CompletionChunkJson(Meta(), r, request_.include_usage);
  return exchange_->SendEvent(data);
}

bool CompletionHandler::SendStreamStart() {
  if (!exchange_->BeginEventStream()) return false;
  for (Choice& c : choices_) {
    ChoiceResult r{c.index, is_chat() ? "" : c.echo_text, "", false, {}};
    if (is_chat()) {
      if (!exchange_->SendEvent(ChatChunkJson(Meta(), r, true, request_.include_usage)))
        return false;
    } else if (request_.echo && !c.echo_text.empty()) {
      if (!exchange_->SendEvent(CompletionChunkJson(Meta(), r, request_.include_usage)))
        return false;
    }
  }
  return true;
}

bool CompletionHandler::ReadOutputs(Choice& c, bool streaming) {
  for (;;) {
    std::optional<RequestOutput> out;
    if (!c.client_done) out = c.channel->Pop(std::chrono::milliseconds(0));
    if (out) Consume(c, *out);
    if (streaming && (!c.delta.empty() || !c.delta_logprobs.empty() ||
                      !c.delta_tool_calls.empty() || c.client_done)) {
      if (!SendChunk(c)) return false;
    }
    if (!out || c.client_done) return true;
  }
}

bool CompletionHandler::Pump(bool streaming) {
  std::vector<bool> finish_sent(choices_.size(), false);
  auto shutdown_deadline = std::chrono::steady_clock::time_point::max();
  uint64_t seen = 0;  // the engine's output generation read before the last pass
  for (;;) {
    bool all_sent = true;
    for (size_t i = 0; i < choices_.size(); ++i) {
      Choice& c = choices_[i];
      if (finish_sent[i]) continue;
      if (!ReadOutputs(c, streaming)) return false;
      finish_sent[i] = c.client_done;
      all_sent = all_sent && c.client_done;
    }
    if (all_sent) return true;
    if (exchange_->ClientGone()) return false;
    if (ctx_.shutting_down->load()) {
      // Abort once; give the engine a moment to report, then finish anyway.
      if (shutdown_deadline == std::chrono::steady_clock::time_point::max()) {
        shutdown_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
        for (Choice& c : choices_) {
          if (!c.engine_done) ctx_.backend->Abort(c.engine_id);
        }
      } else if (std::chrono::steady_clock::now() > shutdown_deadline) {
        for (Choice& c : choices_) {
          c.engine_done = true;  // already aborted above; its final output is not awaited
          if (!c.client_done) FinishChoice(c, FinishReasonName(FinishReason::kAbort));
        }
      }
    }
    // Sleeps until the engine delivers outputs (any request's), or at most
    // kWakeInterval, to notice a client that left or a shutdown.
    seen = ctx_.backend->WaitForOutputs(seen, kWakeInterval);
  }
}

void CompletionHandler::AbortUnfinished() {
  for (Choice& c : choices_) {
    if (c.channel && !c.engine_done) {
      ctx_.backend->Abort(c.engine_id);
      c.engine_done = true;  // its final output is not awaited
    }
    if (!c.client_done) FinishChoice(c, FinishReasonName(FinishReason::kAbort));
  }
}

void CompletionHandler::DrainForMetrics() {
  // Choices cut by a stop string: the engine's final output (with timings)
  // follows within a step or so.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  uint64_t seen = 0;
  for (;;) {
    bool waiting = false;
    for (Choice& c : choices_) {
      while (c.channel && !c.engine_done) {
        std::optional<RequestOutput> out = c.channel->Pop(std::chrono::milliseconds(0));
        if (!out) break;
        if (out->finished) {
          c.engine_done = true;
          ctx_.metrics->Observe(out->metrics);
        }
      }
      waiting = waiting || (c.channel && !c.engine_done);
    }
    const auto now = std::chrono::steady_clock::now();
    if (!waiting || now >= deadline) return;
    seen = ctx_.backend->WaitForOutputs(
        seen, std::min(kWakeInterval, std::chrono::duration_cast<std::chrono::milliseconds>(
                                          deadline - now)));
  }
}

UsageInfo CompletionHandler::Usage() const {
  UsageInfo u;
  for (size_t i = 0; i < choices_.size(); ++i) {
    const Choice& c = choices_[i];
    if (i % request_.n == 0) {  // the prompt counts once, not once per choice
      u.prompt_tokens += (int64_t)c.prompt_ids.size();
      u.cached_tokens += c.cached_tokens;
    }
    u.completion_tokens += c.completion_tokens;
    u.evicted_tokens += c.evicted_tokens;
  }
  return u;
}

std::string CompletionHandler::FinishReasons() const {
  std::string out;
  for (const Choice& c : choices_) {
    if (c.finish_reason.empty()) continue;
    const bool seen = ("," + out + ",").find("," + c.finish_reason + ",") != std::string::npos;
    if (!seen) out += (out.empty() ? "" : ",") + c.finish_reason;
  }
  return out;
}

ResponseMeta CompletionHandler::Meta() const { return {id_, created_, ctx_.model_name}; }

void CompletionHandler::SendFinalResponse() {
  std::vector<ChoiceResult> results;
  for (Choice& c : choices_) {
    std::string text = request_.echo ? c.echo_text + c.text : c.text;
    results.push_back(
        {c.index, std::move(text), c.finish_reason, request_.logprobs >= 0, std::move(c.logprobs)});
    results.back().tool_calls = c.tool_calls;
  }
  const std::string body = is_chat() ? ChatCompletionJson(Meta(), results, Usage())
                                     : CompletionJson(Meta(), results, Usage());
  exchange_->Respond(200, "application/json", body);
}

std::optional<ApiError> CompletionHandler::Run() {
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::string> echo_texts;
  if (auto e = BuildPrompts(&prompts, &echo_texts)) return e;
  if (auto e = Submit(prompts, echo_texts)) return e;
  if (request_.stream) {
    if (!SendStreamStart() || !Pump(true)) {
      AbortUnfinished();
      return std::nullopt;
    }
    if (request_.include_usage) exchange_->SendEvent(UsageChunkJson(Meta(), is_chat(), Usage()));
    exchange_->SendEvent("[DONE]");
    exchange_->EndEventStream();
  } else {
    if (!Pump(false)) {
      AbortUnfinished();
      return std::nullopt;
    }
    SendFinalResponse();
  }
  DrainForMetrics();
  return std::nullopt;
}

}  // namespace tern
