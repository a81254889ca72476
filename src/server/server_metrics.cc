#include "server/server_metrics.h"

#include <cstdio>
#include <cstdlib>

#include "base/check.h"

namespace tern {
namespace {

// Bucket bounds after vLLM's, with finer low buckets for small models.
const std::vector<double> kTtftBounds = {0.001, 0.005, 0.01, 0.02,  0.04,  0.06,  0.08, 0.1,
                                         0.25,  0.5,   0.75, 1.0,   2.5,   5.0,   7.5,  10.0,
                                         20.0,  40.0,  80.0, 160.0, 640.0, 2560.0};
const std::vector<double> kTokenBounds = {0.001, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1,
                                          0.15,  0.2,   0.3,  0.4,   0.5,  0.75,  1.0,
                                          2.5,   5.0,   7.5,  10.0,  20.0, 40.0,  80.0};
const std::vector<double> kRequestBounds = {0.01, 0.05, 0.1,   0.3,   0.5,   0.8,   1.0,    1.5,
                                            2.0,  2.5,  5.0,   10.0,  15.0,  20.0,  30.0,   40.0,
                                            50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};

std::string EscapeLabel(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string Number(double v) {
  // The shortest of 15..17 significant digits that reads back exactly.
  char buf[64];
  for (int precision = 15; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

class Writer {
 public:
  Writer(const std::string& prefix, const std::string& model)
      : ns_(prefix + ":"), label_("model_name=\"" + EscapeLabel(model) + "\"") {}

  void Header(const std::string& name, const char* type, const char* help) {
    out_ += "# HELP " + ns_ + name + " " + help + "\n# TYPE " + ns_ + name + " " + type + "\n";
  }
  void Sample(const std::string& name, double value, const std::string& extra_label = "") {
    out_ += ns_ + name + "{" + (extra_label.empty() ? "" : extra_label + ",") + label_ + "} " +
            Number(value) + "\n";
  }
  // Metrics of one sample each: their HELP and TYPE lines, then the sample.
  struct Single {
    const char* name;
    const char* type;
    double value;
    const char* help;
  };
  void WriteSingles(std::initializer_list<Single> metrics) {
    for (const Single& m : metrics) {
      Header(m.name, m.type, m.help);
      Sample(m.name, m.value);
    }
  }
  void WriteHistogram(const std::string& name, const char* help, const Histogram& h) {
    Header(name, "histogram", help);
    const std::vector<uint64_t> cumulative = h.CumulativeCounts();
    for (size_t i = 0; i < cumulative.size(); ++i) {
      std::string le = i < h.bounds().size() ? Number(h.bounds()[i]) : "+Inf";
      Sample(name + "_bucket", (double)cumulative[i], "le=\"" + le + "\"");
    }
    Sample(name + "_sum", h.sum());
    Sample(name + "_count", (double)h.count());
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string ns_;  // "tern:"
  std::string label_;
  std::string out_;
};

PercentileSummary FromHistogram(const Histogram& h) {
  PercentileSummary s;
  s.count = h.count();
  if (s.count == 0) return s;
  s.p50 = h.Percentile(0.5);
  s.p90 = h.Percentile(0.9);
  s.p99 = h.Percentile(0.99);
  s.mean = h.sum() / (double)s.count;
  return s;
}

bool IsNamespaceChar(char c, bool first) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
         (!first && c >= '0' && c <= '9');
}

}  // namespace

Status ValidateMetricsPrefix(const std::string& prefix) {
  bool ok = !prefix.empty();
  for (size_t i = 0; ok && i < prefix.size(); ++i) ok = IsNamespaceChar(prefix[i], i == 0);
  if (!ok) {
    return InvalidArgument("--metrics-prefix: '" + prefix +
                           "' is not a metric namespace (letters, digits and '_', not starting "
                           "with a digit; e.g. tern or vllm)");
  }
  return Status::Ok();
}

LatencySummaries ServerMetrics::Totals() const {
  std::lock_guard<std::mutex> lock(mu_);
  LatencySummaries out;
  out.ttft = FromHistogram(ttft_);
  out.tpot = FromHistogram(tpot_);
  out.itl = FromHistogram(itl_);
  out.e2e = FromHistogram(e2e_);
  out.queue = FromHistogram(queue_);
  return out;
}

ServerMetrics::ServerMetrics(std::string prefix)
    : prefix_(std::move(prefix)),
      ttft_(kTtftBounds),
      tpot_(kTokenBounds),
      itl_(kTokenBounds),
      e2e_(kRequestBounds),
      queue_(kRequestBounds) {
  CHECK(ValidateMetricsPrefix(prefix_).ok());
}

void ServerMetrics::Observe(const RequestMetrics& m) {
  recent_.Observe(m);
  std::lock_guard<std::mutex> lock(mu_);
  if (m.generated_tokens > 0) ttft_.Observe(m.ttft_s);
  if (m.generated_tokens > 1) tpot_.Observe(m.tpot_s);
  for (double gap : m.itl_s) itl_.Observe(gap);
  e2e_.Observe(m.e2e_s);
  queue_.Observe(m.queue_s);
}

std::string ServerMetrics::Render(const std::string& model_name, const EngineStats* stats) const {
  EngineStats s = stats ? *stats : EngineStats{};
  Writer w(prefix_, model_name);
  w.WriteSingles({
      {"num_requests_running", "gauge", (double)s.num_running,
       "Number of requests in the running batch."},
      {"num_requests_waiting", "gauge", (double)s.num_waiting,
       "Number of requests waiting to be scheduled."},
      {"kv_cache_usage_perc", "gauge", s.kv_cache_usage,
       "Fraction of KV-cache blocks in use (0 to 1)."},
  });
  if (prefix_ == "vllm") {
    // vLLM's name before kv_cache_usage_perc; older schedulers read this one.
    w.WriteSingles(
        {{"gpu_cache_usage_perc", "gauge", s.kv_cache_usage,
          "Fraction of KV-cache blocks in use (0 to 1); the older name of kv_cache_usage_perc."}});
  }
  if (stats && s.block_size > 0) {
    // vLLM's info metric: a scheduler's prefix-cache scorer reads the block
    // size and the number of blocks from its labels (num_gpu_blocks is
    // vLLM's label name; here the blocks are in memory).
    w.Header("cache_config_info", "gauge",
             "The KV cache's configuration in labels: block_size (tokens per block), "
             "num_gpu_blocks (blocks). Value 1.");
    w.Sample("cache_config_info", 1,
             "block_size=\"" + std::to_string(s.block_size) + "\",num_gpu_blocks=\"" +
                 std::to_string(s.num_kv_blocks) + "\"");
  }
  w.WriteSingles({
      {"kv_cache_capacity_tokens", "gauge", (double)s.kv_cache_capacity_tokens,
       "Token slots of the KV cache (its blocks x block size, at its element type)."},
      {"prompt_tokens_total", "counter", (double)s.prompt_tokens_total,
       "Number of prompt tokens of the requests served (prefix-cache hits included)."},
      {"generation_tokens_total", "counter", (double)s.generation_tokens_total,
       "Number of generated tokens."},
      {"forced_tokens_total", "counter", (double)s.forced_tokens_total,
       "Generated tokens appended by jump-forward (structured outputs)."},
      {"prefix_cache_queries_total", "counter", (double)s.prefix_cache_queries_total,
       "Prompt tokens looked up in the prefix cache."},
      {"prefix_cache_hits_total", "counter", (double)s.prefix_cache_hits_total,
       "Prompt tokens found in the prefix cache."},
      {"kv_evicted_tokens_total", "counter", (double)s.kv_evicted_tokens_total,
       "Tokens dropped from requests' KV by streaming eviction (--kv-eviction streaming)."},
      {"num_preemptions_total", "counter", (double)s.num_preemptions_total,
       "Number of request preemptions."},
  });
  w.Header("request_success_total", "counter", "Number of finished requests by finish reason.");
  for (const char* reason : {"stop", "length", "abort"}) {
    auto it = s.request_success_total.find(reason);
    uint64_t v = it == s.request_success_total.end() ? 0 : it->second;
    w.Sample("request_success_total", (double)v, std::string("finished_reason=\"") + reason + "\"");
  }
  // Speculative decoding (vLLM's names; 0 while it is off).
  w.WriteSingles({
      {"spec_decode_num_drafts_total", "counter", (double)s.spec_num_drafts_total,
       "Decode steps that verified speculative proposals."},
      {"spec_decode_num_draft_tokens_total", "counter", (double)s.spec_num_draft_tokens_total,
       "Speculative tokens proposed and verified."},
      {"spec_decode_num_accepted_tokens_total", "counter", (double)s.spec_num_accepted_tokens_total,
       "Speculative tokens accepted."},
  });
  w.Header("spec_decode_num_accepted_tokens_per_pos_total", "counter",
           "Speculative tokens accepted at each proposal position (0 = first).");
  for (size_t i = 0; i < s.spec_accepted_per_position.size(); ++i) {
    w.Sample("spec_decode_num_accepted_tokens_per_pos_total",
             (double)s.spec_accepted_per_position[i], "position=\"" + std::to_string(i) + "\"");
  }
  std::lock_guard<std::mutex> lock(mu_);
  w.WriteHistogram("time_to_first_token_seconds", "Histogram of time to first token in seconds.",
                   ttft_);
  w.WriteHistogram("time_per_output_token_seconds",
                   "Histogram of mean time per output token after the first, in seconds.", tpot_);
  w.WriteHistogram("inter_token_latency_seconds", "Histogram of gaps between tokens in seconds.",
                   itl_);
  w.WriteHistogram("e2e_request_latency_seconds", "Histogram of request latency in seconds.", e2e_);
  w.WriteHistogram("request_queue_time_seconds",
                   "Histogram of time from arrival to first scheduling in seconds.", queue_);
  return w.Take();
}

}  // namespace tern
