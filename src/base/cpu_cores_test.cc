#include "base/cpu_cores.h"

#include <gtest/gtest.h>

namespace tern {
namespace {

TEST(CpuCoresTest, ParsesCpuMax) {
  EXPECT_DOUBLE_EQ(*ParseCpuMax("150000 100000\n"), 1.5);
  EXPECT_DOUBLE_EQ(*ParseCpuMax("200000 100000"), 2.0);
  for (const char* no_limit : {"max 100000\n", "", "100000", "abc 100000", "100000 0"}) {
    EXPECT_FALSE(ParseCpuMax(no_limit).has_value()) << no_limit;
  }
}

TEST(CpuCoresTest, ParsesCfsQuota) {
  EXPECT_DOUBLE_EQ(*ParseCfsQuota("300000\n", "100000\n"), 3.0);
  EXPECT_DOUBLE_EQ(*ParseCfsQuota("50000", "100000"), 0.5);
  EXPECT_FALSE(ParseCfsQuota("-1\n", "100000\n").has_value());
  EXPECT_FALSE(ParseCfsQuota("", "").has_value());
}

TEST(CpuCoresTest, QuotaRoundsUpToWholeCores) {
  EXPECT_EQ(QuotaCores(0.5), 1);
  EXPECT_EQ(QuotaCores(1.0), 1);
  EXPECT_EQ(QuotaCores(1.5), 2);
  EXPECT_EQ(QuotaCores(4.0), 4);
}

// Two sockets of two cores with two hyperthreads each (8 logical CPUs).
constexpr const char* kCpuinfo =
    "processor\t: 0\nphysical id\t: 0\ncore id\t\t: 0\n\n"
    "processor\t: 1\nphysical id\t: 0\ncore id\t\t: 1\n\n"
    "processor\t: 2\nphysical id\t: 1\ncore id\t\t: 0\n\n"
    "processor\t: 3\nphysical id\t: 1\ncore id\t\t: 1\n\n"
    "processor\t: 4\nphysical id\t: 0\ncore id\t\t: 0\n\n"
    "processor\t: 5\nphysical id\t: 0\ncore id\t\t: 1\n\n"
    "processor\t: 6\nphysical id\t: 1\ncore id\t\t: 0\n\n"
    "processor\t: 7\nphysical id\t: 1\ncore id\t\t: 1\n";

TEST(CpuCoresTest, CountsPhysicalCoresInTheAffinityMask) {
  EXPECT_EQ(CountPhysicalCores(kCpuinfo, {}), 4);
  EXPECT_EQ(CountPhysicalCores(kCpuinfo, {0, 1, 2, 3, 4, 5, 6, 7}), 4);
  EXPECT_EQ(CountPhysicalCores(kCpuinfo, {0, 4}), 1);  // siblings of one core
  EXPECT_EQ(CountPhysicalCores(kCpuinfo, {0, 2}), 2);  // core 0 of each socket
  EXPECT_EQ(CountPhysicalCores("processor\t: 0\nmodel name\t: x\n", {}), 0);
}

TEST(CpuCoresTest, FindsTheCpuControllerDirectories) {
  const struct {
    const char* what;
    const char* cgroup;
    const char* mountinfo;
    std::vector<std::string> paths;
    int version;
  } cases[] = {
      {"v2: the directory and its parents", "0::/user.slice/app.service\n",
       "24 1 0:22 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"
       "25 1 0:23 / /proc rw - proc proc rw\n",
       {"/sys/fs/cgroup/user.slice/app.service", "/sys/fs/cgroup/user.slice", "/sys/fs/cgroup"},
       2},
      {"v1: the cpu controller under a container root",
       "4:memory:/docker/abc\n2:cpu,cpuacct:/docker/abc\n1:name=systemd:/\n",
       "31 30 0:28 /docker/abc /sys/fs/cgroup/cpu,cpuacct ro - cgroup cgroup rw,cpu,cpuacct\n"
       "34 30 0:31 /docker/abc /sys/fs/cgroup/memory ro - cgroup cgroup rw,memory\n",
       {"/sys/fs/cgroup/cpu,cpuacct"},
       1},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    const std::vector<CgroupDir> dirs = CgroupCpuDirs(c.cgroup, c.mountinfo);
    ASSERT_EQ(dirs.size(), c.paths.size());
    for (size_t i = 0; i < dirs.size(); ++i) EXPECT_EQ(dirs[i].path, c.paths[i]);
    EXPECT_EQ(dirs[0].version, c.version);
  }
}

TEST(CpuCoresTest, NoCgroupNoDirectories) {
  EXPECT_TRUE(CgroupCpuDirs("", "").empty());
  // A v2 line without a cgroup2 mount.
  EXPECT_TRUE(CgroupCpuDirs("0::/\n", "25 1 0:23 / /proc rw - proc proc rw\n").empty());
}

TEST(CpuCoresTest, AvailableCoresIsAtLeastOneAndAtMostTheCpus) {
  EXPECT_GE(AvailableCores(), 1);
  EXPECT_LE(AvailableCores(), (int)std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace
}  // namespace tern
