// Robustness: truncated and mutated real chat templates must parse to an
// error or a template, and rendering must finish with text or an error —
// never a crash or a hang.
#include <random>

#include <gtest/gtest.h>

#include "jinja/chat_template.h"
#include "jinja/chat_template_testdata.h"

namespace tern {
namespace {

const std::vector<ChatMessage> kConversation = {
    {"system", "sys"}, {"user", "u1"}, {"assistant", "a1"}, {"user", "u2"}};

// Parses and, when that succeeds, renders; returns whether parsing succeeded.
bool ParseAndRender(const std::string& source) {
  StatusOr<Template> t = ParseChatTemplate(source);
  if (!t.ok()) {
    EXPECT_FALSE(t.status().message().empty());
    return false;
  }
  StatusOr<std::string> out = RenderChatTemplate(*t, kConversation, true, "<s>", "</s>");
  if (!out.ok()) {
    EXPECT_FALSE(out.status().message().empty());
  }
  return true;
}

TEST(TemplateFuzzTest, EveryRealTemplateParsesWhole) {
  for (std::string_view tmpl : testdata::kAllChatTemplates) {
    EXPECT_TRUE(ParseChatTemplate(std::string(tmpl)).ok()) << tmpl.substr(0, 80);
  }
}

TEST(TemplateFuzzTest, RandomTruncationsNeverCrash) {
  std::mt19937 rng(1234);
  int parsed = 0, rejected = 0;
  for (std::string_view tmpl : testdata::kAllChatTemplates) {
    std::uniform_int_distribution<size_t> cut(0, tmpl.size());
    for (int i = 0; i < 60; ++i) {
      if (ParseAndRender(std::string(tmpl.substr(0, cut(rng))))) {
        ++parsed;
      } else {
        ++rejected;
      }
    }
  }
  // Both outcomes occur: short prefixes are often valid, most cuts land inside a tag.
  EXPECT_GT(parsed, 0);
  EXPECT_GT(rejected, 0);
}

TEST(TemplateFuzzTest, RandomMutationsNeverCrash) {
  std::mt19937 rng(99);
  const std::string alphabet = "{}%#-+()[]'\"|.,:=~*/ \nabxy01";
  for (std::string_view tmpl : testdata::kAllChatTemplates) {
    for (int i = 0; i < 40; ++i) {
      std::string source(tmpl);
      int edits = 1 + static_cast<int>(rng() % 4);
      for (int e = 0; e < edits && !source.empty(); ++e) {
        size_t pos = rng() % source.size();
        char c = alphabet[rng() % alphabet.size()];
        switch (rng() % 3) {
          case 0: source[pos] = c; break;
          case 1: source.insert(source.begin() + static_cast<std::ptrdiff_t>(pos), c); break;
          default: source.erase(pos, 1 + rng() % 8); break;
        }
      }
      ParseAndRender(source);
    }
  }
}

TEST(TemplateFuzzTest, DeepMacroRecursionInsideNestedBlocksIsBounded) {
  std::string body;
  for (int i = 0; i < 100; ++i) body += "{% if true %}";
  body += "{{ f() }}";
  for (int i = 0; i < 100; ++i) body += "{% endif %}";
  StatusOr<std::string> out =
      RenderChatTemplate("{% macro f() %}" + body + "{% endmacro %}{{ f() }}", kConversation, true, "", "");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kResourceExhausted);
}

TEST(TemplateFuzzTest, PathologicalInputsAreRejectedOrBounded) {
  EXPECT_FALSE(ParseAndRender(std::string(100000, '{')));
  EXPECT_FALSE(ParseAndRender("{{" + std::string(20000, '[')));
  EXPECT_FALSE(ParseAndRender("{{ " + std::string(20000, '-') + "1 }}"));
  EXPECT_FALSE(ParseAndRender("{{ " + std::string(20000, '(') + " }}"));
  std::string nots = "{{ ";
  for (int i = 0; i < 5000; ++i) nots += "not ";
  EXPECT_FALSE(ParseAndRender(nots + "x }}"));
  // Nested loops whose product is large hit the iteration limit, and a
  // doubling string hits the size limit, as errors rather than hangs or
  // allocation failures.
  TemplateOptions small = ChatTemplateOptions();
  small.max_loop_iterations = 20000;
  small.max_output_bytes = 1 << 16;
  StatusOr<Template> loops = Template::Parse(
      "{% for a in range(1000) %}{% for b in range(1000) %}{% for c in range(1000) %}{% endfor %}"
      "{% endfor %}{% endfor %}",
      small);
  ASSERT_TRUE(loops.ok());
  StatusOr<std::string> out = loops->Render(Value::Dict());
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kResourceExhausted);
  StatusOr<Template> doubling = Template::Parse(
      "{% set ns = namespace(s='xxxxxxxxxxxxxxxx') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}"
      "{% endfor %}",
      small);
  ASSERT_TRUE(doubling.ok());
  out = doubling->Render(Value::Dict());
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kResourceExhausted);
}

// A container cannot be made to hold itself (repr, tojson and equality of a
// cycle would recurse without end): every mutator refuses, and the render
// fails with a message instead of overflowing the stack.
TEST(TemplateFuzzTest, ContainersCannotHoldThemselves) {
  const char* cycles[] = {
      "{% set x = [1] %}{% set _ = x.append(x) %}{{ x|tojson }}",
      "{% set x = [1] %}{% set y = [[x]] %}{% set _ = x.append(y) %}{{ x }}",
      "{% set x = [1] %}{% set _ = x.extend([x]) %}{{ x }}",
      "{% set d = {} %}{% set _ = d.update({'a': d}) %}{{ d|tojson }}",
      "{% set d = {} %}{% set _ = d.update(a=[d]) %}{{ d == d }}",
      "{% set ns = namespace(a=1) %}{% set ns.me = [ns] %}{{ ns.me|tojson }}",
  };
  for (const char* source : cycles) {
    StatusOr<Template> t = Template::Parse(source, ChatTemplateOptions());
    ASSERT_TRUE(t.ok()) << source;
    StatusOr<std::string> out = t->Render(Value::Dict());
    ASSERT_FALSE(out.ok()) << source;
    EXPECT_NE(out.status().message().find("cannot contain itself"), std::string::npos)
        << out.status().message();
  }
  // Sharing without a cycle is fine.
  StatusOr<Template> shared = Template::Parse(
      "{% set x = [1] %}{% set y = [x, x] %}{% set _ = y.append(x) %}{{ y|tojson }}",
      ChatTemplateOptions());
  ASSERT_TRUE(shared.ok());
  StatusOr<std::string> out = shared->Render(Value::Dict());
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(*out, "[[1], [1], [1]]");
}

// A loop that rebuilds a big string each turn keeps every value and the
// output small, yet would run for minutes: the work budget stops it.
TEST(TemplateFuzzTest, WorkBudgetStopsRepeatedLargeBuilds) {
  TemplateOptions o = ChatTemplateOptions();
  o.max_work_bytes = 16 << 20;
  StatusOr<Template> t = Template::Parse(
      "{% for i in range(100000) %}{% set x = 'a' * 100000 %}{% endfor %}done", o);
  ASSERT_TRUE(t.ok());
  StatusOr<std::string> out = t->Render(Value::Dict());
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(out.status().message().find("work over the limit"), std::string::npos);
  // The same loop with a small build stays within the budget.
  StatusOr<Template> small = Template::Parse(
      "{% for i in range(1000) %}{% set x = 'a' * 100 %}{% endfor %}done", o);
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(small->Render(Value::Dict()).value(), "done");
}

}  // namespace
}  // namespace tern
