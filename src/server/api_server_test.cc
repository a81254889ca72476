#include "server/api_server.h"

#include <gtest/gtest.h>
#include <atomic>
#include <mutex>
#include <functional>
#include <condition_variable>

#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "sample/defaults.h"
#include "tokenizer/utf8_assembler.h"

namespace tern {
namespace {

using json = nlohmann::json;

// A byte-level fake: token id = byte + 3, BOS 1, EOS 2. Every request
// "generates" reply_ (then EOS) up to max_tokens, all at once.
class FakeBackend : public ServingBackend {
 public:
  std::string reply = "Hello world. Bye.";
  int32_t context = 64;
  std::vector<std::string> aborted;
  std::vector<std::string> stopped;
  std::vector<EngineRequest> requests;
  bool has_template = true;
  bool hang = false;  // push a few tokens and never finish (a long request)
  bool streaming = false;      // streaming KV eviction: no length limit
  int32_t evicted_tokens = 0;  // reported in every finished request's metrics

  // Bumped by each AddRequest: a request's outputs are all pushed there.
  std::atomic<uint64_t> generation{0};

  StatusOr<std::shared_ptr<OutputChannel>> AddRequest(EngineRequest request) override {
    ++generation;
    auto ch = std::make_shared<OutputChannel>();
    int32_t n = 0;
    if (hang) {
      for (int i = 0; i < 5; ++i) Push(*ch, request, 'z' + 3);
      requests.push_back(std::move(request));
      return ch;
    }
    for (unsigned char b : reply) {
      if (n == request.sampling.max_tokens) break;
      Push(*ch, request, b + 3);
      ++n;
    }
    if (n < request.sampling.max_tokens) {
      Push(*ch, request, 2);
      ++n;
    }
    RequestOutput last;
    last.finished = true;
    last.finish_reason =
        n == (int32_t)reply.size() + 1 ? FinishReason::kStop : FinishReason::kLength;
    last.metrics.prompt_tokens = (int32_t)request.prompt_token_ids.size();
    last.metrics.generated_tokens = n;
    last.metrics.ttft_s = 0.01;
    last.metrics.evicted_tokens = evicted_tokens;
    ch->Push(last);
    requests.push_back(std::move(request));
    return ch;
  }
  uint64_t WaitForOutputs(uint64_t seen, std::chrono::milliseconds timeout) const override {
    if (generation.load() == seen) std::this_thread::sleep_for(timeout);  // nothing new
    return generation.load();
  }
  void Abort(const std::string& id) override { aborted.push_back(id); }
  void FinishWithStop(const std::string& id) override { stopped.push_back(id); }
  EngineStats GetStats() const override {
    EngineStats s;
    s.num_running = 1;
    return s;
  }
  int32_t max_model_len() const override { return context; }
  bool streaming_kv_eviction() const override { return streaming; }
  int32_t vocab_size() const override { return 259; }
  // Bytes + 3; "</s>" is the special token 2 only when parse_special.
  std::vector<int32_t> Encode(std::string_view text, bool add_special,
                              bool parse_special) const override {
    std::vector<int32_t> ids;
    if (add_special) ids.push_back(1);
    for (size_t i = 0; i < text.size(); ++i) {
      if (parse_special && text.substr(i).starts_with("</s>")) {
        ids.push_back(2);
        i += 3;
        continue;
      }
      ids.push_back((unsigned char)text[i] + 3);
    }
    return ids;
  }
  std::string Decode(std::span<const int32_t> ids) const override {
    std::string s;
    for (int32_t id : ids) s += TokenPiece(id);
    return s;
  }
  std::string TokenPiece(int32_t id) const override {
    return id >= 3 ? std::string(1, (char)(id - 3)) : "";
  }
  std::unique_ptr<TokenTextStream> NewTextStream(std::span<const int32_t>) const override {
    struct Stream : TokenTextStream {
      const FakeBackend* b;
      Utf8Assembler utf8;
      std::string Add(int32_t id) override { return utf8.Push(b->TokenPiece(id)); }
      std::string Flush() override { return utf8.Flush(); }
    };
    auto s = std::make_unique<Stream>();
    s->b = this;
    return s;
  }
  StatusOr<std::vector<int32_t>> EncodeChat(const std::vector<ApiMessage>& messages,
                                            bool add_special) const override {
    if (!has_template) return InvalidArgument("this model has no chat template");
    std::string text;
    for (const ApiMessage& m : messages) text += "<" + m.role + ">" + m.content;
    return Encode(text + "<assistant>", add_special, true);
  }

