#include "server/request_parser.h"

#include <gtest/gtest.h>

#include "sample/defaults.h"

namespace tern {
namespace {

struct BadCase {
  const char* body;
  const char* param;  // expected "param" ("" = none)
};

constexpr ApiEndpoint kCmpl = ApiEndpoint::kCompletions;
constexpr ApiEndpoint kChat = ApiEndpoint::kChatCompletions;

TEST(RequestParserTest, RejectsTableOfBadRequestsWith400) {
  const std::vector<BadCase> completions = {
      {"", ""},
      {"{", ""},
      {"[1,2]", ""},
      {"\"prompt\"", ""},
      {"{}", "prompt"},
      {R"({"prompt": null})", "prompt"},
      {R"({"prompt": 5})", "prompt"},
      {R"({"prompt": []})", "prompt"},
      {R"({"prompt": [1, "a"]})", "prompt"},
      {R"({"prompt": [[1], 2.5]})", "prompt"},
      {R"({"prompt": [-1]})", "prompt"},
      {R"({"prompt": [600]})", "prompt"},  // vocab 512
      {R"({"prompt": "a", "model": 3})", "model"},
      {R"({"prompt": "a", "max_tokens": 0})", "max_tokens"},
      {R"({"prompt": "a", "max_tokens": -5})", "max_tokens"},
      {R"({"prompt": "a", "max_tokens": 1.5})", "max_tokens"},
      {R"({"prompt": "a", "max_tokens": "10"})", "max_tokens"},
      {R"({"prompt": "a", "max_tokens": 99999999999})", "max_tokens"},
      {R"({"prompt": "a", "max_completion_tokens": 0})", "max_completion_tokens"},
      {R"({"prompt": "a", "temperature": -1})", "temperature"},
      {R"({"prompt": "a", "temperature": "hot"})", "temperature"},
      {R"({"prompt": "a", "top_p": 0})", "top_p"},
      {R"({"prompt": "a", "top_p": 1.5})", "top_p"},
      {R"({"prompt": "a", "top_k": -2})", "top_k"},
      {R"({"prompt": "a", "min_p": 2})", "min_p"},
      {R"({"prompt": "a", "presence_penalty": 3})", "presence_penalty"},
      {R"({"prompt": "a", "frequency_penalty": -3})", "frequency_penalty"},
      {R"({"prompt": "a", "repetition_penalty": 0})", "repetition_penalty"},
      {R"({"prompt": "a", "seed": "x"})", "seed"},
      {R"({"prompt": "a", "stop": 5})", "stop"},
      {R"({"prompt": "a", "stop": ["a", 1]})", "stop"},
      {R"({"prompt": "a", "stop": ["a","b","c","d","e"]})", "stop"},
      {R"({"prompt": "a", "stop": [""]})", "stop"},
      {R"({"prompt": "a", "n": 0})", "n"},
      {R"({"prompt": "a", "n": 17})", "n"},
      {R"({"prompt": "a", "stream": "yes"})", "stream"},
      {R"({"prompt": "a", "stream": true, "stream_options": 1})", "stream_options"},
      {R"({"prompt": "a", "stream_options": {"include_usage": 1}})", "include_usage"},
      {R"({"prompt": "a", "logprobs": 21})", "logprobs"},
      {R"({"prompt": "a", "logprobs": true})", "logprobs"},
      {R"({"prompt": "a", "echo": 1})", "echo"},
      {R"({"prompt": "a", "ignore_eos": "no"})", "ignore_eos"},
      {R"({"prompt": "a", "user": 1})", "user"},
      {R"({"prompt": "a", "cache_salt": []})", "cache_salt"},
  };
  const std::vector<BadCase> chat = {
      {"{}", "messages"},
      {R"({"messages": []})", "messages"},
      {R"({"messages": "hi"})", "messages"},
      {R"({"messages": [1]})", "messages[0]"},
      {R"({"messages": [{"content": "hi"}]})", "messages[0].role"},
      {R"({"messages": [{"role": "user", "content": 5}]})", "messages[0].content"},
      {R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
       "messages[0].content"},
      {R"({"messages": [{"role": "user", "content": [{"type": "text"}]}]})",
       "messages[0].content"},
      // A user/system/tool message without content names its index.
      {R"({"messages": [{"role": "user"}]})", "messages[0].content"},
      {R"({"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": null}]})",
       "messages[1].content"},
      {R"({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"},
          {"role": "system"}]})", "messages[2].content"},
      {R"({"messages": [{"role": "tool", "tool_call_id": "c1"}]})", "messages[0].content"},
      {R"({"messages": [{"role": "user", "content": "x"}], "logprobs": 1})", "logprobs"},
      {R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})",
       "top_logprobs"},
      {R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true, "top_logprobs": 99})",
       "top_logprobs"},
  };
  RequestLimits limits;
  limits.vocab_size = 512;
  for (const auto& [endpoint, cases] : {std::pair{kCmpl, &completions}, std::pair{kChat, &chat}}) {
    for (const BadCase& c : *cases) {
      CompletionRequest req;
      std::optional<ApiError> err = ParseCompletionRequest(c.body, endpoint, limits, &req);
      ASSERT_TRUE(err.has_value()) << c.body;
      EXPECT_EQ(err->http_status, 400) << c.body;
      EXPECT_EQ(err->type, "invalid_request_error") << c.body;
      EXPECT_EQ(err->param, c.param) << c.body << " -> " << err->message;
      EXPECT_FALSE(err->message.empty());
    }
  }
}

