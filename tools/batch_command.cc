// tern batch: offline generation for a JSONL file of requests, through the
// same Engine as `tern serve` (continuous batching, chunked prefill, prefix
// caching, preemption).
//
// Input, one JSON object per line (blank lines skipped):
//   {"prompt": "text" | [token ids], "id": "a", "max_tokens": 16,
//    "temperature": 1.0, "top_p": 1, "top_k": 0, "min_p": 0, "seed": 7,
//    "stop": "x" | ["x", "y"], "ignore_eos": false, "cache_salt": "t",
//    "arrival_ms": 0 (submit this many ms after the start, to shape load)}
// Only "prompt" is required; "id" defaults to the line number. A field a line
// leaves out takes the file-wide flag (--max-tokens, --temperature, --top-p,
// --top-k, --min-p, --seed), else the default of src/sample/defaults.h
// (max_tokens 16, temperature 1, top-k/top-p/min-p off, a random seed).
// A bad line (invalid JSON, unknown field, wrong type or range, prompt +
// max_tokens longer than --max-model-len) is an error naming its line number:
// nothing is generated and the exit code is 1.
//
// Order of checks, cheapest first, so that a mistake shows before the model
// loads: flags, the input file (exists, readable) and the output paths
// (folder writable), every line's JSON and fields; then the model loads and
// the prompts are tokenized (token ids, length).
//
// Output, one line per request in input order:
//   {"id", "text", "token_ids", "finish_reason", "prompt_tokens",
//    "cached_tokens", "timings": {"queue_ms", "ttft_ms", "tpot_ms", "e2e_ms"}}
// plus "evicted_tokens" when --kv-eviction streaming dropped some of its KV.
// Stop strings are matched on the detokenized text by StopMatcher, as the
// server does: the text ends before the stop string, finish_reason is "stop",
// and the engine is told to stop.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "base/atomic_file.h"
#include "base/file_checks.h"
#include "base/progress.h"
#include "engine/engine.h"
#include "metrics/percentile.h"
#include "sample/defaults.h"
#include "sample/request_checks.h"
#include "server/stop_matcher.h"
#include "tokenizer/incremental_detokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tools/arg_parser.h"
#include "tools/commands.h"
#include "tools/engine_flags.h"

namespace tern {
namespace {

using json = nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

struct BatchItem {
  int line = 0;
  json prompt;  // as read, until Tokenize() fills request.prompt_token_ids
  EngineRequest request;
  std::vector<std::string> stop;
  double arrival_ms = 0;  // submitted this long after the start (load shapes)
};

struct ItemState {
  std::shared_ptr<OutputChannel> channel;
  std::unique_ptr<IncrementalDetokenizer> detok;
  std::unique_ptr<StopMatcher> stop;  // the line's stop strings, as the server cuts them
  std::string text;
  std::vector<int32_t> token_ids;
  bool submitted = false;
  bool done = false;
  FinishReason reason = FinishReason::kNone;
  RequestMetrics metrics;
};

// How long the reader may sleep waiting for outputs: until the next request
// is due (arrival_ms), at most 100 ms (progress bar, a missed wake-up).
std::chrono::milliseconds WaitBudget(const std::vector<BatchItem>& items,
                                     const std::vector<ItemState>& states,
                                     SteadyClock::time_point start) {
  const double now_ms =
      std::chrono::duration<double, std::milli>(SteadyClock::now() - start).count();
  double wait = 100;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!states[i].submitted) wait = std::min(wait, items[i].arrival_ms - now_ms);
  }
  return std::chrono::milliseconds((int64_t)std::max(0.0, std::ceil(wait)));
}

Status LineError(int line, const std::string& msg) {
  return InvalidArgument("line " + std::to_string(line) + ": " + msg);
}

