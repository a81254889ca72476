#include "server/tool_calls.h"

#include <random>

#include "server/json_field.h"

namespace tern {
namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

std::string Trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace((unsigned char)s[b])) ++b;
  while (e > b && std::isspace((unsigned char)s[e - 1])) --e;
  return std::string(s.substr(b, e - b));
}

std::string NewCallId() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char kHex[] = "0123456789abcdef";
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id += kHex[rng() % 16];
  return id;
}

// {"name": "...", "arguments"|"parameters": {...} or "..."} -> a call.
std::optional<ToolCallResult> CallFromJson(const ojson& v) {
  if (!v.is_object() || !v.contains("name") || !v["name"].is_string()) return std::nullopt;
  const ojson* args = v.contains("arguments") ? &v["arguments"]
                      : v.contains("parameters") ? &v["parameters"] : nullptr;
  ToolCallResult call{NewCallId(), v["name"].get<std::string>(), "{}"};
  if (args && args->is_string()) {
    call.arguments = args->get<std::string>();
  } else if (args) {
    call.arguments = args->dump();
  }
  return call;
}

// Each format's name (as the server logs it) and the marker its calls start with.
struct FormatInfo {
  ToolCallFormat format;
  const char* name;
  const char* start_marker;
};
constexpr FormatInfo kFormats[] = {
    {ToolCallFormat::kHermes, "hermes", "<tool_call>"},
    {ToolCallFormat::kLlama3, "llama3_json", "<|python_tag|>"},
    {ToolCallFormat::kMistral, "mistral", "[TOOL_CALLS]"},
};

const FormatInfo& Info(ToolCallFormat f) {
  for (const FormatInfo& info : kFormats) {
    if (info.format == f) return info;
  }
  static constexpr FormatInfo kUnknown = {ToolCallFormat::kHermes, "", ""};  // names nothing
  return kUnknown;
}

const char* StartMarker(ToolCallFormat f) { return Info(f).start_marker; }

ParsedToolOutput ParseHermes(std::string_view text) {
  ParsedToolOutput out;
  const std::string open = "<tool_call>", close = "</tool_call>";
  const size_t first = text.find(open);
  if (first == std::string_view::npos) return {std::string(text), {}};
  size_t pos = first;
  while (pos != std::string_view::npos) {
    const size_t body = pos + open.size();
    size_t end = text.find(close, body);
    const std::string inner = Trim(text.substr(body, end == std::string_view::npos ? text.npos : end - body));
    std::optional<ToolCallResult> call = CallFromJson(ojson::parse(inner, nullptr, false));
    if (!call) return {std::string(text), {}};
    out.calls.push_back(std::move(*call));
    if (end == std::string_view::npos) break;
    pos = text.find(open, end + close.size());
  }
  out.content = Trim(text.substr(0, first));
  return out;
}

ParsedToolOutput ParseAnchored(std::string_view text, ToolCallFormat f) {
  std::string t = Trim(text);
  const std::string marker = StartMarker(f);
  if (t.rfind(marker, 0) == 0) t = Trim(std::string_view(t).substr(marker.size()));
  const ojson v = ojson::parse(t, nullptr, false);
  ParsedToolOutput out;
  if (f == ToolCallFormat::kLlama3 && v.is_object()) {
    if (std::optional<ToolCallResult> c = CallFromJson(v)) out.calls.push_back(std::move(*c));
  } else if (f == ToolCallFormat::kMistral && v.is_array() && !v.empty()) {
    for (const ojson& x : v) {
      std::optional<ToolCallResult> c = CallFromJson(x);
      if (!c) return {std::string(text), {}};
      out.calls.push_back(std::move(*c));
    }
  }
  if (out.calls.empty()) out.content = std::string(text);
  return out;
}

}  // namespace

ToolCallFormat DetectToolCallFormat(std::string_view src) {
  if (src.find("[TOOL_CALLS]") != std::string_view::npos) return ToolCallFormat::kMistral;
  if (src.find("<tool_call>") != std::string_view::npos) return ToolCallFormat::kHermes;
  if (src.find("<|start_header_id|>") != std::string_view::npos &&
      src.find("tools") != std::string_view::npos) {
    return ToolCallFormat::kLlama3;
  }
  return ToolCallFormat::kHermes;
}

const char* ToolCallFormatName(ToolCallFormat f) { return Info(f).name; }