// The ranges are sample/request_checks.h's: the 400 says the rule and the
// value, naming the field as the request spelled it.
TEST(RequestParserTest, RangeErrorsSayTheSharedRule) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"prompt": "a", "temperature": 150})", "'temperature' must be between 0 and 100, got 150"},
      {R"({"prompt": "a", "top_p": 1.5})", "'top_p' must be in (0, 1], got 1.5"},
      {R"({"prompt": "a", "max_completion_tokens": 0})", "'max_completion_tokens' must be >= 1, got 0"},
      {R"({"prompt": "a", "n": 17})", "'n' must be between 1 and 16, got 17"},
      {R"({"prompt": "a", "logprobs": 21})", "'logprobs' must be between 0 and 20, got 21"},
      {R"({"prompt": "a", "stop": ["a","b","c","d","e"]})", "'stop' may hold at most 4 strings, got 5"},
      {R"({"prompt": "a", "stop": [""]})", "'stop' strings must not be empty"},
      {R"({"prompt": "a", "max_tokens": 99999999999})", "'max_tokens' is out of range, got 99999999999"},
  };
  for (const auto& [body, message] : cases) {
    CompletionRequest req;
    std::optional<ApiError> err = ParseCompletionRequest(body, kCmpl, RequestLimits{}, &req);
    ASSERT_TRUE(err.has_value()) << body;
    EXPECT_EQ(err->message, message) << body;
  }
  // -1 is "off" for top_k here (vLLM's spelling), as 0.
  CompletionRequest req;
  ASSERT_FALSE(ParseCompletionRequest(R"({"prompt": "a", "top_k": -1})", kCmpl, RequestLimits{}, &req));
  EXPECT_EQ(req.sampling.top_k, 0);
}

TEST(RequestParserTest, ParsesFullCompletionRequest) {
  const char* body = R"({"model": "m", "prompt": "Once", "max_tokens": 7, "temperature": 0,
      "top_p": 0.9, "top_k": 40, "min_p": 0.05, "presence_penalty": 0.5, "frequency_penalty": -0.5,
      "repetition_penalty": 1.1, "seed": 42, "stop": "\n", "n": 3, "stream": true,
      "stream_options": {"include_usage": true}, "logprobs": 2, "echo": true,
      "ignore_eos": true, "user": "u", "cache_salt": "s", "unknown_field": {"x": 1}})";
  CompletionRequest r;
  ASSERT_FALSE(ParseCompletionRequest(body, kCmpl, RequestLimits{}, &r).has_value());
  EXPECT_EQ(r.model, "m");
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(r.prompts[0].text, "Once");
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_EQ(r.sampling.temperature, 0.0f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 0.9f);
  EXPECT_EQ(r.sampling.top_k, 40);
  EXPECT_FLOAT_EQ(r.sampling.min_p, 0.05f);
  EXPECT_FLOAT_EQ(r.sampling.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(r.sampling.frequency_penalty, -0.5f);
  EXPECT_FLOAT_EQ(r.sampling.repetition_penalty, 1.1f);
  EXPECT_TRUE(r.sampling.has_seed);
  EXPECT_EQ(r.sampling.seed, 42u);
  EXPECT_TRUE(r.sampling.ignore_eos);
  EXPECT_EQ(r.stop, std::vector<std::string>{"\n"});
  EXPECT_EQ(r.n, 3);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.logprobs, 2);
  EXPECT_TRUE(r.echo);
  EXPECT_EQ(r.user, "u");
  EXPECT_EQ(r.cache_salt, "s");
}

