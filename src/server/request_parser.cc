#include "server/request_parser.h"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "sample/defaults.h"
#include "sample/request_checks.h"
#include "server/openai_fields.h"
#include "server/json_field.h"
#include "server/structured_output.h"
#include "server/tool_calls.h"

namespace tern {
namespace {

using json = nlohmann::json;
using MaybeError = std::optional<ApiError>;


// An integer that fits int32 (the range itself is request_checks.h's).
MaybeError GetInt(const json& obj, const std::string& key, int64_t* out) {
  const json* v = Field(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_number_integer()) return WrongType(key, "an integer", *v);
  const bool fits = v->is_number_unsigned() ? v->get<uint64_t>() <= (uint64_t)INT32_MAX
                                            : v->get<int64_t>() >= INT32_MIN &&
                                                  v->get<int64_t>() <= INT32_MAX;
  if (!fits) return ApiError::Invalid("'" + key + "' is out of range, got " + v->dump(), key);
  *out = v->get<int64_t>();
  return std::nullopt;
}

// A number (its range is request_checks.h's).
MaybeError GetFloat(const json& obj, const std::string& key, float* out) {
  const json* v = Field(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_number()) return WrongType(key, "a number", *v);
  *out = (float)v->get<double>();
  return std::nullopt;
}

// A broken rule of request_checks.h as a 400 naming `key`.
ApiError Invalid(const FieldError& e, const std::string& key) {
  return ApiError::Invalid(e.Text("'" + key + "'"), key);
}

MaybeError GetBool(const json& obj, const std::string& key, bool* out) {
  const json* v = Field(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) return WrongType(key, "a boolean", *v);
  *out = v->get<bool>();
  return std::nullopt;
}

MaybeError GetString(const json& obj, const std::string& key, std::string* out) {
  const json* v = Field(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_string()) return WrongType(key, "a string", *v);
  *out = v->get<std::string>();
  return std::nullopt;
}

MaybeError ParseBody(std::string_view body, json* out) {
  *out = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (out->is_discarded()) return ApiError::Invalid("request body is not valid JSON");
  if (!out->is_object()) return ApiError::Invalid("request body must be a JSON object");
  return std::nullopt;
}

bool IsTokenArray(const json& v) {
  if (!v.is_array() || v.empty()) return false;
  for (const json& x : v) {
    if (!x.is_number_integer()) return false;
  }
  return true;
}

MaybeError ToTokenIds(const json& v, const std::string& key, const RequestLimits& limits,
                      std::vector<int32_t>* out) {
  out->clear();
  for (const json& x : v) {
    int64_t id =
        x.is_number_unsigned() && x.get<uint64_t>() > (uint64_t)INT64_MAX ? -1 : x.get<int64_t>();
    if (id < 0 || id > INT32_MAX || (limits.vocab_size > 0 && id >= limits.vocab_size)) {
      return ApiError::Invalid(
          "token id " + x.dump() + " in '" + key + "' is out of range" +
              (limits.vocab_size > 0
                   ? " (vocabulary size " + std::to_string(limits.vocab_size) + ")"
                   : ""),
          key);
    }
    out->push_back((int32_t)id);
  }
  return std::nullopt;
}

// prompt: "text" | [ids] | ["text", ...] | [[ids], ...]
MaybeError ParsePrompts(const json& obj, const RequestLimits& limits,
                        std::vector<PromptInput>* out) {
  const json* v = Field(obj, "prompt");
  if (!v) return ApiError::Invalid("'prompt' is required", "prompt");
  if (v->is_string()) {
    out->push_back({false, v->get<std::string>(), {}});
    return std::nullopt;
  }
  const char* kShape = "a string, an array of token ids, or an array of those";
  if (!v->is_array() || v->empty()) return WrongType("prompt", kShape, *v);
  if (IsTokenArray(*v)) {
    PromptInput p{true, "", {}};
    if (auto e = ToTokenIds(*v, "prompt", limits, &p.token_ids)) return e;
    out->push_back(std::move(p));
    return std::nullopt;
  }
  if ((int64_t)v->size() > limits.max_prompts) {
    return ApiError::Invalid(
        "at most " + std::to_string(limits.max_prompts) + " prompts per request", "prompt");
  }
  for (const json& item : *v) {
    if (item.is_string()) {
      out->push_back({false, item.get<std::string>(), {}});
    } else if (IsTokenArray(item)) {
      PromptInput p{true, "", {}};
      if (auto e = ToTokenIds(item, "prompt", limits, &p.token_ids)) return e;
      out->push_back(std::move(p));
    } else {
      return WrongType("prompt", kShape, *v);
    }
  }
  return std::nullopt;
}

// content: "text" | [{"type": "text", "text": "..."}, ...] | null
MaybeError ParseContent(const json& msg, size_t index, std::string* out) {
  const std::string key = "messages[" + std::to_string(index) + "].content";
  const json* c = Field(msg, "content");
  if (!c) return std::nullopt;
  if (c->is_string()) {
    *out = c->get<std::string>();
    return std::nullopt;
  }
  if (!c->is_array()) return WrongType(key, "a string or an array of content parts", *c);
  for (const json& part : *c) {
    if (!part.is_object()) return WrongType(key, "an array of content parts", part);
    const json* type = Field(part, "type");
    if (!type || !type->is_string() || type->get<std::string>() != "text") {
      return ApiError::Invalid("only content parts of type \"text\" are supported in " + key, key);
    }
    const json* text = Field(part, "text");
    if (!text || !text->is_string()) {
      return ApiError::Invalid("a text content part needs a string 'text' in " + key, key);
    }
    *out += text->get<std::string>();
  }
  return std::nullopt;
}

MaybeError ParseMessages(const json& obj, std::vector<ApiMessage>* out) {
  const json* v = Field(obj, "messages");
  if (!v) return ApiError::Invalid("'messages' is required", "messages");
  if (!v->is_array()) return WrongType("messages", "an array", *v);
  if (v->empty()) return ApiError::Invalid("'messages' must not be empty", "messages");
  for (size_t i = 0; i < v->size(); ++i) {
    const json& m = (*v)[i];
    const std::string key = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return WrongType(key, "an object", m);
    const json* role = Field(m, "role");
    if (!role || !role->is_string() || role->get<std::string>().empty()) {
      return ApiError::Invalid(key + " needs a string 'role'", key + ".role");
    }
    ApiMessage msg;
    msg.role = role->get<std::string>();
    if (auto e = ParseContent(m, i, &msg.content)) return e;
    if (const json* calls = Field(m, "tool_calls")) {
      if (!calls->is_array()) return WrongType(key + ".tool_calls", "an array", *calls);
      if (!calls->empty()) msg.tool_calls_json = calls->dump();
    }
    // Every message but an assistant turn needs 'content' (a string or an
    // array of text parts, possibly empty). A tool-call turn without text
    // shows the template None, as clients send it; an assistant turn's
    // missing content otherwise stays "".
    const bool has_content = Field(m, "content") != nullptr;
    if (!has_content && msg.role != "assistant") {
      return ApiError::Invalid(key + " (role '" + msg.role + "') needs 'content'",
                               key + ".content");
    }
    msg.content_null = !msg.tool_calls_json.empty() && !has_content;
    if (auto e = GetString(m, "tool_call_id", &msg.tool_call_id)) return e;
    if (auto e = GetString(m, "name", &msg.name)) return e;
    out->push_back(std::move(msg));
  }
  return std::nullopt;
}

MaybeError ParseStop(const json& obj, const RequestLimits& limits, std::vector<std::string>* out) {
  const json* v = Field(obj, "stop");
  if (!v) return std::nullopt;
  if (v->is_string()) {
    if (!v->get<std::string>().empty()) out->push_back(v->get<std::string>());
    return std::nullopt;
  }
  if (!v->is_array()) return WrongType("stop", "a string or an array of strings", *v);
  for (const json& s : *v) {
    if (!s.is_string()) return WrongType("stop", "a string or an array of strings", s);
    out->push_back(s.get<std::string>());
  }
  if (auto e = CheckStopStrings(*out, limits.max_stop)) return Invalid(*e, "stop");
  return std::nullopt;
}

SamplingParams DefaultSampling() {
  SamplingParams s;
  s.temperature = defaults::kTemperature;
  s.top_k = defaults::kTopK;
  s.top_p = defaults::kTopP;
  s.min_p = defaults::kMinP;
  s.repetition_penalty = defaults::kRepetitionPenalty;
  s.presence_penalty = defaults::kPresencePenalty;
  s.frequency_penalty = defaults::kFrequencyPenalty;
  return s;
}

MaybeError ParseSampling(const json& obj, SamplingParams* s) {
  if (auto e = GetFloat(obj, "temperature", &s->temperature)) return e;
  if (auto e = GetFloat(obj, "top_p", &s->top_p)) return e;
  int64_t top_k = s->top_k;
  if (auto e = GetInt(obj, "top_k", &top_k)) return e;
  s->top_k = top_k == -1 ? 0 : (int32_t)top_k;  // -1 = off, as vLLM
  if (auto e = GetFloat(obj, "min_p", &s->min_p)) return e;
  if (auto e = GetFloat(obj, "presence_penalty", &s->presence_penalty)) return e;
  if (auto e = GetFloat(obj, "frequency_penalty", &s->frequency_penalty)) return e;
  if (auto e = GetFloat(obj, "repetition_penalty", &s->repetition_penalty)) return e;
  if (auto e = CheckSamplingRanges(*s)) return Invalid(*e, e->field);
  if (const json* seed = Field(obj, "seed")) {
    if (!seed->is_number_integer()) return WrongType("seed", "an integer", *seed);
    s->seed = seed->is_number_unsigned() ? seed->get<uint64_t>() : (uint64_t)seed->get<int64_t>();
    s->has_seed = true;
  }
  return GetBool(obj, "ignore_eos", &s->ignore_eos);
}

MaybeError ParseMaxTokens(const json& obj, std::optional<int32_t>* out) {
  for (const char* key : {"max_completion_tokens", "max_tokens"}) {
    int64_t x = 0;
    if (!Field(obj, key)) continue;
    if (auto e = GetInt(obj, key, &x)) return e;
    if (auto e = CheckMaxTokens(x)) return Invalid(*e, key);
    *out = (int32_t)x;
    return std::nullopt;
  }
  return std::nullopt;
}

MaybeError ParseLogprobs(const json& obj, ApiEndpoint endpoint, const RequestLimits& limits,
                         int32_t* out) {
  const char* key = endpoint == ApiEndpoint::kCompletions ? "logprobs" : "top_logprobs";
  int64_t k = -1;
  bool want = false;
  if (endpoint == ApiEndpoint::kChatCompletions) {
    if (auto e = GetBool(obj, "logprobs", &want)) return e;
  }
  if (auto e = GetInt(obj, key, &k)) return e;
  if (Field(obj, key)) {
    if (auto e = CheckLogprobs(k, limits.max_logprobs)) return Invalid(*e, key);
  }
  if (endpoint == ApiEndpoint::kCompletions) {
    *out = (int32_t)k;
    return std::nullopt;
  }
  if (k >= 0 && !want) {
    return ApiError::Invalid("'top_logprobs' requires 'logprobs': true", "top_logprobs");
  }
  *out = want ? (int32_t)std::max<int64_t>(k, 0) : -1;
  return std::nullopt;
}

MaybeError ParseStreamOptions(const json& obj, CompletionRequest* out) {
  if (auto e = GetBool(obj, "stream", &out->stream)) return e;
  const json* opts = Field(obj, "stream_options");
  if (!opts) return std::nullopt;
  if (!opts->is_object()) return WrongType("stream_options", "an object", *opts);
  return GetBool(*opts, "include_usage", &out->include_usage);
}

}  // namespace

int32_t DefaultMaxTokens(ApiEndpoint endpoint) {
  return endpoint == ApiEndpoint::kCompletions ? defaults::kMaxTokensCompletion
                                               : defaults::kMaxTokensUntilContext;
}

std::optional<ApiError> ParseCompletionRequest(std::string_view body, ApiEndpoint endpoint,
                                               const RequestLimits& limits,
                                               CompletionRequest* out) {
  json obj;
  if (auto e = ParseBody(body, &obj)) return e;
  *out = CompletionRequest{};
  out->endpoint = endpoint;
  out->sampling = DefaultSampling();
  if (auto e = CheckUnsupportedFields(obj, endpoint)) return e;
  if (auto e = GetString(obj, "model", &out->model)) return e;
  if (endpoint == ApiEndpoint::kCompletions) {
    if (auto e = ParsePrompts(obj, limits, &out->prompts)) return e;
    if (auto e = GetBool(obj, "echo", &out->echo)) return e;
  } else {
    if (auto e = ParseMessages(obj, &out->messages)) return e;
  }
  if (auto e = ParseMaxTokens(obj, &out->max_tokens)) return e;
  if (auto e = ParseSampling(obj, &out->sampling)) return e;
  if (auto e = ParseStop(obj, limits, &out->stop)) return e;
  int64_t n = 1;
  if (auto e = GetInt(obj, "n", &n)) return e;
  if (auto e = CheckChoices(n, limits.max_n)) return Invalid(*e, "n");
  out->n = (int32_t)n;
  if (auto e = ParseStreamOptions(obj, out)) return e;
  if (auto e = ParseOutputConstraint(obj, body, &out->constraint)) return e;
  if (endpoint == ApiEndpoint::kChatCompletions) {
    if (auto e = ParseTools(obj, body, &out->tools)) return e;
  }
  if (auto e = ParseLogprobs(obj, endpoint, limits, &out->logprobs)) return e;
  if (auto e = GetString(obj, "user", &out->user)) return e;
  if (auto e = GetString(obj, "cache_salt", &out->cache_salt)) return e;
  return std::nullopt;
}

std::optional<ApiError> ParseTokenizeRequest(std::string_view body, TokenizeRequest* out) {
  json obj;
  if (auto e = ParseBody(body, &obj)) return e;
  *out = TokenizeRequest{};
  if (auto e = GetString(obj, "model", &out->model)) return e;
  if (auto e = GetBool(obj, "add_special_tokens", &out->add_special_tokens)) return e;
  if (auto e = GetBool(obj, "parse_special", &out->parse_special)) return e;
  if (Field(obj, "messages")) {
    out->has_messages = true;
    return ParseMessages(obj, &out->messages);
  }
  const json* p = Field(obj, "prompt");
  if (!p) return ApiError::Invalid("'prompt' or 'messages' is required", "prompt");
  if (!p->is_string()) return WrongType("prompt", "a string", *p);
  out->prompt = p->get<std::string>();
  return std::nullopt;
}

std::optional<ApiError> ParseDetokenizeRequest(std::string_view body, const RequestLimits& limits,
                                               DetokenizeRequest* out) {
  json obj;
  if (auto e = ParseBody(body, &obj)) return e;
  *out = DetokenizeRequest{};
  if (auto e = GetString(obj, "model", &out->model)) return e;
  const json* t = Field(obj, "tokens");
  if (!t) return ApiError::Invalid("'tokens' is required", "tokens");
  if (!t->is_array() || !(t->empty() || IsTokenArray(*t))) {
    return WrongType("tokens", "an array of token ids", *t);
  }
  return ToTokenIds(*t, "tokens", limits, &out->tokens);
}

}  // namespace tern
