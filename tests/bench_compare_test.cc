// tools/bench_compare: llama-bench's JSON and tern bench's JSON lines parsed
// from hand-written samples, the medians / ranges / ratio table, the flag
// mapping, and `tern bench --compare-llama` end to end with a stand-in
// llama-bench (a shell script printing a fixed JSON sample) and with a
// missing or failing one. No timing is asserted.
#include "tools/bench_compare.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <sstream>

#include "tests/cli_util.h"

namespace tern {
namespace {

using json = nlohmann::json;
using tern::testing::RunTern;
using tern::testing::ShellQuote;
using tern::testing::TempDir;

// Trimmed from what llama-bench -o json prints (two tests; the fields the
// parser reads plus a few it skips).
const char* kLlamaJson = R"([
  {
    "build_commit": "3f545becc",
    "build_number": 10587,
    "cpu_info": "AMD EPYC",
    "model_filename": "/tmp/m.gguf",
    "n_threads": 2,
    "type_k": "f16",
    "type_v": "f16",
    "flash_attn": 1,
    "n_prompt": 128,
    "n_gen": 0,
    "n_depth": 0,
    "avg_ns": 1000000000,
    "avg_ts": 130.0,
    "stddev_ts": 15.0,
    "samples_ns": [ 1100000000, 900000000, 1000000000 ],
    "samples_ts": [ 116.4, 142.2, 128.0 ]
  },
  {
    "build_commit": "3f545becc",
    "cpu_info": "AMD EPYC",
    "n_prompt": 0,
    "n_gen": 32,
    "n_depth": 0,
    "avg_ts": 48.5,
    "stddev_ts": 0.5,
    "samples_ts": [ 48.0, 49.0 ]
  }
])";

TEST(BenchCompareTest, ParsesLlamaBenchJsonMedianOfItsSamples) {
  std::string build, cpu;
  auto s = ParseLlamaBenchJson(kLlamaJson, &build, &cpu);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->size(), 2u);
  EXPECT_EQ((*s)[0].test, "pp128");
  EXPECT_EQ((*s)[0].n_prompt, 128);
  EXPECT_DOUBLE_EQ((*s)[0].tokens_per_second, 128.0);  // median of 116.4, 142.2, 128.0
  EXPECT_EQ((*s)[1].test, "tg32");
  EXPECT_DOUBLE_EQ((*s)[1].tokens_per_second, 48.5);  // median of two: their mean
  EXPECT_EQ(build, "3f545becc");
  EXPECT_EQ(cpu, "AMD EPYC");
}

TEST(BenchCompareTest, LlamaBenchAvgTsDepthAndCombinedTests) {
  auto s = ParseLlamaBenchJson(
      R"([{"n_prompt": 512, "n_gen": 0, "n_depth": 4096, "avg_ts": 69.5},
          {"n_prompt": 512, "n_gen": 128, "avg_ts": 40}])");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ((*s)[0].test, "pp512 @ d4096");
  EXPECT_DOUBLE_EQ((*s)[0].tokens_per_second, 69.5);
  EXPECT_EQ((*s)[1].test, "pp512+tg128");  // no n_depth: a build before -d
}

TEST(BenchCompareTest, LlamaBenchBadOutputNamesTheProblem) {
  struct Case {
    const char* text;
    const char* expect;
  };
  for (const Case& c : std::vector<Case>{
           {"[\n", "not JSON"},  // what llama-bench prints before failing to load
           {"| model | size |", "not JSON"},
           {"{}", "not a JSON array"},
           {"[]", "no tests"},
           {R"([{"n_prompt": 8, "avg_ts": 5}])", "'n_gen'"},
           {R"([{"n_prompt": 8, "n_gen": 0}])", "neither 'samples_ts' nor 'avg_ts'"},
           {R"([{"n_prompt": -1, "n_gen": 0, "avg_ts": 5}])", "not a count"},
           {R"([{"n_prompt": 8, "n_gen": 0, "avg_ts": 0}])", "not positive"},
           {R"([{"n_prompt": 8, "n_gen": 0, "samples_ts": ["x"]}])", "non-number"},
       }) {
    auto s = ParseLlamaBenchJson(c.text);
    ASSERT_FALSE(s.ok()) << c.text;
    EXPECT_NE(s.status().message().find(c.expect), std::string::npos)
        << c.text << " -> " << s.status().message();
  }
}

