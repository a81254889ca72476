// `tern doctor`: the diagnosis as pure functions on fixed measurements
// (tools/doctor_diagnosis.h, linked in), and one short run of the command.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "base/paths.h"
#include "tests/cli_util.h"
#include "tools/doctor_diagnosis.h"

namespace tern {
namespace {

using tern::testing::RunTern;
using tern::testing::ShellQuote;

// A 2-core machine and a ~100 MB model: 10 ms per decode step alone, 20 ms
// for 8 sequences together (so t(B) = 8.57 ms + 1.43 ms x B).
MachineFigures Machine() {
  MachineFigures m;
  m.read_gb_s = 20;
  m.fma_gflops = 100;
  m.threads = 2;
  m.mem_available_bytes = 8ll << 30;
  return m;
}

ModelFigures Model() {
  ModelFigures m;
  m.path = "model.gguf";
  m.weight_bytes = 100'000'000;
  m.layer_matmul_params = 50'000'000;
  m.n_layer = 10;  // f16 KV: 2 x 10 x 4 x 256 x 2 = 40960 bytes/token
  m.n_head_kv = 4;
  m.head_dim = 256;
  m.context_len = 4096;
  m.pp_tokens = 128;
  m.pp_tps = 1000;
  m.tg_depth = 256;
  m.tg_tps = 100;
  m.batch = 8;
  m.batch_tg_tps = 400;
  return m;
}

// n requests: a shared prefix of prefix_len tokens (the same for all), then
// unique tokens up to prompt_len; output_len each.
std::vector<WorkloadRequest> Requests(int n, int prefix_len, int prompt_len, int output_len) {
  std::vector<WorkloadRequest> out;
  int32_t next = 1000;
  for (int i = 0; i < n; ++i) {
    WorkloadRequest r;
    for (int k = 0; k < prefix_len; ++k) r.prompt.push_back(k + 1);
    while ((int)r.prompt.size() < prompt_len) r.prompt.push_back(next++);
    r.output_len = output_len;
    out.push_back(std::move(r));
  }
  return out;
}

DoctorOptions Options() {
  DoctorOptions o;
  o.concurrency = 16;
  o.slo_tpot_ms = 50;
  o.slo_ttft_ms = 2000;
  return o;
}

const Finding* FindingOf(const Diagnosis& d, const std::string& topic) {
  for (const Finding& f : d.findings) {
    if (f.topic == topic) return &f;
  }
  return nullptr;
}

TEST(DoctorDiagnosisTest, ProfileCountsSharedBlocksAsAChainFromTheStart) {
  // Three prompts of 40 tokens: 32 shared (two full blocks), 8 unique.
  WorkloadProfile p = ProfileWorkload(Requests(3, 32, 40, 10), 16);
  EXPECT_EQ(p.num_requests, 3);
  EXPECT_DOUBLE_EQ(p.prompt.p95, 40);
  EXPECT_DOUBLE_EQ(p.total.max, 50);
  EXPECT_DOUBLE_EQ(p.shared_prefix_share, 64.0 / 120.0);  // requests 2 and 3 hit 32 each
  EXPECT_EQ(p.distinct_shared_tokens, 32);
  // A block equal to an earlier one but after a differing block is no hit.
  std::vector<WorkloadRequest> r = Requests(2, 0, 32, 1);
  r[1].prompt = r[0].prompt;
  r[1].prompt[0] = 7;  // first block differs, second block's tokens equal
  EXPECT_DOUBLE_EQ(ProfileWorkload(r, 16).shared_prefix_share, 0.0);
}

TEST(DoctorDiagnosisTest, LengthPercentilesInterpolate) {
  LengthStats s = SummarizeLengths({10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120, 130, 140,
                                    150, 160, 170, 180, 190, 200, 1000});
  EXPECT_DOUBLE_EQ(s.p50, 110);
  EXPECT_DOUBLE_EQ(s.p95, 200);
  EXPECT_DOUBLE_EQ(s.max, 1000);
}

TEST(DoctorDiagnosisTest, ChatLikeShortPromptsAreDecodeBoundAndBandwidthLimited) {
  const Diagnosis d =
      Diagnose(Machine(), Model(), ProfileWorkload(Requests(64, 0, 64, 64), 16), Options());
  EXPECT_NEAR(d.step_b_s, 0.010 / 7, 1e-9);
  EXPECT_NEAR(d.step_a_s, 0.010 - 0.010 / 7, 1e-9);
  EXPECT_FALSE(d.prefill_bound);
  EXPECT_FALSE(d.capacity_limited);
  // t(16) = 8.57 + 22.9 = 31.4 ms <= 50: the whole wanted concurrency.
  EXPECT_EQ(d.max_num_seqs, 16);
  EXPECT_EQ(d.max_model_len, 192);  // 128 x 1.25 = 160 -> 192
  EXPECT_FALSE(d.prefix_caching);
  EXPECT_DOUBLE_EQ(d.target_itl_ms, 45);
  EXPECT_NEAR(d.prefill_fraction, 1000 / (100e9 / 1e8), 1e-9);  // roofline 1000 tok/s
  EXPECT_NE(FindingOf(d, "bound")->verdict.find("decode-bound"), std::string::npos);
  EXPECT_NE(FlagsLine(d).find("--max-num-seqs 16 "), std::string::npos) << FlagsLine(d);
  EXPECT_NE(FlagsLine(d).find("--no-enable-prefix-caching --target-itl-ms 45.0"), std::string::npos);
}

TEST(DoctorDiagnosisTest, LongSharedDocumentsArePrefillBoundWithPrefixCaching) {
  const WorkloadProfile w = ProfileWorkload(Requests(32, 2048, 2176, 32), 16);
  const Diagnosis d = Diagnose(Machine(), Model(), w, Options());
  EXPECT_TRUE(d.prefix_caching);
  EXPECT_NEAR(d.expected_hit_rate, 2048.0 / 2176 * 31 / 32, 1e-9);
  EXPECT_TRUE(d.prefill_bound) << d.prefill_s_per_request << " vs " << d.decode_s_per_request;
  EXPECT_EQ(d.max_model_len, 2816);  // (2176 + 32) x 1.25 = 2760, rounded up to 64
  EXPECT_NE(FlagsLine(d).find("--enable-prefix-caching"), std::string::npos);
  // The cached document counts in the KV recommendation.
  EXPECT_GE(d.kv_cache_memory_bytes, (int64_t)(1.1 * (d.kv_bytes_per_request * d.max_num_seqs +
                                                      2048 * d.kv_bytes_per_token)) - 1);
}

TEST(DoctorDiagnosisTest, LongGenerationsInASmallBudgetAreCapacityLimited) {
  DoctorOptions o = Options();
  o.kv_budget_bytes = 256ll << 20;
  o.kv_dtypes = {"f16", "f32"};  // a build without quantized KV first
  const WorkloadProfile w = ProfileWorkload(Requests(16, 0, 32, 1024), 16);
  const Diagnosis d = Diagnose(Machine(), Model(), w, o);
  EXPECT_TRUE(d.capacity_limited);
  EXPECT_EQ(d.kv_bytes_per_request, 40960 * 1056);
  EXPECT_EQ(d.fit_concurrency, (256ll << 20) / (40960 * 1056));  // 6
  EXPECT_EQ(d.max_num_seqs, d.fit_concurrency);
  EXPECT_FALSE(d.prefill_bound);
  EXPECT_EQ(d.kv_dtype, "f16");  // this build has no smaller KV dtype
  EXPECT_LE(d.kv_cache_memory_bytes, o.kv_budget_bytes);
  EXPECT_NE(FindingOf(d, "memory")->verdict.find("capacity-limited"), std::string::npos);
  // With a quantized KV dtype available, the doctor picks it.
  o.kv_dtypes = {"f16", "f32", "q8_0"};
  const Diagnosis q = Diagnose(Machine(), Model(), w, o);
  EXPECT_EQ(q.kv_dtype, "q8_0");
  EXPECT_GT(q.fit_concurrency, d.fit_concurrency);
  // This build's default list: the least compression that fits (q8_0 holds
  // 11 of the 16 wanted, so q4_0).
  EXPECT_EQ(DoctorOptions().kv_dtypes.size(), 5u);
  DoctorOptions big = Options();
  big.kv_budget_bytes = 256ll << 20;
  const Diagnosis b = Diagnose(Machine(), Model(), w, big);
  EXPECT_EQ(b.kv_dtype, "q4_0");
  EXPECT_FALSE(b.capacity_limited);
}

TEST(DoctorDiagnosisTest, TightTpotBoundLimitsTheBatch) {
  DoctorOptions o = Options();
  o.slo_tpot_ms = 15;  // t(B) <= 15 ms: B <= 4.5
  const Diagnosis d =
      Diagnose(Machine(), Model(), ProfileWorkload(Requests(16, 0, 64, 64), 16), o);
  EXPECT_EQ(d.max_num_seqs, 4);
  EXPECT_DOUBLE_EQ(d.target_itl_ms, 13.5);
  EXPECT_FALSE(d.defaults_right);
  EXPECT_NE(FindingOf(d, "defaults")->verdict.find("the batch cap (4"), std::string::npos);
}

TEST(DoctorDiagnosisTest, BurstWithTightTtftKeepsEveryRequestInTheBatch) {
  DoctorOptions o = Options();
  o.slo_tpot_ms = 15;   // would cap the batch at 4...
  o.slo_ttft_ms = 600;  // ...but 16 prompts at once already take ~544 ms to prefill
  const Diagnosis d =
      Diagnose(Machine(), Model(), ProfileWorkload(Requests(64, 0, 64, 64), 16), o);
  EXPECT_NEAR(d.ttft_estimate_ms, 64 * 17 / 2.0, 1e-6);
  EXPECT_EQ(d.max_num_seqs, 16);
  EXPECT_DOUBLE_EQ(d.target_itl_ms, 0);  // the automatic target stays
  EXPECT_EQ(FlagsLine(d).find("--target-itl-ms"), std::string::npos) << FlagsLine(d);
  EXPECT_NE(FindingOf(d, "max-num-seqs")->verdict.find("break TTFT"), std::string::npos);
  EXPECT_TRUE(d.defaults_right) << FindingOf(d, "defaults")->verdict;
}

TEST(DoctorDiagnosisTest, PoissonArrivalsWithTtftSlackKeepTheDefaults) {
  // The TPOT bound leaves room above the automatic target, but one arrival at
  // a time waits only for its own prompt (64 ms of a 2 s bound): bigger
  // chunks would buy nothing, and nothing else changes the schedule.
  DoctorOptions o = Options();
  o.request_rate = 4;
  o.slo_tpot_ms = 120;  // 90% of it (108 ms) is above the automatic target (2.5 x 31.4 ms)
  const Diagnosis d =
      Diagnose(Machine(), Model(), ProfileWorkload(Requests(64, 0, 64, 64), 16), o);
  EXPECT_NEAR(d.ttft_tail_ms, 64, 1e-6);
  EXPECT_DOUBLE_EQ(d.target_itl_ms, 0);
  EXPECT_NE(FindingOf(d, "chunked-prefill")->verdict.find("TTFT has slack"), std::string::npos)
      << FindingOf(d, "chunked-prefill")->verdict;
  EXPECT_TRUE(d.defaults_right) << FindingOf(d, "defaults")->verdict;
  // The same prompts as a burst of 16: the last waits ~1 s, so the target rises.
  o.request_rate = 0;
  const Diagnosis b =
      Diagnose(Machine(), Model(), ProfileWorkload(Requests(64, 0, 64, 64), 16), o);
  EXPECT_NEAR(b.ttft_tail_ms, 16 * 64, 1e-6);
  EXPECT_DOUBLE_EQ(b.target_itl_ms, 108);
}

TEST(DoctorCliTest, ShortRunPrintsDiagnosisAndFlagsAsJson) {
  SKIP_WITHOUT_BINARY();
  if (!FileExists(DefaultModelPath())) GTEST_SKIP() << "test model missing";
  const std::string html = ::testing::TempDir() + "/doctor_report.html";
  auto r = RunTern("doctor -m " + ShellQuote(DefaultModelPath()) +
                   " -t 1 --num-prompts 8 --input-len 48 --prefix-len 32 --output-len 16 --json"
                   " --html " + ShellQuote(html));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string page = tern::testing::ReadFileBytes(html);
  EXPECT_NE(page.find("Roofline"), std::string::npos);
  EXPECT_NE(page.find("<svg"), std::string::npos);
  EXPECT_NE(page.find("--max-model-len"), std::string::npos);
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["workload"]["num_requests"], 8);
  EXPECT_DOUBLE_EQ(j["workload"]["prompt"]["p95"].get<double>(), 80);  // 32 shared + 48 ids
  EXPECT_GT(j["model"]["pp_tps"].get<double>(), 0);
  EXPECT_GT(j["machine"]["read_gb_s"].get<double>(), 0);
  EXPECT_TRUE(j["recommended"]["enable_prefix_caching"]);
  EXPECT_EQ(j["diagnosis"]["kv_bytes_per_token"], 640);  // stories260K, f16
  EXPECT_NE(j["recommended"]["command_line"].get<std::string>().find("--max-model-len "),
            std::string::npos);
  EXPECT_NE(j["quantization"].get<std::string>().find("--eval-text"), std::string::npos);
  // Speculation is measured (tern batch on a sample, alternated): n-gram
  // always; random prompt ids repeat nothing, so it is never turned on here.
  const std::string spec = j["speculation"].get<std::string>();
  EXPECT_NE(spec.find("tok/s without speculation"), std::string::npos) << spec;
  EXPECT_NE(spec.find("n-gram: acceptance"), std::string::npos) << spec;
}

TEST(DoctorCliTest, SpeculationIsMeasuredWithTheDraftModel) {
  SKIP_WITHOUT_BINARY();
  if (!FileExists(DefaultModelPath())) GTEST_SKIP() << "test model missing";
  // The model as its own draft: every proposal is accepted.
  auto r = RunTern("doctor -m " + ShellQuote(DefaultModelPath()) + " --draft-model " +
                   ShellQuote(DefaultModelPath()) +
                   " -t 1 --num-prompts 4 --input-len 16 --output-len 24 --concurrency 2 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  const std::string spec = j["speculation"].get<std::string>();
  EXPECT_NE(spec.find("acceptance 100%"), std::string::npos) << spec;
  // Either way the answer is a decision with the flags to apply it.
  EXPECT_TRUE(spec.find("-> turn on") != std::string::npos ||
              spec.find("-> leave speculation off") != std::string::npos) << spec;
  if (spec.find("-> turn on") != std::string::npos) {
    EXPECT_NE(j["recommended"]["command_line"].get<std::string>().find("--speculative"),
              std::string::npos);
  }
}

TEST(DoctorCliTest, VerifyRunsTheWorkloadWithDefaultsAndRecommendedFlags) {
  SKIP_WITHOUT_BINARY();
  if (!FileExists(DefaultModelPath())) GTEST_SKIP() << "test model missing";
  auto r = RunTern("doctor -m " + ShellQuote(DefaultModelPath()) +
                   " -t 1 --num-prompts 8 --input-len 32 --output-len 16 --concurrency 4 --verify"
                   " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["verify"].size(), 2u);
  EXPECT_EQ(j["verify"][0]["label"], "defaults");
  EXPECT_EQ(j["verify"][0]["flags"], "");
  EXPECT_EQ(j["verify"][1]["flags"], j["recommended"]["command_line"]);
  for (const auto& v : j["verify"]) {
    EXPECT_EQ(v["error"], "") << v.dump();
    EXPECT_EQ(v["completed"], 8) << v.dump();
    EXPECT_GT(v["output_throughput"].get<double>(), 0);
  }
}

TEST(DoctorCliTest, BadWorkloadNamesTheLine) {
  SKIP_WITHOUT_BINARY();
  if (!FileExists(DefaultModelPath())) GTEST_SKIP() << "test model missing";
  const std::string path = ::testing::TempDir() + "/doctor_bad.jsonl";
  FILE* f = std::fopen(path.c_str(), "w");
  std::fputs("{\"prompt\": \"Once\", \"output_len\": 4}\n{\"prompt\": 3}\n", f);
  std::fclose(f);
  auto r = RunTern("doctor -m " + ShellQuote(DefaultModelPath()) + " --workload " + ShellQuote(path));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("doctor_bad.jsonl:2: \"prompt\" must be a string"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace tern
