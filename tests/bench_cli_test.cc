// End-to-end tests of `tern bench` on a synthesized tiny model: the JSON
// fields, the KV bytes a depth adds to each decoded token, and bad options.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "tests/cli_util.h"

namespace tern {
namespace {

using json = nlohmann::json;
using tern::testing::RunTern;
using tern::testing::ShellQuote;
using tern::testing::TempDir;

class BenchCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (tern::testing::TernBinary().empty()) GTEST_SKIP() << "TERN_BINARY not set (run through ctest)";
    model_ = dir_.File("tiny.gguf");
    auto r = RunTern("model synth --preset tiny --type q4_0 -o " + ShellQuote(model_));
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  // One JSON object per test line of `tern bench --json`.
  std::vector<json> Bench(const std::string& extra) {
    auto r = RunTern("bench -m " + ShellQuote(model_) + " -t 1 -r 1 --json " + extra);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::vector<json> lines;
    std::istringstream in(r.out);
    std::string line;
    while (std::getline(in, line)) {
      if (!line.empty()) lines.push_back(json::parse(line));
    }
    return lines;
  }
  TempDir dir_;
  std::string model_;
};

TEST_F(BenchCliTest, JsonHasTheRooflineFieldsAndDepthAddsKvBytes) {
  const std::vector<json> at0 = Bench("-p 8 -n 4");
  const std::vector<json> at32 = Bench("-p 8 -n 4 -d 32");
  ASSERT_EQ(at0.size(), 2u);
  ASSERT_EQ(at32.size(), 2u);
  EXPECT_EQ(at0[0]["test"], "pp8");
  EXPECT_EQ(at0[1]["test"], "tg4");
  EXPECT_EQ(at32[1]["test"], "tg4");
  EXPECT_EQ(at0[1]["n_depth"], 0);
  EXPECT_EQ(at32[1]["n_depth"], 32);
  for (const json& j : {at0[0], at0[1], at32[0], at32[1]}) {
    EXPECT_GT(j["tokens_per_second"].get<double>(), 0.0) << j.dump();
    EXPECT_GT(j["bandwidth_gb_s"].get<double>(), 0.0) << j.dump();
    EXPECT_GT(j["roofline_fraction"].get<double>(), 0.0) << j.dump();
    // A tiny model: the probe's floor, 256 MiB (or 4x a last-level cache
    // sysfs reports, when that is larger).
    EXPECT_GE(j["bandwidth_probe_bytes"].get<int64_t>(), 256ll << 20) << j.dump();
    // The settled probes: best >= median >= worst, a spread in [0, 1), at
    // least the rule's minimum of 6 rounds (two bandwidth probes: 12), at
    // most its cap of 40 per probe.
    EXPECT_GE(j["bandwidth_gb_s"].get<double>(), j["bandwidth_median_gb_s"].get<double>());
    EXPECT_GE(j["bandwidth_median_gb_s"].get<double>(), j["bandwidth_worst_gb_s"].get<double>());
    EXPECT_GE(j["bandwidth_spread"].get<double>(), 0.0);
    EXPECT_LT(j["bandwidth_spread"].get<double>(), 1.0);
    EXPECT_GE(j["bandwidth_rounds"].get<int>(), 12);
    EXPECT_LE(j["bandwidth_rounds"].get<int>(), 80);
    EXPECT_GT(j["bandwidth_probe_chunk_bytes"].get<int64_t>(), 0);
    EXPECT_GE(j["fma_peak_gflops"].get<double>(), j["fma_median_gflops"].get<double>());
    EXPECT_GE(j["fma_median_gflops"].get<double>(), j["fma_worst_gflops"].get<double>());
    EXPECT_GE(j["fma_rounds"].get<int>(), 6);
    EXPECT_LE(j["fma_rounds"].get<int>(), 40);
    EXPECT_TRUE(j["fma_settled"].is_boolean());
    const double huge = j["weights_2mib_pages_fraction"].get<double>();
    EXPECT_GE(huge, 0.0);
    EXPECT_LE(huge, 1.0);
  }
  // tg reads the weights and the KV at the mean depth: 32 positions deeper
  // is 32 positions' KV more per token (F16 K and V of every layer).
  const int64_t extra = at32[1]["bytes_per_token"].get<int64_t>() -
                        at0[1]["bytes_per_token"].get<int64_t>();
  EXPECT_GT(extra, 0);
  EXPECT_EQ(extra % 32, 0) << extra;
}

// --pairs N: tg alone gets the paired fraction (decode steps alternated
// with probe rounds), its quartiles in order; --pairs 0 leaves it out.
TEST_F(BenchCliTest, PairedFractionOnTgOnly) {
  const std::vector<json> paired = Bench("-p 8 -n 4 --pairs 6");
  ASSERT_EQ(paired.size(), 2u);
  EXPECT_FALSE(paired[0].contains("paired_fraction")) << paired[0].dump();
  const json& tg = paired[1];
  ASSERT_TRUE(tg.contains("paired_fraction")) << tg.dump();
  EXPECT_EQ(tg["paired_pairs"].get<int>(), 6);
  const double p25 = tg["paired_fraction_p25"].get<double>(),
               med = tg["paired_fraction"].get<double>(),
               p75 = tg["paired_fraction_p75"].get<double>();
  EXPECT_GT(p25, 0.0);
  EXPECT_LE(p25, med);
  EXPECT_LE(med, p75);
  EXPECT_GT(tg["paired_decode_gb_s"].get<double>(), 0.0);
  EXPECT_GT(tg["paired_probe_gb_s"].get<double>(), 0.0);
  const std::vector<json> none = Bench("-p 0 -n 4 --pairs 0");
  ASSERT_EQ(none.size(), 1u);
  EXPECT_FALSE(none[0].contains("paired_fraction")) << none[0].dump();
  // The table form names it.
  auto r = RunTern("bench -m " + ShellQuote(model_) + " -t 1 -r 1 -p 0 -n 4 --pairs 4");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("tg4 paired with the read probe: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("4 pairs of one decode step and one probe round"), std::string::npos)
      << r.out;
}

TEST_F(BenchCliTest, BadOptionsExitNonZero) {
  for (const char* args : {"-d -1", "-n -2", "-r 0", "-d 99999999", "--pairs -1",
                           "--pairs 10001"}) {
    auto r = RunTern("bench -m " + ShellQuote(model_) + " " + args);
    EXPECT_NE(r.exit_code, 0) << args;
    EXPECT_NE(r.err.find("tern bench"), std::string::npos) << args << ": " << r.err;
  }
  auto r = RunTern("bench -m " + ShellQuote(dir_.File("missing.gguf")) + " -p 4 -n 2");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("missing.gguf"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace tern