// Reads a number field into out; error names the field.
template <typename T>
Status NumberField(const json& j, const char* key, int line, T* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::Ok();
  if constexpr (std::is_integral_v<T>) {
    if (!it->is_number_integer()) return LineError(line, std::string("'") + key + "' must be an integer");
    if constexpr (std::is_unsigned_v<T>) {
      if (it->is_number_unsigned()) {
        *out = it->get<T>();
      } else if (it->get<int64_t>() < 0) {
        return LineError(line, std::string("'") + key + "' must be >= 0");
      } else {
        *out = (T)it->get<int64_t>();
      }
    } else {
      const int64_t v = it->get<int64_t>();
      if (v < INT32_MIN || v > INT32_MAX) return LineError(line, std::string("'") + key + "' out of range");
      *out = (T)v;
    }
  } else {
    if (!it->is_number()) return LineError(line, std::string("'") + key + "' must be a number");
    *out = it->get<T>();
  }
  return Status::Ok();
}

// What a line may say: a string, or an array of integers (the vocabulary
// bounds are checked once the model is loaded).
Status CheckPrompt(const json& p, int line) {
  if (p.is_string()) {
    if (p.get_ref<const std::string&>().empty()) return LineError(line, "empty prompt");
    return Status::Ok();
  }
  if (!p.is_array()) return LineError(line, "'prompt' must be a string or an array of token ids");
  if (p.empty()) return LineError(line, "empty prompt");
  for (const json& t : p) {
    if (!t.is_number_integer()) return LineError(line, "'prompt' token ids must be integers");
  }
  return Status::Ok();
}

StatusOr<std::vector<int32_t>> TokenizePrompt(const json& p, int line, const Tokenizer& tok) {
  if (p.is_string()) {
    return tok.Encode(p.get<std::string>(), /*add_special=*/true, /*parse_special=*/true);
  }
  std::vector<int32_t> ids;
  for (const json& t : p) {
    const int64_t v = t.get<int64_t>();
    if (v < 0 || v >= tok.vocab_size()) {
      return LineError(line, "prompt token id " + std::to_string(v) + " outside the vocabulary [0, " +
                                 std::to_string(tok.vocab_size()) + ")");
    }
    ids.push_back((int32_t)v);
  }
  return ids;
}

// The request checks every front end shares (sample/request_checks.h), for
// the file-wide flags and the lines' fields, made before the model loads.
// name("top_p") names the field or flag in the message.
Status CheckSampling(const SamplingParams& s, const std::function<std::string(const std::string&)>& name) {
  if (MaybeFieldError e = CheckSamplingParams(s)) return InvalidArgument(e->Text(name(e->field)));
  return Status::Ok();
}

