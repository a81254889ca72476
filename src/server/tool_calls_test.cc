#include "server/tool_calls.h"

#include <gtest/gtest.h>

#include "grammar/json_schema.h"
#include "jinja/chat_template.h"
#include "jinja/chat_template_testdata.h"
#include "server/tool_calls_testdata.h"

namespace tern {
namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

ToolsRequest Tools(ToolsRequest::Choice choice = ToolsRequest::Choice::kAuto, std::string name = "") {
  const std::string body = "{\"tools\": " + std::string(testdata::kToolsJson) + "}";
  ToolsRequest t;
  EXPECT_FALSE(ParseTools(json::parse(body), body, &t).has_value());
  t.choice = choice;
  t.choice_name = std::move(name);
  return t;
}

// The round trip of scripts/gen_tool_renders.py as the server builds it.
std::vector<ChatMessage> RoundTrip() {
  std::vector<ApiMessage> api(4);
  api[0] = {"system", "You are a helpful assistant."};
  api[1] = {"user", "What is the weather in Paris?"};
  api[2].role = "assistant";
  api[2].content_null = true;
  api[2].tool_calls_json = R"([{"id": "abc123XYZ", "type": "function", "function": {"name": "get_weather",
      "arguments": "{\"location\": \"Paris\", \"unit\": \"celsius\"}"}}])";
  api[3] = {"tool", "{\"temp\": 21}"};
  api[3].tool_call_id = "abc123XYZ";
  api[3].name = "get_weather";
  std::vector<ChatMessage> chat;
  for (const ApiMessage& m : api) chat.push_back({m.role, m.content, MessageExtras(m)});
  return chat;
}

TEST(ToolCallsTest, RoundTripRendersLikeJinja2OnTheRealTemplates) {
  const std::pair<std::string_view, std::string_view> cases[] = {
      {testdata::kQwen25, testdata::kQwen25ToolRender},
      {testdata::kLlama31, testdata::kLlama31ToolRender},
      {testdata::kMistralNemo, testdata::kMistralNemoToolRender},
  };
  for (const auto& [source, expected] : cases) {
    StatusOr<std::string> text =
        RenderChatTemplate(std::string(source), RoundTrip(), true, "<s>", "</s>", ToolsValue(Tools()));
    ASSERT_TRUE(text.ok()) << text.status().message();
    EXPECT_EQ(*text, expected);
  }
}

TEST(ToolCallsTest, FormatFollowsTheTemplate) {
  EXPECT_EQ(DetectToolCallFormat(testdata::kQwen25), ToolCallFormat::kHermes);
  EXPECT_EQ(DetectToolCallFormat(testdata::kLlama31), ToolCallFormat::kLlama3);
  EXPECT_EQ(DetectToolCallFormat(testdata::kMistralNemo), ToolCallFormat::kMistral);
  EXPECT_EQ(DetectToolCallFormat(testdata::kChatml), ToolCallFormat::kHermes);
}

TEST(ToolCallsTest, ParsesEachFormat) {
  ParsedToolOutput h = ParseToolCalls(
      "Let me look.\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"UTC\"}}\n</tool_call>\n"
      "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Oslo\"}}</tool_call>",
      ToolCallFormat::kHermes);
  ASSERT_EQ(h.calls.size(), 2u);
  EXPECT_EQ(h.content, "Let me look.");
  EXPECT_EQ(h.calls[0].name, "get_time");
  EXPECT_EQ(json::parse(h.calls[0].arguments), json::parse(R"({"tz": "UTC"})"));
  EXPECT_EQ(h.calls[0].id.rfind("call_", 0), 0u);
  EXPECT_NE(h.calls[0].id, h.calls[1].id);

  ParsedToolOutput l = ParseToolCalls("<|python_tag|>{\"name\": \"get_time\", \"parameters\": {\"tz\": \"CET\"}}",
                                      ToolCallFormat::kLlama3);
  ASSERT_EQ(l.calls.size(), 1u);
  EXPECT_EQ(json::parse(l.calls[0].arguments)["tz"], "CET");

  ParsedToolOutput m = ParseToolCalls("[{\"name\": \"get_time\", \"arguments\": {\"tz\": \"EST\"}}]",
                                      ToolCallFormat::kMistral);
  ASSERT_EQ(m.calls.size(), 1u);
  EXPECT_TRUE(m.content.empty());

  ParsedToolOutput broken = ParseToolCalls("<tool_call>{\"name\": ", ToolCallFormat::kHermes);
  EXPECT_TRUE(broken.calls.empty());
  EXPECT_EQ(broken.content, "<tool_call>{\"name\": ");
  EXPECT_TRUE(ParseToolCalls("{not json", ToolCallFormat::kLlama3).calls.empty());
}

