// Sliding-window models through the engine: `tern batch` releases KV blocks
// outside the window while a sequence runs, and its greedy tokens equal those
// of one sequence run in-process through SequenceRunner, which keeps every
// position and masks (full attention with the window as a mask: the
// reference). KV usage plateaus.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "model/model.h"
#include "model/sequence_runner.h"
#include "sample/sampler.h"
#include "tests/cli_util.h"
#include "tokenizer/tokenizer.h"

namespace tern::testing {
namespace {

using nlohmann::json;

std::vector<int32_t> ParseIds(const std::string& text) {
  std::vector<int32_t> ids;
  std::istringstream in(text);
  int32_t id;
  while (in >> id) ids.push_back(id);
  return ids;
}

// Greedy ids after `prompt` (with BOS) from one sequence in a contiguous KV
// that keeps every position, up to n tokens or an end-of-text token (not
// included): the masked full-attention reference.
std::vector<int32_t> MaskedReference(const std::string& path, const std::string& prompt, int n) {
  StatusOr<std::unique_ptr<Model>> model = Model::Load(path);
  EXPECT_TRUE(model.ok()) << model.status().message();
  if (!model.ok()) return {};
  StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::FromGguf((*model)->file());
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status().message();
  if (!tokenizer.ok()) return {};
  const std::vector<int32_t> ids = (*tokenizer)->Encode(prompt, true, true);
  SequenceRunner runner(**model, (int32_t)ids.size() + n, DType::kF16, nullptr);
  EXPECT_TRUE(runner.Append(ids, false).ok());
  SamplingParams greedy;
  greedy.temperature = 0;
  std::vector<int32_t> out;
  while ((int)out.size() < n) {
    const int32_t t = SampleToken(runner.Logits(0), greedy, out, 0.5).token_id;
    if ((*tokenizer)->IsEog(t)) break;
    out.push_back(t);
    if (!runner.Append(std::vector<int32_t>{t}, false).ok()) break;
  }
  return out;
}

struct BatchRun {
  std::vector<int32_t> token_ids;
  double peak_kv_usage = 0;
};

BatchRun Batch(const TempDir& dir, const std::string& model, int n) {
  const std::string in = dir.File("in.jsonl"), out = dir.File("out.jsonl"),
                    summary = dir.File("summary.json");
  EXPECT_TRUE(WriteFileBytes(in, "{\"prompt\": \"hello world\", \"max_tokens\": " +
                                     std::to_string(n) + ", \"temperature\": 0}\n"));
  const CliResult r = RunTern("batch -m " + model + " -i " + in + " -o " + out +
                              " --summary-json " + summary +
                              " --block-size 4 --kv-cache-memory 1MiB -t 1");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  BatchRun run;
  const json line = json::parse(ReadFileBytes(out), nullptr, false);
  if (!line.is_discarded()) run.token_ids = line["token_ids"].get<std::vector<int32_t>>();
  const json s = json::parse(ReadFileBytes(summary), nullptr, false);
  if (!s.is_discarded()) run.peak_kv_usage = s["peak_kv_usage"].get<double>();
  return run;
}

TEST(SlidingWindowCliTest, EngineWithReleasedBlocksMatchesMaskedFullAttention) {
  SKIP_WITHOUT_BINARY();
  TempDir dir;
  const std::string model = dir.File("w16.gguf");
  CliResult r = RunTern("model synth --preset mistral-tiny --sliding-window 16 -t 1 -o " + model);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  constexpr int kTokens = 160;  // ten windows past the prompt
  const std::vector<int32_t> reference = MaskedReference(model, "hello world", kTokens);
  ASSERT_GT(reference.size(), 100u) << "the reference stopped early";
  const BatchRun windowed = Batch(dir, model, kTokens);
  EXPECT_EQ(windowed.token_ids, reference);

  // The same shape without a window holds every block: its peak usage grows
  // with the sequence, the windowed one stays at the window's few blocks.
  const std::string full = dir.File("full.gguf");
  r = RunTern("model synth --preset mistral-tiny --sliding-window -1 -t 1 -o " + full);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const BatchRun unwindowed = Batch(dir, full, kTokens);
  ASSERT_GT(windowed.peak_kv_usage, 0);
  EXPECT_LT(windowed.peak_kv_usage * 4, unwindowed.peak_kv_usage)
      << windowed.peak_kv_usage << " vs " << unwindowed.peak_kv_usage;
}

TEST(SlidingWindowCliTest, HybridModelThroughTheEngineMatchesGenerate) {
  // gemma3: windowed and global layers, nothing released; the engine's
  // paged KV and the single-sequence runner agree past the window, and
  // `tern generate` (through the engine) gives the same ids.
  SKIP_WITHOUT_BINARY();
  TempDir dir;
  const std::string model = dir.File("g3.gguf");
  CliResult r = RunTern("model synth --preset gemma3-tiny -t 1 -o " + model);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<int32_t> reference = MaskedReference(model, "hello world", 80);
  ASSERT_GT(reference.size(), 40u);
  EXPECT_EQ(Batch(dir, model, 80).token_ids, reference);
  r = RunTern("generate -m " + model + " -p 'hello world' --temp 0 --ids -n 80 -t 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ParseIds(r.out), reference);
}

TEST(SlidingWindowCliTest, StartUpLogAndKvCalcShowNaiveAndWindowedBytes) {
  SKIP_WITHOUT_BINARY();
  TempDir dir;
  const std::string model = dir.File("g2.gguf");
  CliResult r = RunTern("model synth --preset gemma2-tiny -t 1 -o " + model);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = RunTern("kv-calc -m " + model + " --seq-len 1024");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // 4 layers x 2 KV heads x 64 x 2 (K, V) x 2 bytes = 2048 bytes per token.
  EXPECT_THAT(r.out, ::testing::HasSubstr("per sequence: 2097152 bytes"));
  // 2 global layers x 1024 + 2 windowed x 16 positions, 512 bytes each.
  EXPECT_THAT(r.out, ::testing::HasSubstr("windowed:     1064960 bytes"));
  EXPECT_THAT(r.out, ::testing::HasSubstr("2 of 4 layers keep only the last 16 positions"));
  EXPECT_THAT(r.out, ::testing::HasSubstr("tern holds:   the naive figure"));

  r = RunTern("kv-calc --layers 32 --kv-heads 8 --head-dim 128 --seq-len 32768 --sliding-window 4096");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, ::testing::HasSubstr("windowed:     536870912 bytes"));
  EXPECT_THAT(r.out, ::testing::HasSubstr("tern holds:   the windowed figure"));

  const std::string in = dir.File("in.jsonl");
  ASSERT_TRUE(WriteFileBytes(in, "{\"prompt\": \"hi\", \"max_tokens\": 2}\n"));
  r = RunTern("batch -m " + model + " -i " + in + " -o " + dir.File("out.jsonl") +
              " --max-model-len 1024 --kv-cache-memory 8MiB -t 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, ::testing::HasSubstr(
                         "sliding window 16 on 2 of 4 layers: a max_model_len sequence needs "
                         "2.0 MiB naive, 1.0 MiB windowed; all blocks kept (global layers)"));
}

}  // namespace
}  // namespace tern