 private:
  static void Push(OutputChannel& ch, const EngineRequest& req, int32_t id) {
    RequestOutput out;
    out.new_token_ids = {id};
    if (req.sampling.logprobs >= 0) {
      TokenLogprob lp{id, -0.5f, {}};
      for (int k = 0; k < req.sampling.logprobs; ++k) lp.top.emplace_back(id, -0.5f - k);
      out.logprobs.push_back(lp);
    }
    ch.Push(out);
  }
};

class FakeExchange : public HttpExchange {
 public:
  int status = 0;
  std::string content_type;
  std::string body;
  bool streaming = false;
  bool ended = false;
  std::vector<std::string> events;
  int gone_after_events = -1;  // >= 0: the client disconnects after this many
  std::function<void()> on_event;  // called after each event is recorded

  void Respond(int s, std::string_view type, std::string_view b) override {
    EXPECT_EQ(status, 0) << "responded twice";
    status = s;
    content_type = type;
    body = b;
  }
  bool BeginEventStream() override {
    status = 200;
    streaming = true;
    return true;
  }
  bool SendEvent(std::string_view data) override {
    if (ClientGone()) return false;
    events.emplace_back(data);
    if (on_event) on_event();
    return true;
  }
  void EndEventStream() override { ended = true; }
  bool ClientGone() override {
    return gone_after_events >= 0 && (int)events.size() >= gone_after_events;
  }
  json Json() const { return json::parse(body); }
};

HttpRequest Post(const std::string& path, const std::string& body) {
  HttpRequest r;
  r.method = "POST";
  r.path = r.target = path;
  r.version = "HTTP/1.1";
  r.body = body;
  return r;
}

HttpRequest Get(const std::string& path) {
  HttpRequest r = Post(path, "");
  r.method = "GET";
  return r;
}

// An ApiServer of the given options serving a FakeBackend.
struct ServedFake {
  explicit ServedFake(const ApiServerOptions& o) : server(o) { server.SetBackend(&backend); }
  FakeBackend backend;
  ApiServer server;
};

class ApiServerTest : public ::testing::Test {
 protected:
  ApiServerTest() : server_(Options()) { server_.SetBackend(&backend_); }
  static ApiServerOptions Options() {
    ApiServerOptions o;
    o.served_model_name = "stories";
    return o;
  }
  FakeExchange Call(const HttpRequest& r) {
    FakeExchange ex;
    server_.Handle(r, ex);
    return ex;
  }
  // Concatenates the text of every stream chunk of choice `index`.
  static std::string StreamText(const FakeExchange& ex, bool chat, int index = 0) {
    std::string text;
    for (const std::string& e : ex.events) {
      if (e == "[DONE]") continue;
      json j = json::parse(e);
      for (const json& c : j["choices"]) {
        if (c["index"] != index) continue;
        if (chat)
          text += c["delta"].value("content", "");
        else
          text += c["text"].get<std::string>();
      }
    }
    return text;
  }

  FakeBackend backend_;
  ApiServer server_;
};

TEST_F(ApiServerTest, CompletionReturnsTextFinishReasonAndUsage) {
  FakeExchange ex =
      Call(Post("/v1/completions", R"({"model": "stories", "prompt": "Hi", "max_tokens": 30})"));
  ASSERT_EQ(ex.status, 200) << ex.body;
  json j = ex.Json();
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["id"].get<std::string>().rfind("cmpl-", 0), 0u);
  EXPECT_EQ(j["model"], "stories");
  EXPECT_EQ(j["choices"][0]["text"], backend_.reply);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(j["usage"]["prompt_tokens"], 3);  // BOS + "Hi"
  EXPECT_EQ(j["usage"]["completion_tokens"], (int)backend_.reply.size() + 1);
}

TEST_F(ApiServerTest, CompletionsWithoutMaxTokensGenerateSixteen) {
  backend_.reply = std::string(40, 'a');
  json j = Call(Post("/v1/completions", R"({"prompt": "Hi"})")).Json();
  EXPECT_EQ(j["choices"][0]["text"], std::string(defaults::kMaxTokensCompletion, 'a'));
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["completion_tokens"], defaults::kMaxTokensCompletion);
  ASSERT_EQ(backend_.requests.size(), 1u);
  EXPECT_EQ(backend_.requests[0].sampling.max_tokens, defaults::kMaxTokensCompletion);
  // The default never runs past the context: 60 prompt tokens leave 4.
  const std::string long_prompt = R"({"prompt": ")" + std::string(59, 'x') + R"("})";
  FakeExchange near_end = Call(Post("/v1/completions", long_prompt));
  EXPECT_EQ(near_end.status, 200) << near_end.body;
  EXPECT_EQ(backend_.requests.back().sampling.max_tokens, 64 - 60);
}

