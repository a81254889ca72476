#include "grammar/json_schema.h"

#include <map>
#include <set>

#include "grammar/regex.h"

namespace tern::grammar {
namespace {

using ojson = nlohmann::ordered_json;

constexpr int64_t kMaxCount = 10000;  // minItems/maxItems/minLength/maxLength

const std::set<std::string>& Annotations() {
  static const std::set<std::string> k = {
      "title", "description", "default", "examples", "$schema", "$id", "$comment",
      "$defs", "definitions", "deprecated", "readOnly", "writeOnly", "strict"};
  return k;
}

const std::set<std::string>& Supported() {
  static const std::set<std::string> k = {
      "type", "properties", "required", "additionalProperties", "enum", "const",
      "items", "minItems", "maxItems", "minLength", "maxLength", "pattern", "format",
      "anyOf", "oneOf", "allOf", "$ref"};
  return k;
}

// Regexes of the formats we generate; each accepts only valid values (days
// up to 28, so no month/day combination is impossible).
const std::map<std::string, std::string>& Formats() {
  static const std::map<std::string, std::string> k = {
      {"date", "[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])"},
      {"time", "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"},
      {"date-time",
       "[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]"
       "(\\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"},
      {"uuid", "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"},
      {"email", "[a-z0-9]([a-z0-9._+-]{0,30}[a-z0-9])?@[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?\\.[a-z]{2,6}"},
  };
  return k;
}

class SchemaCompiler {
 public:
  SchemaCompiler(const ojson& root, Grammar* g) : root_(root), g_(g) {}

  StatusOr<int32_t> Compile(const ojson& s, const std::string& path) {
    if (++depth_ > 64) return InvalidArgument(path + ": schema nested deeper than 64");
    StatusOr<int32_t> r = CompileInner(s, path);
    --depth_;
    if (r.ok() && g_->num_rules() > 200000) {
      return InvalidArgument(path + ": the schema compiles to more than 200000 grammar rules");
    }
    return r;
  }

  // ---- generic JSON ----
  int32_t StringChar() {
    if (string_char_ >= 0) return string_char_;
    ByteSet plain = Range("\x20-\x7F");
    plain.reset('"');
    plain.reset('\\');
    const int32_t hex = g_->Choice({{Symbol::Bytes(Range("0-9a-fA-F"))}});
    Sequence unicode = Literal("\\u");
    for (int k = 0; k < 4; ++k) unicode.push_back(Symbol::Rule(hex));
    string_char_ = g_->Choice({{Symbol::Bytes(plain)},
                               {Symbol::Byte('\\'), Symbol::Bytes(Range("\"\\\\/bfnrt"))},
                               unicode,
                               {Symbol::Rule(AddUtf8NonAsciiRule(g_))}});
    return string_char_;
  }
  int32_t Quoted(int32_t body) {
    return g_->Choice({{Symbol::Byte('"'), Symbol::Rule(body), Symbol::Byte('"')}});
  }
  int32_t String() {
    if (string_ < 0) string_ = Quoted(g_->Repeat(StringChar(), 0, -1));
    return string_;
  }
  int32_t Digits(int32_t min, int32_t max) {
    const int32_t digit = g_->Choice({{Symbol::Bytes(Range("0-9"))}});
    return g_->Repeat(digit, min, max);
  }
  int32_t Integer() {
    if (integer_ >= 0) return integer_;
    const int32_t minus = g_->Optional(Literal("-"));
    const int32_t magnitude =
        g_->Choice({Literal("0"), {Symbol::Bytes(Range("1-9")), Symbol::Rule(Digits(0, 15))}});
    integer_ = g_->Choice({{Symbol::Rule(minus), Symbol::Rule(magnitude)}});
    return integer_;
  }
  int32_t Number() {
    if (number_ >= 0) return number_;
    const int32_t fraction = g_->Optional({Symbol::Byte('.'), Symbol::Rule(Digits(1, 16))});
    const int32_t exponent = g_->Optional({Symbol::Bytes(Range("eE")),
                                           Symbol::Rule(g_->Optional({Symbol::Bytes(Range("+-"))})),
                                           Symbol::Rule(Digits(1, 2))});
    number_ = g_->Choice(
        {{Symbol::Rule(Integer()), Symbol::Rule(fraction), Symbol::Rule(exponent)}});
    return number_;
  }
  int32_t Value() {
    if (value_ >= 0) return value_;
    value_ = g_->NewRule("value");
    const int32_t member = g_->Choice({{Symbol::Rule(String()), Symbol::Byte(':'),
                                        Symbol::Byte(' '), Symbol::Rule(value_)}});
    const int32_t object = Bracketed('{', g_->SeparatedList(member, ", ", 0, -1), '}');
    const int32_t array = Bracketed('[', g_->SeparatedList(value_, ", ", 0, -1), ']');
    for (int32_t r : {object, array, String(), Number()}) g_->AddAlternative(value_, {Symbol::Rule(r)});
    for (const char* lit : {"true", "false", "null"}) g_->AddAlternative(value_, Literal(lit));
    return value_;
  }
  int32_t Object() {
    const int32_t member = g_->Choice({{Symbol::Rule(String()), Symbol::Byte(':'),
                                        Symbol::Byte(' '), Symbol::Rule(Value())}});
    return Bracketed('{', g_->SeparatedList(member, ", ", 0, -1), '}');
  }
  int32_t Bracketed(char open, int32_t body, char close) {
    return g_->Choice({{Symbol::Byte((uint8_t)open), Symbol::Rule(body), Symbol::Byte((uint8_t)close)}});
  }

