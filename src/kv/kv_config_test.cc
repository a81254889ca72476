#include "kv/kv_config.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace tern {
namespace {

KvConfig Shape(DType dtype = DType::kF16) {
  return {.num_layers = 32, .num_kv_heads = 8, .head_dim = 128, .block_size = 16, .dtype = dtype,
          .v_dtype = std::nullopt};
}

// A budget of `bytes` of KV (max_model_len 0: the model's context).
KvBudget MemoryBudget(int64_t bytes, int32_t max_model_len = 0) {
  KvBudget b;
  b.kv_cache_memory_bytes = bytes;
  b.max_model_len = max_model_len;
  return b;
}

TEST(KvConfigTest, BytesPerTokenFollowsTheFormula) {
  EXPECT_EQ(Shape().BytesPerToken(), 131072);  // 2*32*8*128*2
  EXPECT_EQ(Shape(DType::kF32).BytesPerToken(), 262144);
  EXPECT_EQ(Shape(DType::kQ8_0).BytesPerToken(), 65536 * 34 / 32);
  EXPECT_EQ(Shape(DType::kQ4_0).BytesPerToken(), 65536 * 18 / 32);
  EXPECT_EQ(Shape().BytesPerBlock(), 131072 * 16);
}

// bytes_per_elem 2 / 2 / 4 / 34/32 / 18/32, K and V each their own half.
TEST(KvConfigTest, KAndVOfDifferentTypesEachCountTheirHalf) {
  EXPECT_EQ(KvBytesPerElement(DType::kF16), 2.0);
  EXPECT_EQ(KvBytesPerElement(DType::kBF16), 2.0);
  EXPECT_EQ(KvBytesPerElement(DType::kF32), 4.0);
  EXPECT_EQ(KvBytesPerElement(DType::kQ8_0), 34.0 / 32);
  EXPECT_EQ(KvBytesPerElement(DType::kQ4_0), 18.0 / 32);
  KvConfig c = Shape(DType::kQ8_0);
  c.v_dtype = DType::kQ4_0;
  EXPECT_EQ(c.BytesPerToken(), 32 * 8 * 128 * (34 + 18) / 32);
  EXPECT_EQ(c.BytesPerToken(), KvBytesPerToken(32, 8, 128, DType::kQ8_0, DType::kQ4_0));
  EXPECT_EQ(Shape(DType::kBF16).BytesPerToken(), Shape().BytesPerToken());
  // The same budget holds 32/17 (q8_0) and 32/9 (q4_0) times f16's tokens.
  KvBudget budget = MemoryBudget(1LL << 30, 1024);
  budget.max_num_seqs = 1 << 20;
  auto f16 = PlanKvCache(Shape(), budget);
  auto q8 = PlanKvCache(Shape(DType::kQ8_0), budget);
  auto q4 = PlanKvCache(Shape(DType::kQ4_0), budget);
  ASSERT_TRUE(f16.ok() && q8.ok() && q4.ok());
  EXPECT_EQ(f16->num_tokens(), 8192);
  EXPECT_EQ(q8->num_tokens(), 15408);  // 2^30 / 69632 = 15420 -> whole blocks
  EXPECT_EQ(q4->num_tokens(), 29120);  // 2^30 / 36864 = 29127
  EXPECT_NE(c.Summary().find("K Q8_0, V Q4_0"), std::string::npos) << c.Summary();
}

TEST(KvConfigTest, ExplicitBudgetGivesBlocksCappedBySequences) {
  KvBudget b = MemoryBudget(1LL << 30, 4096);  // 1 GiB = 8192 tokens = 512 blocks
  b.max_num_seqs = 64;
  auto cfg = PlanKvCache(Shape(), b);
  ASSERT_TRUE(cfg.ok()) << cfg.status().message();
  EXPECT_EQ(cfg->num_blocks, 512);
  EXPECT_EQ(cfg->MaxConcurrency(), 2);
  EXPECT_EQ(cfg->Summary(),
            "KV cache: 512 blocks = 8192 tokens (1.00 GiB, F16); max concurrency at "
            "max_model_len 4096 = 2");
  b.max_num_seqs = 1;
  cfg = PlanKvCache(Shape(), b);
  ASSERT_TRUE(cfg.ok());
  EXPECT_EQ(cfg->num_blocks, 256);
}

TEST(KvConfigTest, BudgetBelowOneSequenceIsAnErrorWithTheNumbers) {
  KvBudget b = MemoryBudget(256LL << 20, 4096);  // 2048 tokens
  auto cfg = PlanKvCache(Shape(), b);
  ASSERT_FALSE(cfg.ok());
  EXPECT_NE(cfg.status().message().find("2048 tokens"), std::string::npos)
      << cfg.status().message();
  EXPECT_NE(cfg.status().message().find("max_model_len 4096"), std::string::npos);
}

TEST(KvConfigTest, ZeroMaxModelLenTakesModelContextCappedByMemory) {
  KvBudget b = MemoryBudget(256LL << 20);  // 2048 tokens
  b.model_context_len = 8192;
  auto cfg = PlanKvCache(Shape(), b);
  ASSERT_TRUE(cfg.ok());
  EXPECT_EQ(cfg->max_model_len, 2048);
  b.model_context_len = 1024;
  cfg = PlanKvCache(Shape(), b);
  ASSERT_TRUE(cfg.ok());
  EXPECT_EQ(cfg->max_model_len, 1024);
  EXPECT_EQ(cfg->num_blocks, 128);
}

TEST(KvConfigTest, MemoryUtilizationUsesFreeMemoryAfterWeights) {
  KvBudget b;
  b.memory_utilization = 0.5;
  b.mem_available_bytes = 3LL << 30;
  b.weight_bytes = 1LL << 30;  // 1 GiB usable = 8192 tokens
  b.max_model_len = 1024;
  b.max_num_seqs = 100;
  auto cfg = PlanKvCache(Shape(), b);
  ASSERT_TRUE(cfg.ok());
  EXPECT_EQ(cfg->num_blocks, 512);
}

TEST(KvConfigTest, ReadsMemAvailable) {
  auto m = ReadMemAvailableBytes();
  ASSERT_TRUE(m.has_value());
  EXPECT_GT(*m, 0);
}

// A gemma3-like hybrid (5 of 6 layers windowed) split from a planned cache.
KvConfig Planned(int64_t num_blocks) {
  KvConfig c = Shape();
  c.num_layers = 6;
  c.max_model_len = 1024;  // 64 blocks
  c.num_blocks = num_blocks;
  return c;
}

TEST(KvConfigTest, SplitForWindowDividesTheSameBytesByWhatASequenceHolds) {
  const KvConfig naive = Planned(256);  // 4 sequences of 1024 unsplit
  const KvConfig c = SplitKvForWindow(naive, /*windowed_layers=*/5, /*window=*/64,
                                      /*chunk_tokens=*/512, /*max_num_seqs=*/64);
  EXPECT_EQ(c.window_group_layers, 5);
  // In one-layer blocks: 1536 = S x (64 full + 5 x 5 windowed) + 5 x 32 for
  // one prefill chunk, S = 15.46: 15.46 x 5 + 32 = 109 windowed blocks, the
  // rest (1536 - 545) full.
  EXPECT_EQ(c.window_group_blocks, 109);
  EXPECT_EQ(c.num_blocks, 991);
  EXPECT_LE(c.TotalBytes(), naive.TotalBytes());
  EXPECT_GT(c.TotalBytes(), naive.TotalBytes() - naive.BytesPerBlock());
  EXPECT_EQ(c.MaxConcurrency(), 15);  // of the full group, from 4 unsplit
  EXPECT_NE(c.Summary().find("windowed layers: 109 blocks of their own"), std::string::npos)
      << c.Summary();
}

TEST(KvConfigTest, SplitForWindowKeepsOneSequenceAndHonoursMaxNumSeqs) {
  // Exactly one unsplit sequence: still one, its windowed blocks at most
  // a sequence's.
  for (int32_t window : {64, 512, 900}) {
    const KvConfig c = SplitKvForWindow(Planned(64), 5, window, 1024, 64);
    EXPECT_GE(c.num_blocks, 64) << window;
    EXPECT_GE(c.window_group_blocks, std::min<int64_t>(64, (window - 1) / 16 + 2)) << window;
    EXPECT_LE(c.window_group_blocks, 64) << window;
    EXPECT_LE(c.TotalBytes(), Planned(64).TotalBytes()) << window;
  }
  // Two sequences at most: 2 x 64 full blocks, 2 x 5 + 32 windowed, less
  // memory than the budget.
  const KvConfig c = SplitKvForWindow(Planned(256), 5, 64, 512, 2);
  EXPECT_EQ(c.num_blocks, 128);
  EXPECT_EQ(c.window_group_blocks, 42);
  EXPECT_EQ(c.TotalBytes(), (128 + 5 * 42) * Planned(1).BytesPerBlock() / 6);
  // A window as long as max_model_len (1024 = 64 blocks) releases nothing:
  // unchanged, one group.
  EXPECT_EQ(SplitKvForWindow(Planned(256), 5, 1024, 512, 64).window_group_layers, 0);
  EXPECT_EQ(SplitKvForWindow(Planned(256), 5, 1024, 512, 64).num_blocks, 256);
  // No windowed layer, or every layer windowed: unchanged.
  EXPECT_EQ(SplitKvForWindow(Planned(256), 0, 64, 512, 64).num_blocks, 256);
  EXPECT_EQ(SplitKvForWindow(Planned(256), 6, 64, 512, 64).window_group_layers, 0);
}

}  // namespace
}  // namespace tern