// One line's request, its fields over `base` (the file-wide defaults). The
// prompt stays JSON until Tokenize().
StatusOr<BatchItem> ParseLine(const std::string& text, int line, const SamplingParams& base) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return LineError(line, "invalid JSON");
  if (!j.is_object()) return LineError(line, "expected a JSON object");
  static const char* kKnown[] = {"prompt", "id",    "max_tokens", "temperature", "top_p",
                                 "top_k",  "min_p", "seed",       "stop",        "ignore_eos",
                                 "cache_salt", "arrival_ms"};
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (std::find_if(std::begin(kKnown), std::end(kKnown),
                     [&](const char* k) { return it.key() == k; }) == std::end(kKnown)) {
      return LineError(line, "unknown field '" + it.key() + "'");
    }
  }
  BatchItem item;
  item.line = line;
  if (!j.contains("prompt")) return LineError(line, "missing 'prompt'");
  TERN_RETURN_IF_ERROR(CheckPrompt(j["prompt"], line));
  item.prompt = std::move(j["prompt"]);
  if (j.contains("id")) {
    const json& id = j["id"];
    if (id.is_string()) {
      item.request.request_id = id.get<std::string>();
    } else if (id.is_number_integer()) {
      item.request.request_id = std::to_string(id.get<int64_t>());
    } else {
      return LineError(line, "'id' must be a string or an integer");
    }
  } else {
    item.request.request_id = "line-" + std::to_string(line);
  }
  SamplingParams& s = item.request.sampling;
  s = base;
  TERN_RETURN_IF_ERROR(NumberField(j, "max_tokens", line, &s.max_tokens));
  TERN_RETURN_IF_ERROR(NumberField(j, "temperature", line, &s.temperature));
  TERN_RETURN_IF_ERROR(NumberField(j, "top_p", line, &s.top_p));
  TERN_RETURN_IF_ERROR(NumberField(j, "top_k", line, &s.top_k));
  TERN_RETURN_IF_ERROR(NumberField(j, "min_p", line, &s.min_p));
  if (j.contains("seed") && !j["seed"].is_null()) {
    TERN_RETURN_IF_ERROR(NumberField(j, "seed", line, &s.seed));
    s.has_seed = true;
  }
  TERN_RETURN_IF_ERROR(CheckSampling(s, [&](const std::string& key) {
    return "line " + std::to_string(line) + ": '" + key + "'";
  }));
  if (j.contains("ignore_eos")) {
    if (!j["ignore_eos"].is_boolean()) return LineError(line, "'ignore_eos' must be true or false");
    s.ignore_eos = j["ignore_eos"].get<bool>();
  }
  TERN_RETURN_IF_ERROR(NumberField(j, "arrival_ms", line, &item.arrival_ms));
  if (item.arrival_ms < 0) return LineError(line, "'arrival_ms' must be >= 0");
  if (j.contains("cache_salt")) {
    if (!j["cache_salt"].is_string()) return LineError(line, "'cache_salt' must be a string");
    item.request.cache_salt = j["cache_salt"].get<std::string>();
  }
  if (j.contains("stop") && !j["stop"].is_null()) {
    const json& st = j["stop"];
    if (st.is_string()) {
      item.stop.push_back(st.get<std::string>());
    } else if (st.is_array()) {
      for (const json& x : st) {
        if (!x.is_string()) return LineError(line, "'stop' must be a string or a list of strings");
        item.stop.push_back(x.get<std::string>());
      }
    } else {
      return LineError(line, "'stop' must be a string or a list of strings");
    }
    if (MaybeFieldError e = CheckStopStrings(item.stop)) return LineError(line, e->Text("'stop'"));
  }
  return item;
}

// Reads and checks every line (no model needed).
StatusOr<std::vector<BatchItem>> ReadItems(const std::string& path, const SamplingParams& base) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot open input file " + path);
  std::vector<BatchItem> items;
  std::string text;
  int line = 0;
  while (std::getline(in, text)) {
    ++line;
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    StatusOr<BatchItem> item = ParseLine(text, line, base);
    if (!item.ok()) return item.status().WithContext(path);
    items.push_back(std::move(item).value());
  }
  if (in.bad()) return Internal("error reading input file " + path);
  for (size_t i = 0; i < items.size(); ++i) {
    for (size_t k = 0; k < i; ++k) {
      if (items[k].request.request_id == items[i].request.request_id) {
        return InvalidArgument(path + ": line " + std::to_string(items[i].line) + ": duplicate id '" +
                               items[i].request.request_id + "' (first on line " +
                               std::to_string(items[k].line) + ")");
      }
    }
    if (i > 2000) break;  // quadratic check only on small files; the engine rejects the rest
  }
  return items;
}

// Turns every prompt into token ids with the model's tokenizer and checks
// prompt + max_tokens against the context (max_model_len 0: no limit, the
// engine evicts KV instead).
Status Tokenize(std::vector<BatchItem>& items, const std::string& path, const Tokenizer& tok,
                int32_t max_model_len) {
  for (BatchItem& item : items) {
    const int line = item.line;
    StatusOr<std::vector<int32_t>> ids = TokenizePrompt(item.prompt, line, tok);
    if (!ids.ok()) return ids.status().WithContext(path);
    item.request.prompt_token_ids = std::move(ids).value();
    item.prompt = json();
    if (item.request.prompt_token_ids.empty()) return LineError(line, "empty prompt").WithContext(path);
    const int64_t num_prompt = (int64_t)item.request.prompt_token_ids.size();
    if (MaybeFieldError e = CheckContextRoom(num_prompt, item.request.sampling.max_tokens, max_model_len)) {
      return LineError(line, e->problem).WithContext(path);
    }
  }
  return Status::Ok();
}