TEST(RequestParserTest, AcceptsEveryPromptShape) {
  CompletionRequest r;
  ASSERT_FALSE(ParseCompletionRequest(R"({"prompt": [1, 2, 3]})", kCmpl, {}, &r));
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_TRUE(r.prompts[0].is_tokens);
  EXPECT_EQ(r.prompts[0].token_ids, (std::vector<int32_t>{1, 2, 3}));
  ASSERT_FALSE(ParseCompletionRequest(R"({"prompt": ["a", [4, 5], "b"]})", kCmpl, {}, &r));
  ASSERT_EQ(r.prompts.size(), 3u);
  EXPECT_EQ(r.prompts[0].text, "a");
  EXPECT_EQ(r.prompts[1].token_ids, (std::vector<int32_t>{4, 5}));
  EXPECT_EQ(r.prompts[2].text, "b");
  EXPECT_FALSE(r.max_tokens.has_value()) << "absent: the endpoint's default applies later";
  EXPECT_EQ(r.n, 1);
}

TEST(RequestParserTest, JoinsTextContentPartsAndTakesChatLogprobs) {
  const char* body = R"({"messages": [{"role": "system", "content": "Be brief."},
      {"role": "user", "content": [{"type": "text", "text": "Hi "}, {"type": "text", "text": "there"}]},
      {"role": "assistant", "content": null}],
      "max_completion_tokens": 5, "max_tokens": 9, "logprobs": true, "top_logprobs": 3})";
  CompletionRequest r;
  ASSERT_FALSE(ParseCompletionRequest(body, kChat, {}, &r));
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[1].content, "Hi there");
  EXPECT_EQ(r.messages[2].content, "");
  EXPECT_EQ(r.max_tokens, 5) << "max_completion_tokens wins";
  EXPECT_EQ(r.logprobs, 3);
}

TEST(RequestParserTest, NullFieldsKeepDefaults) {
  CompletionRequest r;
  ASSERT_FALSE(ParseCompletionRequest(
      R"({"prompt": "a", "max_tokens": null, "stop": null, "temperature": null, "n": null})", kCmpl,
      {}, &r));
  EXPECT_FALSE(r.max_tokens.has_value());
  EXPECT_TRUE(r.stop.empty());
  EXPECT_EQ(r.sampling.temperature, 1.0f);
}

TEST(RequestParserTest, AbsentFieldsTakeTheFrontEndDefaults) {
  EXPECT_EQ(DefaultMaxTokens(kCmpl), defaults::kMaxTokensCompletion);
  EXPECT_EQ(DefaultMaxTokens(kChat), defaults::kMaxTokensUntilContext);
  for (auto [endpoint, body] : {std::pair{kCmpl, R"({"prompt": "a"})"},
                                std::pair{kChat, R"({"messages": [{"role": "user", "content": "a"}]})"}}) {
    CompletionRequest r;
    ASSERT_FALSE(ParseCompletionRequest(body, endpoint, {}, &r)) << body;
    EXPECT_FALSE(r.max_tokens.has_value()) << body;
    EXPECT_EQ(r.sampling.temperature, defaults::kTemperature) << body;
    EXPECT_EQ(r.sampling.top_k, defaults::kTopK) << body;
    EXPECT_EQ(r.sampling.top_p, defaults::kTopP) << body;
    EXPECT_EQ(r.sampling.min_p, defaults::kMinP) << body;
    EXPECT_EQ(r.sampling.repetition_penalty, defaults::kRepetitionPenalty) << body;
    EXPECT_EQ(r.sampling.presence_penalty, defaults::kPresencePenalty) << body;
    EXPECT_EQ(r.sampling.frequency_penalty, defaults::kFrequencyPenalty) << body;
    EXPECT_FALSE(r.sampling.has_seed) << body;
    EXPECT_EQ(r.n, 1) << body;
    EXPECT_FALSE(r.stream) << body;
  }
}