 private:
  static std::string Join(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }

  StatusOr<int32_t> CompileInner(const ojson& s, const std::string& path) {
    if (s.is_boolean()) {
      if (s.get<bool>()) return Value();
      return InvalidArgument(path + ": schema false matches nothing");
    }
    if (!s.is_object()) return InvalidArgument(path + ": a schema must be an object or a boolean");
    for (const auto& [key, v] : s.items()) {
      if (!Supported().count(key) && !Annotations().count(key)) {
        return InvalidArgument(path + ": unsupported JSON schema keyword '" + key + "'");
      }
    }
    if (s.contains("$ref")) return Ref(s, path);
    if (s.contains("const")) return g_->LiteralRule(DumpCompact(s["const"]));
    if (s.contains("enum")) return Enum(s["enum"], Join(path, "enum"));
    for (const char* key : {"anyOf", "oneOf", "allOf"}) {
      if (s.contains(key)) return Combination(s, key, Join(path, key));
    }
    std::vector<std::string> types;
    if (s.contains("type")) {
      const ojson& t = s["type"];
      if (t.is_string()) {
        types.push_back(t.get<std::string>());
      } else if (t.is_array() && !t.empty()) {
        for (const ojson& x : t) {
          if (!x.is_string()) return InvalidArgument(Join(path, "type") + ": must be strings");
          types.push_back(x.get<std::string>());
        }
      } else {
        return InvalidArgument(Join(path, "type") + ": must be a string or a non-empty array");
      }
    } else if (s.contains("properties") || s.contains("additionalProperties") || s.contains("required")) {
      types.push_back("object");
    } else if (s.contains("items") || s.contains("minItems") || s.contains("maxItems")) {
      types.push_back("array");
    } else if (s.contains("pattern") || s.contains("format") || s.contains("minLength") ||
               s.contains("maxLength")) {
      types.push_back("string");
    } else {
      return Value();
    }
    std::vector<Sequence> alts;
    for (const std::string& t : types) {
      StatusOr<int32_t> r = Typed(s, t, path);
      if (!r.ok()) return r;
      alts.push_back({Symbol::Rule(*r)});
    }
    return g_->Choice(std::move(alts));
  }