TEST_F(ApiServerTest, ChatWithoutMaxTokensRunsToTheContext) {
  backend_.reply = std::string(100, 'a');
  json j = Call(Post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "Hi"}]})"))
               .Json();
  const int prompt = (int)std::string("<user>Hi<assistant>").size() + 1;
  EXPECT_EQ(j["usage"]["prompt_tokens"], prompt);
  ASSERT_EQ(backend_.requests.size(), 1u);
  EXPECT_EQ(backend_.requests[0].sampling.max_tokens, 64 - prompt) << "up to max_model_len";
  EXPECT_EQ(j["usage"]["completion_tokens"], 64 - prompt);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
}

TEST_F(ApiServerTest, StreamingEvictionLiftsTheLengthLimitAndUsageReportsEvictedTokens) {
  backend_.reply = std::string(100, 'a');
  const std::string body =
      R"({"prompt": ")" + std::string(80, 'x') + R"(", "max_tokens": 90})";  // 81 + 90 > 64
  FakeExchange refused = Call(Post("/v1/completions", body));
  EXPECT_EQ(refused.status, 400) << refused.body;

  backend_.streaming = true;
  backend_.evicted_tokens = 112;
  FakeExchange ok = Call(Post("/v1/completions", body));
  ASSERT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(backend_.requests.back().sampling.max_tokens, 90);
  EXPECT_EQ(ok.Json()["usage"]["evicted_tokens"], 112);
  EXPECT_EQ(ok.Json()["usage"]["completion_tokens"], 90);
  // Chat without max_tokens: one context's worth, not "until the context ends".
  FakeExchange chat =
      Call(Post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "Hi"}]})"));
  ASSERT_EQ(chat.status, 200) << chat.body;
  EXPECT_EQ(backend_.requests.back().sampling.max_tokens, 64);
  EXPECT_EQ(chat.Json()["usage"]["evicted_tokens"], 112);
  // Nothing evicted: the usage object is the usual one.
  backend_.evicted_tokens = 0;
  FakeExchange plain = Call(Post("/v1/completions", R"({"prompt": "Hi", "max_tokens": 4})"));
  EXPECT_FALSE(plain.Json()["usage"].contains("evicted_tokens"));
}

TEST_F(ApiServerTest, SamplingDefaultsComeFromTheTable) {
  Call(Post("/v1/completions", R"({"prompt": "Hi"})"));
  Call(Post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "Hi"}]})"));
  ASSERT_EQ(backend_.requests.size(), 2u);
  for (const EngineRequest& r : backend_.requests) {
    EXPECT_EQ(r.sampling.temperature, defaults::kTemperature);
    EXPECT_EQ(r.sampling.top_k, defaults::kTopK);
    EXPECT_EQ(r.sampling.top_p, defaults::kTopP);
    EXPECT_EQ(r.sampling.min_p, defaults::kMinP);
    EXPECT_EQ(r.sampling.repetition_penalty, defaults::kRepetitionPenalty);
    EXPECT_EQ(r.sampling.presence_penalty, defaults::kPresencePenalty);
    EXPECT_EQ(r.sampling.frequency_penalty, defaults::kFrequencyPenalty);
    EXPECT_EQ(r.sampling.logprobs, -1);
    EXPECT_FALSE(r.sampling.ignore_eos);
  }
}

TEST_F(ApiServerTest, MaxTokensCutsWithLength) {
  FakeExchange ex = Call(Post("/v1/completions", R"({"prompt": "Hi", "max_tokens": 5})"));
  json j = ex.Json();
  EXPECT_EQ(j["choices"][0]["text"], "Hello");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["completion_tokens"], 5);
}