TEST(BenchCompareTest, ParsesTernBenchJsonLines) {
  auto s = ParseTernBenchJson(
      "{\"test\":\"pp128\",\"n_depth\":0,\"tokens_per_second\":180.5,\"roofline_fraction\":0.4}\n"
      "\n"
      "{\"test\":\"tg32\",\"n_depth\":512,\"tokens_per_second\":60.25,"
      "\"paired_fraction\":0.91}\n");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->size(), 2u);
  EXPECT_EQ((*s)[0].test, "pp128");
  EXPECT_DOUBLE_EQ((*s)[0].roofline_fraction, 0.4);
  EXPECT_EQ((*s)[1].test, "tg32 @ d512");
  EXPECT_EQ((*s)[1].n_gen, 32);
  EXPECT_DOUBLE_EQ((*s)[1].tokens_per_second, 60.25);
  EXPECT_DOUBLE_EQ((*s)[0].paired_fraction, 0.0);
  EXPECT_DOUBLE_EQ((*s)[1].paired_fraction, 0.91);
  for (const char* bad : {"", "not json", "{\"test\":\"pp8\"}", "{\"test\":\"xx8\",\"tokens_per_second\":1}",
                          "{\"test\":\"pp\",\"tokens_per_second\":1}"}) {
    EXPECT_FALSE(ParseTernBenchJson(bad).ok()) << bad;
  }
}

BenchSample Sample(const std::string& test, double tps, double roof = 0, double paired = 0) {
  BenchSample s;
  s.test = test;
  s.tokens_per_second = tps;
  s.roofline_fraction = roof;
  s.paired_fraction = paired;
  return s;
}