  StatusOr<int32_t> Typed(const ojson& s, const std::string& type, const std::string& path) {
    if (type == "string") return StringSchema(s, path);
    if (type == "integer") return Integer();
    if (type == "number") return Number();
    if (type == "boolean") return g_->Choice({Literal("true"), Literal("false")});
    if (type == "null") return g_->LiteralRule("null");
    if (type == "object") return ObjectSchema(s, path);
    if (type == "array") return ArraySchema(s, path);
    return InvalidArgument(Join(path, "type") + ": unknown type '" + type + "'");
  }

  Status Count(const ojson& s, const char* key, const std::string& path, int64_t* out) {
    if (!s.contains(key)) return Status::Ok();
    const ojson& v = s[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0) {
      return InvalidArgument(Join(path, key) + ": must be a non-negative integer");
    }
    if (v.get<int64_t>() > kMaxCount) {
      return InvalidArgument(Join(path, key) + ": values above 10000 are not supported");
    }
    *out = v.get<int64_t>();
    return Status::Ok();
  }

  StatusOr<int32_t> StringSchema(const ojson& s, const std::string& path) {
    int64_t min = 0, max = -1;
    TERN_RETURN_IF_ERROR(Count(s, "minLength", path, &min));
    TERN_RETURN_IF_ERROR(Count(s, "maxLength", path, &max));
    if (max >= 0 && max < min) return InvalidArgument(path + ": maxLength below minLength");
    const bool lengths = s.contains("minLength") || s.contains("maxLength");
    std::string pattern;
    if (s.contains("format")) {
      if (!s["format"].is_string() || !Formats().count(s["format"].get<std::string>())) {
        return InvalidArgument(Join(path, "format") +
                               ": unsupported format (supported: date, time, date-time, uuid, email)");
      }
      pattern = Formats().at(s["format"].get<std::string>());
    }
    if (s.contains("pattern")) {
      if (!s["pattern"].is_string()) return InvalidArgument(Join(path, "pattern") + ": must be a string");
      if (!pattern.empty()) return InvalidArgument(path + ": pattern together with format is not supported");
      pattern = s["pattern"].get<std::string>();
    }
    if (!pattern.empty()) {
      if (lengths) return InvalidArgument(path + ": pattern or format together with minLength/maxLength is not supported");
      StatusOr<int32_t> body = AddRegexRule(pattern, RegexTarget::kJsonString, g_);
      if (!body.ok()) return body.status().WithContext(Join(path, "pattern"));
      return Quoted(*body);
    }
    if (!lengths) return String();
    return Quoted(g_->Repeat(StringChar(), (int32_t)min, (int32_t)max));
  }

  StatusOr<int32_t> ArraySchema(const ojson& s, const std::string& path) {
    int64_t min = 0, max = -1;
    TERN_RETURN_IF_ERROR(Count(s, "minItems", path, &min));
    TERN_RETURN_IF_ERROR(Count(s, "maxItems", path, &max));
    if (max >= 0 && max < min) return InvalidArgument(path + ": maxItems below minItems");
    int32_t item = -1;
    if (s.contains("items")) {
      if (s["items"].is_array()) return InvalidArgument(Join(path, "items") + ": tuple form (an array) is not supported");
      StatusOr<int32_t> r = Compile(s["items"], Join(path, "items"));
      if (!r.ok()) return r;
      item = *r;
    } else {
      item = Value();
    }
    return Bracketed('[', g_->SeparatedList(item, ", ", (int32_t)min, (int32_t)max), ']');
  }

  struct Property {
    std::string key;
    int32_t value = -1;
    bool required = false;
  };