std::optional<ApiError> ParseTools(const json& obj, std::string_view body, ToolsRequest* out) {
  *out = ToolsRequest{};
  if (const json* t = Field(obj, "tools")) {
    if (!t->is_array()) return ApiError::Invalid("'tools' must be an array", "tools");
    const ojson ordered = ojson::parse(body.begin(), body.end(), nullptr, false)["tools"];
    for (size_t i = 0; i < t->size(); ++i) {
      const std::string key = "tools[" + std::to_string(i) + "]";
      const json& tool = (*t)[i];
      const json* type = tool.is_object() ? Field(tool, "type") : nullptr;
      if (!type || *type != "function") {
        return ApiError::Invalid(key + ".type must be \"function\"", key + ".type");
      }
      const json* fn = Field(tool, "function");
      const json* name = fn && fn->is_object() ? Field(*fn, "name") : nullptr;
      if (!name || !name->is_string() || name->get<std::string>().empty()) {
        return ApiError::Invalid(key + ".function needs a string 'name'", key + ".function.name");
      }
      const json* params = Field(*fn, "parameters");
      if (params && !params->is_object()) {
        return ApiError::Invalid(key + ".function.parameters must be an object", key + ".function.parameters");
      }
      out->names.push_back(name->get<std::string>());
      out->parameters_json.push_back(params ? ordered[i]["function"]["parameters"].dump() : "");
    }
    if (!t->empty()) out->tools_json = ordered.dump();
  }
  if (const json* c = Field(obj, "tool_choice")) {
    if (c->is_string()) {
      const std::string s = c->get<std::string>();
      if (s == "none") {
        out->choice = ToolsRequest::Choice::kNone;
      } else if (s == "auto") {
        out->choice = ToolsRequest::Choice::kAuto;
      } else if (s == "required") {
        out->choice = ToolsRequest::Choice::kRequired;
      } else {
        return ApiError::Invalid("'tool_choice' must be \"none\", \"auto\", \"required\" or "
                                 "{\"type\": \"function\", \"function\": {\"name\": ...}}, got \"" + s + "\"",
                                 "tool_choice");
      }
    } else if (c->is_object()) {
      const json* fn = Field(*c, "function");
      const json* name = fn && fn->is_object() ? Field(*fn, "name") : nullptr;
      if (!name || !name->is_string()) {
        return ApiError::Invalid("'tool_choice' names a function as {\"type\": \"function\", \"function\": {\"name\": ...}}",
                                 "tool_choice");
      }
      out->choice = ToolsRequest::Choice::kNamed;
      out->choice_name = name->get<std::string>();
      if (std::find(out->names.begin(), out->names.end(), out->choice_name) == out->names.end()) {
        return ApiError::Invalid("'tool_choice' names the function '" + out->choice_name +
                                     "', which is not in 'tools'",
                                 "tool_choice");
      }
    } else {
      return ApiError::Invalid("'tool_choice' must be a string or an object", "tool_choice");
    }
  }
  if (out->choice == ToolsRequest::Choice::kRequired && out->names.empty()) {
    return ApiError::Invalid("'tool_choice' is \"required\" but the request has no 'tools'", "tool_choice");
  }
  if (const json* p = Field(obj, "parallel_tool_calls")) {
    if (!p->is_boolean()) return ApiError::Invalid("'parallel_tool_calls' must be a boolean", "parallel_tool_calls");
  }
  return std::nullopt;
}

namespace {

// "$ref": "#/x" inside a function's parameters points into the parameters;
// embedded at `base` of the call schema it must point there.
void RebaseRefs(ojson& v, const std::string& base) {
  if (v.is_object()) {
    for (auto& [k, x] : v.items()) {
      if (k == "$ref" && x.is_string() && x.get<std::string>().rfind("#", 0) == 0) {
        x = base + x.get<std::string>().substr(1);
      } else {
        RebaseRefs(x, base);
      }
    }
  } else if (v.is_array()) {
    for (ojson& x : v) RebaseRefs(x, base);
  }
}

}  // namespace

OutputConstraintSpec ToolCallConstraint(const ToolsRequest& tools, ToolCallFormat format) {
  OutputConstraintSpec spec;
  if (tools.choice != ToolsRequest::Choice::kRequired && tools.choice != ToolsRequest::Choice::kNamed) {
    return spec;
  }
  const char* args_key = format == ToolCallFormat::kLlama3 ? "parameters" : "arguments";
  ojson alternatives = ojson::array();
  size_t num = 0;
  for (size_t i = 0; i < tools.names.size(); ++i) {
    num += tools.choice != ToolsRequest::Choice::kNamed || tools.names[i] == tools.choice_name;
  }
  for (size_t i = 0; i < tools.names.size(); ++i) {
    if (tools.choice == ToolsRequest::Choice::kNamed && tools.names[i] != tools.choice_name) continue;
    ojson params = tools.parameters_json[i].empty()
                       ? ojson{{"type", "object"}, {"properties", ojson::object()}}
                       : ojson::parse(tools.parameters_json[i]);
    const std::string at = num == 1 ? "" : "/anyOf/" + std::to_string(alternatives.size());
    RebaseRefs(params, "#" + at + "/properties/" + args_key);
    ojson call = {{"type", "object"},
                  {"properties", {{"name", {{"const", tools.names[i]}}}, {args_key, params}}},
                  {"required", {"name", args_key}},
                  {"additionalProperties", false}};
    alternatives.push_back(std::move(call));
  }
  spec.kind = OutputConstraintSpec::Kind::kJsonSchema;
  spec.param = "tools";
  spec.text = alternatives.size() == 1 ? alternatives[0].dump() : ojson{{"anyOf", alternatives}}.dump();
  switch (format) {
    case ToolCallFormat::kHermes:
      spec.prefix = "<tool_call>\n";
      spec.suffix = "\n</tool_call>";
      break;
    case ToolCallFormat::kLlama3:
      break;
    case ToolCallFormat::kMistral:
      spec.prefix = "[";
      spec.suffix = "]";
      break;
  }
  return spec;
}

