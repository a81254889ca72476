// How many cores this process may use: the physical cores in its CPU
// affinity mask (sched_getaffinity; hyperthread siblings count once), capped
// by the CPU quota of its cgroup (v2 `cpu.max`, v1 `cpu.cfs_quota_us` /
// `cpu.cfs_period_us`, the smallest on the path up to the hierarchy's root,
// a fraction rounded up). Always at least 1.
//
// The parse functions take the files' text, so that they can be tested
// without the files.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace tern {

// Cores available to this process (computed once, then cached).
int AvailableCores();

// Distinct (physical id, core id) pairs among the processors in `allowed`
// of a /proc/cpuinfo text (all processors when `allowed` is empty). 0 when
// the text has no core ids (then count the logical CPUs instead).
int CountPhysicalCores(std::string_view cpuinfo, const std::set<int>& allowed);

// CPUs of a cgroup v2 `cpu.max` text ("150000 100000" -> 1.5); nullopt for
// "max ..." (no limit) or text that does not parse.
std::optional<double> ParseCpuMax(std::string_view text);
// CPUs of a cgroup v1 quota and period ("150000", "100000" -> 1.5); nullopt
// for a quota of -1 (no limit) or text that does not parse.
std::optional<double> ParseCfsQuota(std::string_view quota, std::string_view period);
// Whole cores for a quota of `cpus` (rounded up, at least 1).
int QuotaCores(double cpus);

// The directories whose CPU quota applies to this process, leaf first, from
// the texts of /proc/self/cgroup and /proc/self/mountinfo: for cgroup v2
// (the "0::PATH" line and a cgroup2 mount) and for v1 (the line and mount
// with the "cpu" controller). Each comes with its version (1 or 2).
struct CgroupDir {
  std::string path;
  int version;
};
std::vector<CgroupDir> CgroupCpuDirs(std::string_view proc_cgroup, std::string_view mountinfo);

}  // namespace tern
