#include "tools/bench_serve_instances.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace tern {
namespace {

// The metric's name without its namespace ("tern:", "vllm:") and "_total".
std::string BareName(std::string name) {
  const size_t colon = name.rfind(':');
  if (colon != std::string::npos) name = name.substr(colon + 1);
  const std::string total = "_total";
  if (name.size() > total.size() && name.compare(name.size() - total.size(), total.size(), total) == 0) {
    name.resize(name.size() - total.size());
  }
  return name;
}

double* Field(InstanceCounters* c, const std::string& bare) {
  if (bare == "request_success") return &c->requests;
  if (bare == "prompt_tokens") return &c->prompt_tokens;
  if (bare == "prefix_cache_queries") return &c->prefix_cache_queries;
  if (bare == "prefix_cache_hits") return &c->prefix_cache_hits;
  return nullptr;
}

std::string Fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, v);
  return buf;
}

}  // namespace

bool ParseInstanceCounters(const std::string& text, InstanceCounters* out) {
  *out = InstanceCounters{};
  bool found = false;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t name_end = line.find_first_of("{ ");
    if (name_end == std::string::npos) continue;
    double* field = Field(out, BareName(line.substr(0, name_end)));
    if (!field) continue;
    // The value follows the labels (which may hold spaces) or the name.
    size_t value_at = name_end;
    if (line[name_end] == '{') {
      value_at = line.rfind('}');
      if (value_at == std::string::npos) continue;
      ++value_at;
    }
    const char* begin = line.c_str() + value_at;
    char* end = nullptr;
    const double v = std::strtod(begin, &end);
    if (end == begin) continue;
    *field += v;
    found = true;
  }
  return found;
}

InstanceSpread SummarizeInstances(const std::vector<std::string>& urls,
                                  const std::vector<InstanceCounters>& before,
                                  const std::vector<InstanceCounters>& after) {
  InstanceSpread s;
  double hits = 0, queries = 0, total = 0, busiest = 0;
  for (size_t i = 0; i < urls.size() && i < before.size() && i < after.size(); ++i) {
    InstanceLoad load;
    load.url = urls[i];
    load.delta.requests = after[i].requests - before[i].requests;
    load.delta.prompt_tokens = after[i].prompt_tokens - before[i].prompt_tokens;
    load.delta.prefix_cache_queries = after[i].prefix_cache_queries - before[i].prefix_cache_queries;
    load.delta.prefix_cache_hits = after[i].prefix_cache_hits - before[i].prefix_cache_hits;
    hits += load.delta.prefix_cache_hits;
    queries += load.delta.prefix_cache_queries;
    total += load.delta.requests;
    busiest = std::max(busiest, load.delta.requests);
    s.instances.push_back(std::move(load));
  }
  if (!s.instances.empty()) s.mean_requests = total / (double)s.instances.size();
  if (s.mean_requests > 0) s.max_over_mean = busiest / s.mean_requests;
  if (queries > 0) s.prefix_cache_hit_rate = hits / queries;
  return s;
}

std::string FormatInstanceSpread(const InstanceSpread& s) {
  std::string out = std::string(15, '-') + "Instances (/metrics)" + std::string(15, '-') + "\n";
  out += "  requests  prompt tok  prefix hit  instance\n";
  for (const InstanceLoad& l : s.instances) {
    char row[512];
    std::snprintf(row, sizeof(row), "  %8.0f  %10.0f  %9.1f%%  %s\n", l.delta.requests,
                  l.delta.prompt_tokens, 100 * l.hit_rate(), l.url.c_str());
    out += row;
  }
  out += "Busiest instance / mean requests:    " + Fmt("%.2f", s.max_over_mean) + "\n";
  out += "Prefix-cache hit rate (all):         " + Fmt("%.1f%%", 100 * s.prefix_cache_hit_rate) + "\n";
  out += std::string(50, '=') + "\n";
  return out;
}

nlohmann::json InstanceSpreadJson(const InstanceSpread& s) {
  nlohmann::json instances = nlohmann::json::array();
  for (const InstanceLoad& l : s.instances) {
    instances.push_back({{"url", l.url},
                         {"requests", l.delta.requests},
                         {"prompt_tokens", l.delta.prompt_tokens},
                         {"prefix_cache_queries", l.delta.prefix_cache_queries},
                         {"prefix_cache_hits", l.delta.prefix_cache_hits},
                         {"prefix_cache_hit_rate", l.hit_rate()}});
  }
  return {{"instances", instances},
          {"instance_max_over_mean", s.max_over_mean},
          {"prefix_cache_hit_rate", s.prefix_cache_hit_rate}};
}

}  // namespace tern