TEST(ToolCallsTest, StreamHoldsBackWhatMayStartACall) {
  ToolCallStream s(ToolCallFormat::kHermes);
  EXPECT_EQ(s.Push("Hi <tool"), "Hi ");
  EXPECT_EQ(s.Push("_call>{\"name\": \"get_time\", \"arguments\": {}}"), "");
  ParsedToolOutput end = s.Finish();
  ASSERT_EQ(end.calls.size(), 1u);
  EXPECT_EQ(end.content, "");

  ToolCallStream plain(ToolCallFormat::kHermes);
  EXPECT_EQ(plain.Push("a <to"), "a ");
  EXPECT_EQ(plain.Push("y"), "<toy");

  ToolCallStream llama(ToolCallFormat::kLlama3);
  EXPECT_EQ(llama.Push("  "), "");
  EXPECT_EQ(llama.Push("Sure"), "  Sure");
  EXPECT_EQ(llama.Push("!"), "!");
}

TEST(ToolCallsTest, RequiredAndNamedConstrainToTheFunctionsSchemas) {
  OutputConstraintSpec spec = ToolCallConstraint(Tools(ToolsRequest::Choice::kRequired), ToolCallFormat::kHermes);
  ASSERT_EQ(spec.kind, OutputConstraintSpec::Kind::kJsonSchema);
  StatusOr<grammar::Grammar> g = grammar::CompileJsonSchema(ojson::parse(spec.text), spec.prefix, spec.suffix);
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_TRUE(g->Accepts("<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"UTC\"}}\n</tool_call>"));
  EXPECT_TRUE(g->Accepts("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"x\", \"unit\": \"celsius\"}}\n</tool_call>"));
  EXPECT_FALSE(g->Accepts("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"x\"}}\n</tool_call>"));

  spec = ToolCallConstraint(Tools(ToolsRequest::Choice::kNamed, "get_time"), ToolCallFormat::kLlama3);
  g = grammar::CompileJsonSchema(ojson::parse(spec.text), spec.prefix, spec.suffix);
  ASSERT_TRUE(g.ok());
  EXPECT_TRUE(g->Accepts("{\"name\": \"get_time\", \"parameters\": {\"tz\": \"UTC\"}}"));
  EXPECT_FALSE(g->Accepts("{\"name\": \"get_weather\", \"parameters\": {\"location\": \"x\", \"unit\": \"celsius\"}}"));

  EXPECT_EQ(ToolCallConstraint(Tools(), ToolCallFormat::kHermes).kind, OutputConstraintSpec::Kind::kNone);

  // A $ref into the function's own $defs still resolves once embedded.
  ToolsRequest refs = Tools(ToolsRequest::Choice::kRequired);
  refs.parameters_json[1] = R"({"$defs": {"zone": {"enum": ["UTC", "CET"]}}, "type": "object",
      "properties": {"tz": {"$ref": "#/$defs/zone"}}, "required": ["tz"]})";
  spec = ToolCallConstraint(refs, ToolCallFormat::kHermes);
  g = grammar::CompileJsonSchema(ojson::parse(spec.text), spec.prefix, spec.suffix);
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_TRUE(g->Accepts("<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"CET\"}}\n</tool_call>"));
  EXPECT_FALSE(g->Accepts("<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"EST\"}}\n</tool_call>"));
}

TEST(ToolCallsTest, ToolChoiceErrorsNameTheField) {
  auto parse = [](const std::string& body) {
    ToolsRequest t;
    std::optional<ApiError> e = ParseTools(json::parse(body), body, &t);
    return e ? e->message + " [" + e->param + "]" : std::string("ok");
  };
  const std::string tools = std::string(testdata::kToolsJson);
  EXPECT_NE(parse("{\"tools\": " + tools + ", \"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": \"nope\"}}}")
                .find("'nope', which is not in 'tools' [tool_choice]"),
            std::string::npos);
  EXPECT_NE(parse("{\"tools\": " + tools + ", \"tool_choice\": \"sometimes\"}").find("[tool_choice]"), std::string::npos);
  EXPECT_NE(parse("{\"tool_choice\": \"required\"}").find("no 'tools'"), std::string::npos);
  EXPECT_NE(parse("{\"tools\": [{\"type\": \"function\"}]}").find("tools[0].function.name"), std::string::npos);
  EXPECT_EQ(parse("{\"tools\": " + tools + ", \"tool_choice\": \"auto\", \"parallel_tool_calls\": false}"), "ok");
}

}  // namespace
}  // namespace tern
