#include "tools/doctor_diagnosis.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <unordered_set>

#include "base/progress.h"
#include "kv/block_hash.h"
#include "kv/kv_config.h"
#include "tools/kv_dtype_flags.h"
#include "tools/report_text.h"

namespace tern {
namespace {


std::string Bytes(int64_t b) { return FormatBytes((double)b); }

int64_t RoundUp(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

DType KvDtype(const std::string& dtype) {
  StatusOr<DType> t = ParseKvDtype("--kv-cache-dtype", dtype);
  return t.ok() ? *t : DType::kF16;
}

double KvBytesPerElem(const std::string& dtype) { return KvBytesPerElement(KvDtype(dtype)); }

// Fits t(B) = a + b B through the batch-1 and batch-N decode measurements.
void FitDecodeStep(const ModelFigures& m, Diagnosis* d) {
  const double t1 = m.tg_tps > 0 ? 1.0 / m.tg_tps : 0;
  if (m.batch > 1 && m.batch_tg_tps > 0) {
    const double tn = (double)m.batch / m.batch_tg_tps;
    d->step_b_s = std::max(0.0, (tn - t1) / (double)(m.batch - 1));
  }
  d->step_a_s = std::max(0.0, t1 - d->step_b_s);
}

void AddFlag(Diagnosis* d, const std::string& flag, const std::string& value,
             const std::string& why) {
  d->flags.push_back({flag, value, why});
}

void DecideObjectives(const ModelFigures& m, const WorkloadProfile& w, const DoctorOptions& o,
                      Diagnosis* d) {
  const double t1_ms = 1e3 * DecodeStepSeconds(*d, 1);
  const double pp_p95_tps = m.pp_long_tps > 0 ? m.pp_long_tps : m.pp_tps;
  const double prefill_p95_ms = pp_p95_tps > 0 ? 1e3 * w.prompt.p95 / pp_p95_tps : 0;
  d->slo_tpot_ms = o.slo_tpot_ms > 0 ? o.slo_tpot_ms : std::max(50.0, 2 * t1_ms);
  d->slo_ttft_ms = o.slo_ttft_ms > 0 ? o.slo_ttft_ms : std::max(1000.0, 4 * prefill_p95_ms);
  const double prefill_mean_ms = m.pp_tps > 0 ? 1e3 * w.prompt.mean * (1 - w.shared_prefix_share) / m.pp_tps : 0;
  const double arrivals = o.request_rate > 0 ? 1.0 : std::min<double>(o.concurrency, w.num_requests);
  d->ttft_estimate_ms = prefill_mean_ms * (arrivals + 1) / 2;
  d->ttft_tail_ms = prefill_mean_ms * arrivals;
  Finding f{"objectives",
            Fmt("service objectives: TTFT <= %.0f ms, TPOT <= %.1f ms", d->slo_ttft_ms,
                d->slo_tpot_ms),
            {}};
  if (o.slo_tpot_ms <= 0) {
    f.details.push_back(Fmt("TPOT bound derived: max(50 ms, 2 x the batch-1 decode step %.2f ms); "
                            "give --slo-tpot-ms to set yours",
                            t1_ms));
  }
  if (o.slo_ttft_ms <= 0) {
    f.details.push_back(Fmt("TTFT bound derived: max(1 s, 4 x the p95 prompt's prefill %.0f ms); "
                            "give --slo-ttft-ms to set yours",
                            prefill_p95_ms));
  }
  f.details.push_back(
      Fmt("predicted median TTFT from prefill alone: %.0f ms (%.0f arrivals at once x mean prompt "
          "prefill %.1f ms / 2)",
          d->ttft_estimate_ms, arrivals, prefill_mean_ms) +
      (d->ttft_estimate_ms > d->slo_ttft_ms ? ": the TTFT bound cannot hold at this concurrency; "
                                              "fewer requests at once or faster prefill"
                                            : ""));
  d->findings.push_back(std::move(f));
}

void DecideMemory(const MachineFigures& mc, const ModelFigures& m, const WorkloadProfile& w,
                  const DoctorOptions& o, Diagnosis* d) {
  const int64_t total_p95 = (int64_t)std::ceil(w.total.p95);
  d->kv_budget_bytes =
      o.kv_budget_bytes > 0
          ? o.kv_budget_bytes
          : (int64_t)(o.memory_utilization *
                      (double)std::max<int64_t>(0, mc.mem_available_bytes - m.weight_bytes));
  // f16 (full quality) unless it does not fit and this build has a smaller KV dtype.
  std::vector<std::string> dtypes = o.kv_dtypes;
  std::sort(dtypes.begin(), dtypes.end(), [](const std::string& a, const std::string& b) {
    return KvBytesPerElem(a) > KvBytesPerElem(b);
  });
  auto plan = [&](const std::string& dtype) {
    d->kv_dtype = dtype;
    const DType t = KvDtype(dtype);
    d->kv_bytes_per_token = KvBytesPerToken(m.n_layer, m.n_head_kv, m.head_dim, t, t);
    d->kv_bytes_per_request = d->kv_bytes_per_token * total_p95;
    d->kv_needed_bytes = d->kv_bytes_per_request * o.concurrency;
    d->fit_concurrency =
        d->kv_bytes_per_request > 0 ? d->kv_budget_bytes / d->kv_bytes_per_request : 0;
    d->capacity_limited = d->kv_needed_bytes > d->kv_budget_bytes;
  };
  plan("f16");
  for (const std::string& t : dtypes) {
    if (!d->capacity_limited || KvBytesPerElem(t) >= 2) continue;
    plan(t);
  }

  Finding f;
  f.topic = "memory";
  const std::string formula = Fmt(
      "KV per request = KV bytes/token %.0f x p95(prompt + output) %.0f tokens", (double)d->kv_bytes_per_token,
      (double)total_p95) + " = " + Bytes(d->kv_bytes_per_request) + " (" + d->kv_dtype +
      "; bytes/token = 2 x layers x kv_heads x head_dim x bytes/elem)";
  f.details.push_back(formula);
  f.details.push_back(Fmt("KV needed = concurrency %.0f x KV per request = ", o.concurrency) +
                      Bytes(d->kv_needed_bytes) + "; KV budget " + Bytes(d->kv_budget_bytes) +
                      (o.kv_budget_bytes > 0
                           ? " (--kv-cache-memory)"
                           : Fmt(" (%.2f x (free memory - weights))", o.memory_utilization)));
  if (d->capacity_limited) {
    f.verdict = Fmt("capacity-limited: %.0f requests of p95 length fit in the KV budget, %.0f wanted",
                    (double)d->fit_concurrency, (double)o.concurrency);
    f.details.push_back("more concurrency needs more KV memory, a smaller KV dtype or shorter "
                        "requests; beyond the fit the engine preempts and recomputes");
  } else {
    // Bandwidth: every decode step streams the weights and each sequence's KV.
    const double mean_depth = w.prompt.mean + w.output.mean / 2;
    const double step_bytes = (double)m.weight_bytes +
                              (double)o.concurrency * (double)d->kv_bytes_per_token * mean_depth;
    const double floor_ms = mc.read_gb_s > 0 ? 1e3 * step_bytes / (mc.read_gb_s * 1e9) : 0;
    f.verdict = Fmt("bandwidth-limited, not capacity: the KV of %.0f requests fits %.0f times over",
                    (double)o.concurrency,
                    d->kv_needed_bytes > 0 ? (double)d->kv_budget_bytes / (double)d->kv_needed_bytes : 0);
    f.details.push_back(Fmt("a decode step at concurrency %.0f streams weights + concurrency x "
                            "KV/token x mean depth %.0f = ",
                            o.concurrency, mean_depth) +
                        Bytes((int64_t)step_bytes) +
                        Fmt(" -> >= %.2f ms per step at %.1f GB/s (memory, not KV size, sets "
                            "the pace)",
                            floor_ms, mc.read_gb_s));
  }
  d->findings.push_back(std::move(f));
}

void DecideBound(const MachineFigures& mc, const ModelFigures& m, const WorkloadProfile& w,
                 Diagnosis* d) {
  d->prefill_roofline_tps =
      m.layer_matmul_params > 0 ? mc.fma_gflops * 1e9 / (2.0 * (double)m.layer_matmul_params) : 0;
  d->prefill_fraction = d->prefill_roofline_tps > 0 ? m.pp_tps / d->prefill_roofline_tps : 0;
  const double tg_bytes =
      (double)m.weight_bytes + (double)d->kv_bytes_per_token * (double)m.tg_depth;
  d->decode_roofline_tps = tg_bytes > 0 ? mc.read_gb_s * 1e9 / tg_bytes : 0;
  d->decode_fraction = d->decode_roofline_tps > 0 ? m.tg_tps / d->decode_roofline_tps : 0;

  const int b = std::max(1, d->max_num_seqs);
  const double hit = w.shared_prefix_share;
  d->prefill_s_per_request = m.pp_tps > 0 ? w.prompt.mean * (1 - hit) / m.pp_tps : 0;
  d->decode_s_per_request = w.output.mean * DecodeStepSeconds(*d, b) / b;
  d->prefill_bound = d->prefill_s_per_request > d->decode_s_per_request;
  const double total = d->prefill_s_per_request + d->decode_s_per_request;
  Finding f;
  f.topic = "bound";
  f.verdict = Fmt(d->prefill_bound ? "prefill-bound: prompts take %.0f%% of the engine's time"
                                   : "decode-bound: generation takes %.0f%% of the engine's time",
                  100 * (d->prefill_bound ? d->prefill_s_per_request : d->decode_s_per_request) /
                      std::max(total, 1e-12));
  f.details.push_back(Fmt("prefill per request: mean prompt %.0f tokens x (1 - prefix hits %.0f%%) "
                          "/ %.0f tok/s = %.2f ms",
                          w.prompt.mean, 100 * hit, m.pp_tps, 1e3 * d->prefill_s_per_request));
  f.details.push_back(Fmt("decode per request: mean output %.0f tokens x step t(B)/B at B = %.0f "
                          "= %.3f ms/token",
                          w.output.mean, b, 1e3 * DecodeStepSeconds(*d, b) / b) +
                      Fmt(" -> %.2f ms", 1e3 * d->decode_s_per_request));
  f.details.push_back(Fmt("prefill: %.0f tok/s at %.0f tokens = %.0f%% of the FMA roofline "
                          "(%.0f GFLOP/s / (2 x ",
                          m.pp_tps, m.pp_tokens, 100 * d->prefill_fraction, mc.fma_gflops) +
                      Fmt("%.1fM params) = %.0f tok/s)", (double)m.layer_matmul_params / 1e6,
                          d->prefill_roofline_tps));
  f.details.push_back(Fmt("decode: %.1f tok/s at depth %.0f = %.0f%% of the bandwidth roofline "
                          "(%.1f GB/s / ",
                          m.tg_tps, m.tg_depth, 100 * d->decode_fraction, mc.read_gb_s) +
                      Bytes((int64_t)tg_bytes) + Fmt(" per token = %.0f tok/s)", d->decode_roofline_tps));
  if (d->decode_fraction > 1.05) {
    f.details.push_back("decode above the bandwidth roofline: the weights fit in the CPU caches, "
                        "so memory bandwidth does not bind this model on this machine");
  }
  f.details.push_back(Fmt("decode step model t(B) = %.3f ms + %.3f ms x B (from batch 1 and batch ",
                          1e3 * d->step_a_s, 1e3 * d->step_b_s) +
                      Fmt("%.0f: %.0f tok/s together)", m.batch, m.batch_tg_tps));
  f.details.push_back(d->prefill_bound
                          ? "so: raise prefix hits (shared prompts first), keep prompts short; "
                            "the decode side has room"
                          : "so: batch more sequences per step (up to the TPOT bound), a smaller "
                            "weight format reads fewer bytes per step");
  d->findings.push_back(std::move(f));
}

void DecideLengths(const ModelFigures& m, const WorkloadProfile& w, Diagnosis* d) {
  int64_t len = RoundUp((int64_t)std::ceil(w.total.p95 * 1.25), 64);
  len = std::max<int64_t>(len, (int64_t)std::ceil(w.total.max));
  if (m.context_len > 0) len = std::min<int64_t>(len, m.context_len);
  d->max_model_len = (int32_t)len;
  Finding f{"max-model-len",
            Fmt("--max-model-len %.0f: p95 of prompt + output %.0f tokens x 1.25 headroom, "
                "rounded up to 64, at least the longest request (%.0f)",
                (double)len, w.total.p95, w.total.max),
            {}};
  f.details.push_back(Fmt("prompt tokens p50 %.0f, p95 %.0f, max %.0f; output p50 %.0f, ", w.prompt.p50,
                          w.prompt.p95, w.prompt.max, w.output.p50) +
                      Fmt("p95 %.0f, max %.0f", w.output.p95, w.output.max));
  if (m.context_len > 0) {
    f.details.push_back(Fmt("the model's trained context is %.0f tokens; the default "
                            "max_model_len is that, and the KV plan caps each sequence's share by it",
                            m.context_len));
  }
  d->findings.push_back(std::move(f));
}

void DecideConcurrency(const WorkloadProfile& w, const DoctorOptions& o, Diagnosis* d) {
  int64_t fit = std::max<int64_t>(1, d->fit_concurrency);
  int best = 1;
  for (int b = 1; b <= o.concurrency && b <= fit; ++b) {
    if (1e3 * DecodeStepSeconds(*d, b) <= d->slo_tpot_ms) best = b;
  }
  const int all = (int)std::min<int64_t>(o.concurrency, fit);
  Finding f;
  f.topic = "max-num-seqs";
  // Capping the batch below the requests in flight makes the rest wait about
  // one request's decode: only worth it while TTFT keeps its bound.
  const double wait_ms = 1e3 * w.output.mean * DecodeStepSeconds(*d, best);
  if (best < all && d->ttft_estimate_ms + wait_ms > d->slo_ttft_ms) {
    d->max_num_seqs = all;
    f.verdict = Fmt("--max-num-seqs %.0f: every request in flight; a cap at %.0f (where t(B) meets "
                    "TPOT <= %.1f ms) would make the rest wait ~%.0f ms",
                    all, best, d->slo_tpot_ms, wait_ms) +
                Fmt(" and break TTFT <= %.0f ms", d->slo_ttft_ms);
  } else {
    d->max_num_seqs = best;
    f.verdict = Fmt("--max-num-seqs %.0f: the largest batch whose decode step t(B) = %.2f ms meets "
                    "TPOT <= %.1f ms",
                    best, 1e3 * DecodeStepSeconds(*d, best), d->slo_tpot_ms);
  }
  best = d->max_num_seqs;
  f.details.push_back(Fmt("limits: wanted concurrency %.0f, KV fit %.0f", o.concurrency,
                          (double)d->fit_concurrency));
  f.details.push_back(Fmt("decode throughput at that batch: %.0f tok/s (B / t(B))",
                          best / DecodeStepSeconds(*d, best)));
  if (1e3 * DecodeStepSeconds(*d, 1) > d->slo_tpot_ms) {
    f.details.push_back("even one sequence misses the TPOT bound on this machine: a smaller or "
                        "quantized model, or a looser bound");
  }
  d->findings.push_back(std::move(f));
}

void DecidePrefixCaching(const WorkloadProfile& w, Diagnosis* d) {
  d->expected_hit_rate = w.shared_prefix_share;
  d->prefix_caching = w.shared_prefix_share > 0.01;
  Finding f;
  f.topic = "prefix-caching";
  if (d->prefix_caching) {
    f.verdict = Fmt("prefix caching on: expected hit rate %.0f%% of prompt tokens",
                    100 * w.shared_prefix_share);
    f.details.push_back(Fmt("%.0f distinct shared tokens to keep cached; send requests that share "
                            "a prefix close together (and with the same cache_salt)",
                            (double)w.distinct_shared_tokens));
  } else {
    f.verdict = Fmt("prefix caching does not help this workload: %.1f%% of prompt tokens repeat an "
                    "earlier block",
                    100 * w.shared_prefix_share);
    f.details.push_back("the engine's default is on; leaving it on costs one hash per block");
  }
  f.details.push_back(Fmt("measured by chaining block hashes over full %.0f-token blocks, in "
                          "arrival order",
                          w.block_size));
  d->findings.push_back(std::move(f));
}

void DecideKvMemory(const WorkloadProfile& w, const DoctorOptions& o, Diagnosis* d) {
  const int64_t running = d->kv_bytes_per_request * d->max_num_seqs;
  const int64_t cached =
      d->prefix_caching ? d->kv_bytes_per_token * w.distinct_shared_tokens : 0;
  int64_t want = (int64_t)((double)(running + cached) * 1.1);
  want = RoundUp(std::max<int64_t>(want, 1 << 20), 1 << 20);
  d->kv_cache_memory_bytes = std::min(want, std::max<int64_t>(d->kv_budget_bytes, 1 << 20));
  Finding f;
  f.topic = "kv-cache";
  f.verdict = "--kv-cache-memory " + Bytes(d->kv_cache_memory_bytes) + ", --kv-cache-dtype " +
              d->kv_dtype;
  f.details.push_back(Fmt("= 1.1 x (max-num-seqs %.0f x KV per request ", d->max_num_seqs) +
                      Bytes(d->kv_bytes_per_request) + " + cached shared prefixes " +
                      Bytes(cached) + "), rounded up to 1 MiB, within the budget");
  std::string dtypes;
  for (const std::string& t : o.kv_dtypes) dtypes += (dtypes.empty() ? "" : ", ") + t;
  if (d->capacity_limited && d->kv_dtype == "f16") {
    f.details.push_back("this build's --kv-cache-dtype takes " + dtypes +
                        "; f16 is the smallest of them, so a smaller KV needs a build with "
                        "quantized KV");
  } else if (d->kv_dtype != "f16") {
    f.details.push_back("f16 KV does not fit the wanted concurrency; " + d->kv_dtype +
                        " is this build's smallest KV dtype (takes " + dtypes + ")");
  } else {
    f.details.push_back("KV size is not the limit here; f16 keeps full attention quality (this "
                        "build's --kv-cache-dtype takes " + dtypes + ")");
  }
  d->findings.push_back(std::move(f));
}

void DecideChunking(const WorkloadProfile& w, const DoctorOptions& o, Diagnosis* d) {
  d->chunked_prefill = true;
  // The automatic target: 2.5 x the decode-only step (engine/engine.h).
  const double auto_ms = 2.5 * 1e3 * DecodeStepSeconds(*d, d->max_num_seqs);
  const double slo_target = std::floor(d->slo_tpot_ms * 0.9 * 10) / 10;
  const bool ttft_tight = d->ttft_estimate_ms > 0.5 * d->slo_ttft_ms;
  // Bigger chunks only pay where TTFT is at risk: the last of a burst waits
  // for every prompt ahead, and queueing and decode steps add to that, so a
  // tail past a quarter of the bound is a risk; a lone Poisson arrival whose
  // prompt takes a few ms is not.
  const bool ttft_at_risk = ttft_tight || d->ttft_tail_ms > 0.25 * d->slo_ttft_ms;
  Finding f;
  f.topic = "chunked-prefill";
  if (slo_target > auto_ms * 1.1 && ttft_at_risk) {
    d->target_itl_ms = slo_target;
    f.verdict = Fmt("--target-itl-ms %.1f: the TPOT bound leaves room above the automatic target "
                    "(~%.1f ms); bigger prompt chunks per step shorten TTFT",
                    d->target_itl_ms, auto_ms);
  } else if (slo_target < auto_ms * 0.9 && !ttft_tight) {
    d->target_itl_ms = slo_target;
    f.verdict = Fmt("--target-itl-ms %.1f: the automatic target (~%.1f ms) would let prompt chunks "
                    "push steps past the TPOT bound; TTFT has the slack to take smaller chunks",
                    d->target_itl_ms, auto_ms);
  } else {
    d->target_itl_ms = 0;
    f.verdict = Fmt("keep the automatic ITL target (~%.1f ms = 2.5 x the decode step)", auto_ms) +
                (slo_target > auto_ms * 1.1
                     ? Fmt(": the TPOT bound would allow %.1f ms, but TTFT has slack (the last "
                           "prompt of a burst waits ~%.0f ms of the %.0f ms bound), so bigger "
                           "chunks would buy nothing",
                           slo_target, d->ttft_tail_ms, d->slo_ttft_ms)
                 : slo_target < auto_ms * 0.9
                     ? Fmt(": a lower one (%.1f ms) protects TPOT but TTFT (predicted %.0f ms) has "
                           "no slack to pay for it",
                           slo_target, d->ttft_estimate_ms)
                     : Fmt(": it is within 10%% of 90%% of the TPOT bound (%.1f ms)", slo_target));
  }
  if (w.prompt.p95 > o.max_num_batched_tokens) {
    f.details.push_back(Fmt("p95 prompt %.0f tokens > the step budget %.0f: chunked prefill (on by "
                            "default) must stay on, or one prompt stalls every decode",
                            w.prompt.p95, o.max_num_batched_tokens));
  } else {
    f.details.push_back(Fmt("p95 prompt %.0f tokens fits one step's budget (%.0f); chunking "
                            "rarely splits a prompt",
                            w.prompt.p95, o.max_num_batched_tokens));
  }
  f.details.push_back(Fmt("the automatic target is 2.5 x the decode-only step; a decode step at "
                          "B = %.0f takes %.2f ms",
                          d->max_num_seqs, 1e3 * DecodeStepSeconds(*d, d->max_num_seqs)));
  d->findings.push_back(std::move(f));
}

// Which recommendations change how the engine schedules this workload, as
// against its defaults (64 sequences, the automatic ITL target, f16 KV; the
// client never has more than `concurrency` requests in flight).
void CompareWithDefaults(const DoctorOptions& o, Diagnosis* d) {
  std::vector<std::string> changes;
  if (d->max_num_seqs < std::min(64, o.concurrency)) {
    changes.push_back(Fmt("the batch cap (%.0f instead of every request in flight)", d->max_num_seqs));
  }
  if (d->target_itl_ms > 0) changes.push_back(Fmt("the ITL target (%.1f ms)", d->target_itl_ms));
  if (d->kv_dtype != "f16") changes.push_back("the KV dtype (" + d->kv_dtype + ")");
  Finding f;
  f.topic = "defaults";
  if (changes.empty()) {
    d->defaults_right = true;
    f.verdict = "the defaults already schedule this workload right: the flags above only size "
                "memory and limits (--max-model-len, --kv-cache-memory)";
  } else {
    std::string list;
    for (const std::string& c : changes) list += (list.empty() ? "" : ", ") + c;
    f.verdict = "against the defaults, what changes the schedule: " + list;
  }
  d->findings.push_back(std::move(f));
}

void CollectFlags(const WorkloadProfile& w, Diagnosis* d) {
  char buf[64];
  AddFlag(d, "--max-model-len", std::to_string(d->max_model_len), "p95 length + 25% headroom");
  AddFlag(d, "--max-num-seqs", std::to_string(d->max_num_seqs), "largest batch within the TPOT bound");
  const int64_t mib = d->kv_cache_memory_bytes >> 20;
  AddFlag(d, "--kv-cache-memory", std::to_string(mib) + "MiB", "the running batch's KV + shared prefixes");
  AddFlag(d, "--kv-cache-dtype", d->kv_dtype,
          d->kv_dtype == "f16" ? "f16 fits (the default)" : "f16 does not fit the wanted concurrency");
  AddFlag(d, d->prefix_caching ? "--enable-prefix-caching" : "--no-enable-prefix-caching", "",
          d->prefix_caching ? "shared prefixes (the default)" : "nothing repeats (the default is on)");
  if (d->target_itl_ms > 0) {
    std::snprintf(buf, sizeof buf, "%.1f", d->target_itl_ms);
    AddFlag(d, "--target-itl-ms", buf, "prompt chunks per step within the TPOT bound");
  }
}

}  // namespace

LengthStats SummarizeLengths(std::vector<double> v) {
  LengthStats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / (double)v.size();
  auto pct = [&](double p) {
    const double rank = p * (double)(v.size() - 1);
    const size_t lo = (size_t)std::floor(rank);
    const size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (v[hi] - v[lo]) * (rank - (double)lo);
  };
  s.p50 = pct(0.5);
  s.p95 = pct(0.95);
  s.max = v.back();
  return s;
}

WorkloadProfile ProfileWorkload(const std::vector<WorkloadRequest>& requests, int32_t block_size) {
  WorkloadProfile p;
  p.num_requests = (int)requests.size();
  p.block_size = block_size;
  std::vector<double> prompt, output, total;
  std::unordered_set<BlockHash> seen, hit;
  int64_t prompt_tokens = 0, shared_tokens = 0;
  for (const WorkloadRequest& r : requests) {
    prompt.push_back((double)r.prompt.size());
    output.push_back((double)r.output_len);
    total.push_back((double)r.prompt.size() + r.output_len);
    prompt_tokens += (int64_t)r.prompt.size();
    std::vector<BlockHash> hashes;
    ExtendBlockHashes(r.prompt, block_size, "", &hashes);
    // The engine serves hits only as a chain from the first block.
    bool chain = true;
    for (BlockHash h : hashes) {
      if (chain && seen.count(h)) {
        shared_tokens += block_size;
        hit.insert(h);
      } else {
        chain = false;
      }
      seen.insert(h);
    }
  }
  p.prompt = SummarizeLengths(prompt);
  p.output = SummarizeLengths(output);
  p.total = SummarizeLengths(total);
  p.shared_prefix_share = prompt_tokens > 0 ? (double)shared_tokens / (double)prompt_tokens : 0;
  p.distinct_shared_tokens = (int64_t)hit.size() * block_size;
  return p;
}

double DecodeStepSeconds(const Diagnosis& d, int b) {
  return d.step_a_s + d.step_b_s * std::max(1, b);
}

Diagnosis Diagnose(const MachineFigures& machine, const ModelFigures& model,
                   const WorkloadProfile& workload, const DoctorOptions& options) {
  Diagnosis d;
  FitDecodeStep(model, &d);
  DecideObjectives(model, workload, options, &d);
  DecideMemory(machine, model, workload, options, &d);
  DecideConcurrency(workload, options, &d);
  DecideBound(machine, model, workload, &d);
  // The bound comes first in the report.
  std::rotate(d.findings.begin() + 1, d.findings.end() - 1, d.findings.end());
  DecideLengths(model, workload, &d);
  DecidePrefixCaching(workload, &d);
  DecideKvMemory(workload, options, &d);
  DecideChunking(workload, options, &d);
  CompareWithDefaults(options, &d);
  CollectFlags(workload, &d);
  return d;
}

std::string FlagsLine(const Diagnosis& d) {
  std::string out;
  for (const FlagValue& f : d.flags) {
    if (!out.empty()) out += ' ';
    out += f.flag;
    if (!f.value.empty()) out += ' ' + f.value;
  }
  return out;
}

}  // namespace tern