TEST(BenchCompareTest, MediansRangesAndRatioPerTest) {
  const std::vector<std::vector<BenchSample>> tern = {
      {Sample("pp128", 200, 0.5), Sample("tg32", 60, 0.9, 0.95)},
      {Sample("pp128", 180, 0.4), Sample("tg32", 70, 0.8, 0.9)},
      {Sample("pp128", 220, 0.6), Sample("tg32", 62, 1.0, 0.97)}};
  const std::vector<std::vector<BenchSample>> llama = {
      {Sample("pp128", 160), Sample("tg32", 50), Sample("pp128+tg32", 45)},
      {Sample("pp128", 150), Sample("tg32", 40), Sample("pp128+tg32", 44)}};
  const std::vector<CompareRow> rows = CompareSamples(tern, llama);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].test, "pp128");
  EXPECT_DOUBLE_EQ(rows[0].tern_stats.median, 200);
  EXPECT_DOUBLE_EQ(rows[0].tern_stats.min, 180);
  EXPECT_DOUBLE_EQ(rows[0].tern_stats.max, 220);
  EXPECT_DOUBLE_EQ(rows[0].llama_stats.median, 155);  // even count: mean of the middle two
  EXPECT_DOUBLE_EQ(rows[0].ratio, 200.0 / 155.0);
  EXPECT_DOUBLE_EQ(rows[0].tern_roofline_median, 0.5);
  EXPECT_EQ(rows[1].test, "tg32");
  EXPECT_DOUBLE_EQ(rows[1].tern_stats.median, 62);
  EXPECT_DOUBLE_EQ(rows[1].llama_stats.median, 45);
  EXPECT_DOUBLE_EQ(rows[1].ratio, 62.0 / 45.0);
  EXPECT_DOUBLE_EQ(rows[1].tern_paired_median, 0.95);
  EXPECT_DOUBLE_EQ(rows[0].tern_paired_median, 0);
  EXPECT_EQ(rows[2].test, "pp128+tg32");  // llama-bench only: no ratio
  EXPECT_EQ(rows[2].tern_stats.count, 0);
  EXPECT_DOUBLE_EQ(rows[2].ratio, 0);
  // Per round: rounds 1 and 2 of both (tern's round 3 has no llama.cpp
  // round to pair with): 200/160, 180/150 and 60/50, 70/40.
  ASSERT_EQ(rows[0].round_ratios.size(), 2u);
  EXPECT_DOUBLE_EQ(rows[0].round_ratios[0], 200.0 / 160.0);
  EXPECT_DOUBLE_EQ(rows[0].round_ratios[1], 180.0 / 150.0);
  EXPECT_DOUBLE_EQ(rows[0].round_ratio_stats.median, (200.0 / 160.0 + 180.0 / 150.0) / 2);
  ASSERT_EQ(rows[1].round_ratios.size(), 2u);
  EXPECT_DOUBLE_EQ(rows[1].round_ratio_stats.min, 60.0 / 50.0);
  EXPECT_DOUBLE_EQ(rows[1].round_ratio_stats.max, 70.0 / 40.0);
  EXPECT_TRUE(rows[2].round_ratios.empty());

  CompareContext c;
  c.model = "/tmp/m.gguf";
  c.cpu = "AMD EPYC";
  c.isa = "avx512vnni";
  c.threads = 2;
  c.rounds = 3;
  c.reps = 1;
  c.kv = "f16";
  c.llama_build = "3f545becc";
  c.cpus = 2;
  c.other_cpus = {0.1, 0.05, 0.2};
  const std::string table = FormatCompareTable(rows, c);
  EXPECT_NE(table.find("quiet: other processes used at most 0.20 of 2 CPUs"), std::string::npos)
      << table;
  EXPECT_NE(table.find("AMD EPYC, 2 threads, KV cache f16; tern kernel table avx512vnni; "
                       "llama.cpp build 3f545becc"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("| pp128 | 200.00 (180.00-220.00) | 155.00 (150.00-160.00) | 1.29x | "
                       "1.23x (1.20-1.25) | 50% |"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("| tg32 | 62.00 (60.00-70.00) | 45.00 (40.00-50.00) | 1.38x | "
                       "1.48x (1.20-1.75) | 90% (paired 95%) |"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("| pp128+tg32 | - | 44.50 (44.00-45.00) | - | - | - |"), std::string::npos)
      << table;
  const std::vector<json> js = CompareJson(rows, c);
  ASSERT_EQ(js.size(), 3u);
  EXPECT_EQ(js[0]["test"], "pp128");
  EXPECT_DOUBLE_EQ(js[0]["ratio"].get<double>(), 200.0 / 155.0);
  EXPECT_DOUBLE_EQ(js[0]["llama"]["median"].get<double>(), 155);
  EXPECT_EQ(js[0]["tern"]["rounds"].size(), 3u);
  EXPECT_EQ(js[0]["cpu"], "AMD EPYC");
  EXPECT_TRUE(js[2]["ratio"].is_null());
  EXPECT_EQ(js[1]["round_ratios"].size(), 2u);
  EXPECT_DOUBLE_EQ(js[1]["round_ratio_median"].get<double>(), (60.0 / 50.0 + 70.0 / 40.0) / 2);
  EXPECT_TRUE(js[2]["round_ratio_median"].is_null());
  EXPECT_EQ(js[0]["quiet"], true);
  EXPECT_DOUBLE_EQ(js[0]["other_cpus_max"].get<double>(), 0.2);
}

TEST(BenchCompareTest, ABusyMachineIsSaidSo) {
  EXPECT_TRUE(IsQuiet({}));
  EXPECT_TRUE(IsQuiet({0.0, kQuietOtherCpus}));
  EXPECT_FALSE(IsQuiet({0.0, 1.5, 0.1}));
  const std::string note = QuietNote({0.1, 1.5, 0.9}, 2);
  EXPECT_EQ(note.rfind("NOT QUIET: other processes used up to 1.50 of 2 CPUs (median 0.90)", 0), 0u)
      << note;
  CompareContext c;
  c.cpus = 2;
  c.other_cpus = {0.1, 1.5};
  EXPECT_NE(FormatCompareTable({}, c).find("NOT QUIET"), std::string::npos);
  EXPECT_EQ(CompareJson(CompareSamples({{Sample("tg4", 10)}}, {{Sample("tg4", 5)}}), c)[0]["quiet"],
            false);
}

bool HasPair(const std::vector<std::string>& args, const std::string& flag, const std::string& value) {
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] == flag && args[i + 1] == value) return true;
  }
  return false;
}