TEST_F(ApiServerTest, StreamedTextEqualsNonStreamedAndEndsWithDone) {
  FakeExchange plain = Call(Post("/v1/completions", R"({"prompt": "Hi", "max_tokens": 10})"));
  FakeExchange ex = Call(Post("/v1/completions",
                              R"({"prompt": "Hi", "max_tokens": 10, "stream": true,
                                  "stream_options": {"include_usage": true}})"));
  ASSERT_TRUE(ex.streaming);
  EXPECT_TRUE(ex.ended);
  ASSERT_GE(ex.events.size(), 3u);
  EXPECT_EQ(ex.events.back(), "[DONE]");
  EXPECT_EQ(StreamText(ex, false), plain.Json()["choices"][0]["text"]);
  json usage_chunk = json::parse(ex.events[ex.events.size() - 2]);
  EXPECT_TRUE(usage_chunk["choices"].empty());
  EXPECT_EQ(usage_chunk["usage"]["completion_tokens"], 10);
  json last_choice = json::parse(ex.events[ex.events.size() - 3]);
  EXPECT_EQ(last_choice["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(last_choice["usage"].is_null());
}

TEST_F(ApiServerTest, StopStringIsCutAndNeverStreamed) {
  FakeExchange ex = Call(Post("/v1/completions", R"({"prompt": "Hi", "stop": ["d. B"]})"));
  json j = ex.Json();
  EXPECT_EQ(j["choices"][0]["text"], "Hello worl");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(backend_.stopped.size(), 1u);

  FakeExchange s =
      Call(Post("/v1/completions", R"({"prompt": "Hi", "stop": "d. B", "stream": true})"));
  EXPECT_EQ(StreamText(s, false), "Hello worl");
  EXPECT_EQ(s.events.back(), "[DONE]");
}

TEST_F(ApiServerTest, MultiByteCharactersStreamWhole) {
  backend_.reply = "a\xC3\xA9\xE2\x82\xAC";  // "aé€", one byte per token
  FakeExchange ex = Call(Post("/v1/completions", R"({"prompt": "x", "stream": true})"));
  for (const std::string& e : ex.events) {
    if (e == "[DONE]") continue;
    std::string t = json::parse(e)["choices"][0]["text"];
    EXPECT_TRUE(t.empty() || t == "a" || t == "\xC3\xA9" || t == "\xE2\x82\xAC") << t;
  }
  EXPECT_EQ(StreamText(ex, false), backend_.reply);
}

TEST_F(ApiServerTest, ChatCompletionAndChatStream) {
  const char* body = R"({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 5})";
  FakeExchange ex = Call(Post("/v1/chat/completions", body));
  json j = ex.Json();
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(j["choices"][0]["message"]["content"], "Hello");
  EXPECT_EQ(j["usage"]["prompt_tokens"], (int)std::string("<user>Hi<assistant>").size() + 1);

  FakeExchange s = Call(Post("/v1/chat/completions",
                             R"({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 5,
                                 "stream": true})"));
  json first = json::parse(s.events.front());
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(StreamText(s, true), "Hello");
}

TEST_F(ApiServerTest, ChatWithoutTemplateIs400) {
  backend_.has_template = false;
  FakeExchange ex =
      Call(Post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "Hi"}]})"));
  EXPECT_EQ(ex.status, 400);
  EXPECT_NE(ex.Json()["error"]["message"].get<std::string>().find("chat template"),
            std::string::npos);
}

