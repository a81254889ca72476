// End-to-end tests of `tern kv-calc`, the KV-cache capacity planner.
#include <gtest/gtest.h>

#include "base/paths.h"
#include "tests/cli_util.h"

namespace tern {
namespace {

using tern::testing::RunTern;

const char kShape[] = "kv-calc --layers 32 --kv-heads 8 --head-dim 128 --seq-len 4096";

TEST(KvCalcCliTest, ReproducesTheWorkedExample) {
  SKIP_WITHOUT_BINARY();
  auto r = RunTern(kShape);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("per token:    131072 bytes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("per sequence: 536870912 bytes = 512.0 MiB"), std::string::npos) << r.out;
}

TEST(KvCalcCliTest, BatchOfSixteenIsEightGib) {
  SKIP_WITHOUT_BINARY();
  auto r = RunTern(std::string(kShape) + " --batch 16");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("total:        8589934592 bytes = 8.0 GiB (batch 16)"), std::string::npos)
      << r.out;
}

TEST(KvCalcCliTest, QuantizedDtypesUseTheirBlockBytes) {
  SKIP_WITHOUT_BINARY();
  auto r = RunTern(std::string(kShape) + " --kv-cache-dtype q8_0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("per token:    69632 bytes"), std::string::npos) << r.out;  // 65536*34/32
  r = RunTern(std::string(kShape) + " --kv-cache-dtype q4_0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("per token:    36864 bytes"), std::string::npos) << r.out;  // 65536*18/32
}

TEST(KvCalcCliTest, MemoryGivesSequencesAndLongestLength) {
  SKIP_WITHOUT_BINARY();
  auto r = RunTern(std::string(kShape) + " --batch 4 --memory 8GiB");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("16 sequences of 4096 tokens fit"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("longest length for batch 4: 16384 tokens"), std::string::npos) << r.out;
}

TEST(KvCalcCliTest, ReadsTheShapeFromAModel) {
  SKIP_WITHOUT_BINARY();
  if (!FileExists(DefaultModelPath())) GTEST_SKIP() << "test model missing";
  // stories260K: 5 layers x 4 KV heads x head_dim 8 x 2 x 2 bytes = 640.
  auto r = RunTern("kv-calc -m " + tern::testing::ShellQuote(DefaultModelPath()) + " --seq-len 100");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("per token:    640 bytes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("per sequence: 64000 bytes"), std::string::npos) << r.out;
}

TEST(KvCalcCliTest, MissingShapeIsAOneLineError) {
  SKIP_WITHOUT_BINARY();
  auto r = RunTern("kv-calc --layers 32");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(tern::testing::CountLines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("--kv-heads"), std::string::npos) << r.err;
  r = RunTern(std::string(kShape) + " --kv-cache-dtype q5_k");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--kv-cache-dtype"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace tern