TEST(BenchCompareTest, FlagsMapToLlamaBench) {
  CompareOptions o;
  o.model_path = "/m/F.gguf";
  o.pp = 512;
  o.tg = 128;
  o.depth = 4096;
  o.threads = 2;
  o.reps = 1;
  std::vector<std::string> l = LlamaBenchArgs(o, "/b/llama-bench");
  EXPECT_EQ(l[0], "/b/llama-bench");
  for (auto [f, v] : std::vector<std::pair<std::string, std::string>>{
           {"-m", "/m/F.gguf"}, {"-p", "512"}, {"-n", "128"}, {"-d", "4096"}, {"-t", "2"},
           {"-r", "1"}, {"-ctk", "f16"}, {"-ctv", "f16"}, {"-o", "json"}}) {
    EXPECT_TRUE(HasPair(l, f, v)) << f << " " << v;
  }
  EXPECT_EQ(std::find(l.begin(), l.end(), "-fa"), l.end());  // F16 cache: llama-bench's default
  o.depth = 0;  // no -d at depth 0 (llama-bench builds before -d reject it)
  const std::vector<std::string> at0 = LlamaBenchArgs(o, "/b/llama-bench");
  EXPECT_EQ(std::find(at0.begin(), at0.end(), "-d"), at0.end());
  o.depth = 4096;
  o.k_dtype = "q8_0";
  o.v_dtype = "q4_0";
  l = LlamaBenchArgs(o, "/b/llama-bench");
  EXPECT_TRUE(HasPair(l, "-ctk", "q8_0"));
  EXPECT_TRUE(HasPair(l, "-ctv", "q4_0"));
  EXPECT_TRUE(HasPair(l, "-fa", "1"));  // a quantized V cache needs flash attention there
  const std::vector<std::string> t = TernBenchArgs(o, "/b/tern");
  EXPECT_EQ(t[0], "/b/tern");
  EXPECT_EQ(t[1], "bench");
  for (auto [f, v] : std::vector<std::pair<std::string, std::string>>{
           {"-m", "/m/F.gguf"}, {"-p", "512"}, {"-n", "128"}, {"-d", "4096"}, {"-t", "2"},
           {"-r", "1"}, {"--pairs", "32"}, {"--kv-cache-dtype-k", "q8_0"},
           {"--kv-cache-dtype-v", "q4_0"}}) {
    EXPECT_TRUE(HasPair(t, f, v)) << f << " " << v;
  }
  EXPECT_EQ(t.back(), "--json");
}

class CompareLlamaCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_BINARY();
    model_ = dir_.File("tiny.gguf");
    auto r = RunTern("model synth --preset tiny --type q4_0 -o " + ShellQuote(model_));
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  // A stand-in llama-bench in dir_/bin printing `body` (a shell script).
  std::string FakeLlamaBench(const std::string& body) {
    const std::string bin = dir_.File("bin");
    ::mkdir(bin.c_str(), 0755);
    const std::string path = bin + "/llama-bench";
    EXPECT_TRUE(tern::testing::WriteFileBytes(path, "#!/bin/sh\n" + body));
    ::chmod(path.c_str(), 0755);
    return bin;
  }
  TempDir dir_;
  std::string model_;
};

TEST_F(CompareLlamaCliTest, MissingDirOrLlamaBenchFailsNamingThePath) {
  const std::string missing = dir_.File("no-such-build/bin");
  auto r = RunTern("bench -m " + ShellQuote(model_) + " -p 8 -n 4 --compare-llama " +
                   ShellQuote(missing));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find(missing), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("not a directory"), std::string::npos) << r.err;
  // A directory without llama-bench in it.
  r = RunTern("bench -m " + ShellQuote(model_) + " -p 8 -n 4 --compare-llama " +
              ShellQuote(dir_.path()));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find(dir_.File("llama-bench")), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
}

