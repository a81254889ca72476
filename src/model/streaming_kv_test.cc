#include "model/streaming_kv.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "base/file_checks.h"
#include "base/paths.h"
#include "model/model.h"

namespace tern {
namespace {

std::unique_ptr<Model> LoadStories() {
  auto model = Model::Load(ModelsDir() + "/stories260K.gguf");
  if (!model.ok()) return nullptr;
  return std::move(model).value();
}

#define SKIP_WITHOUT_STORIES(model)                                             \
  if (!(model)) GTEST_SKIP() << "test model not found: " << ModelsDir() << "/stories260K.gguf"

std::vector<int32_t> Tokens(int n) {
  std::vector<int32_t> t = {1};
  for (int i = 1; i < n; ++i) t.push_back(3 + (i * 37) % 500);
  return t;
}

TEST(StreamingKvTest, DroppedTokensLeaveKeysRotatedToTheirNewPositions) {
  auto model = LoadStories();
  SKIP_WITHOUT_STORIES(model);
  // Layer 0's K and V depend only on the token and its position, so after
  // dropping positions [2, 7) the moved slots must equal a fresh run of the
  // kept tokens at their new positions.
  const std::vector<int32_t> all = Tokens(30);
  std::vector<int32_t> kept(all.begin(), all.begin() + 2);
  kept.insert(kept.end(), all.begin() + 7, all.end());
  SequenceRunner a(*model, 64, DType::kF32, nullptr);
  ASSERT_TRUE(a.Append(all, false).ok());
  a.DropTokens(2, 5);
  ASSERT_EQ(a.num_computed(), 25);
  SequenceRunner b(*model, 64, DType::kF32, nullptr);
  ASSERT_TRUE(b.Append(kept, false).ok());
  const int64_t n = a.kv().slot_elems();
  std::vector<float> ka(n), va(n), kb(n), vb(n);
  for (int32_t pos = 0; pos < 25; ++pos) {
    a.kv().ReadSlot(0, pos, ka.data(), va.data());
    b.kv().ReadSlot(0, pos, kb.data(), vb.data());
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_NEAR(ka[i], kb[i], 1e-4f) << "pos " << pos << " elem " << i;
      ASSERT_EQ(va[i], vb[i]) << "pos " << pos << " elem " << i;
    }
  }
}

TEST(StreamingKvTest, MakeRoomKeepsSinksAndTheRecentWindow) {
  auto model = LoadStories();
  SKIP_WITHOUT_STORIES(model);
  SequenceRunner r(*model, 64, DType::kF16, nullptr);
  StreamingKvConfig c;
  c.sink_tokens = 4;
  c.window_tokens = 16;
  ASSERT_TRUE(CheckStreamingKv(c, 64).ok());
  ASSERT_TRUE(r.Append(Tokens(60), false).ok());
  EXPECT_EQ(MakeRoom(r, c, 4), 0);  // fits
  EXPECT_EQ(MakeRoom(r, c, 5), 40);  // 60 - 4 sinks - 16 recent
  EXPECT_EQ(r.num_computed(), 20);
  // Decoding continues after the eviction.
  EXPECT_TRUE(r.Append(std::vector<int32_t>{42}, false).ok());
  for (float x : r.Logits(0)) ASSERT_TRUE(std::isfinite(x));
}

TEST(StreamingKvTest, ConfigMustLeaveRoom) {
  StreamingKvConfig c;
  c.sink_tokens = 4;
  c.window_tokens = 60;
  const Status st = CheckStreamingKv(c, 64);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("--kv-sink-tokens 4 + --kv-window 60 must be below the context of 64"),
            std::string::npos)
      << st.message();
  c.window_tokens = 0;  // half the context
  EXPECT_TRUE(CheckStreamingKv(c, 64).ok());
}

TEST(StreamingKvTest, PerplexityStreamWithoutEvictionScoresEveryTokenAfterTheSkip) {
  auto model = LoadStories();
  SKIP_WITHOUT_STORIES(model);
  const std::vector<int32_t> tokens = Tokens(100);
  SequenceRunner r(*model, 128, DType::kF32, nullptr);
  auto fits = RunStreamingPerplexity(r, tokens, StreamingKvConfig{}, 10);
  ASSERT_TRUE(fits.ok());
  EXPECT_EQ(fits->num_evicted, 0);
  EXPECT_EQ(fits->num_scored, 89);  // predictions of tokens 11..99
  SequenceRunner small(*model, 32, DType::kF32, nullptr);
  auto streamed = RunStreamingPerplexity(small, tokens, StreamingKvConfig{}, 10);
  ASSERT_TRUE(streamed.ok());
  EXPECT_GT(streamed->num_evicted, 0);
  EXPECT_EQ(streamed->num_scored, 89);
  EXPECT_TRUE(std::isfinite(streamed->ppl) && streamed->ppl > 1.0);
}

}  // namespace
}  // namespace tern