// The input must be a readable file and every output path a file in a
// writable folder, checked before the model loads.
Status CheckPaths(const std::string& input, const std::vector<std::pair<const char*, std::string>>& outputs) {
  TERN_RETURN_IF_ERROR(CheckReadableFile(input, "input"));
  for (const auto& [flag, path] : outputs) {
    if (path.empty()) continue;
    if (SameFile(input, path)) return InvalidArgument(std::string(flag) + " " + path + " is the input file");
    TERN_RETURN_IF_ERROR(CheckWritableFile(path, flag));
  }
  return Status::Ok();
}

// Applies one output message; returns true when the request is finished.
void Consume(RequestOutput& out, const BatchItem& item, ItemState& st, Engine& engine) {
  for (int32_t id : out.new_token_ids) {
    if (st.stop->matched()) break;
    st.token_ids.push_back(id);
    st.text += st.stop->Push(st.detok->Add(id));
    if (st.stop->matched()) engine.FinishWithStop(item.request.request_id);
  }
  if (out.finished) {
    if (!st.stop->matched()) st.text += st.stop->Push(st.detok->Flush());
    if (!st.stop->matched()) st.text += st.stop->Flush();
    st.done = true;
    st.reason = st.stop->matched() ? FinishReason::kStop : out.finish_reason;
    st.metrics = out.metrics;
  }
}

json SpecJson(const SpecSummary& s) {
  return {{"drafts", s.drafts},
          {"draft_tokens", s.draft_tokens},
          {"accepted_tokens", s.accepted_tokens},
          {"acceptance_rate", s.AcceptanceRate()},
          {"mean_accepted_length", s.MeanAcceptedLength()}};
}

json ResultJson(const BatchItem& item, const ItemState& st, bool speculative) {
  json j;
  j["id"] = item.request.request_id;
  j["text"] = st.text;
  j["token_ids"] = st.token_ids;
  j["finish_reason"] = FinishReasonName(st.reason);
  j["prompt_tokens"] = st.metrics.prompt_tokens;
  j["cached_tokens"] = st.metrics.cached_tokens;
  if (st.metrics.evicted_tokens > 0) j["evicted_tokens"] = st.metrics.evicted_tokens;
  j["timings"] = {{"queue_ms", st.metrics.queue_s * 1e3},
                  {"ttft_ms", st.metrics.ttft_s * 1e3},
                  {"tpot_ms", st.metrics.tpot_s * 1e3},
                  {"e2e_ms", st.metrics.e2e_s * 1e3}};
  if (!st.metrics.itl_s.empty()) {
    std::vector<double> itl(st.metrics.itl_s);
    std::sort(itl.begin(), itl.end());
    j["timings"]["itl_p50_ms"] = itl[itl.size() / 2] * 1e3;
    j["timings"]["itl_max_ms"] = itl.back() * 1e3;
  }
  if (speculative) {
    j["speculative"] = SpecJson({st.metrics.spec_num_drafts, st.metrics.spec_num_draft_tokens,
                                 st.metrics.spec_num_accepted_tokens});
  }
  return j;
}

std::string TokensPerSecond(uint64_t tokens, double secs) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f tok/s", secs > 0 ? (double)tokens / secs : 0.0);
  return text;
}

json PercentilesJson(const PercentileSummary& s) {
  return {{"p50", s.p50}, {"p90", s.p90}, {"p99", s.p99}};
}

