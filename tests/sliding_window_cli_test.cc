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
  // gemma3: windowed and global layers, each with its own blocks (the
  // windowed group's released outside the window); the engine's paged KV
  // and the single-sequence runner agree past the window, and `tern
  // generate` (through the engine) gives the same ids.
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
  EXPECT_THAT(r.out, ::testing::HasSubstr("tern holds:   the windowed figure (the windowed layers"));

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
                         "2.0 MiB naive, 1.0 MiB windowed; the windowed layers' own blocks "
                         "outside the window are released, the global layers keep theirs"));
  EXPECT_THAT(r.err, ::testing::HasSubstr("windowed layers: "));
}

// Hybrid models keep their windowed layers' KV in a group of its own
// (released outside the window) and their global layers' in another: greedy
// tokens of several prompts batched together, prefilled in small chunks,
// equal `tern generate`'s one by one (every position kept, the window a mask).
TEST(SlidingWindowCliTest, HybridModelsSeveralPromptsBatchedMatchGenerate) {
  SKIP_WITHOUT_BINARY();
  TempDir dir;
  const std::vector<std::string> prompts = {
      "hello world", "Once upon a time there was a little dog who liked to run",
      "The quick brown fox jumps over the lazy dog. The quick brown fox"};
  constexpr int kTokens = 64;  // four windows of 16 past the prompt
  for (const std::string preset : {"gemma2-tiny", "gemma3-tiny"}) {
    const std::string model = dir.File(preset + ".gguf");
    CliResult r = RunTern("model synth --preset " + preset + " -t 1 -o " + model);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::string lines;
    std::vector<std::vector<int32_t>> reference;
    for (const std::string& p : prompts) {
      lines += json({{"prompt", p}, {"max_tokens", kTokens}, {"temperature", 0}}).dump() + "\n";
      r = RunTern("generate -m " + model + " -p '" + p + "' --temp 0 --ids -n " +
                  std::to_string(kTokens) + " -t 1");
      ASSERT_EQ(r.exit_code, 0) << r.err;
      reference.push_back(ParseIds(r.out));
      ASSERT_GT(reference.back().size(), 40u) << preset << ": " << r.out;
    }
    // The second prompt again once the first run of it is done: a prefix
    // cache hit must hold in both groups (the windowed one's last window).
    lines += json({{"prompt", prompts[1]}, {"max_tokens", kTokens}, {"temperature", 0},
                   {"arrival_ms", 1500}}).dump() + "\n";
    const std::string in = dir.File("in.jsonl"), out = dir.File("out.jsonl");
    ASSERT_TRUE(WriteFileBytes(in, lines));
    r = RunTern("batch -m " + model + " -i " + in + " -o " + out +
                " --block-size 4 --kv-cache-memory 4MiB --max-model-len 256"
                " --max-num-batched-tokens 8 -t 1");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_THAT(r.err, ::testing::HasSubstr("windowed layers: "));
    std::istringstream got(ReadFileBytes(out));
    std::string line;
    for (size_t i = 0; i < prompts.size(); ++i) {
      ASSERT_TRUE(std::getline(got, line)) << preset << " line " << i;
      const json j = json::parse(line, nullptr, false);
      ASSERT_FALSE(j.is_discarded()) << line;
      EXPECT_EQ(j["token_ids"].get<std::vector<int32_t>>(), reference[i])
          << preset << ": prompt " << i;
    }
    ASSERT_TRUE(std::getline(got, line));
    const json again = json::parse(line, nullptr, false);
    ASSERT_FALSE(again.is_discarded()) << line;
    EXPECT_GT(again["cached_tokens"].get<int>(), 0) << preset << ": " << line;
    EXPECT_EQ(again["token_ids"].get<std::vector<int32_t>>(), reference[1]) << preset;

    // A KV cache for about one and a half sequences: requests wait and are
    // preempted when either group is short; the tokens do not change.
    const std::string out2 = dir.File("out2.jsonl");
    r = RunTern("batch -m " + model + " -i " + in + " -o " + out2 +
                " --block-size 4 --kv-cache-memory 700KiB --max-model-len 160 -t 1");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::istringstream got2(ReadFileBytes(out2));
    for (size_t i = 0; i < prompts.size(); ++i) {
      ASSERT_TRUE(std::getline(got2, line)) << preset << " line " << i;
      const json j = json::parse(line, nullptr, false);
      ASSERT_FALSE(j.is_discarded()) << line;
      EXPECT_EQ(j["token_ids"].get<std::vector<int32_t>>(), reference[i])
          << preset << ": prompt " << i << " in a short KV cache";
    }
  }
}

// A hybrid model's windowed layers hold the same few blocks however long
// the sequence (their own pool's peak usage is flat), while the global
// layers' blocks grow with it.
TEST(SlidingWindowCliTest, HybridWindowedLayersKvPlateausWhileTheGlobalLayersGrow) {
  SKIP_WITHOUT_BINARY();
  TempDir dir;
  const std::string model = dir.File("g3.gguf");
  CliResult r = RunTern("model synth --preset gemma3-tiny -t 1 -o " + model);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto peaks = [&](int n) {
    const std::string in = dir.File("in.jsonl"), summary = dir.File("s.json");
    EXPECT_TRUE(WriteFileBytes(in, "{\"prompt\": \"hello world\", \"max_tokens\": " +
                                       std::to_string(n) +
                                       ", \"temperature\": 0, \"ignore_eos\": true}\n"));
    const CliResult b = RunTern("batch -m " + model + " -i " + in + " -o " + dir.File("o.jsonl") +
                                " --summary-json " + summary +
                                " --max-model-len 1024 --kv-cache-memory 4MiB -t 1");
    EXPECT_EQ(b.exit_code, 0) << b.err;
    const json s = json::parse(ReadFileBytes(summary), nullptr, false);
    EXPECT_FALSE(s.is_discarded());
    if (s.is_discarded() || !s.contains("peak_kv_usage_windowed_layers")) return std::pair{-1.0, -1.0};
    return std::pair{s["peak_kv_usage_global_layers"].get<double>(),
                     s["peak_kv_usage_windowed_layers"].get<double>()};
  };
  const auto [global_short, windowed_short] = peaks(256);
  const auto [global_long, windowed_long] = peaks(1000);
  ASSERT_GT(windowed_short, 0);
  EXPECT_EQ(windowed_long, windowed_short);    // window 16 at block size 16: 2 blocks
  EXPECT_GT(global_long, 3 * global_short);    // 64 blocks against 17
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