namespace tern::testing {
namespace {

// tern bench's roofline counts the KV a token reads: a windowed layer at
// most its window's positions, so at depth past the window the windowed
// file reads fewer bytes per token than its window-less twin.
TEST(SlidingWindowCliTest, BenchCountsOnlyTheWindowsKvBytes) {
  SKIP_WITHOUT_BINARY();
  TempDir dir;
  const std::string w = dir.File("g3.gguf"), nw = dir.File("g3nw.gguf");
  ASSERT_EQ(RunTern("model synth --preset gemma3-tiny -t 1 -o " + w).exit_code, 0);
  ASSERT_EQ(RunTern("model synth --preset gemma3-tiny --sliding-window -1 -t 1 -o " + nw).exit_code, 0);
  auto bytes = [&](const std::string& model) -> int64_t {
    const CliResult r = RunTern("bench -m " + model + " -p 0 -n 1 -d 256 -r 1 -t 1 --json");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    const json j = json::parse(r.out, nullptr, false);
    return j.is_discarded() ? -1 : j["bytes_per_token"].get<int64_t>();
  };
  const int64_t windowed = bytes(w), full = bytes(nw);
  ASSERT_GT(windowed, 0);
  // 5 of 6 layers read 16 positions instead of 256; the file sizes are equal.
  EXPECT_LT(windowed, full);
}

}  // namespace
}  // namespace tern::testing
