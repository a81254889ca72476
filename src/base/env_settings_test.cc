#include "base/env_settings.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "base/paths.h"

namespace tern {
namespace {

EnvSettings ReadFrom(const std::map<std::string, std::string>& env) {
  return EnvSettings::Read([&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST(EnvSettingsTest, NothingSetMeansDefaultsAndNothingToLog) {
  const EnvSettings s = ReadFrom({{"HOME", "/home/x"}});
  EXPECT_EQ(s.step_log_path, "");
  EXPECT_TRUE(s.found.empty());
}

TEST(EnvSettingsTest, StepLogIsReadAndListed) {
  const EnvSettings s = ReadFrom({{"TERN_STEP_LOG", "/tmp/steps.jsonl"}});
  EXPECT_EQ(s.step_log_path, "/tmp/steps.jsonl");
  ASSERT_EQ(s.found.size(), 1u);
  EXPECT_EQ(s.found[0], "TERN_STEP_LOG=/tmp/steps.jsonl");
  // Empty is unset.
  EXPECT_TRUE(ReadFrom({{"TERN_STEP_LOG", ""}}).found.empty());
}

TEST(EnvSettingsTest, PoolSpinInMicroseconds) {
  EXPECT_EQ(ReadFrom({}).pool_spin_us, -1);
  EXPECT_EQ(ReadFrom({{"TERN_POOL_SPIN", "50"}}).pool_spin_us, 50);
  EXPECT_EQ(ReadFrom({{"TERN_POOL_SPIN", "-3"}}).pool_spin_us, 0);
}

TEST(EnvSettingsTest, IsaCapIsReadAsGiven) {
  EXPECT_EQ(ReadFrom({}).isa, "");
  const EnvSettings s = ReadFrom({{"TERN_ISA", "avx2"}});
  EXPECT_EQ(s.isa, "avx2");
  ASSERT_EQ(s.found.size(), 1u);
  EXPECT_EQ(s.found[0], "TERN_ISA=avx2");
  // A name no table has is kept: SelectKernelTable reports it.
  EXPECT_EQ(ReadFrom({{"TERN_ISA", "sse9"}}).isa, "sse9");
}

TEST(EnvSettingsTest, WeightLayoutIsReadAsGiven) {
  EXPECT_EQ(ReadFrom({}).weight_layout, "");
  const EnvSettings s = ReadFrom({{"TERN_WEIGHT_LAYOUT", "rows"}});
  EXPECT_EQ(s.weight_layout, "rows");
  ASSERT_EQ(s.found.size(), 1u);
  EXPECT_EQ(s.found[0], "TERN_WEIGHT_LAYOUT=rows");
  // Other values are kept for main to reject with a warning.
  EXPECT_EQ(ReadFrom({{"TERN_WEIGHT_LAYOUT", "diagonal"}}).weight_layout, "diagonal");
}

// Memory and paths.
TEST(EnvSettingsTest, KvHugePagesOffOnlyWithZero) {
  EXPECT_TRUE(ReadFrom({}).kv_huge_pages);
  EXPECT_TRUE(ReadFrom({{"TERN_KV_HUGEPAGES", "1"}}).kv_huge_pages);
  const EnvSettings off = ReadFrom({{"TERN_KV_HUGEPAGES", "0"}});
  EXPECT_FALSE(off.kv_huge_pages);
  ASSERT_EQ(off.found.size(), 1u);
  EXPECT_EQ(off.found[0], "TERN_KV_HUGEPAGES=0");
}

TEST(EnvSettingsTest, ModelsDirIsReadAndWinsOverTheBuiltInDefault) {
  const EnvSettings s = ReadFrom({{"TERN_MODELS_DIR", "/data/models"}});
  EXPECT_EQ(s.models_dir, "/data/models");
  EXPECT_TRUE(s.found.empty());  // a path, not a tuning: not logged
  EXPECT_EQ(ModelsDir(s.models_dir), "/data/models");
  EXPECT_EQ(ReadFrom({}).models_dir, "");
  // Unset: the built-in default, never "".
  EXPECT_FALSE(ModelsDir("").empty());
}

}  // namespace
}  // namespace tern