json Summary(const std::vector<ItemState>& states, const EngineStats& stats, double secs,
             bool speculative) {
  std::vector<double> ttft, tpot, itl;
  uint64_t out_tokens = 0;
  for (const ItemState& st : states) {
    out_tokens += st.token_ids.size();
    if (st.metrics.generated_tokens > 0) ttft.push_back(st.metrics.ttft_s * 1e3);
    if (st.metrics.generated_tokens > 1) tpot.push_back(st.metrics.tpot_s * 1e3);
    for (double x : st.metrics.itl_s) itl.push_back(x * 1e3);
  }
  json j;
  j["num_requests"] = states.size();
  j["elapsed_s"] = secs;
  j["output_tokens"] = out_tokens;
  j["requests_per_s"] = secs > 0 ? (double)states.size() / secs : 0.0;
  j["output_tokens_per_s"] = secs > 0 ? (double)out_tokens / secs : 0.0;
  j["ttft_ms"] = PercentilesJson(Summarize(ttft));
  j["tpot_ms"] = PercentilesJson(Summarize(tpot));
  j["itl_ms"] = PercentilesJson(Summarize(itl));
  j["peak_kv_usage"] = stats.peak_kv_cache_usage;
  if (stats.num_kv_window_blocks > 0) {  // hybrid models: each group's own pool
    j["peak_kv_usage_global_layers"] = stats.peak_kv_full_usage;
    j["peak_kv_usage_windowed_layers"] = stats.peak_kv_window_usage;
  }
  j["num_preemptions"] = stats.num_preemptions_total;
  j["kv_evicted_tokens"] = stats.kv_evicted_tokens_total;
  j["prefix_cache_hit_rate"] =
      stats.prefix_cache_queries_total
          ? (double)stats.prefix_cache_hits_total / (double)stats.prefix_cache_queries_total
          : 0.0;
  if (speculative) {
    j["speculative"] = SpecJson({(int64_t)stats.spec_num_drafts_total,
                                 (int64_t)stats.spec_num_draft_tokens_total,
                                 (int64_t)stats.spec_num_accepted_tokens_total});
  }
  return j;
}

void PrintSummary(const json& s) {
  auto p = [&](const char* key) {
    const json& x = s[key];
    std::fprintf(stderr, "  %-8s p50 %8.2f  p90 %8.2f  p99 %8.2f\n", key, x["p50"].get<double>(),
                 x["p90"].get<double>(), x["p99"].get<double>());
  };
  std::fprintf(stderr, "%zu requests in %.2f s: %.2f req/s, %.1f output tok/s\n",
               s["num_requests"].get<size_t>(), s["elapsed_s"].get<double>(),
               s["requests_per_s"].get<double>(), s["output_tokens_per_s"].get<double>());
  p("ttft_ms");
  p("tpot_ms");
  p("itl_ms");
  std::fprintf(stderr, "  peak KV usage %.1f%%, preemptions %llu, prefix cache hit rate %.1f%%\n",
               100 * s["peak_kv_usage"].get<double>(),
               (unsigned long long)s["num_preemptions"].get<uint64_t>(),
               100 * s["prefix_cache_hit_rate"].get<double>());
  if (s.contains("peak_kv_usage_windowed_layers")) {
    std::fprintf(stderr, "  peak KV usage of each group's blocks: global layers %.1f%%, windowed layers %.1f%%\n",
                 100 * s["peak_kv_usage_global_layers"].get<double>(),
                 100 * s["peak_kv_usage_windowed_layers"].get<double>());
  }
  if (s.contains("speculative")) {
    const json& x = s["speculative"];
    std::fprintf(stderr, "  speculative: acceptance %.1f%% (%lld of %lld proposals), mean accepted length %.2f tokens/step\n",
                 100 * x["acceptance_rate"].get<double>(), (long long)x["accepted_tokens"].get<int64_t>(),
                 (long long)x["draft_tokens"].get<int64_t>(), x["mean_accepted_length"].get<double>());
  }
}

int Fail(const std::string& msg) {
  std::fprintf(stderr, "tern batch: %s\n", msg.c_str());
  return 1;
}

// File-wide sampling flags: a line's own field wins.
struct LineDefaults {
  int max_tokens = defaults::kMaxTokensCompletion;
  double temperature = defaults::kTemperature;
  double top_p = defaults::kTopP;
  int top_k = defaults::kTopK;
  double min_p = defaults::kMinP;
  int64_t seed = -1;  // -1: a random seed per line

