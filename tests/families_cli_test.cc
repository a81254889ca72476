// The model families beyond llama/qwen2 (qwen3, gemma2, gemma3, phi3,
// mistral-style windowed llama): `tern model synth --preset F-tiny` writes a
// small file of the family's shape, `tern inspect` shows its hyper-parameters,
// and greedy decoding on it gives the token ids the reference engine gave on
// the same file (tests/testdata/families/*.greedy.ids; how they were made is in
// tests/testdata/families/README.md).
//
// Random weights put many near-ties among the top logits, where two exact
// computations in different orders may pick different tokens. Each prompt is
// compared token by token up to the first step whose top-2 logit margin (in
// our logits) is below kNearTie; a disagreement before that fails.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "model/model.h"
#include "model/sequence_runner.h"
#include "tests/cli_util.h"

namespace tern::testing {
namespace {

constexpr float kNearTie = 2e-3f;

struct RefLine {
  std::vector<int32_t> prompt, generated;
};

std::vector<RefLine> ReadRef(const std::string& path) {
  std::vector<RefLine> lines;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const size_t bar = line.find('|');
    if (bar == std::string::npos) continue;
    RefLine r;
    std::istringstream a(line.substr(0, bar)), b(line.substr(bar + 1));
    int32_t id;
    while (a >> id) r.prompt.push_back(id);
    while (b >> id) r.generated.push_back(id);
    lines.push_back(std::move(r));
  }
  return lines;
}

std::string Synth(const TempDir& dir, const std::string& preset) {
  const std::string out = dir.File(preset + ".gguf");
  const CliResult r = RunTern("model synth --preset " + preset + " --type f16 -t 1 -o " + out);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return out;
}

// Greedy on `model` compared with ref up to the first near-tie; returns the
// number of tokens compared.
int CompareGreedy(Model& model, const RefLine& ref, const std::string& what) {
  SequenceRunner runner(model, 512, DType::kF16, nullptr);
  EXPECT_TRUE(runner.Append(ref.prompt, false).ok());
  int compared = 0;
  for (size_t i = 0; i < ref.generated.size(); ++i) {
    std::span<const float> logits = runner.Logits(0);
    int32_t best = 0, second = 1;
    if (logits[second] > logits[best]) std::swap(best, second);
    for (int32_t v = 2; v < (int32_t)logits.size(); ++v) {
      if (logits[v] > logits[best]) {
        second = best;
        best = v;
      } else if (logits[v] > logits[second]) {
        second = v;
      }
    }
    if (logits[best] - logits[second] < kNearTie) break;
    EXPECT_EQ(best, ref.generated[i]) << what << " step " << i << " (margin "
                                      << logits[best] - logits[second] << ")";
    if (best != ref.generated[i]) break;
    ++compared;
    EXPECT_TRUE(runner.Append(std::vector<int32_t>{ref.generated[i]}, false).ok());
  }
  return compared;
}

class FamilyTest : public ::testing::TestWithParam<const char*> {};

TEST_P(FamilyTest, BenchRunsAndGreedyMatchesReferenceIdsUpToTheFirstNearTie) {
  SKIP_WITHOUT_BINARY();
  const std::string preset = std::string(GetParam()) + "-tiny";
  TempDir dir;
  const std::string path = Synth(dir, preset);
  const CliResult bench = RunTern("bench -m " + path + " -p 16 -n 4 -t 1");
  EXPECT_EQ(bench.exit_code, 0) << bench.err;
  auto model = Model::Load(path);
  ASSERT_TRUE(model.ok()) << model.status().message();
  EXPECT_THAT(bench.out, ::testing::HasSubstr("| " + (*model)->config().arch + " |"));
  const std::vector<RefLine> refs =
      ReadRef(std::string(TERN_TESTS_DIR) + "/testdata/families/" + preset + ".greedy.ids");
  ASSERT_GE(refs.size(), 5u);
  int total = 0, long_runs = 0;
  for (size_t p = 0; p < refs.size(); ++p) {
    const int n = CompareGreedy(**model, refs[p], preset + " prompt " + std::to_string(p));
    total += n;
    long_runs += n >= 8;
  }
  std::printf("%s: %d of %zu reference tokens compared before near-ties\n", preset.c_str(), total,
              refs.size() * refs[0].generated.size());
  // Most prompts get well past their first tokens before a near-tie.
  EXPECT_GE(long_runs, 3) << preset << ": " << total << " tokens compared";
  EXPECT_GE(total, 60) << preset;
}

INSTANTIATE_TEST_SUITE_P(Families, FamilyTest,
                         ::testing::Values("qwen3", "gemma2", "gemma3", "phi3", "mistral"));

// Phi-3's fused QKV matrix is split into views (LlamaModel::RowRange). With
// rows a Q4_0 tile of more than 18 KiB (2112 columns) the AVX-512 table lays
// its tiles out in groups of 4 (64 rows), and K's 96 rows end off that
// grain: the fused matrix must then keep the file's rows. The AVX2 table,
// whose tiles lie one after another, gives the same bits (the tables agree
// bitwise on Q4_0: kernels_tests), so the two tables' log-probs of a text
// must be equal byte for byte (where the CPU has no AVX-512, both runs take
// the AVX2 table).
TEST(FusedTilesTest, FusedPartsOffTheTileGroupsGiveTheSameBitsOnEveryTable) {
  SKIP_WITHOUT_BINARY();
  TempDir dir;
  const std::string model = dir.File("phi3-wide.gguf");
  const CliResult r = RunTern(
      "model synth --preset phi3-tiny --type q4_0 --n-embd 2112 --n-head 22 --head-dim 96 "
      "--n-head-kv 1 --n-ff 2112 --n-layer 2 -t 1 -o " + model);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string text;
  const char* words[] = {"the", "cat", "sat", "on", "a", "mat", "and", "then", "slept"};
  for (int i = 0; i < 200; ++i) text += std::string(words[(i * 7 + i / 3) % 9]) + " ";
  ASSERT_TRUE(WriteFileBytes(dir.File("text.txt"), text));
  const auto logprobs = [&](const char* isa, const std::string& out) {
    if (isa != nullptr) setenv("TERN_ISA", isa, 1);
    const CliResult p = RunTern("perplexity -m " + model + " -f " + dir.File("text.txt") +
                                " --ctx 64 --save-logits " + out);
    if (isa != nullptr) unsetenv("TERN_ISA");
    EXPECT_EQ(p.exit_code, 0) << p.err;
    return ReadFileBytes(out);
  };
  const std::string best = logprobs(nullptr, dir.File("best.bin"));
  const std::string avx2 = logprobs("avx2", dir.File("avx2.bin"));
  ASSERT_GT(best.size(), 100000u);
  EXPECT_TRUE(best == avx2) << "log-probs differ between the default table and avx2";
}

TEST(FamilyInspectTest, ShowsTheFamilyHyperParameters) {
  SKIP_WITHOUT_BINARY();
  TempDir dir;
  const CliResult g2 = RunTern("inspect " + Synth(dir, "gemma2-tiny"));
  ASSERT_EQ(g2.exit_code, 0) << g2.err;
  EXPECT_THAT(g2.out, ::testing::HasSubstr("sliding window:   16 tokens on 2 of 4 layers (pattern 2)"));
  EXPECT_THAT(g2.out, ::testing::HasSubstr("soft-capping:     attention 50, final 30"));
  EXPECT_THAT(g2.out, ::testing::HasSubstr("embedding scale:  11.3137"));
  const CliResult g3 = RunTern("inspect " + Synth(dir, "gemma3-tiny"));
  ASSERT_EQ(g3.exit_code, 0) << g3.err;
  EXPECT_THAT(g3.out, ::testing::HasSubstr("sliding window:   16 tokens on 5 of 6 layers (pattern 6)"));
  EXPECT_THAT(g3.out, ::testing::HasSubstr("rope base:        1e+06 (windowed layers 10000)"));
  EXPECT_THAT(g3.out, ::testing::HasSubstr("qk-norm"));
  const CliResult q3 = RunTern("inspect " + Synth(dir, "qwen3-tiny"));
  ASSERT_EQ(q3.exit_code, 0) << q3.err;
  EXPECT_THAT(q3.out, ::testing::HasSubstr("heads:            4 (2 KV), head dim 64"));
  EXPECT_THAT(q3.out, ::testing::HasSubstr("qk-norm"));
  const CliResult phi = RunTern("inspect " + Synth(dir, "phi3-tiny"));
  ASSERT_EQ(phi.exit_code, 0) << phi.err;
  EXPECT_THAT(phi.out, ::testing::HasSubstr("sliding window:   512 tokens on 4 of 4 layers"));
  EXPECT_THAT(phi.out, ::testing::HasSubstr("fused QKV, fused gate-up"));
  const CliResult mistral = RunTern("inspect " + Synth(dir, "mistral-tiny"));
  ASSERT_EQ(mistral.exit_code, 0) << mistral.err;
  EXPECT_THAT(mistral.out, ::testing::HasSubstr("architecture:     llama"));
  EXPECT_THAT(mistral.out, ::testing::HasSubstr("sliding window:   64 tokens on 4 of 4 layers"));
  EXPECT_THAT(mistral.out, ::testing::HasSubstr("rope:             normal, dim 32"));
}

TEST(FamilyInspectTest, UnsupportedArchitectureNamesTheSupportedList) {
  SKIP_WITHOUT_BINARY();
  TempDir dir;
  const std::string path = Synth(dir, "qwen3-tiny");
  // Rewrite the architecture string in place ("qwen3" -> "qwenX" keeps sizes).
  std::string bytes = ReadFileBytes(path);
  const size_t at = bytes.find("qwen3", bytes.find("general.architecture"));
  ASSERT_NE(at, std::string::npos);
  bytes[at + 4] = 'X';
  ASSERT_TRUE(WriteFileBytes(path, bytes));
  const CliResult r = RunTern("generate -m " + path + " -p hi -n 1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, ::testing::HasSubstr(
                         "unsupported architecture 'qwenX' (supported: llama, qwen2, qwen3, "
                         "gemma2, gemma3, phi3)"));
}

}  // namespace
}  // namespace tern::testing
