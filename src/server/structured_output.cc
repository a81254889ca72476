#include "server/structured_output.h"

#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"
#include "server/json_field.h"
#include "tokenizer/tokenizer.h"

namespace tern {
namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

// The schema at path in the body, with its key order.
std::string OrderedSchemaText(std::string_view body, std::initializer_list<const char*> path) {
  ojson v = ojson::parse(body.begin(), body.end(), nullptr, false);
  for (const char* key : path) v = ojson(v[key]);
  return v.dump();
}

std::optional<ApiError> ParseResponseFormat(const json& rf, std::string_view body,
                                            OutputConstraintSpec* out) {
  if (!rf.is_object()) return WrongType("response_format", "an object", rf);
  const json* type = Field(rf, "type");
  if (!type || !type->is_string()) {
    return ApiError::Invalid("'response_format.type' is required: \"text\", \"json_object\" or \"json_schema\"",
                             "response_format.type");
  }
  const std::string t = type->get<std::string>();
  out->param = "response_format";
  if (t == "text") return std::nullopt;
  if (t == "json_object") {
    out->kind = OutputConstraintSpec::Kind::kJsonObject;
    return std::nullopt;
  }
  if (t != "json_schema") {
    return ApiError::Invalid("'response_format.type' must be \"text\", \"json_object\" or \"json_schema\", got \"" +
                                 t + "\"",
                             "response_format.type");
  }
  const json* js = Field(rf, "json_schema");
  if (!js || !js->is_object()) {
    return ApiError::Invalid("response_format of type json_schema needs a 'json_schema' object",
                             "response_format.json_schema");
  }
  const json* schema = Field(*js, "schema");
  out->kind = OutputConstraintSpec::Kind::kJsonSchema;
  out->param = "response_format.json_schema.schema";
  if (!schema) {
    out->text = "{}";  // any JSON value, as OpenAI takes a missing schema
  } else if (!schema->is_object() && !schema->is_boolean()) {
    return WrongType(out->param, "an object", *schema);
  } else {
    out->text = OrderedSchemaText(body, {"response_format", "json_schema", "schema"});
  }
  return std::nullopt;
}

// A field whose string value is the constraint's text (a regex, a grammar).
std::optional<ApiError> ParseTextConstraint(const json& value, const char* param,
                                            OutputConstraintSpec::Kind kind, const char* want,
                                            OutputConstraintSpec* out) {
  if (!value.is_string()) return WrongType(param, want, value);
  out->kind = kind;
  out->param = param;
  out->text = value.get<std::string>();
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> ParseOutputConstraint(const json& obj, std::string_view body,
                                              OutputConstraintSpec* out) {
  *out = OutputConstraintSpec{};
  int n = 0;
  for (const char* key : {"response_format", "guided_json", "guided_regex", "guided_choice", "guided_grammar"}) {
    if (!Field(obj, key)) continue;
    if (++n > 1) {
      return ApiError::Invalid(std::string("'") + key +
                                   "' cannot be combined with another structured-output field",
                               key);
    }
  }
  if (const json* rf = Field(obj, "response_format")) return ParseResponseFormat(*rf, body, out);
  if (const json* g = Field(obj, "guided_json")) {
    out->kind = OutputConstraintSpec::Kind::kJsonSchema;
    out->param = "guided_json";
    if (g->is_string()) {
      ojson parsed = ojson::parse(g->get<std::string>(), nullptr, false);
      if (parsed.is_discarded()) return ApiError::Invalid("'guided_json' is not valid JSON", "guided_json");
      out->text = parsed.dump();
    } else if (g->is_object()) {
      out->text = OrderedSchemaText(body, {"guided_json"});
    } else {
      return WrongType("guided_json", "an object or a string", *g);
    }
    return std::nullopt;
  }
  if (const json* g = Field(obj, "guided_regex")) {
    return ParseTextConstraint(*g, "guided_regex", OutputConstraintSpec::Kind::kRegex, "a string",
                               out);
  }
  if (const json* g = Field(obj, "guided_choice")) {
    if (!g->is_array() || g->empty()) return WrongType("guided_choice", "a non-empty array of strings", *g);
    for (const json& c : *g) {
      if (!c.is_string() || c.get<std::string>().empty()) {
        return ApiError::Invalid("'guided_choice' must hold non-empty strings", "guided_choice");
      }
      out->choices.push_back(c.get<std::string>());
    }
    out->kind = OutputConstraintSpec::Kind::kChoice;
    out->param = "guided_choice";
    return std::nullopt;
  }
  if (const json* g = Field(obj, "guided_grammar")) {
    return ParseTextConstraint(*g, "guided_grammar", OutputConstraintSpec::Kind::kGrammar,
                               "a string (GBNF)", out);
  }
  return std::nullopt;
}

std::shared_ptr<const grammar::TokenTrie> BuildTokenTrie(const std::vector<std::string>& pieces,
                                                         std::vector<int32_t> eog_ids) {
  return std::make_shared<const grammar::TokenTrie>(pieces, std::move(eog_ids));
}

std::shared_ptr<const grammar::TokenTrie> TokenTrieFor(const Tokenizer& tok) {
  std::vector<std::string> pieces(tok.vocab_size());
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    if (!tok.IsEog(id)) pieces[id] = tok.TokenToPiece(id, /*skip_special=*/true);
  }
  return BuildTokenTrie(pieces, tok.eog_ids());
}

namespace {

StatusOr<grammar::Grammar> Compile(const OutputConstraintSpec& spec) {
  using Kind = OutputConstraintSpec::Kind;
  switch (spec.kind) {
    case Kind::kJsonObject:
      return grammar::CompileJsonObject();
    case Kind::kJsonSchema: {
      ojson schema = ojson::parse(spec.text, nullptr, false);
      if (schema.is_discarded()) return InvalidArgument("the schema is not valid JSON");
      return grammar::CompileJsonSchema(schema, spec.prefix, spec.suffix);
    }
    case Kind::kRegex: {
      grammar::Grammar g;
      StatusOr<int32_t> root = grammar::AddRegexRule(spec.text, grammar::RegexTarget::kRaw, &g);
      if (!root.ok()) return root.status();
      TERN_RETURN_IF_ERROR(g.Finalize(*root));
      return g;
    }
    case Kind::kChoice: {
      grammar::Grammar g;
      std::vector<grammar::Sequence> alts;
      for (const std::string& c : spec.choices) alts.push_back(grammar::Literal(c));
      const int32_t root = g.Choice(std::move(alts));
      TERN_RETURN_IF_ERROR(g.Finalize(root));
      return g;
    }
    case Kind::kGrammar:
      return grammar::CompileGbnf(spec.text);
    case Kind::kNone:
      break;
  }
  return InvalidArgument("no constraint");
}

std::string CacheKey(const OutputConstraintSpec& spec) {
  std::string key = std::to_string((int)spec.kind) + ":" + spec.text + "\n" + spec.prefix + "\n" + spec.suffix;
  for (const std::string& c : spec.choices) key += "\n" + std::to_string(c.size()) + ":" + c;
  return key;
}

}  // namespace

std::optional<ApiError> ResolveConstraint(const OutputConstraintSpec& spec, int32_t max_tokens,
                                          grammar::ConstraintCache* cache,
                                          std::shared_ptr<const TokenConstraint>* out) {
  out->reset();
  if (spec.kind == OutputConstraintSpec::Kind::kNone) return std::nullopt;
  if (!cache) {
    return ApiError::Invalid("structured outputs are not available on this server", spec.param);
  }
  StatusOr<std::shared_ptr<const grammar::GrammarConstraint>> c =
      cache->Get(CacheKey(spec), [&] { return Compile(spec); });
  if (!c.ok()) return ApiError::Invalid("'" + spec.param + "': " + c.status().message(), spec.param);
  if (!(*c)->FitsIn(max_tokens)) {
    return ApiError::Invalid("'" + spec.param + "': the shortest output it allows is " +
                                 std::to_string((*c)->MinOutputBytes()) +
                                 " bytes, which may need more tokens than max_tokens (" +
                                 std::to_string(max_tokens) + "); raise max_tokens",
                             "max_tokens");
  }
  *out = *c;
  return std::nullopt;
}

}  // namespace tern
