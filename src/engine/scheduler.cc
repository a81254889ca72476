#include "engine/scheduler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/check.h"
#include "spec/step_calibration.h"

namespace tern {

Scheduler::Scheduler(const SchedulerConfig& config, std::unique_ptr<KvCacheManager> kv)
    : config_(config),
      kv_(std::move(kv)),
      cost_model_(config.fixed_step_cost),
      decode_cost_model_(config.fixed_step_cost) {
  CHECK_GT(config_.max_num_seqs, 0);
  CHECK_GT(config_.max_num_batched_tokens, 0);
  CHECK_GT(config_.max_model_len, 0);
  if (config_.max_num_partial_prefills < 1) config_.max_num_partial_prefills = 1;
  CHECK_GE(config_.max_prefill_tokens_while_decoding, 0);
  CHECK_GE(config_.target_itl_s, 0);
  CHECK_GE(config_.target_itl_factor, 1);
  // Whole prompts only: the budget must hold the longest sequence.
  if (!config_.enable_chunked_prefill) {
    config_.max_num_batched_tokens =
        std::max(config_.max_num_batched_tokens, config_.max_model_len);
  }
}

void Scheduler::AddRequest(std::unique_ptr<Request> request) {
  CHECK(!request->id().empty());
  CHECK(requests_.count(request->id()) == 0);
  Request* r = request.get();
  r->spec_k = config_.num_spec_tokens;
  requests_.emplace(r->id(), std::move(request));
  waiting_.push_back(r);
}

SchedulerOutput Scheduler::Schedule(Clock::time_point now) {
  SchedulerOutput out = SchedulePolicy(now);
  out.kv_moves = kv_->TakeKvMoves();  // streaming eviction: before the forward pass
  return out;
}

SchedulerOutput Scheduler::SchedulePolicy(Clock::time_point now) {
  PlanSpeculation();
  if (config_.policy == SchedulingPolicy::kGoodput && config_.enable_chunked_prefill) {
    return ScheduleGoodput(now);
  }
  SchedulerOutput out;
  StepState step;
  step.budget = config_.max_num_batched_tokens;
  int32_t num_decodes = 0;
  for (const Request* r : running_) num_decodes += r->num_tokens() - r->num_computed_tokens == 1;
  step.prefill_cap = PrefillCap(num_decodes);
  step.prefill_budget = step.prefill_cap;
  step.protect_decodes = step.prefill_cap < step.budget;
  ScheduleRunning(step, out);
  if (!step.preempted) ScheduleWaiting(step, out, now);
  out.num_scheduled_tokens = config_.max_num_batched_tokens - step.budget;
  StepShape shape;  // for the step log only
  for (const ScheduledSequence& s : out.sequences) {
    shape += StepShape::Chunk(s.start_position, (int32_t)s.token_ids.size(), s.sample);
  }
  out.predicted_step_s = cost_model_.Predict(shape);
  return out;
}

// ---- goodput policy (rules G1-G4 in the header) ----------------------------------

SchedulerOutput Scheduler::ScheduleGoodput(Clock::time_point now) {
  SchedulerOutput out;
  StepState step;
  step.budget = config_.max_num_batched_tokens;
  StepShape shape, prefill;  // the decodes' and the prompt chunks'
  ScheduleDecodes(step, shape, out);
  const bool decoding = !out.sequences.empty();
  double slack = std::numeric_limits<double>::infinity();
  int32_t prefill_tokens_left = step.budget;
  double decodes_s = 0;  // predicted time of the decode part
  std::vector<PrefillCandidate> cands = PrefillCandidates(step, now);
  if (decoding) {
    decodes_s = PredictDecodes(shape);
    out.target_step_s = config_.target_itl_s > 0
                            ? config_.target_itl_s
                            : config_.target_itl_factor * decodes_s *
                                  QueuePressure((int32_t)out.sequences.size(), cands);
    slack = out.target_step_s - decodes_s;
    if (config_.max_prefill_tokens_while_decoding > 0) {
      prefill_tokens_left = config_.max_prefill_tokens_while_decoding;
    }
  }
  int32_t prompts_in_progress = 0;
  for (const Request* r : running_) prompts_in_progress += r->num_tokens() - r->num_computed_tokens > 1;
  bool admitting = !step.preempted;
  bool first_prompt = true;  // no prompt has a chunk in this step yet
  bool progress_owed = true;  // the first prompt that is not a short new one gets >= 1 token
  // G4a: short new prompts first (their own order kept).
  std::stable_partition(cands.begin(), cands.end(),
                        [](const PrefillCandidate& c) { return IsShortNewPrompt(c); });
  for (PrefillCandidate& c : cands) {
    Request& r = *c.request;
    if (step.budget <= 0 || prefill_tokens_left <= 0) break;
    if (c.waiting && (!admitting || (int32_t)running_.size() >= config_.max_num_seqs)) continue;
    if (!c.waiting && r.status != RequestStatus::kRunning) continue;  // preempted this step
    if (c.waiting && kv_->prefix_caching()) {
      // Again: allocations before this one may have evicted cached blocks.
      c.hit = kv_->FindCachedPrefix(r.BlockHashes(kv_->block_size()), r.token_ids(),
                                    r.cache_salt());
      c.start = c.hit.num_tokens;
      c.remaining = r.num_tokens() - c.start;
    }
    const int32_t limit = std::min({c.remaining, step.budget, prefill_tokens_left});
    // G4a (one that the step's tokens cannot hold whole is chunked as any other).
    const bool is_short = IsShortNewPrompt(c) && limit == c.remaining;
    if (!decoding && first_prompt) {
      // G5: nothing decodes. The first prompt (shortest first) goes whole as
      // far as the budget allows; more prompts join only while the step stays
      // within the larger of that and an efficient step, so that a burst of
      // arrivals gets its first tokens one group after another instead of all
      // at the end of one long step.
      const int32_t efficient = std::min(kEfficientStepTokens, step.budget);
      slack = std::max(MarginalCost(StepShape::Chunk(c.start, limit, limit == c.remaining)),
                       MarginalCost(StepShape::Chunk(c.start, efficient, false)));
    }
    int32_t n = ChunkWithin(c.start, limit, c.remaining, slack);
    if (is_short && n < c.remaining) {
      // G4a: a short new prompt goes whole or waits; the first prompt of a
      // step goes whole beyond the slack.
      if (!first_prompt) continue;
      n = c.remaining;
    }
    if (n == 0 && progress_owed && !is_short) n = std::min(limit, 1);
    if (n == 0) continue;
    const bool partial = n < c.remaining;
    if (partial && c.waiting && prompts_in_progress >= config_.max_num_partial_prefills) continue;
    if (c.waiting) {
      if (!kv_->AllocateSlots(r.id(), c.start, n, c.hit)) {
        admitting = false;  // KV is short: no new prompts this step
        continue;
      }
      Admit(r, c.hit, now);
      prompts_in_progress += partial;
    } else if (!kv_->AllocateSlots(r.id(), c.start, n)) {
      // Preempt only while nothing is scheduled (the victim, the newest
      // running request, must not be in this step); otherwise the decodes
      // preempt in the steps to come, or finish and free blocks.
      if (!out.sequences.empty()) continue;
      const bool fits = AllocateOrPreempt(r, n, out);
      admitting = false;
      if (!fits) continue;
    }
    // A prompt in progress that finishes here frees its partial-prefill slot
    // for a waiting prompt in this same step (the slack is not left unused).
    if (!c.waiting && !partial && c.remaining > 1) --prompts_in_progress;
    const StepShape chunk = StepShape::Chunk(c.start, n, !partial);
    slack -= MarginalCost(chunk);
    prefill += chunk;
    step.budget -= n;
    prefill_tokens_left -= n;
    first_prompt = false;
    if (!is_short) progress_owed = false;
    BuildOutput(r, n, out);
  }
  out.num_scheduled_tokens = config_.max_num_batched_tokens - step.budget;
  out.predicted_step_s = decoding ? decodes_s + MarginalCost(prefill) : cost_model_.Predict(prefill);
  return out;
}

void Scheduler::ScheduleDecodes(StepState& step, StepShape& shape, SchedulerOutput& out) {
  int32_t decodes_left = 0;
  for (const Request* r : running_) decodes_left += r->num_tokens() - r->num_computed_tokens == 1;
  for (size_t i = 0; i < running_.size() && step.budget > 0; ++i) {
    Request& r = *running_[i];
    if (r.num_tokens() - r.num_computed_tokens != 1) continue;
    --decodes_left;
    // Proposals take what the budget has beyond one token per decode.
    const int32_t k = std::max(0, std::min(NumSpecTokens(r), step.budget - 1 - decodes_left));
    int32_t n = 0;
    if (!ScheduleDecode(r, k, out, &n)) {
      step.preempted = true;
      break;  // r itself was preempted: it was the newest
    }
    if (!out.preempted_ids.empty()) step.preempted = true;
    shape += StepShape::Chunk(r.num_computed_tokens, n, true);
    step.budget -= n;
  }
}

int32_t Scheduler::NumSpecTokens(const Request& r) const {
  if (config_.num_spec_tokens <= 0 || r.sampling().constraint) return 0;
  // Emitted tokens (k + 1 at most) stay within max_tokens; positions within
  // max_model_len.
  const int32_t k = std::min({r.spec_k, r.sampling().max_tokens - r.num_output_tokens() - 1,
                              config_.max_model_len - r.num_tokens()});
  return std::max(k, 0);
}

int32_t Scheduler::BestSpecTokens(double alpha, int32_t max_k, double batch, double step_s,
                                  double verify_s, double propose_s) {
  int32_t best = 0;
  double best_rate = batch / step_s;
  double expected = 1;  // E(k): tokens a step emits with k proposals
  double term = 1;
  for (int32_t k = 1; k <= max_k; ++k) {
    term *= alpha;
    expected += term;
    const double rate = (batch - 1 + expected) / (step_s + k * (verify_s + propose_s));
    if (rate > best_rate) {
      best_rate = rate;
      best = k;
    }
  }
  return best;
}

double Scheduler::SpecAcceptance(const Request& r) const {
  const uint64_t acc = stats_.spec_num_accepted_tokens_total;
  const uint64_t rej = stats_.spec_num_rejections_total;
  // Engine-wide per-proposal acceptance; before any, 1 (speculate to measure).
  const double prior = acc + rej > 0 ? (double)acc / (double)(acc + rej) : 1.0;
  return (r.spec_accepted_w + kSpecPriorSteps * prior) /
         (r.spec_accepted_w + r.spec_rejected_w + kSpecPriorSteps);
}

void Scheduler::ObserveProposeTime(int64_t num_proposals, double seconds) {
  if (num_proposals <= 0) return;
  const double per = seconds / (double)num_proposals;
  propose_s_per_token_ = propose_s_per_token_ == 0 ? per : 0.9 * propose_s_per_token_ + 0.1 * per;
}

void Scheduler::PlanSpeculation() {
  if (config_.num_spec_tokens <= 0 || !config_.spec_adaptive) return;
  StepShape decodes;
  int32_t batch = 0;
  int64_t positions = 0;
  for (const Request* r : running_) {
    if (r->num_tokens() - r->num_computed_tokens != 1) continue;
    decodes += StepShape::Chunk(r->num_computed_tokens, 1, true);
    positions += r->num_computed_tokens;
    ++batch;
  }
  if (batch == 0) return;
  const int32_t max_k = config_.num_spec_tokens;
  // Requests are planned in order; each sees the step as the ones before
  // left it: tokens scheduled so far, tokens their proposals should add.
  int32_t tokens = batch;
  int32_t proposals = 0;
  double gain = 0;
  for (Request* r : running_) {
    if (r->num_tokens() - r->num_computed_tokens != 1) continue;
    double step_s, verify_s;
    if (!config_.spec_step_times.empty()) {
      // The measured forward time of the step's tokens, and the mean cost of
      // the next max_k tokens on that curve.
      step_s = InterpolateStepTime(config_.spec_step_times, tokens);
      verify_s = (InterpolateStepTime(config_.spec_step_times, tokens + max_k) - step_s) / max_k;
    } else {
      // The step-cost model: what one more verified token (a token and its
      // logits row, at the batch's mean depth) adds.
      StepShape now = decodes;
      now.num_tokens += tokens - batch;
      now.num_sampled += tokens - batch;
      step_s = cost_model_.Predict(now);
      StepShape more = now;
      more += StepShape::Chunk((int32_t)(positions / batch), 1, true);
      verify_s = cost_model_.Predict(more) - step_s;
    }
    step_s += proposals * propose_s_per_token_;
    const double alpha = SpecAcceptance(*r);
    const int32_t k = BestSpecTokens(alpha, max_k, batch + gain, step_s, verify_s,
                                     propose_s_per_token_);
    r->spec_k = k;
    tokens += k;
    proposals += k;
    double term = 1;
    for (int32_t i = 1; i <= k; ++i) gain += (term *= alpha);
  }
}

bool Scheduler::ScheduleDecode(Request& r, int32_t k, SchedulerOutput& out,
                               int32_t* num_tokens) {
  CHECK_GE(k, 0);
  if (k > 0 && !kv_->AllocateSlots(r.id(), r.num_computed_tokens, 1 + k)) k = 0;
  if (k == 0 && !AllocateOrPreempt(r, 1, out)) return false;
  *num_tokens = 1 + k;
  BuildOutput(r, 1, out, k);
  return true;
}

std::vector<Scheduler::PrefillCandidate> Scheduler::PrefillCandidates(
    const StepState& step, Clock::time_point now) const {
  std::vector<PrefillCandidate> cands;
  for (Request* r : running_) {
    const int32_t remaining = r->num_tokens() - r->num_computed_tokens;
    if (remaining > 1) cands.push_back({r, false, {}, r->num_computed_tokens, remaining, 0});
  }
  if (!step.preempted) {
    const size_t n = std::min<size_t>(waiting_.size(), kMaxWaitingCandidates);
    for (size_t i = 0; i < n; ++i) {
      Request* r = waiting_[i];
      PrefillCandidate c{r, true, {}, 0, 0, 0};
      if (kv_->prefix_caching()) {
        c.hit = kv_->FindCachedPrefix(r->BlockHashes(kv_->block_size()), r->token_ids(),
                                      r->cache_salt());
      }
      c.start = c.hit.num_tokens;
      c.remaining = r->num_tokens() - c.start;
      cands.push_back(std::move(c));
    }
  }
  for (PrefillCandidate& c : cands) {
    const double waited_s = std::chrono::duration<double>(now - c.request->arrival()).count();
    c.key = MarginalCost(StepShape::Chunk(c.start, c.remaining, true)) -
            kAgingPerWaitedSecond * std::max(0.0, waited_s);
  }
  // Stable: equal keys keep running-then-arrival order.
  std::stable_sort(cands.begin(), cands.end(),
                   [](const PrefillCandidate& a, const PrefillCandidate& b) { return a.key < b.key; });
  return cands;
}

double Scheduler::QueuePressure(int32_t num_decodes,
                                const std::vector<PrefillCandidate>& cands) const {
  int32_t prompts = (int32_t)waiting_.size();
  for (const Request* r : running_) prompts += r->num_tokens() - r->num_computed_tokens > 1;
  for (const PrefillCandidate& c : cands) prompts -= IsShortNewPrompt(c);
  if (num_decodes <= 0) return 1;
  return std::clamp((double)prompts / num_decodes, 1.0, kMaxQueuePressure);
}

double Scheduler::MarginalCost(const StepShape& chunk) const {
  return cost_model_.Predict(chunk) - cost_model_.Predict(StepShape{});
}

int32_t Scheduler::ChunkWithin(int32_t start, int32_t limit, int32_t remaining,
                               double slack) const {
  if (limit <= 0) return 0;
  if (std::isinf(slack)) return limit;
  slack += 1e-12;  // a picosecond of rounding
  auto fits = [&](int32_t n) {
    return MarginalCost(StepShape::Chunk(start, n, n == remaining)) <= slack;
  };
  // Cost grows with n except for the sampled row at n == remaining: search
  // without it, then check the last step.
  int32_t lo = 0, hi = limit;
  while (lo < hi) {
    const int32_t mid = lo + (hi - lo + 1) / 2;
    if (MarginalCost(StepShape::Chunk(start, mid, false)) <= slack) lo = mid;
    else hi = mid - 1;
  }
  if (lo == remaining && !fits(lo)) --lo;
  return lo;
}

double Scheduler::PredictDecodes(const StepShape& shape) const {
  if (decode_cost_model_.num_observations() == 0) return cost_model_.Predict(shape);
  if (shape.num_tokens <= decode_seen_tokens_) return decode_cost_model_.Predict(shape);
  // More decodes than any decode-only step measured: the decode model's
  // slope there is its prior's guess (a few 1-decode steps say nothing of
  // what each further token costs; on 2 cores it guessed 23 ms for 7 decodes
  // that took 42). So: the largest measured decode-only step, plus the
  // marginal cost of the other tokens by the model of every step.
  const double f = (double)decode_seen_tokens_ / shape.num_tokens;
  StepShape seen;
  seen.num_tokens = decode_seen_tokens_;
  seen.num_sampled = (int32_t)std::lround(shape.num_sampled * f);
  seen.attended_positions = (int64_t)std::llround((double)shape.attended_positions * f);
  return decode_cost_model_.Predict(seen) + cost_model_.Predict(shape) - cost_model_.Predict(seen);
}

void Scheduler::ObserveStepTime(const SchedulerOutput& scheduled, double seconds) {
  StepShape shape;
  bool decode_only = true;
  for (const ScheduledSequence& s : scheduled.sequences) {
    shape += StepShape::Chunk(s.start_position, (int32_t)s.token_ids.size(), s.sample);
    shape.num_sampled += s.num_spec_tokens;  // a logits row per proposal
    decode_only = decode_only && s.token_ids.size() == 1;
  }
  cost_model_.Observe(shape, seconds);
  if (decode_only) {
    decode_cost_model_.Observe(shape, seconds);
    decode_seen_tokens_ = std::max(decode_seen_tokens_, shape.num_tokens);
  }
}

// ---- decode-protect policy ---------------------------------------------------------

int32_t Scheduler::PrefillCap(int32_t num_decodes) const {
  const int32_t budget = config_.max_num_batched_tokens;
  if (!config_.enable_chunked_prefill || num_decodes == 0) return budget;
  const int32_t automatic =
      kAutoPrefillTokensPerDecode * std::max(num_decodes, kAutoPrefillDecodeFloor);
  const int32_t cap = config_.max_prefill_tokens_while_decoding > 0
                          ? config_.max_prefill_tokens_while_decoding
                          : automatic;
  return std::min(cap, budget);
}

int32_t Scheduler::PrefillChunkCap(const StepState& step, int32_t start_position) const {
  const int32_t n = config_.max_num_partial_prefills;
  const int32_t share = n <= 1 ? step.prefill_cap : std::max(1, (step.prefill_cap + n - 1) / n);
  const int32_t units = std::min(share, step.prefill_budget);
  const int64_t depth = config_.attention_cost_context_tokens;
  if (units <= 0 || !step.protect_decodes || depth <= 0) return std::max(units, 0);
  // Tokens whose cost (1 + start / depth each) fits the units; at least one.
  return (int32_t)std::max<int64_t>(1, units * depth / (depth + start_position));
}

int32_t Scheduler::PrefillCost(const StepState& step, int32_t start_position,
                               int32_t num_tokens) const {
  const int64_t depth = config_.attention_cost_context_tokens;
  if (!step.protect_decodes || depth <= 0) return num_tokens;
  const int64_t cost = ((int64_t)num_tokens * (depth + start_position) + depth - 1) / depth;
  return (int32_t)std::min<int64_t>(cost, config_.max_num_batched_tokens);
}

int32_t Scheduler::RunningChunk(const Request& r, const StepState& step,
                                int32_t reserved) const {
  const int32_t remaining = r.num_tokens() - r.num_computed_tokens;
  if (remaining <= 0) return 0;
  if (remaining == 1) return step.budget > 0 ? 1 : 0;
  if (!config_.enable_chunked_prefill) return remaining <= step.budget ? remaining : 0;
  // Leave one token for each decode behind this request.
  const int32_t chunk = std::min(
      {remaining, step.budget - reserved, PrefillChunkCap(step, r.num_computed_tokens)});
  if (chunk <= 0) return 0;
  if (chunk < remaining && step.num_partial_prefills >= config_.max_num_partial_prefills) {
    return 0;
  }
  return chunk;
}

void Scheduler::ScheduleRunning(StepState& step, SchedulerOutput& out) {
  int32_t decodes_left = 0;
  for (const Request* r : running_) decodes_left += r->num_tokens() - r->num_computed_tokens == 1;
  for (size_t i = 0; i < running_.size() && step.budget > 0; ++i) {
    Request& r = *running_[i];
    const bool is_decode = r.num_tokens() - r.num_computed_tokens == 1;
    if (is_decode) --decodes_left;
    const int32_t num_new = RunningChunk(r, step, decodes_left);
    if (num_new == 0) continue;
    if (is_decode) {
      const int32_t k = std::max(0, std::min(NumSpecTokens(r), step.budget - 1 - decodes_left));
      int32_t n = 0;
      if (!ScheduleDecode(r, k, out, &n)) {
        step.preempted = true;
        break;
      }
      if (!out.preempted_ids.empty()) step.preempted = true;
      step.budget -= n;
      continue;
    }
    if (!AllocateOrPreempt(r, num_new, out)) {
      step.preempted = true;
      break;  // r itself was preempted: it was the newest
    }
    if (!out.preempted_ids.empty()) step.preempted = true;
    if (r.num_computed_tokens + num_new < r.num_tokens()) ++step.num_partial_prefills;
    if (!is_decode) step.prefill_budget -= PrefillCost(step, r.num_computed_tokens, num_new);
    step.budget -= num_new;
    BuildOutput(r, num_new, out);
  }
}

bool Scheduler::AllocateOrPreempt(Request& r, int32_t num_new_tokens, SchedulerOutput& out) {
  while (!kv_->AllocateSlots(r.id(), r.num_computed_tokens, num_new_tokens)) {
    // Newest running request goes; it has not been scheduled this step
    // (running is walked oldest first), unless it is r.
    Request& victim = *running_.back();
    Preempt(victim, out);
    if (&victim == &r) return false;
  }
  return true;
}

void Scheduler::Preempt(Request& r, SchedulerOutput& out) {
  CHECK(running_.back() == &r);
  running_.pop_back();
  kv_->Free(r.id());
  r.num_computed_tokens = 0;
  r.status = RequestStatus::kPreempted;
  ++r.num_preemptions;
  ++stats_.num_preemptions_total;
  waiting_.push_front(&r);
  out.preempted_ids.push_back(r.id());
}

void Scheduler::ScheduleWaiting(StepState& step, SchedulerOutput& out, Clock::time_point now) {
  while (!waiting_.empty() && step.budget > 0 &&
         (int32_t)running_.size() < config_.max_num_seqs) {
    Request& r = *waiting_.front();
    PrefixHit hit;
    if (kv_->prefix_caching()) {
      hit = kv_->FindCachedPrefix(r.BlockHashes(kv_->block_size()), r.token_ids(),
                                  r.cache_salt());
    }
    const int32_t remaining = r.num_tokens() - hit.num_tokens;
    int32_t num_new = remaining;
    if (num_new > step.budget) {
      if (!config_.enable_chunked_prefill) break;
      num_new = step.budget;
    }
    if (config_.enable_chunked_prefill) {
      num_new = std::min(num_new, PrefillChunkCap(step, hit.num_tokens));
    }
    if (num_new <= 0) break;
    const bool partial = num_new < remaining;
    if (partial && step.num_partial_prefills >= config_.max_num_partial_prefills) break;
    if (!kv_->AllocateSlots(r.id(), hit.num_tokens, num_new, hit)) break;

    Admit(r, hit, now);
    if (partial) ++step.num_partial_prefills;
    step.prefill_budget -= PrefillCost(step, hit.num_tokens, num_new);
    step.budget -= num_new;
    BuildOutput(r, num_new, out);
  }
}

void Scheduler::Admit(Request& r, const PrefixHit& hit, Clock::time_point now) {
  waiting_.erase(std::find(waiting_.begin(), waiting_.end(), &r));
  r.num_computed_tokens = hit.num_tokens;
  if (kv_->prefix_caching()) {
    stats_.prefix_cache_queries_total += r.num_tokens();
    stats_.prefix_cache_hits_total += hit.num_tokens;
  }
  if (r.num_cached_tokens < 0) {
    r.num_cached_tokens = hit.num_tokens;
    // All prompt tokens, cached or not (as the usage the client sees).
    stats_.prompt_tokens_total += r.num_prompt_tokens();
  }
  if (!r.scheduled_once) {
    r.scheduled_once = true;
    r.first_scheduled = now;
  }
  r.status = RequestStatus::kRunning;
  running_.push_back(&r);
}

void Scheduler::BuildOutput(Request& r, int32_t num_new_tokens, SchedulerOutput& out,
                            int32_t max_spec_tokens) const {
  ScheduledSequence s;
  s.request_id = r.id();
  s.token_ids = r.token_ids().subspan(r.num_computed_tokens, num_new_tokens);
  s.start_position = KvPosition(r);
  s.block_table = kv_->BlockTable(r.id());
  s.window_block_table = kv_->WindowBlockTable(r.id());
  s.sample = r.num_computed_tokens + num_new_tokens == r.num_tokens();
  if (s.sample) {
    s.sampling = &r.sampling();
    s.rng = &r.rng();
    s.history = r.output_token_ids();
    s.constraint = r.constraint();
  }
  if (max_spec_tokens > 0) {
    CHECK(s.sample && num_new_tokens == 1);
    s.max_spec_tokens = max_spec_tokens;
    s.context = r.token_ids();
    s.num_prompt_tokens = r.num_prompt_tokens();
    r.spec_input.assign(s.token_ids.begin(), s.token_ids.end());
    r.spec_q.clear();
    s.spec_input = &r.spec_input;
    s.spec_q = &r.spec_q;
    s.draft_rng = &r.draft_rng();
  }
  out.sequences.push_back(std::move(s));
}

std::vector<RequestDelta> Scheduler::UpdateFromOutput(const SchedulerOutput& scheduled,
                                                      const ModelRunnerOutput& result,
                                                      Clock::time_point now) {
  CHECK_EQ(scheduled.sequences.size(), result.sampled.size());
  ++stats_.num_steps_total;
  std::vector<RequestDelta> deltas;
  for (size_t k = 0; k < scheduled.sequences.size(); ++k) {
    const ScheduledSequence& s = scheduled.sequences[k];
    auto it = requests_.find(s.request_id);
    CHECK(it != requests_.end());
    Request& r = *it->second;
    if (s.max_spec_tokens > 0) {
      const FinishReason reason = ApplySpeculative(r, s, result.sampled[k], now);
      if (reason != FinishReason::kNone) Finish(r, reason);
      deltas.push_back(TakeDelta(r, now));
      if (reason != FinishReason::kNone) requests_.erase(it);
      continue;
    }
    r.num_computed_tokens += (int32_t)s.token_ids.size();
    if (kv_->prefix_caching()) {
      kv_->CommitFullBlocks(r.id(), r.BlockHashes(kv_->block_size()), r.token_ids(),
                            r.num_computed_tokens, r.cache_salt());
    }
    if (!s.sample) continue;
    const SampledOutput& sampled = result.sampled[k];
    CHECK_GE(sampled.token_id, 0);
    AppendSampled(r, sampled.token_id, &sampled.logprob, now, false);
    FinishReason reason = CheckStop(r, sampled.token_id);
    if (reason == FinishReason::kNone) reason = AppendForced(r, sampled.forced_token_ids);
    // A structured output that completed on its last allowed token stopped, not ran out.
    if (reason == FinishReason::kLength && r.constraint() && r.constraint()->IsComplete()) {
      reason = FinishReason::kStop;
    }
    if (reason != FinishReason::kNone) Finish(r, reason);
    deltas.push_back(TakeDelta(r, now));
    if (reason != FinishReason::kNone) requests_.erase(it);
  }
  return deltas;
}

void Scheduler::AppendSampled(Request& r, int32_t token, const TokenLogprob* logprob,
                              Clock::time_point now, bool same_step) {
  r.AppendToken(token);
  ++stats_.generation_tokens_total;
  if (r.num_output_tokens() == 1) {
    r.first_token = now;
  } else {
    // A token verified in the same step as the one before arrives with it.
    r.itl_s.push_back(same_step ? 0.0 : std::chrono::duration<double>(now - r.last_token).count());
  }
  r.last_token = now;
  if (r.sampling().logprobs >= 0) r.pending_logprobs.push_back(logprob ? *logprob : TokenLogprob{});
}

FinishReason Scheduler::ApplySpeculative(Request& r, const ScheduledSequence& s,
                                         const SampledOutput& sampled, Clock::time_point now) {
  CHECK_GE(sampled.token_id, 0);
  const int32_t k = s.num_spec_tokens;
  const int32_t a = sampled.num_accepted;
  CHECK_LE(a, k);
  CHECK_EQ((int32_t)sampled.spec_token_ids.size(), a);
  // KV is exact for the last token and the accepted proposals.
  r.num_computed_tokens += 1 + a;
  if (k > 0) {
    ++r.spec_num_drafts;
    r.spec_num_draft_tokens += k;
    r.spec_num_accepted_tokens += a;
    ++stats_.spec_num_drafts_total;
    stats_.spec_num_draft_tokens_total += k;
    stats_.spec_num_accepted_tokens_total += a;
    if ((int32_t)stats_.spec_accepted_per_position.size() < k) {
      stats_.spec_accepted_per_position.resize(k, 0);
    }
    for (int32_t i = 0; i < a; ++i) ++stats_.spec_accepted_per_position[i];
    // A step is a run of acceptances ended by at most one rejection.
    const bool rejected = a < k;
    stats_.spec_num_rejections_total += rejected;
    r.spec_accepted_w = kSpecAcceptanceDecay * r.spec_accepted_w + a;
    r.spec_rejected_w = kSpecAcceptanceDecay * r.spec_rejected_w + (rejected ? 1 : 0);
  }
  FinishReason reason = FinishReason::kNone;
  for (int32_t i = 0; i <= a && reason == FinishReason::kNone; ++i) {
    const int32_t token = i == 0 ? sampled.token_id : sampled.spec_token_ids[i - 1];
    const TokenLogprob* lp = nullptr;
    if (r.sampling().logprobs >= 0) lp = i == 0 ? &sampled.logprob : &sampled.spec_logprobs[i - 1];
    AppendSampled(r, token, lp, now, i > 0);
    reason = CheckStop(r, token);
  }
  // Rejected positions: their slots go back; only computed, accepted blocks
  // enter the prefix cache.
  r.num_computed_tokens = std::min(r.num_computed_tokens, r.num_tokens());
  stats_.spec_rollback_blocks_total += kv_->TruncateTo(r.id(), r.num_computed_tokens);
  if (kv_->prefix_caching()) {
    kv_->CommitFullBlocks(r.id(), r.BlockHashes(kv_->block_size()), r.token_ids(),
                          r.num_computed_tokens, r.cache_salt());
  }
  return reason;
}

// Jump-forward tokens follow the sampled one; each is checked like it.
FinishReason Scheduler::AppendForced(Request& r, std::span<const int32_t> forced) {
  FinishReason reason = FinishReason::kNone;
  for (int32_t token : forced) {
    r.AppendToken(token);
    ++r.num_forced_tokens;
    ++stats_.generation_tokens_total;
    ++stats_.forced_tokens_total;
    r.itl_s.push_back(0);
    // A forced token has probability 1 under the constraint (and is its
    // own only alternative).
    if (r.sampling().logprobs >= 0) {
      TokenLogprob lp{token, 0.0f, {}};
      if (r.sampling().logprobs > 0) lp.top.emplace_back(token, 0.0f);
      r.pending_logprobs.push_back(std::move(lp));
    }
    reason = CheckStop(r, token);
    if (reason != FinishReason::kNone) return reason;
  }
  if (r.constraint() && r.constraint()->IsComplete()) reason = FinishReason::kStop;
  return reason;
}

FinishReason Scheduler::CheckStop(const Request& r, int32_t token) const {
  const SamplingParams& p = r.sampling();
  if (!p.ignore_eos && std::find(config_.eog_token_ids.begin(), config_.eog_token_ids.end(),
                                 token) != config_.eog_token_ids.end()) {
    return FinishReason::kStop;
  }
  if (std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), token) !=
      p.stop_token_ids.end()) {
    return FinishReason::kStop;
  }
  if (r.num_output_tokens() >= p.max_tokens ||
      (!kv_->streaming_eviction() && r.num_tokens() >= config_.max_model_len)) {
    return FinishReason::kLength;
  }
  return FinishReason::kNone;
}