Value JsonToValue(const ojson& v) {
  switch (v.type()) {
    case ojson::value_t::null: return Value::None();
    case ojson::value_t::boolean: return Value(v.get<bool>());
    case ojson::value_t::number_integer: return Value(v.get<int64_t>());
    case ojson::value_t::number_unsigned: return Value(v.get<uint64_t>());
    case ojson::value_t::number_float: return Value(v.get<double>());
    case ojson::value_t::string: return Value(v.get<std::string>());
    case ojson::value_t::array: {
      ValueList items;
      for (const ojson& x : v) items.push_back(JsonToValue(x));
      return Value::List(std::move(items));
    }
    case ojson::value_t::object: {
      ValueDict items;
      for (const auto& [k, x] : v.items()) items.emplace_back(k, JsonToValue(x));
      return Value::Dict(std::move(items));
    }
    default: return Value::None();
  }
}

Value ToolsValue(const ToolsRequest& tools) {
  if (tools.tools_json.empty()) return Value();
  return JsonToValue(ojson::parse(tools.tools_json));
}

ValueDict MessageExtras(const ApiMessage& m) {
  ValueDict extra;
  if (m.content_null) extra.emplace_back("content", Value::None());
  if (!m.tool_calls_json.empty()) {
    ojson calls = ojson::parse(m.tool_calls_json, nullptr, false);
    // Templates index arguments as a dict (HF transformers' convention).
    for (ojson& c : calls) {
      if (c.is_object() && c.contains("function") && c["function"].contains("arguments") &&
          c["function"]["arguments"].is_string()) {
        ojson args = ojson::parse(c["function"]["arguments"].get<std::string>(), nullptr, false);
        if (!args.is_discarded()) c["function"]["arguments"] = std::move(args);
      }
    }
    extra.emplace_back("tool_calls", JsonToValue(calls));
  }
  if (!m.tool_call_id.empty()) extra.emplace_back("tool_call_id", Value(m.tool_call_id));
  if (!m.name.empty()) extra.emplace_back("name", Value(m.name));
  return extra;
}

ParsedToolOutput ParseToolCalls(std::string_view text, ToolCallFormat format) {
  if (format == ToolCallFormat::kHermes) return ParseHermes(text);
  return ParseAnchored(text, format);
}

std::string ToolCallStream::Push(std::string_view text) {
  all_ += text;
  if (in_call_) return "";
  if (format_ == ToolCallFormat::kHermes) {
    const std::string marker = StartMarker(format_);
    const size_t pos = all_.find(marker, released_);
    size_t upto = all_.size();
    if (pos != std::string::npos) {
      upto = pos;
      in_call_ = true;
    } else {
      // Hold back a tail that may be the start of the marker.
      for (size_t k = std::min(marker.size() - 1, all_.size() - released_); k > 0; --k) {
        if (all_.compare(all_.size() - k, k, marker, 0, k) == 0) {
          upto = all_.size() - k;
          break;
        }
      }
    }
    std::string out = all_.substr(released_, upto - released_);
    released_ = upto;
    return out;
  }
  if (content_only_) {
    std::string out = all_.substr(released_);
    released_ = all_.size();
    return out;
  }
  const std::string t = Trim(all_);
  if (t.empty()) return "";
  const std::string marker = StartMarker(format_);
  const std::string json_start = format_ == ToolCallFormat::kLlama3 ? "{" : "[";
  const bool starts = t.rfind(marker, 0) == 0 || t.rfind(json_start, 0) == 0;
  const bool may_start = marker.rfind(t, 0) == 0;
  if (starts) {
    in_call_ = true;
    return "";
  }
  if (may_start) return "";
  content_only_ = true;
  return Push("");
}

ParsedToolOutput ToolCallStream::Finish() {
  ParsedToolOutput out;
  if (in_call_) out = ParseToolCalls(all_, format_);
  if (out.calls.empty()) {
    out.content = all_.substr(released_);
  } else {
    out.content.clear();  // content before the call went out already
  }
  released_ = all_.size();
  return out;
}

}  // namespace tern