  StatusOr<int32_t> ObjectSchema(const ojson& s, const std::string& path) {
    std::vector<Property> props;
    if (s.contains("properties")) {
      if (!s["properties"].is_object()) return InvalidArgument(Join(path, "properties") + ": must be an object");
      for (const auto& [key, sub] : s["properties"].items()) {
        StatusOr<int32_t> r = Compile(sub, Join(Join(path, "properties"), key));
        if (!r.ok()) return r;
        props.push_back({key, *r, false});
      }
    }
    const ojson* extra = s.contains("additionalProperties") ? &s["additionalProperties"] : nullptr;
    const bool extra_false = extra && extra->is_boolean() && !extra->get<bool>();
    if (s.contains("required")) {
      const ojson& req = s["required"];
      if (!req.is_array()) return InvalidArgument(Join(path, "required") + ": must be an array of names");
      for (const ojson& name : req) {
        if (!name.is_string()) return InvalidArgument(Join(path, "required") + ": must be an array of names");
        const std::string key = name.get<std::string>();
        auto it = std::find_if(props.begin(), props.end(), [&](const Property& p) { return p.key == key; });
        if (it != props.end()) {
          it->required = true;
        } else if (extra_false) {
          return InvalidArgument(Join(path, "required") + ": '" + key +
                                 "' is not in properties and additionalProperties is false");
        } else {
          int32_t v = Value();
          if (extra && extra->is_object()) {
            StatusOr<int32_t> r = Compile(*extra, Join(path, "additionalProperties"));
            if (!r.ok()) return r;
            v = *r;
          }
          props.push_back({key, v, true});
        }
      }
    }
    if (props.empty() && extra && !extra_false && !(extra->is_boolean() && extra->get<bool>())) {
      // A map: any keys, values of the additionalProperties schema.
      StatusOr<int32_t> v = Compile(*extra, Join(path, "additionalProperties"));
      if (!v.ok()) return v;
      const int32_t member = g_->Choice({{Symbol::Rule(String()), Symbol::Byte(':'), Symbol::Byte(' '),
                                          Symbol::Rule(*v)}});
      return Bracketed('{', g_->SeparatedList(member, ", ", 0, -1), '}');
    }
    if (props.empty() && !extra) return Object();  // {"type": "object"}: any object
    return Bracketed('{', Members(props), '}');
  }

  // S(i, first): the properties from i on, in order; optional ones may be
  // left out; ", " before each but the first written.
  int32_t Members(const std::vector<Property>& props) {
    const int32_t n = (int32_t)props.size();
    std::vector<int32_t> next_first(n + 1), next_rest(n + 1);
    next_first[n] = next_rest[n] = g_->Choice(std::vector<Sequence>{Sequence{}});
    for (int32_t i = n - 1; i >= 0; --i) {
      Sequence kv = Literal(DumpCompact(ojson(props[i].key)) + ": ");
      kv.push_back(Symbol::Rule(props[i].value));
      for (bool first : {true, false}) {
        Sequence with = first ? Sequence{} : Literal(", ");
        with.insert(with.end(), kv.begin(), kv.end());
        with.push_back(Symbol::Rule(next_rest[i + 1]));
        std::vector<Sequence> alts = {with};
        if (!props[i].required) alts.push_back({Symbol::Rule(first ? next_first[i + 1] : next_rest[i + 1])});
        (first ? next_first : next_rest)[i] = g_->Choice(std::move(alts));
      }
    }
    return next_first[0];
  }

  StatusOr<int32_t> Enum(const ojson& values, const std::string& path) {
    if (!values.is_array() || values.empty()) return InvalidArgument(path + ": must be a non-empty array");
    std::vector<Sequence> alts;
    for (const ojson& v : values) alts.push_back(Literal(DumpCompact(v)));
    return g_->Choice(std::move(alts));
  }