TEST_F(ApiServerTest, SeveralPromptsAndChoicesGetIndexesAndSeeds) {
  FakeExchange ex = Call(
      Post("/v1/completions", R"({"prompt": ["a", "bb"], "n": 2, "max_tokens": 3, "seed": 7})"));
  json j = ex.Json();
  ASSERT_EQ(j["choices"].size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(j["choices"][i]["index"], i);
  EXPECT_EQ(j["usage"]["prompt_tokens"], 2 + 3) << "each prompt counted once";
  EXPECT_EQ(j["usage"]["completion_tokens"], 12);
  ASSERT_EQ(backend_.requests.size(), 4u);
  EXPECT_EQ(backend_.requests[0].sampling.seed, 7u);
  EXPECT_EQ(backend_.requests[1].sampling.seed, 8u);
  std::set<std::string> ids;
  for (const EngineRequest& r : backend_.requests) ids.insert(r.request_id);
  EXPECT_EQ(ids.size(), 4u);
}

TEST_F(ApiServerTest, LogprobsAndEcho) {
  FakeExchange ex = Call(
      Post("/v1/completions", R"({"prompt": "Hi", "max_tokens": 2, "logprobs": 2, "echo": true})"));
  json j = ex.Json();
  EXPECT_EQ(j["choices"][0]["text"], "HiHe");
  const json& lp = j["choices"][0]["logprobs"];
  EXPECT_EQ(lp["tokens"], json({"H", "e"}));
  EXPECT_EQ(lp["text_offset"], json({2, 3}));
  EXPECT_EQ(lp["top_logprobs"][0].size(), 1u);  // both alternatives are "H"

  FakeExchange chat = Call(Post("/v1/chat/completions",
                                R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 2,
                                    "logprobs": true, "top_logprobs": 2})"));
  json content = chat.Json()["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 2u);
  EXPECT_EQ(content[0]["token"], "H");
  EXPECT_EQ(content[0]["top_logprobs"].size(), 2u);
}

TEST_F(ApiServerTest, ClientGoneMidStreamAbortsTheRequest) {
  backend_.hang = true;
  FakeExchange ex;
  ex.gone_after_events = 3;
  server_.Handle(Post("/v1/completions", R"({"prompt": "Hi", "stream": true})"), ex);
  EXPECT_FALSE(ex.ended);
  ASSERT_EQ(backend_.aborted.size(), 1u);
  EXPECT_EQ(backend_.aborted[0], backend_.requests[0].request_id);
  EXPECT_EQ(server_.pending_requests(), 0);
  // Non-streaming requests are aborted too when the client goes away.
  FakeExchange plain;
  plain.gone_after_events = 0;
  server_.Handle(Post("/v1/completions", R"({"prompt": "Hi"})"), plain);
  EXPECT_EQ(plain.status, 0) << "nothing sent to a gone client";
  EXPECT_EQ(backend_.aborted.size(), 2u);
}

TEST_F(ApiServerTest, ErrorsHaveStatusAndShape) {
  struct Case {
    HttpRequest request;
    int status;
    const char* code;
  };
  std::vector<Case> cases = {
      {Post("/v1/completions", "{bad json"), 400, ""},
      {Post("/v1/completions", R"({"prompt": "Hi", "model": "gpt-4"})"), 404, "model_not_found"},
      {Post("/v1/completions", R"({"prompt": "Hi", "max_tokens": 62})"), 400, ""},
      {Post("/v1/completions", R"({"prompt": ")" + std::string(70, 'x') + R"("})"), 400, ""},
      {Post("/v1/completions", R"({"prompt": "Hi", "n": 100})"), 400, ""},
      {Post("/v1/nothing", "{}"), 404, "not_found"},
      {Get("/v1/completions"), 405, "method_not_allowed"},
      {Post("/v1/models", ""), 405, "method_not_allowed"},
      {Post("/tokenize", R"({"prompt": 3})"), 400, ""},
      {Post("/detokenize", R"({"tokens": [999]})"), 400, ""},
  };
  for (Case& c : cases) {
    FakeExchange ex = Call(c.request);
    EXPECT_EQ(ex.status, c.status) << c.request.path << " " << c.request.body;
    json j = ex.Json();
    ASSERT_TRUE(j["error"].is_object()) << ex.body;
    EXPECT_TRUE(j["error"]["message"].is_string());
    EXPECT_TRUE(j["error"]["type"].is_string());
    EXPECT_TRUE(j["error"].contains("param"));
    if (*c.code) {
      EXPECT_EQ(j["error"]["code"], c.code) << ex.body;
    }
  }
  FakeExchange over = Call(Post("/v1/completions", R"({"prompt": "Hi", "max_tokens": 62})"));
  EXPECT_NE(
      over.Json()["error"]["message"].get<std::string>().find("65 tokens (3 in the prompt, 62"),
      std::string::npos)
      << over.body;
  EXPECT_EQ(Call(Get("/health")).status, 200);
  EXPECT_EQ(server_.pending_requests(), 0);
}

TEST_F(ApiServerTest, ShutdownEndsRunningStreamsWithAbortAndDone) {
  backend_.hang = true;
  // The shutdown starts once the stream has sent its first event (ordered by
  // a condition, not a sleep).
  std::mutex mu;
  std::condition_variable cv;
  bool streaming = false;
  std::thread stopper([&] {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return streaming; });
    server_.BeginShutdown();
  });
  FakeExchange ex;
  ex.on_event = [&] {
    std::lock_guard<std::mutex> lock(mu);
    streaming = true;
    cv.notify_all();
  };
  server_.Handle(Post("/v1/completions", R"({"prompt": "Hi", "stream": true})"), ex);
  stopper.join();
  ASSERT_GE(ex.events.size(), 2u);
  EXPECT_EQ(ex.events.back(), "[DONE]");
  EXPECT_EQ(json::parse(ex.events[ex.events.size() - 2])["choices"][0]["finish_reason"], "abort");
  EXPECT_TRUE(ex.ended);
  EXPECT_EQ(backend_.aborted.size(), 1u);
}

TEST(ApiServerLifecycleTest, LoadingThenReadyThenShuttingDown) {
  ApiServer server(ApiServerOptions{});
  FakeExchange h1;
  server.Handle(Get("/health"), h1);
  EXPECT_EQ(h1.status, 503);
  FakeExchange c1;
  server.Handle(Post("/v1/completions", R"({"prompt": "x"})"), c1);
  EXPECT_EQ(c1.status, 503);
  FakeExchange m1;
  server.Handle(Get("/metrics"), m1);
  EXPECT_EQ(m1.status, 200);
  FakeBackend backend;
  server.SetBackend(&backend);
  FakeExchange h2;
  server.Handle(Get("/health"), h2);
  EXPECT_EQ(h2.status, 200);
  server.BeginShutdown();
  FakeExchange h3;
  server.Handle(Get("/health"), h3);
  EXPECT_EQ(h3.status, 503);
}

TEST(ApiServerMetricsTest, MetricsPrefixRenamesTheMetricsPage) {
  ApiServerOptions o;
  o.served_model_name = "stories";
  o.metrics_prefix = "vllm";
  ServedFake served(o);
  ApiServer& server = served.server;
  FakeExchange ex;
  server.Handle(Get("/metrics"), ex);
  ASSERT_EQ(ex.status, 200);
  EXPECT_NE(ex.body.find("vllm:num_requests_running{model_name=\"stories\"} 1\n"), std::string::npos);
  EXPECT_NE(ex.body.find("vllm:num_requests_waiting{model_name=\"stories\"} 0\n"), std::string::npos);
  EXPECT_EQ(ex.body.find("tern:"), std::string::npos);
}