void Scheduler::Finish(Request& r, FinishReason reason) {
  if (r.status == RequestStatus::kRunning) {
    running_.erase(std::find(running_.begin(), running_.end(), &r));
  } else {
    waiting_.erase(std::find(waiting_.begin(), waiting_.end(), &r));
  }
  r.num_evicted_tokens = kv_->EvictedTokens(r.id());
  kv_->Free(r.id());
  r.status = RequestStatus::kFinished;
  r.finish_reason = reason;
  ++stats_.request_success_total[FinishReasonName(reason)];
}

RequestDelta Scheduler::TakeDelta(Request& r, Clock::time_point now) {
  RequestDelta d;
  d.request_id = r.id();
  std::span<const int32_t> out = r.output_token_ids();
  d.output.new_token_ids.assign(out.begin() + r.num_sent_tokens, out.end());
  r.num_sent_tokens = (int32_t)out.size();
  d.output.logprobs = std::move(r.pending_logprobs);
  r.pending_logprobs.clear();
  if (r.status == RequestStatus::kFinished) {
    d.output.finished = true;
    d.output.finish_reason = r.finish_reason;
    d.output.metrics = r.Metrics(now);
  }
  return d;
}

std::optional<RequestDelta> Scheduler::FinishRequest(const std::string& request_id,
                                                     FinishReason reason,
                                                     Clock::time_point now) {
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return std::nullopt;
  Request& r = *it->second;
  Finish(r, reason);
  RequestDelta d = TakeDelta(r, now);
  requests_.erase(it);
  return d;
}

int32_t Scheduler::KvPosition(const Request& r) const {
  return r.num_computed_tokens - kv_->EvictedTokens(r.id());
}

void Scheduler::CheckInvariants() const {
  kv_->CheckInvariants();
  CHECK_LE((int32_t)running_.size(), config_.max_num_seqs);
  CHECK_EQ(running_.size() + waiting_.size(), requests_.size());
  CHECK_EQ(kv_->num_requests(), (int32_t)running_.size());
  for (const Request* r : running_) {
    CHECK(r->status == RequestStatus::kRunning);
    const int64_t covered = (int64_t)kv_->BlockTable(r->id()).size() * kv_->block_size();
    CHECK_GE(covered, KvPosition(*r));
    CHECK_LE(r->num_computed_tokens, r->num_tokens());
  }
  for (const Request* r : waiting_) {
    CHECK(r->status == RequestStatus::kWaiting || r->status == RequestStatus::kPreempted);
    CHECK_EQ(r->num_computed_tokens, 0);
    CHECK(kv_->BlockTable(r->id()).empty());
  }
}

}  // namespace tern