  StatusOr<SamplingParams> ToParams() const {
    SamplingParams s;
    s.max_tokens = max_tokens;
    s.temperature = (float)temperature;
    s.top_p = (float)top_p;
    s.top_k = top_k;
    s.min_p = (float)min_p;
    s.repetition_penalty = defaults::kRepetitionPenalty;
    s.presence_penalty = defaults::kPresencePenalty;
    s.frequency_penalty = defaults::kFrequencyPenalty;
    if (MaybeFieldError e = CheckSeedFlag(seed)) return InvalidArgument(e->Text("--seed"));
    s.has_seed = seed >= 0;
    s.seed = s.has_seed ? (uint64_t)seed : 0;
    TERN_RETURN_IF_ERROR(CheckSampling(s, [](const std::string& key) {
      std::string flag = "--" + key;
      std::replace(flag.begin(), flag.end(), '_', '-');
      return flag;
    }));
    return s;
  }
};

std::string Num(double x) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", x);
  return buf;
}

void AddLineDefaultFlags(ArgParser& parser, LineDefaults* d) {
  parser.AddInt("--max-tokens", "N", &d->max_tokens,
                "tokens to generate for lines without \"max_tokens\" (default " +
                    std::to_string(defaults::kMaxTokensCompletion) + ")");
  parser.AddDouble("--temperature,--temp", "T", &d->temperature,
                   "temperature for lines without \"temperature\" (default " +
                       Num(defaults::kTemperature) + "; 0 = greedy)");
  parser.AddDouble("--top-p", "P", &d->top_p,
                   "top-p for lines without \"top_p\" (default " + Num(defaults::kTopP) + "; 1 = off)");
  parser.AddInt("--top-k", "K", &d->top_k,
                "top-k for lines without \"top_k\" (default " + Num(defaults::kTopK) + "; 0 = off)");
  parser.AddDouble("--min-p", "P", &d->min_p,
                   "min-p for lines without \"min_p\" (default " + Num(defaults::kMinP) + "; 0 = off)");
  parser.AddInt("--seed", "S", &d->seed,
                "seed for lines without \"seed\" (default -1: a random seed per line)");
}

}  // namespace

