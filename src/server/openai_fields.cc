#include "server/openai_fields.h"

#include "server/json_field.h"

namespace tern {
namespace {

using json = nlohmann::json;

ApiError Unsupported(const std::string& field, const std::string& why) {
  return ApiError::Invalid("'" + field + "' is not supported by this server" + why, field);
}

}  // namespace

const std::vector<std::string>& IgnoredOpenAiFields(ApiEndpoint endpoint) {
  static const std::vector<std::string> chat = {
      "user", "metadata", "store", "service_tier", "prompt_cache_key", "safety_identifier",
      "parallel_tool_calls"};
  static const std::vector<std::string> completions = {"user"};
  return endpoint == ApiEndpoint::kChatCompletions ? chat : completions;
}

std::optional<ApiError> CheckUnsupportedFields(const json& obj, ApiEndpoint endpoint) {
  if (!obj.is_object()) return std::nullopt;
  if (const json* lb = Field(obj, "logit_bias")) {
    if (!(lb->is_object() && lb->empty())) return Unsupported("logit_bias", "");
  }
  if (endpoint == ApiEndpoint::kCompletions) {
    if (const json* b = Field(obj, "best_of")) {
      if (!(b->is_number_integer() && b->get<int64_t>() == 1)) return Unsupported("best_of", " (only 1)");
    }
    if (const json* s = Field(obj, "suffix")) {
      if (!(s->is_string() && s->get<std::string>().empty())) return Unsupported("suffix", "");
    }
    return std::nullopt;
  }
  for (const char* key : {"audio", "functions", "function_call", "prediction", "web_search_options",
                          "reasoning_effort", "verbosity"}) {
    if (Field(obj, key)) {
      std::string why;
      if (std::string(key) == "functions" || std::string(key) == "function_call") why = " (use 'tools' and 'tool_choice')";
      return Unsupported(key, why);
    }
  }
  if (const json* m = Field(obj, "modalities")) {
    if (!(m->is_array() && m->size() == 1 && (*m)[0] == "text")) {
      return Unsupported("modalities", " (only [\"text\"])");
    }
  }
  return std::nullopt;
}

}  // namespace tern
