// What `tern bench serve --instance-metrics URL,...` reports about the
// instances behind a load balancer: each instance's /metrics is read before
// and after the run, and the differences give every instance's share of the
// requests (spread = the busiest instance's count over the mean) and the
// prefix-cache hit rate of them all (hit tokens / looked-up tokens, summed).
//
// Reads tern's names (tern:request_success_total, tern:prompt_tokens_total,
// tern:prefix_cache_queries_total, tern:prefix_cache_hits_total) and the same
// names under any other prefix (vllm:...), with or without _total.
//
// Thread rules: pure functions of their arguments.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tern {

struct InstanceCounters {
  double requests = 0;  // finished requests, every finish reason
  double prompt_tokens = 0;
  double prefix_cache_queries = 0;  // prompt tokens looked up
  double prefix_cache_hits = 0;     // prompt tokens found
};

// Sums the counters above over all label sets in Prometheus text `text`.
// False when none of them is there (not a tern or vLLM /metrics page).
bool ParseInstanceCounters(const std::string& text, InstanceCounters* out);

struct InstanceLoad {
  std::string url;
  InstanceCounters delta;  // after - before
  double hit_rate() const {
    return delta.prefix_cache_queries > 0 ? delta.prefix_cache_hits / delta.prefix_cache_queries : 0;
  }
};

struct InstanceSpread {
  std::vector<InstanceLoad> instances;
  double mean_requests = 0;
  double max_over_mean = 0;          // the busiest instance's requests / mean (0 without requests)
  double prefix_cache_hit_rate = 0;  // sum of hits / sum of queries
};

// before, after and urls are parallel.
InstanceSpread SummarizeInstances(const std::vector<std::string>& urls,
                                  const std::vector<InstanceCounters>& before,
                                  const std::vector<InstanceCounters>& after);

// A table in the style of FormatServeSummary.
std::string FormatInstanceSpread(const InstanceSpread& s);
// {"instances": [{url, requests, prompt_tokens, prefix_cache_queries,
//  prefix_cache_hits, prefix_cache_hit_rate}], "instance_max_over_mean",
//  "prefix_cache_hit_rate"}
nlohmann::json InstanceSpreadJson(const InstanceSpread& s);

}  // namespace tern