int RunBatch(int argc, char** argv) {
  EngineFlags flags;
  LineDefaults line_defaults;
  std::string input, output, summary_path;
  ArgParser parser("batch -m MODEL -i PROMPTS.jsonl -o OUT.jsonl [sampling defaults] [engine options]",
                   "Generates a completion for every line of a JSONL file with the serving engine\n"
                   "(continuous batching). Output lines follow input order. The sampling flags\n"
                   "apply to lines that leave the field out; a line's own field wins. See\n"
                   "docs/engine.md and docs/defaults.md.");
  AddEngineFlags(parser, &flags);
  parser.AddString("-i,--input", "FILE", &input, "input JSONL (required)");
  parser.AddString("-o,--output", "FILE", &output, "output JSONL (required)");
  parser.AddString("--summary-json", "FILE", &summary_path, "also write the summary as JSON");
  AddLineDefaultFlags(parser, &line_defaults);
  if (int rc = ParseOrExit(parser, argc, argv, "batch"); rc >= 0) return rc;
  if (input.empty()) return Fail("missing -i PROMPTS.jsonl");
  if (output.empty()) return Fail("missing -o OUT.jsonl");
  StatusOr<EngineConfig> config = flags.ToConfig();
  if (!config.ok()) return Fail(config.status().message());
  StatusOr<SamplingParams> base = line_defaults.ToParams();
  if (!base.ok()) return Fail(base.status().message());
  if (Status st = CheckPaths(input, {{"-o", output}, {"--summary-json", summary_path}}); !st.ok()) {
    return Fail(st.message());
  }
  StatusOr<std::vector<BatchItem>> read = ReadItems(input, *base);
  if (!read.ok()) return Fail(read.status().message());
  std::vector<BatchItem>& items = *read;

  const bool speculative = config->speculative_method != SpecMethod::kNone;
  StatusOr<std::unique_ptr<Engine>> created = Engine::Create(*config);
  if (!created.ok()) return Fail(created.status().message());
  Engine& engine = **created;
  std::fprintf(stderr, "tern batch: %s\n", engine.KvSummary().c_str());
  if (speculative) std::fprintf(stderr, "tern batch: %s\n", engine.SpeculativeSummary().c_str());
  const bool streaming = config->kv_eviction == KvEviction::kStreaming;
  if (Status st = Tokenize(items, input, engine.tokenizer(), streaming ? 0 : engine.max_model_len());
      !st.ok()) {
    return Fail(st.message());
  }
  // Results go to a temp file beside the output, renamed into place when the
  // run completes: a failed or killed run leaves no partial output.
  AtomicFile out(output);
  if (Status st = out.Create(); !st.ok()) return Fail("cannot write output file: " + st.message());

  const SteadyClock::time_point start = SteadyClock::now();
  std::vector<ItemState> states(items.size());
  // Submits every request whose arrival time has come.
  auto submit_due = [&]() -> Status {
    const double now_ms = std::chrono::duration<double, std::milli>(SteadyClock::now() - start).count();
    for (size_t i = 0; i < items.size(); ++i) {
      if (states[i].submitted || items[i].arrival_ms > now_ms) continue;
      states[i].detok = std::make_unique<IncrementalDetokenizer>(engine.tokenizer(), true);
      states[i].stop = std::make_unique<StopMatcher>(items[i].stop);
      // Prime with the prompt so the output continues it (its leading space
      // is kept, as in the prompt + output text).
      for (int32_t id : items[i].request.prompt_token_ids) states[i].detok->Add(id);
      StatusOr<std::shared_ptr<OutputChannel>> ch = engine.AddRequest(items[i].request);
      if (!ch.ok()) return InvalidArgument("line " + std::to_string(items[i].line) + ": " + ch.status().message());
      states[i].channel = *ch;
      states[i].submitted = true;
    }
    return Status::Ok();
  };
  if (Status st = submit_due(); !st.ok()) return Fail(st.message());

  Progress progress("batch", "requests", (int64_t)items.size());
  size_t num_done = 0, next_write = 0;
  uint64_t tokens = 0;
  uint64_t output_generation = 0;
  while (num_done < items.size()) {
    output_generation = engine.WaitForOutputs(output_generation, WaitBudget(items, states, start));
    if (Status st = submit_due(); !st.ok()) return Fail(st.message());
    for (size_t i = 0; i < items.size(); ++i) {
      ItemState& st = states[i];
      if (st.done || !st.submitted) continue;
      while (std::optional<RequestOutput> o = st.channel->Pop(std::chrono::milliseconds(0))) {
        tokens += o->new_token_ids.size();
        Consume(*o, items[i], st, engine);
        if (st.done) {
          ++num_done;
          break;
        }
      }
    }
    while (next_write < items.size() && states[next_write].done) {
      // Text may hold invalid UTF-8 (byte tokens): written as U+FFFD; the
      // exact bytes are in token_ids.
      const Status st = out.Write(ResultJson(items[next_write], states[next_write], speculative)
                                      .dump(-1, ' ', false, json::error_handler_t::replace) +
                                  "\n");
      if (!st.ok()) return Fail(st.message());
      states[next_write].channel.reset();
      ++next_write;
    }
    const double elapsed_s = std::chrono::duration<double>(SteadyClock::now() - start).count();
    progress.Update((int64_t)num_done, TokensPerSecond(tokens, elapsed_s));
  }
  const double secs = std::chrono::duration<double>(SteadyClock::now() - start).count();
  progress.Finish(TokensPerSecond(tokens, secs));
  if (Status st = out.Commit(); !st.ok()) return Fail(st.message());

  const json summary = Summary(states, engine.GetStats(), secs, speculative);
  PrintSummary(summary);
  if (!summary_path.empty()) {
    if (Status st = WriteFileAtomically(summary_path, summary.dump(2) + "\n"); !st.ok()) {
      return Fail("cannot write summary file: " + st.message());
    }
  }
  return 0;
}

}  // namespace tern
