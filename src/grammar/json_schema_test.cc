#include "grammar/json_schema.h"

#include <gtest/gtest.h>

#include <random>

#include "grammar/grammar_test_util.h"

namespace tern::grammar {
namespace {

using ojson = nlohmann::ordered_json;

Grammar Compile(const char* schema) {
  StatusOr<Grammar> g = CompileJsonSchema(ojson::parse(schema));
  EXPECT_TRUE(g.ok()) << g.status().message();
  return std::move(g).value();
}

std::string Error(const char* schema) {
  StatusOr<Grammar> g = CompileJsonSchema(ojson::parse(schema));
  EXPECT_FALSE(g.ok()) << schema;
  return g.ok() ? "" : g.status().message();
}

// A random string of the grammar's language: random allowed bytes, and once
// past `soft` bytes only bytes that keep the shortest completion shrinking.
std::string RandomOutput(const Grammar& g, std::mt19937& rng, size_t soft = 60) {
  State s = g.Start(), next;
  std::string out;
  while (true) {
    const ByteSet bytes = g.NextBytes(s);
    if (g.CanEnd(s) && (bytes.none() || out.size() > soft || rng() % 8 == 0)) return out;
    std::vector<uint8_t> choices;
    for (int b = 0; b < 256; ++b) {
      if (!bytes[b]) continue;
      g.Advance(s, (uint8_t)b, &next);
      if (out.size() > soft && g.MinBytes(next) >= g.MinBytes(s)) continue;
      choices.push_back((uint8_t)b);
    }
    EXPECT_FALSE(choices.empty());
    if (choices.empty()) return out;
    const uint8_t b = choices[rng() % choices.size()];
    out += (char)b;
    g.Advance(s, b, &next);
    s.swap(next);
  }
}

TEST(JsonSchemaTest, ObjectsFollowPropertyOrderAndRequired) {
  Grammar g = Compile(R"({"type": "object", "properties": {
      "name": {"type": "string"}, "age": {"type": "integer"}, "tags": {"type": "array",
      "items": {"enum": ["a", "b"]}, "minItems": 1, "maxItems": 2}},
      "required": ["name", "tags"], "additionalProperties": false})");
  ExpectLanguage(
      g, {R"({"name": "x", "age": 3, "tags": ["a"]})", R"({"name": "x", "tags": ["a", "b"]})"},
      {R"({"name": "x", "age": 3})",                 // tags required
       R"({"name": "x", "tags": []})",               // minItems
       R"({"name": "x", "tags": ["a", "b", "a"]})",  // maxItems
       R"({"name": "x", "tags": ["c"]})",            // enum
       R"({"tags": ["a"], "name": "x"})",            // order
       R"({"name": "x", "age": 3.5, "tags": ["a"]})"});
}

TEST(JsonSchemaTest, RandomOutputsParseAndKeepTheirShape) {
  Grammar g = Compile(R"({"type": "object", "properties": {
      "id": {"type": "integer"}, "score": {"type": "number"}, "ok": {"type": "boolean"},
      "nick": {"type": ["string", "null"], "maxLength": 5},
      "code": {"type": "string", "pattern": "^[A-Z]{2}-\\d{3}$"},
      "when": {"type": "string", "format": "date"},
      "child": {"type": "object", "properties": {"v": {"const": [1, {"a": null}]}}, "required": ["v"]}},
      "required": ["id", "score", "ok", "nick", "code", "when", "child"]})");
  std::mt19937 rng(7);
  for (int i = 0; i < 200; ++i) {
    const std::string out = RandomOutput(g, rng);
    ojson v = ojson::parse(out, nullptr, false);
    ASSERT_FALSE(v.is_discarded()) << out;
    EXPECT_TRUE(v["id"].is_number_integer()) << out;
    EXPECT_TRUE(v["score"].is_number()) << out;
    EXPECT_TRUE(v["nick"].is_null() || v["nick"].get<std::string>().size() <= 5 * 4) << out;
    const std::string code = v["code"].get<std::string>();
    ASSERT_EQ(code.size(), 6u) << out;
    EXPECT_EQ(code[2], '-');
    EXPECT_EQ(v["child"]["v"], ojson::parse(R"([1, {"a": null}])"));
    EXPECT_EQ(v["when"].get<std::string>().size(), 10u);
  }
}

TEST(JsonSchemaTest, JsonObjectAndRecursiveRefs) {
  StatusOr<Grammar> obj = CompileJsonObject();
  ASSERT_TRUE(obj.ok());
  ExpectLanguage(*obj, {R"({"a": [1, -2.5e3, "x\n\u00e9"], "b": {"c": true}})"},
                 {R"([1])", R"({"a":1})"});  // the compact form has ": "
  std::mt19937 rng(3);
  for (int i = 0; i < 100; ++i) {
    const std::string out = RandomOutput(*obj, rng);
    ojson v = ojson::parse(out, nullptr, false);
    ASSERT_FALSE(v.is_discarded()) << out;
    EXPECT_TRUE(v.is_object());
  }
  Grammar tree = Compile(R"({"$defs": {"node": {"type": "object", "properties": {
      "v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
      "required": ["v"]}}, "$ref": "#/$defs/node"})");
  EXPECT_TRUE(tree.Accepts(R"({"v": 1, "kids": [{"v": 2}, {"v": 3, "kids": []}]})"));
  EXPECT_FALSE(tree.Accepts(R"({"v": 1, "kids": [{"w": 2}]})"));
}

TEST(JsonSchemaTest, UnsupportedKeywordsAreNamed) {
  EXPECT_NE(Error(R"({"type": "integer", "minimum": 3})").find("'minimum'"), std::string::npos);
  EXPECT_NE(Error(R"({"properties": {"a": {"not": {}}}})").find("schema.properties.a"),
            std::string::npos);
  EXPECT_NE(Error(R"({"type": "strin"})").find("unknown type 'strin'"), std::string::npos);
  EXPECT_NE(Error(R"({"$ref": "#/$defs/missing"})").find("does not resolve"), std::string::npos);
  EXPECT_NE(Error(R"({"type": "string", "format": "ipv6"})").find("format"), std::string::npos);
  EXPECT_NE(Error(R"({"$defs": {"a": {"type": "array", "items": {"$ref": "#/$defs/a"}, "minItems": 1}},
                      "$ref": "#/$defs/a"})").find("never finish"), std::string::npos);
}

TEST(JsonSchemaTest, DumpCompactWritesTheGrammarsForm) {
  EXPECT_EQ(DumpCompact(ojson::parse(R"({"b": [1, "x"], "a": null})")), R"({"b": [1, "x"], "a": null})");
}

}  // namespace
}  // namespace tern::grammar