TEST(ApiServerAuthTest, ApiKeyGuardsApiButNotHealthOrMetrics) {
  ApiServerOptions o;
  o.api_key = "sekret";
  ServedFake served(o);
  ApiServer& server = served.server;
  HttpRequest r = Get("/v1/models");
  FakeExchange a;
  server.Handle(r, a);
  EXPECT_EQ(a.status, 401);
  EXPECT_EQ(json::parse(a.body)["error"]["code"], "invalid_api_key");
  r.headers.emplace_back("authorization", "Bearer wrong!");
  FakeExchange b;
  server.Handle(r, b);
  EXPECT_EQ(b.status, 401);
  r.headers.back().second = "Bearer sekret";
  FakeExchange c;
  server.Handle(r, c);
  EXPECT_EQ(c.status, 200);
  EXPECT_EQ(json::parse(c.body)["data"][0]["id"], "model");
  FakeExchange h, m;
  server.Handle(Get("/health"), h);
  server.Handle(Get("/metrics"), m);
  EXPECT_EQ(h.status, 200);
  EXPECT_EQ(m.status, 200);
}

TEST(ApiServerAuthTest, ProtectMetricsPutsMetricsAndStatsBehindTheKey) {
  ApiServerOptions o;
  o.api_key = "sekret";
  o.protect_metrics = true;
  ServedFake served(o);
  ApiServer& server = served.server;
  for (const char* path : {"/metrics", "/stats"}) {
    FakeExchange open;
    server.Handle(Get(path), open);
    EXPECT_EQ(open.status, 401) << path;
    HttpRequest r = Get(path);
    r.headers.emplace_back("authorization", "Bearer sekret");
    FakeExchange keyed;
    server.Handle(r, keyed);
    EXPECT_EQ(keyed.status, 200) << path;
  }
  FakeExchange h;
  server.Handle(Get("/health"), h);
  EXPECT_EQ(h.status, 200);  // always open
}

// The comparison is right for every length relation and never matches an
// empty key; its timing independence is by construction (no early exit).
TEST(ApiServerHealthTest, OnlyHealthChecksAreAnsweredOnTheAcceptThread) {
  auto request = [](std::string method, std::string path) {
    HttpRequest r;
    r.method = std::move(method);
    r.path = std::move(path);
    return r;
  };
  EXPECT_TRUE(ApiServer::AnswersAtOnce(request("GET", "/health")));
  EXPECT_TRUE(ApiServer::AnswersAtOnce(request("HEAD", "/health")));
  EXPECT_FALSE(ApiServer::AnswersAtOnce(request("POST", "/health")));
  EXPECT_FALSE(ApiServer::AnswersAtOnce(request("GET", "/metrics")));  // reads engine stats
  EXPECT_FALSE(ApiServer::AnswersAtOnce(request("GET", "/v1/models")));
  EXPECT_FALSE(ApiServer::AnswersAtOnce(request("POST", "/v1/completions")));
}

TEST(ApiServerAuthTest, SameSecretComparesWholeKeys) {
  EXPECT_TRUE(SameSecret("sekret", "sekret"));
  EXPECT_FALSE(SameSecret("sekreT", "sekret"));
  EXPECT_FALSE(SameSecret("Sekret", "sekret"));
  EXPECT_FALSE(SameSecret("sekre", "sekret"));
  EXPECT_FALSE(SameSecret("sekrets", "sekret"));
  EXPECT_FALSE(SameSecret("seksek", "sek"));  // the key repeated: lengths differ
  EXPECT_FALSE(SameSecret("", "sekret"));
  EXPECT_FALSE(SameSecret("", ""));
  EXPECT_FALSE(SameSecret("x", ""));
}

TEST(ApiServerAuthTest, DashboardAndStatsAreOpenLikeMetrics) {
  ApiServerOptions o;
  o.api_key = "sekret";
  ApiServer server(o);
  FakeExchange loading;
  server.Handle(Get("/stats"), loading);
  EXPECT_EQ(loading.status, 200);
  EXPECT_FALSE(json::parse(loading.body)["ready"]);
  FakeBackend backend;
  server.SetBackend(&backend);
  FakeExchange root, page, stats, nested;
  server.Handle(Get("/"), root);
  server.Handle(Get("/dashboard"), page);
  server.Handle(Get("/stats"), stats);
  server.Handle(Get("/dashboard/x"), nested);
  EXPECT_EQ(root.status, 200);
  EXPECT_EQ(root.content_type, "text/html; charset=utf-8");
  EXPECT_NE(root.body.find("/v1/chat/completions"), std::string::npos);
  EXPECT_EQ(page.body, root.body);
  EXPECT_EQ(stats.status, 200);
  EXPECT_TRUE(json::parse(stats.body)["ready"]);
  EXPECT_EQ(json::parse(stats.body)["engine"]["running"], 1);
  EXPECT_EQ(nested.status, 404) << "'/' is not a prefix route";
  FakeExchange post;
  server.Handle(Post("/stats", "{}"), post);
  EXPECT_EQ(post.status, 405);
}

