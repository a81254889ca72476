#include "base/cpu_cores.h"

#include <sched.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>

namespace tern {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "";
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n')) s.remove_suffix(1);
  return s;
}

std::optional<int64_t> ParseInt(std::string_view s) {
  s = Trim(s);
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  for (;;) {
    const size_t at = s.find(sep);
    parts.push_back(s.substr(0, at));
    if (at == std::string_view::npos) return parts;
    s.remove_prefix(at + 1);
  }
}

// The logical CPUs this thread may run on; empty when unknown.
std::set<int> AffinityCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::set<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.insert(c);
  }
  return cpus;
}

// The smallest quota (in CPUs) on the cgroup paths, nullopt when none.
std::optional<double> CgroupQuota() {
  std::optional<double> best;
  for (const CgroupDir& leaf :
       CgroupCpuDirs(ReadFile("/proc/self/cgroup"), ReadFile("/proc/self/mountinfo"))) {
    std::optional<double> q = leaf.version == 2
                                  ? ParseCpuMax(ReadFile(leaf.path + "/cpu.max"))
                                  : ParseCfsQuota(ReadFile(leaf.path + "/cpu.cfs_quota_us"),
                                                  ReadFile(leaf.path + "/cpu.cfs_period_us"));
    if (q && (!best || *q < *best)) best = q;
  }
  return best;
}

int ComputeAvailableCores() {
  const std::set<int> allowed = AffinityCpus();
  int cores = CountPhysicalCores(ReadFile("/proc/cpuinfo"), allowed);
  if (cores == 0) cores = !allowed.empty() ? (int)allowed.size()
                                           : (int)std::thread::hardware_concurrency();
  if (!allowed.empty()) cores = std::min(cores, (int)allowed.size());
  if (std::optional<double> quota = CgroupQuota()) cores = std::min(cores, QuotaCores(*quota));
  return std::max(1, cores);
}

}  // namespace

int AvailableCores() {
  static const int cores = ComputeAvailableCores();
  return cores;
}

int CountPhysicalCores(std::string_view cpuinfo, const std::set<int>& allowed) {
  std::set<std::pair<int64_t, int64_t>> cores;
  int64_t processor = -1, physical = 0;
  for (std::string_view line : Split(cpuinfo, '\n')) {
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view key = Trim(line.substr(0, colon));
    const std::optional<int64_t> value = ParseInt(line.substr(colon + 1));
    if (!value) continue;
    if (key == "processor") processor = *value, physical = 0;
    if (key == "physical id") physical = *value;
    if (key == "core id" && (allowed.empty() || allowed.count((int)processor) > 0)) {
      cores.insert({physical, *value});
    }
  }
  return (int)cores.size();
}

std::optional<double> ParseCpuMax(std::string_view text) {
  const std::vector<std::string_view> f = Split(Trim(text), ' ');
  if (f.size() != 2) return std::nullopt;
  const std::optional<int64_t> quota = ParseInt(f[0]), period = ParseInt(f[1]);
  if (!quota || !period || *quota <= 0 || *period <= 0) return std::nullopt;
  return (double)*quota / (double)*period;
}

std::optional<double> ParseCfsQuota(std::string_view quota, std::string_view period) {
  const std::optional<int64_t> q = ParseInt(quota), p = ParseInt(period);
  if (!q || !p || *q <= 0 || *p <= 0) return std::nullopt;
  return (double)*q / (double)*p;
}

int QuotaCores(double cpus) { return std::max(1, (int)std::ceil(cpus - 1e-9)); }

std::vector<CgroupDir> CgroupCpuDirs(std::string_view proc_cgroup, std::string_view mountinfo) {
  // This process's path in each hierarchy: v2 ("0::/a/b") and v1 cpu.
  std::string v2_path, v1_path;
  bool have_v2 = false, have_v1 = false;
  for (std::string_view line : Split(proc_cgroup, '\n')) {
    const size_t c1 = line.find(':');
    const size_t c2 = c1 == std::string_view::npos ? c1 : line.find(':', c1 + 1);
    if (c2 == std::string_view::npos) continue;
    const std::string_view controllers = line.substr(c1 + 1, c2 - c1 - 1);
    const std::string path(Trim(line.substr(c2 + 1)));
    if (line.substr(0, c1) == "0" && controllers.empty()) have_v2 = true, v2_path = path;
    for (std::string_view c : Split(controllers, ',')) {
      if (c == "cpu") have_v1 = true, v1_path = path;
    }
  }
  std::vector<CgroupDir> dirs;
  // mountinfo: ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - TYPE SOURCE SUPER
  for (std::string_view line : Split(mountinfo, '\n')) {
    const size_t dash = line.find(" - ");
    if (dash == std::string_view::npos) continue;
    const std::vector<std::string_view> head = Split(line.substr(0, dash), ' ');
    const std::vector<std::string_view> tail = Split(line.substr(dash + 3), ' ');
    if (head.size() < 5 || tail.size() < 3) continue;
    int version = 0;
    if (tail[0] == "cgroup2" && have_v2) version = 2;
    if (tail[0] == "cgroup" && have_v1) {
      for (std::string_view o : Split(Trim(tail[2]), ',')) {
        if (o == "cpu") version = 1;
      }
    }
    if (version == 0) continue;
    const std::string root(head[3]), mount(head[4]);
    const std::string& path = version == 2 ? v2_path : v1_path;
    // The process's directory under this mount: its path below the mount's
    // root (a container sees its own cgroup as "/").
    std::string rel;
    if (root == "/") {
      rel = path;
    } else if (path.compare(0, root.size(), root) == 0 &&
               (path.size() == root.size() || path[root.size()] == '/')) {
      rel = path.substr(root.size());
    } else {
      continue;
    }
    while (!rel.empty() && rel.back() == '/') rel.pop_back();
    // Leaf first, then each parent up to the mount point.
    for (;;) {
      dirs.push_back({mount + rel, version});
      if (rel.empty()) break;
      rel.resize(rel.rfind('/'));
    }
  }
  return dirs;
}

}  // namespace tern
