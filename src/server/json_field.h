// Reading the fields of an OpenAI request body, the same way in every parser
// of the server (request_parser, structured_output, tool_calls,
// openai_fields): a field that is absent or null keeps its default, a field
// of the wrong type is a 400 naming it.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "server/api_error.h"

namespace tern {

// The field, or null when it is absent or JSON null.
inline const nlohmann::json* Field(const nlohmann::json& obj, const std::string& key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

// "'key' must be WANT, got TYPE" (param key).
inline ApiError WrongType(const std::string& key, const char* want, const nlohmann::json& v) {
  return ApiError::Invalid("'" + key + "' must be " + want + ", got " + v.type_name(), key);
}

}  // namespace tern