TEST(ApiServerLimitTest, TooManyPendingRequestsIs429) {
  ApiServerOptions o;
  o.max_pending_requests = 2;
  ServedFake served(o);
  ApiServer& server = served.server;
  FakeExchange ex;
  server.Handle(Post("/v1/completions", R"({"prompt": "x", "n": 3})"), ex);
  EXPECT_EQ(ex.status, 429);
  EXPECT_EQ(server.pending_requests(), 0);
  FakeExchange ok;
  server.Handle(Post("/v1/completions", R"({"prompt": "x", "n": 2, "max_tokens": 1})"), ok);
  EXPECT_EQ(ok.status, 200);
}

TEST_F(ApiServerTest, TokenizeDetokenizeAndModels) {
  json t = Call(Post("/tokenize", R"({"prompt": "ab"})")).Json();
  EXPECT_EQ(t["tokens"], json({1, 'a' + 3, 'b' + 3}));
  EXPECT_EQ(t["count"], 3);
  EXPECT_EQ(t["max_model_len"], 64);
  json t2 = Call(Post("/tokenize", R"({"prompt": "ab", "add_special_tokens": false})")).Json();
  EXPECT_EQ(t2["count"], 2);
  // Special-token text is plain text unless the request asks to parse it.
  json t3 = Call(Post("/tokenize", R"({"prompt": "a</s>", "add_special_tokens": false})")).Json();
  EXPECT_EQ(t3["tokens"], json({'a' + 3, '<' + 3, '/' + 3, 's' + 3, '>' + 3}));
  json t4 = Call(Post("/tokenize",
                      R"({"prompt": "a</s>", "add_special_tokens": false, "parse_special": true})"))
                .Json();
  EXPECT_EQ(t4["tokens"], json({'a' + 3, 2}));
  json d = Call(Post("/detokenize", R"({"tokens": [100, 101]})")).Json();
  EXPECT_EQ(d["prompt"], "ab");
  json m = Call(Get("/v1/models")).Json();
  EXPECT_EQ(m["data"][0]["id"], "stories");
  EXPECT_EQ(m["data"][0]["max_model_len"], 64);
  FakeExchange metrics = Call(Get("/metrics"));
  EXPECT_NE(metrics.body.find("tern:num_requests_running{model_name=\"stories\"} 1"),
            std::string::npos);
}

TEST_F(ApiServerTest, RetrievesTheServedModelById) {
  const json list = Call(Get("/v1/models")).Json();
  FakeExchange ex = Call(Get("/v1/models/stories"));
  ASSERT_EQ(ex.status, 200) << ex.body;
  EXPECT_EQ(ex.content_type, "application/json");
  EXPECT_EQ(ex.Json(), list["data"][0]) << "the same object as in the list";
  EXPECT_EQ(ex.Json()["object"], "model");
  EXPECT_EQ(ex.Json()["id"], "stories");
}

TEST_F(ApiServerTest, UnknownModelIdIs404ModelNotFound) {
  for (const char* path : {"/v1/models/gpt-4", "/v1/models/stories/x", "/v1/models/Stories"}) {
    FakeExchange ex = Call(Get(path));
    EXPECT_EQ(ex.status, 404) << path;
    const json e = ex.Json()["error"];
    EXPECT_EQ(e["type"], "invalid_request_error") << path;
    EXPECT_EQ(e["code"], "model_not_found") << path;
    EXPECT_EQ(e["param"], "model") << path;
    EXPECT_NE(e["message"].get<std::string>().find("'stories'"), std::string::npos) << e;
  }
  EXPECT_EQ(Call(Post("/v1/models/stories", "{}")).status, 405);
  // "/v1/models/" alone names no model: no such route.
  EXPECT_EQ(Call(Get("/v1/models/")).Json()["error"]["code"], "not_found");
}

