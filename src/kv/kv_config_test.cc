#include "kv/kv_config.h"

#include <gtest/gtest.h>

namespace tern {
namespace {

KvConfig Shape(DType dtype = DType::kF16) {
  KvConfig c;
  c.num_layers = 32;
  c.num_kv_heads = 8;
  c.head_dim = 128;
  c.block_size = 16;
  c.dtype = dtype;
  return c;
}

TEST(KvConfigTest, BytesPerTokenFollowsTheFormula) {
  EXPECT_EQ(Shape().BytesPerToken(), 131072);  // 2*32*8*128*2
  EXPECT_EQ(Shape(DType::kF32).BytesPerToken(), 262144);
  EXPECT_EQ(Shape(DType::kQ8_0).BytesPerToken(), 65536 * 34 / 32);
  EXPECT_EQ(Shape(DType::kQ4_0).BytesPerToken(), 65536 * 18 / 32);
  EXPECT_EQ(Shape().BytesPerBlock(), 131072 * 16);
}

TEST(KvConfigTest, ExplicitBudgetGivesBlocksCappedBySequences) {
  KvBudget b;
  b.kv_cache_memory_bytes = 1LL << 30;  // 1 GiB = 8192 tokens = 512 blocks
  b.max_model_len = 4096;
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
  KvBudget b;
  b.kv_cache_memory_bytes = 256LL << 20;  // 2048 tokens
  b.max_model_len = 4096;
  auto cfg = PlanKvCache(Shape(), b);
  ASSERT_FALSE(cfg.ok());
  EXPECT_NE(cfg.status().message().find("2048 tokens"), std::string::npos)
      << cfg.status().message();
  EXPECT_NE(cfg.status().message().find("max_model_len 4096"), std::string::npos);
}

TEST(KvConfigTest, ZeroMaxModelLenTakesModelContextCappedByMemory) {
  KvBudget b;
  b.kv_cache_memory_bytes = 256LL << 20;  // 2048 tokens
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

}  // namespace
}  // namespace tern