TEST_F(CompareLlamaCliTest, FailingLlamaBenchFailsWithItsMessage) {
  const std::string bin =
      FakeLlamaBench("echo '['\necho 'llama_bench: error: failed to load model' >&2\nexit 1\n");
  auto r = RunTern("bench -m " + ShellQuote(model_) + " -p 8 -n 4 -t 1 -r 1 --rounds 2 "
                   "--compare-llama " + ShellQuote(bin));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("llama-bench exited with 1"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("failed to load model"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
}

TEST_F(CompareLlamaCliTest, AlternatesAndPrintsRatiosAgainstAStandIn) {
  // The stand-in logs its arguments and prints a fixed result for pp8 / tg4.
  const std::string log = dir_.File("calls.log");
  const std::string bin = FakeLlamaBench(
      "echo \"$@\" >> " + ShellQuote(log) + "\n"
      "cat <<'EOF'\n"
      "[{\"build_commit\": \"abc123\", \"cpu_info\": \"x\", \"n_prompt\": 8, \"n_gen\": 0,"
      " \"n_depth\": 0, \"avg_ts\": 1000.0, \"samples_ts\": [1000.0]},\n"
      " {\"build_commit\": \"abc123\", \"n_prompt\": 0, \"n_gen\": 4, \"n_depth\": 0,"
      " \"avg_ts\": 500.0, \"samples_ts\": [500.0]}]\n"
      "EOF\n");
  auto r = RunTern("bench -m " + ShellQuote(model_) + " -p 8 -n 4 -t 1 -r 1 --rounds 2 --json "
                   "--compare-llama " + ShellQuote(bin));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Two rounds, each tern then llama-bench.
  const size_t t1 = r.err.find("round 1/2: tern"), l1 = r.err.find("round 1/2: llama-bench"),
               t2 = r.err.find("round 2/2: tern"), l2 = r.err.find("round 2/2: llama-bench");
  ASSERT_NE(l2, std::string::npos) << r.err;
  EXPECT_LT(t1, l1);
  EXPECT_LT(l1, t2);
  EXPECT_LT(t2, l2);
  EXPECT_EQ(tern::testing::CountLines(tern::testing::ReadFileBytes(log)), 2);
  EXPECT_NE(tern::testing::ReadFileBytes(log).find("-p 8 -n 4 -t 1 -r 1 -ctk f16 -ctv f16 -o json"),
            std::string::npos);
  std::vector<json> rows;
  std::istringstream in(r.out);
  std::string line;
  while (std::getline(in, line)) rows.push_back(json::parse(line));
  ASSERT_EQ(rows.size(), 2u) << r.out;
  EXPECT_EQ(rows[0]["test"], "pp8");
  EXPECT_EQ(rows[1]["test"], "tg4");
  EXPECT_EQ(rows[0]["llama_build_commit"], "abc123");
  for (const json& j : rows) {
    EXPECT_EQ(j["tern"]["rounds"].size(), 2u);
    EXPECT_EQ(j["llama"]["rounds"].size(), 2u);
    const double tern = j["tern"]["median"].get<double>(), llama = j["llama"]["median"].get<double>();
    EXPECT_GT(tern, 0);
    EXPECT_NEAR(j["ratio"].get<double>(), tern / llama, 1e-9 * tern / llama);
    // Both rounds paired: round i of tern over round i of llama-bench.
    ASSERT_EQ(j["round_ratios"].size(), 2u) << j.dump();
    for (int i = 0; i < 2; ++i) {
      const double ri = j["tern"]["rounds"][i].get<double>() / j["llama"]["rounds"][i].get<double>();
      EXPECT_NEAR(j["round_ratios"][i].get<double>(), ri, 1e-9 * ri);
    }
    EXPECT_GT(j["tern_roofline_fraction"].get<double>(), 0);
    // tern bench's default --pairs: tg has a paired fraction, pp none.
    EXPECT_EQ(j.contains("tern_paired_fraction"), j["test"] == "tg4") << j.dump();
    EXPECT_GE(j["other_cpus_max"].get<double>(), 0);  // /proc/stat is there on Linux
    EXPECT_TRUE(j["quiet"].is_boolean());
  }
  // The table form.
  r = RunTern("bench -m " + ShellQuote(model_) + " -p 8 -n 4 -t 1 -r 1 --rounds 1 "
              "--compare-llama " + ShellQuote(bin));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("| test | tern tok/s | llama.cpp tok/s | tern / llama.cpp | per round | tern roofline |"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("| pp8 | "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" | 1000.00 | "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tern kernel table"), std::string::npos) << r.out;
}

TEST_F(CompareLlamaCliTest, BadRoundsExitNonZero) {
  auto r = RunTern("bench -m " + ShellQuote(model_) + " --rounds 0 --compare-llama " +
                   ShellQuote(dir_.path()));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--rounds"), std::string::npos) << r.err;
  r = RunTern("bench -m " + ShellQuote(model_) + " --rounds 2");  // without --compare-llama
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--rounds goes with --compare-llama"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace tern