TEST(ApiServerModelIdTest, IdsWithSlashesMatchEncodedOrNot) {
  ApiServerOptions o;
  o.served_model_name = "org/tiny model";
  ServedFake served(o);
  ApiServer& server = served.server;
  for (const char* path : {"/v1/models/org/tiny%20model", "/v1/models/org%2Ftiny%20model",
                           "/v1/models/org%2ftiny%20model"}) {
    FakeExchange ex;
    server.Handle(Get(path), ex);
    ASSERT_EQ(ex.status, 200) << path << " " << ex.body;
    EXPECT_EQ(ex.Json()["id"], "org/tiny model");
  }
  FakeExchange ok, other;
  server.Handle(Post("/v1/completions", R"({"model": "org/tiny model", "prompt": "x",
                                            "max_tokens": 1})"),
                ok);
  EXPECT_EQ(ok.status, 200) << "the listed id is the one requests name";
  server.Handle(Post("/v1/completions", R"({"model": "tiny model", "prompt": "x"})"), other);
  EXPECT_EQ(other.status, 404);
}

TEST(ApiServerModelIdTest, ModelRouteNeedsTheApiKeyAndAnswersWhileLoading) {
  ApiServerOptions o;
  o.api_key = "k";
  ApiServer server(o);
  HttpRequest r = Get("/v1/models/model");
  FakeExchange no_key;
  server.Handle(r, no_key);
  EXPECT_EQ(no_key.status, 401);
  r.headers.emplace_back("authorization", "Bearer k");
  FakeExchange loading;
  server.Handle(r, loading);
  EXPECT_EQ(loading.status, 200) << "the model's id is known before it loads";
  EXPECT_EQ(loading.Json()["max_model_len"], 0);
}

class ApiServerAccessLogTest : public ::testing::Test {
 protected:
  ApiServerAccessLogTest() : server_(Options(&entries_)) { server_.SetBackend(&backend_); }
  static ApiServerOptions Options(std::vector<AccessLogEntry>* entries) {
    ApiServerOptions o;
    o.served_model_name = "stories";
    o.access_log = [entries](const AccessLogEntry& e) { entries->push_back(e); };
    return o;
  }
  FakeExchange Call(HttpRequest r) {
    r.remote_addr = "127.0.0.1:4242";
    FakeExchange ex;
    server_.Handle(r, ex);
    return ex;
  }

  std::vector<AccessLogEntry> entries_;
  FakeBackend backend_;
  ApiServer server_;
};

TEST_F(ApiServerAccessLogTest, OneEntryPerCompletionWithIdTokensAndTimes) {
  const auto before = std::chrono::system_clock::now();
  FakeExchange ex = Call(Post("/v1/completions", R"({"prompt": "Hi", "max_tokens": 5})"));
  ASSERT_EQ(entries_.size(), 1u);
  const AccessLogEntry& e = entries_[0];
  EXPECT_EQ(e.request_id, ex.Json()["id"]);
  EXPECT_EQ(e.client, "127.0.0.1:4242");
  EXPECT_EQ(e.method, "POST");
  EXPECT_EQ(e.path, "/v1/completions");
  EXPECT_EQ(e.status, 200);
  EXPECT_EQ(e.prompt_tokens, 3);
  EXPECT_EQ(e.completion_tokens, 5);
  EXPECT_EQ(e.cached_tokens, 0);
  EXPECT_EQ(e.finish_reason, "length");
  EXPECT_GE(e.ttft_ms, 0);
  EXPECT_GE(e.duration_ms, e.ttft_ms);
  EXPECT_GE(e.time, before - std::chrono::seconds(1));
}

TEST_F(ApiServerAccessLogTest, StreamsChatAndErrorsAreLoggedToo) {
  FakeExchange s = Call(Post("/v1/chat/completions",
                             R"({"messages": [{"role": "user", "content": "Hi"}], "stream": true,
                                 "max_tokens": 4, "n": 2})"));
  ASSERT_EQ(entries_.size(), 1u);
  EXPECT_EQ(entries_[0].status, 200);
  EXPECT_EQ(entries_[0].request_id, json::parse(s.events.front())["id"]);
  EXPECT_EQ(entries_[0].completion_tokens, 8) << "both choices";
  EXPECT_EQ(entries_[0].finish_reason, "length");

  Call(Get("/v1/models/nope"));
  Call(Post("/v1/completions", R"({"prompt": "Hi", "max_tokens": 500})"));
  Call(Get("/health"));
  ASSERT_EQ(entries_.size(), 4u);
  EXPECT_EQ(entries_[1].status, 404);
  EXPECT_EQ(entries_[1].path, "/v1/models/nope");
  EXPECT_EQ(entries_[1].request_id, "");
  EXPECT_LT(entries_[1].ttft_ms, 0) << "no token, no TTFT";
  EXPECT_EQ(entries_[2].status, 400);
  EXPECT_EQ(entries_[2].completion_tokens, 0);
  EXPECT_EQ(entries_[2].request_id, "") << "no response id was sent";
  EXPECT_EQ(entries_[3].status, 200);
  EXPECT_EQ(entries_[3].method, "GET");
}

}  // namespace
}  // namespace tern
