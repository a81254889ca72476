#include "server/response_writer.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace tern {
namespace {

using json = nlohmann::json;

const ResponseMeta kMeta{"cmpl-1", 1700000000, "stories"};

TEST(ResponseWriterTest, ErrorHasOpenAiShapeWithNulls) {
  json j = json::parse(ErrorJson(ApiError::Invalid("bad n", "n")));
  EXPECT_EQ(j["error"]["message"], "bad n");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["param"], "n");
  EXPECT_TRUE(j["error"]["code"].is_null());
}

TEST(ResponseWriterTest, CompletionCarriesChoicesAndUsage) {
  ChoiceResult c{0, "hello", "length", false, {}};
  json j = json::parse(CompletionJson(kMeta, {c}, UsageInfo{5, 3, 2}));
  EXPECT_EQ(j["id"], "cmpl-1");
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["created"], 1700000000);
  EXPECT_EQ(j["model"], "stories");
  EXPECT_EQ(j["choices"][0]["text"], "hello");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(j["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(j["usage"]["prompt_tokens"], 5);
  EXPECT_EQ(j["usage"]["completion_tokens"], 3);
  EXPECT_EQ(j["usage"]["total_tokens"], 8);
  EXPECT_EQ(j["usage"]["prompt_tokens_details"]["cached_tokens"], 2);
}

TEST(ResponseWriterTest, CompletionLogprobsUseLegacyLayout) {
  ChoiceResult c{0, "ab", "stop", true, {}};
  c.logprobs.push_back({"a", -0.5f, {{"a", -0.5f}, {"b", -1.5f}}, 0});
  c.logprobs.push_back({"b", -0.25f, {{"b", -0.25f}}, 1});
  json j = json::parse(CompletionJson(kMeta, {c}, {}));
  const json& lp = j["choices"][0]["logprobs"];
  EXPECT_EQ(lp["tokens"], json({"a", "b"}));
  EXPECT_EQ(lp["token_logprobs"], json({-0.5, -0.25}));
  EXPECT_EQ(lp["top_logprobs"][0]["b"], -1.5);
  EXPECT_EQ(lp["text_offset"], json({0, 1}));
}

TEST(ResponseWriterTest, ChatLogprobsListBytesAndAlternatives) {
  ChoiceResult c{0, "A", "stop", true, {}};
  c.logprobs.push_back({"A", -0.5f, {{"A", -0.5f}}, 0});
  json j = json::parse(ChatCompletionJson(kMeta, {c}, {}));
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(j["choices"][0]["message"]["content"], "A");
  // Required by the OpenAI schema (nullable): present, null.
  ASSERT_TRUE(j["choices"][0]["message"].contains("refusal"));
  EXPECT_TRUE(j["choices"][0]["message"]["refusal"].is_null());
  ASSERT_TRUE(j["choices"][0]["logprobs"].contains("refusal"));
  EXPECT_TRUE(j["choices"][0]["logprobs"]["refusal"].is_null());
  const json& e = j["choices"][0]["logprobs"]["content"][0];
  EXPECT_EQ(e["token"], "A");
  EXPECT_EQ(e["bytes"], json({65}));
  EXPECT_EQ(e["top_logprobs"][0]["token"], "A");
}

TEST(ResponseWriterTest, PartialUtf8TokenTextStaysValidJson) {
  ChoiceResult c{0, "x", "stop", true, {}};
  c.logprobs.push_back({"\xe2\x96", -1.0f, {{"\xe2\x96", -1.0f}}, 0});
  EXPECT_NO_THROW(json::parse(CompletionJson(kMeta, {c}, {})));
  json j = json::parse(ChatCompletionJson(kMeta, {c}, {}));
  EXPECT_EQ(j["choices"][0]["logprobs"]["content"][0]["bytes"], json({0xe2, 0x96}));
}

TEST(ResponseWriterTest, ChatChunksCarryRoleFirstThenContentThenFinish) {
  json first = json::parse(ChatChunkJson(kMeta, ChoiceResult{0, "", "", false, {}}, true, false));
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(first["choices"][0]["delta"]["content"], "");
  EXPECT_FALSE(first.contains("usage"));
  json mid = json::parse(ChatChunkJson(kMeta, ChoiceResult{0, "hi", "", false, {}}, false, true));
  EXPECT_FALSE(mid["choices"][0]["delta"].contains("role"));
  EXPECT_EQ(mid["choices"][0]["delta"]["content"], "hi");
  EXPECT_TRUE(mid["choices"][0]["finish_reason"].is_null());
  EXPECT_TRUE(mid["usage"].is_null());
  json last =
      json::parse(ChatChunkJson(kMeta, ChoiceResult{0, "", "stop", false, {}}, false, false));
  EXPECT_TRUE(last["choices"][0]["delta"].empty());
  EXPECT_EQ(last["choices"][0]["finish_reason"], "stop");
}

TEST(ResponseWriterTest, UsageChunkHasEmptyChoices) {
  json j = json::parse(UsageChunkJson(kMeta, true, UsageInfo{4, 6, 0}));
  EXPECT_TRUE(j["choices"].empty());
  EXPECT_EQ(j["usage"]["total_tokens"], 10);
}

TEST(ResponseWriterTest, ModelsTokenizeDetokenize) {
  json m = json::parse(ModelsJson("stories", 1, 2048));
  EXPECT_EQ(m["object"], "list");
  EXPECT_EQ(m["data"][0]["id"], "stories");
  EXPECT_EQ(m["data"][0]["object"], "model");
  EXPECT_EQ(json::parse(ModelJson("stories", 1, 2048)), m["data"][0])
      << "the single model object equals the list entry";
  json t = json::parse(TokenizeJson({1, 2, 3}, 2048));
  EXPECT_EQ(t["count"], 3);
  EXPECT_EQ(t["max_model_len"], 2048);
  EXPECT_EQ(json::parse(DetokenizeJson("hi"))["prompt"], "hi");
}

}  // namespace
}  // namespace tern