TEST(RequestParserTest, ParsesTokenizeAndDetokenize) {
  TokenizeRequest t;
  ASSERT_FALSE(ParseTokenizeRequest(R"({"prompt": "hi", "add_special_tokens": false})", &t));
  EXPECT_FALSE(t.has_messages);
  EXPECT_EQ(t.prompt, "hi");
  EXPECT_FALSE(t.add_special_tokens);
  EXPECT_FALSE(t.parse_special);
  ASSERT_FALSE(ParseTokenizeRequest(R"({"prompt": "</s>", "parse_special": true})", &t));
  EXPECT_TRUE(t.parse_special);
  ASSERT_TRUE(ParseTokenizeRequest(R"({"prompt": "</s>", "parse_special": 1})", &t));
  ASSERT_FALSE(ParseTokenizeRequest(R"({"messages": [{"role": "user", "content": "x"}]})", &t));
  EXPECT_TRUE(t.has_messages);
  EXPECT_TRUE(t.add_special_tokens);
  EXPECT_TRUE(ParseTokenizeRequest(R"({})", &t).has_value());
  EXPECT_TRUE(ParseTokenizeRequest(R"({"prompt": 1})", &t).has_value());

  RequestLimits limits;
  limits.vocab_size = 10;
  DetokenizeRequest d;
  ASSERT_FALSE(ParseDetokenizeRequest(R"({"tokens": [1, 2]})", limits, &d));
  EXPECT_EQ(d.tokens, (std::vector<int32_t>{1, 2}));
  ASSERT_FALSE(ParseDetokenizeRequest(R"({"tokens": []})", limits, &d));
  EXPECT_TRUE(ParseDetokenizeRequest(R"({"tokens": [10]})", limits, &d).has_value());
  EXPECT_TRUE(ParseDetokenizeRequest(R"({"tokens": "1"})", limits, &d).has_value());
  EXPECT_TRUE(ParseDetokenizeRequest(R"({})", limits, &d).has_value());
}

}  // namespace
}  // namespace tern

namespace tern {
namespace {

TEST(RequestParserTest, UnsupportedOpenAiFieldsAre400sNamingThemIgnoredOnesPass) {
  const char* chat = R"("messages": [{"role": "user", "content": "x"}])";
  for (const char* field : {R"("logit_bias": {"5": 10})", R"("functions": [{"name": "f"}])",
                            R"("function_call": "auto")", R"("audio": {"voice": "x"})",
                            R"("prediction": {"type": "content", "content": "x"})",
                            R"("modalities": ["text", "audio"])", R"("reasoning_effort": "low")",
                            R"("web_search_options": {})"}) {
    const std::string body = std::string("{") + chat + ", " + field + "}";
    CompletionRequest r;
    std::optional<ApiError> e = ParseCompletionRequest(body, kChat, {}, &r);
    ASSERT_TRUE(e.has_value()) << body;
    EXPECT_EQ(e->http_status, 400);
    const std::string name = std::string(field).substr(1, std::string(field).find('"', 1) - 1);
    EXPECT_EQ(e->param, name);
    EXPECT_NE(e->message.find("'" + name + "' is not supported"), std::string::npos) << e->message;
  }
  CompletionRequest r;
  EXPECT_FALSE(ParseCompletionRequest(std::string("{") + chat +
                                          R"(, "user": "u", "store": false, "metadata": {"a": "b"},
                                          "service_tier": "auto", "logit_bias": {}, "modalities": ["text"],
                                          "parallel_tool_calls": true})",
                                      kChat, {}, &r)
                   .has_value());
  std::optional<ApiError> e = ParseCompletionRequest(R"({"prompt": "x", "best_of": 3})", kCmpl, {}, &r);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "best_of");
  e = ParseCompletionRequest(R"({"prompt": "x", "suffix": "end"})", kCmpl, {}, &r);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "suffix");
}

TEST(RequestParserTest, ReadsResponseFormatAndToolMessages) {
  CompletionRequest r;
  ASSERT_FALSE(ParseCompletionRequest(
      R"({"messages": [{"role": "user", "content": "x"},
          {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
           "function": {"name": "f", "arguments": "{}"}}]},
          {"role": "tool", "tool_call_id": "c1", "content": "ok"}],
          "response_format": {"type": "json_schema", "json_schema": {"name": "n",
           "schema": {"type": "object", "properties": {"z": {"type": "string"}, "a": {"type": "integer"}}}}}})",
      kChat, {}, &r).has_value());
  EXPECT_EQ(r.constraint.kind, OutputConstraintSpec::Kind::kJsonSchema);
  // Key order as sent (z before a): properties come out in it.
  EXPECT_LT(r.constraint.text.find("\"z\""), r.constraint.text.find("\"a\""));
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_TRUE(r.messages[1].content_null);
  EXPECT_NE(r.messages[1].tool_calls_json.find("\"c1\""), std::string::npos);
  EXPECT_EQ(r.messages[2].tool_call_id, "c1");
}

}  // namespace
}  // namespace tern
