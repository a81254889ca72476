#include "server/response_writer.h"

#include <nlohmann/json.hpp>

namespace tern {
namespace {

using json = nlohmann::ordered_json;

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

json NullOr(const std::string& s) { return s.empty() ? json(nullptr) : json(s); }

// Bytes of a token text as a JSON array of integers (chat logprobs).
json Bytes(const std::string& s) {
  json out = json::array();
  for (unsigned char c : s) out.push_back((int)c);
  return out;
}

// A valid-UTF-8 copy of s for use as an object key (invalid bytes replaced).
std::string SafeKey(const std::string& s) {
  json tmp = s;
  std::string quoted = tmp.dump(-1, ' ', false, json::error_handler_t::replace);
  return json::parse(quoted).get<std::string>();
}

json CompletionLogprobs(const ChoiceResult& c) {
  if (!c.has_logprobs) return nullptr;
  json tokens = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
  for (const LogprobEntry& e : c.logprobs) {
    tokens.push_back(e.token);
    lps.push_back(e.logprob);
    json top = json::object();
    for (const auto& [tok, lp] : e.top) top[SafeKey(tok)] = lp;
    tops.push_back(std::move(top));
    offsets.push_back(e.text_offset);
  }
  return {{"tokens", tokens},
          {"token_logprobs", lps},
          {"top_logprobs", tops},
          {"text_offset", offsets}};
}

json ChatLogprobs(const ChoiceResult& c) {
  if (!c.has_logprobs) return nullptr;
  json content = json::array();
  for (const LogprobEntry& e : c.logprobs) {
    json top = json::array();
    for (const auto& [tok, lp] : e.top) {
      top.push_back({{"token", tok}, {"logprob", lp}, {"bytes", Bytes(tok)}});
    }
    content.push_back({{"token", e.token},
                       {"logprob", e.logprob},
                       {"bytes", Bytes(e.token)},
                       {"top_logprobs", std::move(top)}});
  }
  // The schema requires refusal beside content (tern never refuses: null).
  return {{"content", std::move(content)}, {"refusal", nullptr}};
}

json ToolCallsJson(const ChoiceResult& c, bool chunk) {
  json arr = json::array();
  for (size_t i = 0; i < c.tool_calls.size(); ++i) {
    const ToolCallResult& t = c.tool_calls[i];
    json call = {{"id", t.id},
                 {"type", "function"},
                 {"function", {{"name", t.name}, {"arguments", t.arguments}}}};
    if (chunk) call["index"] = c.tool_call_base + (int32_t)i;
    arr.push_back(std::move(call));
  }
  return arr;
}

json ChatMessageJson(const ChoiceResult& c) {
  json m = {{"role", "assistant"}, {"content", c.text}, {"refusal", nullptr}};
  if (!c.tool_calls.empty()) {
    if (c.text.empty()) m["content"] = nullptr;
    m["tool_calls"] = ToolCallsJson(c, false);
  }
  return m;
}

json Usage(const UsageInfo& u) {
  json j = {{"prompt_tokens", u.prompt_tokens},
            {"completion_tokens", u.completion_tokens},
            {"total_tokens", u.prompt_tokens + u.completion_tokens},
            {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
  if (u.evicted_tokens > 0) j["evicted_tokens"] = u.evicted_tokens;
  return j;
}

json Head(const ResponseMeta& meta, const char* object) {
  return {{"id", meta.id}, {"object", object}, {"created", meta.created}, {"model", meta.model}};
}

// A completion's choice, whole or in a chunk.
json CompletionChoice(const ChoiceResult& c) {
  return {{"index", c.index},
          {"text", c.text},
          {"logprobs", CompletionLogprobs(c)},
          {"finish_reason", NullOr(c.finish_reason)}};
}

// A chat completion's choice: `body` is its "message", or in a chunk its "delta".
json ChatChoice(const ChoiceResult& c, const char* key, json body) {
  return {{"index", c.index},
          {key, std::move(body)},
          {"logprobs", ChatLogprobs(c)},
          {"finish_reason", NullOr(c.finish_reason)}};
}

// A whole response: the head, each choice as choice_json writes it, the usage.
template <class ChoiceJson>
std::string WholeResponse(const ResponseMeta& meta, const char* object,
                          const std::vector<ChoiceResult>& choices, const UsageInfo& usage,
                          ChoiceJson choice_json) {
  json j = Head(meta, object);
  json arr = json::array();
  for (const ChoiceResult& c : choices) arr.push_back(choice_json(c));
  j["choices"] = std::move(arr);
  j["usage"] = Usage(usage);
  return Dump(j);
}

// A streamed chunk of one choice (usage_null as in response_writer.h).
std::string Chunk(const ResponseMeta& meta, const char* object, json choice, bool usage_null) {
  json j = Head(meta, object);
  j["choices"] = json::array({std::move(choice)});
  if (usage_null) j["usage"] = nullptr;
  return Dump(j);
}

}  // namespace

std::string ErrorJson(const ApiError& e) {
  json err = {{"message", e.message},
              {"type", e.type},
              {"param", NullOr(e.param)},
              {"code", NullOr(e.code)}};
  return Dump({{"error", std::move(err)}});
}

std::string CompletionJson(const ResponseMeta& meta, const std::vector<ChoiceResult>& choices,
                           const UsageInfo& usage) {
  return WholeResponse(meta, "text_completion", choices, usage, CompletionChoice);
}

std::string ChatCompletionJson(const ResponseMeta& meta, const std::vector<ChoiceResult>& choices,
                               const UsageInfo& usage) {
  return WholeResponse(meta, "chat.completion", choices, usage, [](const ChoiceResult& c) {
    return ChatChoice(c, "message", ChatMessageJson(c));
  });
}

std::string CompletionChunkJson(const ResponseMeta& meta, const ChoiceResult& c, bool usage_null) {
  return Chunk(meta, "text_completion", CompletionChoice(c), usage_null);
}

std::string ChatChunkJson(const ResponseMeta& meta, const ChoiceResult& c, bool with_role,
                          bool usage_null) {
  json delta = json::object();
  if (with_role) delta["role"] = "assistant";
  if (!c.text.empty() || (with_role && c.finish_reason.empty())) delta["content"] = c.text;
  if (!c.tool_calls.empty()) delta["tool_calls"] = ToolCallsJson(c, true);
  return Chunk(meta, "chat.completion.chunk", ChatChoice(c, "delta", std::move(delta)), usage_null);
}

std::string UsageChunkJson(const ResponseMeta& meta, bool chat, const UsageInfo& usage) {
  json j = Head(meta, chat ? "chat.completion.chunk" : "text_completion");
  j["choices"] = json::array();
  j["usage"] = Usage(usage);
  return Dump(j);
}

namespace {

json ModelObject(const std::string& model, int64_t created, int32_t max_model_len) {
  return {{"id", model},
          {"object", "model"},
          {"created", created},
          {"owned_by", "tern"},
          {"max_model_len", max_model_len}};
}

}  // namespace

std::string ModelJson(const std::string& model, int64_t created, int32_t max_model_len) {
  return Dump(ModelObject(model, created, max_model_len));
}

std::string ModelsJson(const std::string& model, int64_t created, int32_t max_model_len) {
  return Dump(
      {{"object", "list"}, {"data", json::array({ModelObject(model, created, max_model_len)})}});
}

std::string TokenizeJson(const std::vector<int32_t>& tokens, int32_t max_model_len) {
  return Dump({{"tokens", tokens}, {"count", tokens.size()}, {"max_model_len", max_model_len}});
}

std::string DetokenizeJson(const std::string& text) { return Dump({{"prompt", text}}); }

}  // namespace tern
