// End-to-end tests of the quantized KV cache flags (--kv-cache-dtype,
// --kv-cache-dtype-k, --kv-cache-dtype-v): every command that runs a model
// takes them, an unknown type names the choices, a model whose K/V row holds
// no whole block is refused naming its head_dim and KV heads, and the
// quality figures (perplexity, eval-quant) come out as measured.
#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "base/paths.h"
#include "tests/cli_util.h"

namespace tern {
namespace {

using testing::RunTern;
using testing::ShellQuote;

std::string Model() { return ShellQuote(DefaultModelPath()); }
std::string TextPath() { return ModelsDir() + "/text/tinystories_sample.txt"; }
std::string TinyRandom() { return ModelsDir() + "/llama-2-tiny-random.gguf"; }

double ParsePpl(const std::string& out) {
  double ppl = 0, err = 0;
  const size_t at = out.find("ppl = ");
  if (at == std::string::npos) return 0;
  std::sscanf(out.c_str() + at, "ppl = %lf +/- %lf", &ppl, &err);
  return ppl;
}

#define SKIP_WITHOUT_STORIES()                                                     \
  SKIP_WITHOUT_BINARY();                                                           \
  if (!FileExists(DefaultModelPath()) || !FileExists(TextPath()))                  \
  GTEST_SKIP() << "stories260K.gguf or text/tinystories_sample.txt missing in " << ModelsDir()

TEST(KvCacheDtypeCliTest, UnknownTypeNamesTheChoicesInEveryCommand) {
  SKIP_WITHOUT_BINARY();
  for (const char* cmd : {"generate -m x.gguf -p hi", "batch -m x.gguf", "serve -m x.gguf",
                          "bench -m x.gguf", "perplexity -m x.gguf -f y",
                          "eval-quant -m x.gguf -f y", "kv-calc --layers 1 --kv-heads 1 "
                          "--head-dim 32", "chat -m x.gguf"}) {
    for (const char* flag : {"--kv-cache-dtype", "--kv-cache-dtype-k", "--kv-cache-dtype-v"}) {
      const testing::CliResult r = RunTern(std::string(cmd) + " " + flag + " q5_k");
      EXPECT_EQ(r.exit_code, 1) << cmd << " " << flag;
      EXPECT_NE(r.err.find(std::string(flag) + " must be one of f16, bf16, f32, q8_0, q4_0, got "
                           "'q5_k'"),
                std::string::npos)
          << cmd << ": " << r.err;
    }
  }
}

// llama-2-tiny-random: 2 KV heads x head_dim 4 = 8 values a row, no block of 32.
TEST(KvCacheDtypeCliTest, RowWithoutWholeBlocksIsAStartUpErrorNamingTheShape) {
  SKIP_WITHOUT_BINARY();
  if (!FileExists(TinyRandom())) GTEST_SKIP() << "llama-2-tiny-random.gguf missing";
  const std::string m = ShellQuote(TinyRandom());
  for (const std::string& cmd :
       {"generate -m " + m + " -p hi -n 2 --kv-cache-dtype q8_0",
        "generate -m " + m + " -p hi -n 2 --kv-cache-dtype-v q4_0",
        "bench -m " + m + " -p 4 -n 2 -r 1 --kv-cache-dtype q4_0",
        "kv-calc -m " + m + " --kv-cache-dtype q8_0"}) {
    const testing::CliResult r = RunTern(cmd);
    EXPECT_EQ(r.exit_code, 1) << cmd;
    EXPECT_NE(r.err.find("2 KV heads x head_dim 4 = 8 values"), std::string::npos)
        << cmd << ": " << r.err;
  }
  // Float types hold any row.
  const testing::CliResult ok = RunTern("generate -m " + m + " -p hi -n 2 --kv-cache-dtype bf16");
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
}

// K and V apart, and llama.cpp's -ctk/-ctv spellings for the same flags.
TEST(KvCacheDtypeCliTest, GenerateTakesKAndVApart) {
  SKIP_WITHOUT_STORIES();
  const std::string base = "generate -m " + Model() + " -p 'Once upon a time' --temp 0 -n 8";
  testing::CliResult r = RunTern(base + " --kv-cache-dtype-k q8_0 --kv-cache-dtype-v q4_0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("KV K q8_0, V q4_0"), std::string::npos) << r.err;
  const testing::CliResult alias = RunTern(base + " -ctk q8_0 -ctv q4_0");
  ASSERT_EQ(alias.exit_code, 0) << alias.err;
  EXPECT_EQ(alias.out, r.out);
  r = RunTern(base + " --kv-cache-dtype q8_0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("KV q8_0)"), std::string::npos) << r.err;
}

TEST(KvCacheDtypeCliTest, KvCalcPrintsBytesPerElementAndMixedTypes) {
  SKIP_WITHOUT_BINARY();
  const std::string shape = "kv-calc --layers 32 --kv-heads 8 --head-dim 128 --seq-len 4096";
  testing::CliResult r = RunTern(shape + " --kv-cache-dtype q8_0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("q8_0 (1.0625 bytes/element)"), std::string::npos) << r.out;
  r = RunTern(shape + " --kv-cache-dtype-k q8_0 --kv-cache-dtype-v q4_0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("K q8_0, V q4_0 (1.0625 + 0.5625 bytes/element)"), std::string::npos)
      << r.out;
  // 32 x 8 x 128 x (34 + 18) / 32 bytes.
  EXPECT_NE(r.out.find("per token:    53248 bytes"), std::string::npos) << r.out;
}

// stories260K (head_dim 8: one block spans the token's 4 KV heads) on the
// TinyStories sample at ctx 128. Measured: f16 6.8464, q8_0 6.8555 (+0.13%),
// K q8_0 + V q4_0 6.9008 (+0.8%), bf16 6.8470.
TEST(KvCacheDtypeCliTest, PerplexityOfQuantizedCachesStaysCloseToF16) {
  SKIP_WITHOUT_STORIES();
  const std::string args =
      "perplexity -m " + Model() + " -f " + ShellQuote(TextPath()) + " --ctx 128 -t 1";
  const testing::CliResult f16 = RunTern(args + " --kv-cache-dtype f16");
  const testing::CliResult q8 = RunTern(args + " --kv-cache-dtype q8_0");
  const testing::CliResult mixed = RunTern(args + " -ctk q8_0 -ctv q4_0");
  const testing::CliResult bf16 = RunTern(args + " --kv-cache-dtype bf16");
  for (const auto* r : {&f16, &q8, &mixed, &bf16}) ASSERT_EQ(r->exit_code, 0) << r->err;
  const double base = ParsePpl(f16.out);
  EXPECT_NEAR(base, 6.8464, 0.0005) << f16.out;
  EXPECT_NEAR(ParsePpl(q8.out) / base, 1.0, 0.002) << q8.out;
  EXPECT_NEAR(ParsePpl(mixed.out) / base, 1.0, 0.03) << mixed.out;
  EXPECT_NEAR(ParsePpl(bf16.out) / base, 1.0, 0.001) << bf16.out;
}

// eval-quant --kv-cache-dtype: the same weights, base f16 cache against the
// quantized one: KL and top-1 agreement of the cache alone.
TEST(KvCacheDtypeCliTest, EvalQuantMeasuresTheCacheAlone) {
  SKIP_WITHOUT_STORIES();
  const std::string args =
      "eval-quant -m " + Model() + " -f " + ShellQuote(TextPath()) + " --ctx 128 -t 1 --json";
  nlohmann::json q8, q4;
  for (auto [flag, out] : {std::pair{" --kv-cache-dtype q8_0", &q8},
                           std::pair{" --kv-cache-dtype q4_0", &q4}}) {
    const testing::CliResult r = RunTern(args + flag);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    *out = nlohmann::json::parse(r.out, nullptr, false);
    ASSERT_FALSE(out->is_discarded()) << r.out;
    EXPECT_NE(r.err.find("KV cache base f16, quant "), std::string::npos) << r.err;
  }
  EXPECT_EQ(q8["kv_cache_dtype"], "q8_0");
  EXPECT_NEAR(q8["ppl_base"].get<double>(), 6.8464, 0.0005);  // the f16 cache
  EXPECT_EQ(q8["size_ratio"].get<double>(), 1.0);              // the same weights
  EXPECT_LT(q8["kl_mean"].get<double>(), 0.005);
  EXPECT_GT(q8["top1_agreement"].get<double>(), 0.95);
  EXPECT_GT(q4["kl_mean"].get<double>(), q8["kl_mean"].get<double>());
}

// serve and batch print the cache's capacity in tokens at start-up: the same
// --kv-cache-memory holds 32/17 the tokens at q8_0 (whole blocks).
TEST(KvCacheDtypeCliTest, BatchStartUpShowsTheTokenCapacity) {
  SKIP_WITHOUT_STORIES();
  testing::TempDir dir;
  const std::string in = dir.File("in.jsonl");
  {
    FILE* f = std::fopen(in.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("{\"prompt\": \"Once upon a time\", \"max_tokens\": 4, \"temperature\": 0}\n", f);
    std::fclose(f);
  }
  const std::string cmd = "batch -m " + Model() + " -i " + ShellQuote(in) + " -o " +
                          ShellQuote(dir.File("out.jsonl")) +
                          " --kv-cache-memory 1MiB --max-model-len 256 --max-num-seqs 256";
  const testing::CliResult f16 = RunTern(cmd);
  const testing::CliResult q8 = RunTern(cmd + " --kv-cache-dtype q8_0");
  ASSERT_EQ(f16.exit_code, 0) << f16.err;
  ASSERT_EQ(q8.exit_code, 0) << q8.err;
  // 2^20 / 640 = 1638 -> 102 blocks of 16; 2^20 / 340 = 3084 -> 192 blocks.
  EXPECT_NE(f16.err.find("102 blocks = 1632 tokens"), std::string::npos) << f16.err;
  EXPECT_NE(q8.err.find("192 blocks = 3072 tokens"), std::string::npos) << q8.err;
  EXPECT_NE(q8.err.find("Q8_0"), std::string::npos) << q8.err;
}

// head_dim 64: K and V are rotated (Walsh-Hadamard) before a block-format
// cache stores them and the attention output is rotated back, so q . k and
// the weighted V sums are unchanged and a 4-bit cache stays close to f16 (a
// random-weight synth: perplexity near the vocabulary size, measured f16
// 532.51, q8_0 532.56, q4_0 533.07). Streaming eviction re-rotates stored
// keys through the same rotation.
TEST(KvCacheDtypeCliTest, RotatedCacheOfHeadDim64StaysCloseToF16AndStreams) {
  SKIP_WITHOUT_STORIES();
  testing::TempDir dir;
  const std::string model = dir.File("hd64.gguf");
  testing::CliResult r = RunTern("model synth --preset tiny --head-dim 64 --n-head 4 --n-head-kv 2 "
                                 "--n-embd 256 -o " + ShellQuote(model));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string args =
      "perplexity -m " + ShellQuote(model) + " -f " + ShellQuote(TextPath()) + " --ctx 128 -t 1";
  const testing::CliResult f16 = RunTern(args + " --kv-cache-dtype f16");
  const testing::CliResult q8 = RunTern(args + " --kv-cache-dtype q8_0");
  const testing::CliResult q4 = RunTern(args + " --kv-cache-dtype q4_0");
  for (const auto* x : {&f16, &q8, &q4}) ASSERT_EQ(x->exit_code, 0) << x->err;
  const double base = ParsePpl(f16.out);
  ASSERT_GT(base, 100);
  EXPECT_NEAR(ParsePpl(q8.out) / base, 1.0, 0.001) << q8.out;
  EXPECT_NEAR(ParsePpl(q4.out) / base, 1.0, 0.005) << q4.out;
  r = RunTern("generate -m " + ShellQuote(model) +
              " -p 'Once upon a time' -c 64 --ignore-eos -n 200 --temp 0 -t 1 --kv-eviction streaming "
              "--kv-sink-tokens 4 --kv-window 24 -ctk q4_0 -ctv q8_0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("generated: 200 tokens"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("tokens evicted"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace tern