  StatusOr<int32_t> Combination(const ojson& s, const char* key, const std::string& path) {
    for (const auto& [k, v] : s.items()) {
      if (k != key && !Annotations().count(k)) {
        return InvalidArgument(path + ": '" + key + "' beside '" + k + "' is not supported");
      }
    }
    const ojson& list = s[key];
    if (!list.is_array() || list.empty()) return InvalidArgument(path + ": must be a non-empty array");
    if (std::string(key) == "allOf" && list.size() != 1) {
      return InvalidArgument(path + ": allOf with more than one schema is not supported");
    }
    std::vector<Sequence> alts;
    for (size_t i = 0; i < list.size(); ++i) {
      StatusOr<int32_t> r = Compile(list[i], path + "[" + std::to_string(i) + "]");
      if (!r.ok()) return r;
      alts.push_back({Symbol::Rule(*r)});
    }
    return g_->Choice(std::move(alts));
  }

  StatusOr<int32_t> Ref(const ojson& s, const std::string& path) {
    for (const auto& [k, v] : s.items()) {
      if (k != "$ref" && !Annotations().count(k)) {
        return InvalidArgument(path + ": '$ref' beside '" + k + "' is not supported");
      }
    }
    if (!s["$ref"].is_string()) return InvalidArgument(Join(path, "$ref") + ": must be a string");
    const std::string ref = s["$ref"].get<std::string>();
    auto it = refs_.find(ref);
    if (it != refs_.end()) return it->second;
    if (ref.empty() || ref[0] != '#') {
      return InvalidArgument(Join(path, "$ref") + ": only local references (\"#...\") are supported");
    }
    const ojson* target = nullptr;
    try {
      target = &root_.at(ojson::json_pointer(ref.substr(1)));
    } catch (const std::exception&) {
      return InvalidArgument(Join(path, "$ref") + ": '" + ref + "' does not resolve");
    }
    const int32_t r = g_->NewRule("ref " + ref);
    refs_[ref] = r;
    StatusOr<int32_t> body = Compile(*target, ref);
    if (!body.ok()) return body;
    g_->AddAlternative(r, {Symbol::Rule(*body)});
    return r;
  }

  const ojson& root_;
  Grammar* g_;
  int depth_ = 0;
  std::map<std::string, int32_t> refs_;
  int32_t string_char_ = -1, string_ = -1, integer_ = -1, number_ = -1, value_ = -1;
};

StatusOr<Grammar> Finish(Grammar g, StatusOr<int32_t> root) {
  if (!root.ok()) return root.status();
  TERN_RETURN_IF_ERROR(g.Finalize(*root));
  return g;
}

}  // namespace

std::string DumpCompact(const ojson& v) {
  if (v.is_object()) {
    std::string out = "{";
    bool first = true;
    for (const auto& [k, x] : v.items()) {
      if (!first) out += ", ";
      first = false;
      out += ojson(k).dump() + ": " + DumpCompact(x);
    }
    return out + "}";
  }
  if (v.is_array()) {
    std::string out = "[";
    for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + DumpCompact(v[i]);
    return out + "]";
  }
  return v.dump(-1, ' ', false, ojson::error_handler_t::replace);
}

StatusOr<Grammar> CompileJsonSchema(const ojson& schema, std::string_view prefix,
                                    std::string_view suffix) {
  Grammar g;
  SchemaCompiler c(schema, &g);
  StatusOr<int32_t> root = c.Compile(schema, "schema");
  if (root.ok() && !(prefix.empty() && suffix.empty())) {
    Sequence seq = Literal(prefix);
    seq.push_back(Symbol::Rule(*root));
    for (const Symbol& s : Literal(suffix)) seq.push_back(s);
    root = g.Choice({std::move(seq)});
  }
  return Finish(std::move(g), root);
}

StatusOr<Grammar> CompileJsonObject() {
  Grammar g;
  SchemaCompiler c(ojson::object(), &g);
  const int32_t root = c.Object();
  return Finish(std::move(g), root);
}

StatusOr<Grammar> CompileJsonValue() {
  Grammar g;
  SchemaCompiler c(ojson::object(), &g);
  const int32_t root = c.Value();
  return Finish(std::move(g), root);
}

}  // namespace tern::grammar
