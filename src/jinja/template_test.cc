#include "jinja/template.h"

#include <gtest/gtest.h>

#include <initializer_list>

namespace tern {
namespace {

std::string Render(std::string_view source, const Value& context = Value::Dict(),
                   TemplateOptions options = {}) {
  StatusOr<Template> t = Template::Parse(source, options);
  if (!t.ok()) return "PARSE ERROR: " + t.status().message();
  StatusOr<std::string> out = t->Render(context);
  if (!out.ok()) return "RENDER ERROR: " + out.status().message();
  return *out;
}

Status RenderStatus(std::string_view source, const Value& context = Value::Dict(),
                    TemplateOptions options = {}) {
  StatusOr<Template> t = Template::Parse(source, options);
  if (!t.ok()) return t.status();
  StatusOr<std::string> out = t->Render(context);
  return out.ok() ? Status::Ok() : out.status();
}

// Parsing or rendering `source` fails with a message that has every needle.
void ExpectRenderError(std::string_view source, std::initializer_list<std::string_view> needles) {
  const Status s = RenderStatus(source);
  ASSERT_FALSE(s.ok()) << source;
  for (std::string_view needle : needles) {
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
  }
}

// Each source renders to its expected text under `context` and `options`.
struct RenderCase {
  std::string_view source;
  std::string_view want;
};
void ExpectRenders(std::initializer_list<RenderCase> cases, const Value& context = Value::Dict(),
                   const TemplateOptions& options = {}) {
  for (const RenderCase& c : cases) EXPECT_EQ(Render(c.source, context, options), c.want) << c.source;
}

TemplateOptions HfOptions() {
  TemplateOptions o;
  o.trim_blocks = true;
  o.lstrip_blocks = true;
  return o;
}

// ------------------------------------------------------------ syntax

TEST(TemplateTest, RendersTextExpressionsAndComments) {
  EXPECT_EQ(Render("a{{ 1 + 2 }}b{# hidden #}c"), "a3bc");
  EXPECT_EQ(Render("{{ x }}", Value::Dict({{"x", Value("hi")}})), "hi");
}

TEST(TemplateTest, WhitespaceControlStripsBothSides) {
  ExpectRenders({
      {"a  \n {{- 'b' -}} \n  c", "abc"},
      {"a \n{%- if true -%}\n b \n{%- endif -%}\n c", "abc"},
      {"a \n{#- note -#}\n c", "ac"},
  });
}

TEST(TemplateTest, TrimAndLstripBlocksAreOffByDefault) {
  EXPECT_EQ(Render("{% if true %}\n  x\n{% endif %}\n"), "\n  x\n");
}

TEST(TemplateTest, TrimBlocksAndLstripBlocks) {
  EXPECT_EQ(Render("{% if true %}\n  x\n  {% endif %}\ny", Value::Dict(), HfOptions()), "  x\ny");
  // Expressions are not affected; a block after text on the same line keeps its spaces.
  EXPECT_EQ(Render("  {{ 1 }}\n  a {% if true %}b{% endif %}", Value::Dict(), HfOptions()), "  1\n  a b");
  // `+` disables lstrip for one tag, `+%}` disables trim.
  EXPECT_EQ(Render("  {%+ if true +%}\nx{% endif %}", Value::Dict(), HfOptions()), "  \nx");
}

TEST(TemplateTest, TrailingNewlineDroppedUnlessKept) {
  EXPECT_EQ(Render("x\n"), "x");
  TemplateOptions keep;
  keep.keep_trailing_newline = true;
  EXPECT_EQ(Render("x\n", Value::Dict(), keep), "x\n");
  EXPECT_EQ(Render("a\r\nb"), "a\nb");
}

TEST(TemplateTest, RawBlockIsLiteral) {
  EXPECT_EQ(Render("{% raw %}{{ x }}{% if %}{% endraw %}!"), "{{ x }}{% if %}!");
  EXPECT_EQ(Render("{%- raw -%}  {{a}}  {%- endraw %}"), "{{a}}");
  // lstrip_blocks reaches into the raw text before endraw; trim_blocks acts after endraw only.
  EXPECT_EQ(Render("  {% raw %}\n  {{ x }}\n  {% endraw %}\ny", Value::Dict(), HfOptions()), "\n  {{ x }}\ny");
}

// ------------------------------------------------------------ literals and access

TEST(TemplateTest, Literals) {
  ExpectRenders({
      {"{{ 'a\\n\\t\\'b\\u00e9' }}|{{ \"q\\\"\" }}", "a\n\t'bé|q\""},
      {"{{ 42 }} {{ -7 }} {{ 2.5 }} {{ 1e3 }} {{ 1_000 }}", "42 -7 2.5 1000.0 1000"},
      {"{{ true }} {{ False }} {{ none }} {{ None }}", "True False None None"},
      {"{{ [1, 'a', [true]] }}", "[1, 'a', [True]]"},
      {"{{ {'a': 1, 'b': [2]} }}", "{'a': 1, 'b': [2]}"},
      {"{{ ('x', 2) | join }}", "x2"},  // tuples behave as lists
      {"{{ 'ab' 'cd' }}", "abcd"},
  });
}

TEST(TemplateTest, AttributeSubscriptAndSlice) {
  Value ctx = Value::Dict({{"m", Value::Dict({{"role", Value("user")}})},
                           {"xs", Value::List({Value(1), Value(2), Value(3), Value(4)})},
                           {"s", Value("héllo")}});
  ExpectRenders({
      {"{{ m.role }} {{ m['role'] }} {{ m.missing }}|", "user user |"},
      {"{{ xs[0] }} {{ xs[-1] }} {{ xs.1 }} {{ xs[9] }}|", "1 4 2 |"},
      {"{{ xs[1:] }} {{ xs[:2] }} {{ xs[::-1] }} {{ xs[::2] }} {{ xs[-2:] }}",
       "[2, 3, 4] [1, 2] [4, 3, 2, 1] [1, 3] [3, 4]"},
      {"{{ s[1] }} {{ s[:-1] }} {{ s[::-1] }} {{ s | length }}", "é héll olléh 5"},
  }, ctx);
}

TEST(TemplateTest, UndefinedIsEmptyAndFalsy) {
  EXPECT_EQ(Render("[{{ nope }}][{{ nope.deeper['x'] }}]{% if nope %}yes{% else %}no{% endif %}"),
            "[][]no");
  EXPECT_EQ(Render("{% for x in nope %}{{ x }}{% else %}empty{% endfor %}"), "empty");
}

// ------------------------------------------------------------ operators

TEST(TemplateTest, ArithmeticFollowsPython) {
  ExpectRenders({
      {"{{ 7 + 2 }} {{ 7 - 2 }} {{ 7 * 2 }} {{ 7 / 2 }} {{ 7 // 2 }} {{ 7 % 3 }} {{ 2 ** 10 }}",
       "9 5 14 3.5 3 1 1024"},
      {"{{ -7 // 2 }} {{ -7 % 3 }} {{ 1 + 0.5 }} {{ 'ab' * 3 }} {{ [0] * 2 }}",
       "-4 2 1.5 ababab [0, 0]"},
      {"{{ 'a' ~ 1 ~ none ~ nope }} {{ 'x' + 'y' }} {{ [1] + [2] }}", "a1None xy [1, 2]"},
      {"{{ 2 + 3 * 4 }} {{ (2 + 3) * 4 }} {{ 2 ** 3 ** 2 }}", "14 20 64"},
  });
}

TEST(TemplateTest, ComparisonsLogicAndMembership) {
  ExpectRenders({
      {"{{ 1 == 1.0 }} {{ 'a' != 'b' }} {{ 2 < 3 }} {{ 3 <= 2 }} {{ 'b' > 'a' }} {{ 1 < 2 < 3 }}",
       "True True True False True True"},
      {"{{ true and 'x' }} {{ 0 or 'y' }} {{ not 0 }} {{ not 'a' }}", "x y True False"},
      {"{{ 'ell' in 'hello' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 3 not in [1] }}",
       "True True True True"},
      {"{{ 'a' if 1 > 2 else 'b' }}|{{ 'c' if false }}|", "b||"},
  });
}

TEST(TemplateTest, FilterBindsTighterThanPlus) {
  EXPECT_EQ(Render("{{ '[' + '  x  ' | trim + ']' }}"), "[x]");
}

// ------------------------------------------------------------ tests

TEST(TemplateTest, IsTests) {
  Value ctx = Value::Dict({{"d", Value::Dict()}, {"n", Value::None()}, {"s", Value("x")}});
  ExpectRenders({
      {"{{ d is defined }} {{ q is defined }} {{ q is undefined }} {{ n is none }}",
       "True False True True"},
      {"{{ s is string }} {{ 1 is number }} {{ 1.5 is number }} {{ d is mapping }}",
       "True True True True"},
      {"{{ [1] is iterable }} {{ s is iterable }} {{ 1 is iterable }} {{ [1] is sequence }}",
       "True True False True"},
      {"{{ 4 is even }} {{ 4 is odd }} {{ 3 is odd }} {{ true is true }} {{ 0 is false }}",
       "True False True True False"},
      {"{{ 'a' is equalto 'a' }} {{ 2 is eq(3) }} {{ n is not none }} {{ 6 is divisibleby 3 }}",
       "True False False True"},
  }, ctx);
}

// ------------------------------------------------------------ filters

TEST(TemplateTest, StringFilters) {
  ExpectRenders({
      {"{{ '  a b  ' | trim }}|{{ 'xaby' | trim('xy') }}|{{ 'aB' | upper }}|{{ 'aB' | lower }}",
       "a b|ab|AB|ab"},
      {"{{ 'hello world' | capitalize }}|{{ 'hello big-world' | title }}",
       "Hello world|Hello Big-World"},
      {"{{ 'aaa' | replace('a', 'b', 2) }}|{{ 'a<b>&' | escape }}|{{ 'x' | safe }}",
       "bba|a&lt;b&gt;&amp;|x"},
      {"{{ 'a\\nb\\n' | indent(2) }}|{{ 'a\\nb' | indent(2, true) }}", "a\n  b\n|  a\n  b"},
      {"{{ 12 | string + 'x' }}|{{ '42' | int + 1 }}|{{ 'z' | int }}|{{ '2.5' | float }}|{{ 3 | float }}",
       "12x|43|0|2.5|3.0"},
  });
}

TEST(TemplateTest, SequenceFilters) {
  ExpectRenders({
      {"{{ [1, 2, 3] | length }} {{ 'abc' | count }} {{ {'a': 1} | length }}", "3 3 1"},
      {"{{ [1, 2, 3] | first }} {{ [1, 2, 3] | last }} {{ 'xyz' | first }}", "1 3 x"},
      {"{{ [1, 2, 3] | join(', ') }}|{{ ['a', 'b'] | join }}", "1, 2, 3|ab"},
      {"{{ [3, 1, 2] | sort }} {{ [3, 1, 2] | sort(reverse=true) }} {{ ['b', 'A', 'c'] | sort }}",
       "[1, 2, 3] [3, 2, 1] ['A', 'b', 'c']"},
      {"{{ [1, 2, 1, 3] | unique | list }} {{ [1, 2] | reverse | list }} {{ 'ab' | reverse }}",
       "[1, 2, 3] [2, 1] ba"},
      {"{{ 'ab' | list }} {{ -3 | abs }} {{ 2.567 | round(2) }} {{ 2.5 | round }} {{ 3.5 | round }}",
       "['a', 'b'] 3 2.57 2.0 4.0"},
  });
}

TEST(TemplateTest, FilterEdgeCasesFollowJinja) {
  ExpectRenders({
      {"{{ 3 | round }} {{ 'a,b c-d' | title }} {{ 'a,b' .title() }}", "3 A,b C-D A,B"},
      {"{{ '1' is lower }} {{ 'ab1' is lower }} {{ 1.5 is even }} {{ 4.0 is even }}",
       "False True False True"},
      {"{{ 0 | map(attribute='x') | list }} {{ none | select | list }} {{ 5[1:] }}|", "[] [] |"},
      {"{{ 'hello, world_x 42' | wordcount }} {{ nope is iterable }}", "3 True"},
  });
}

TEST(TemplateTest, DefaultFilter) {
  EXPECT_EQ(Render("{{ x | default('d') }} {{ x | d('e') }} {{ '' | default('f') }} {{ '' | default('g', true) }}"),
            "d e  g");
}

TEST(TemplateTest, DictFilters) {
  Value ctx = Value::Dict({{"d", Value::Dict({{"b", Value(1)}, {"a", Value(2)}})}});
  ExpectRenders({
      {"{% for k, v in d | items %}{{ k }}={{ v }};{% endfor %}", "b=1;a=2;"},
      {"{{ d | keys }} {{ d | values }}", "['b', 'a'] [1, 2]"},
      {"{% for k, v in d | dictsort %}{{ k }}{{ v }}{% endfor %}", "a2b1"},
  }, ctx);
}

TEST(TemplateTest, ToJson) {
  Value ctx = Value::Dict({{"t", Value::Dict({{"name", Value("f")}, {"args", Value::List({Value(1), Value(true)})}})}});
  EXPECT_EQ(Render("{{ t | tojson }}", ctx), "{\"name\": \"f\", \"args\": [1, true]}");
  EXPECT_EQ(Render("{{ t | tojson(indent=2) }}", ctx),
            "{\n  \"name\": \"f\",\n  \"args\": [\n    1,\n    true\n  ]\n}");
  ExpectRenders({
      {"{{ 'a\"<' | tojson }}", "\"a\\\"<\""},
      {"{{ [] | tojson(indent=2) }} {{ {} | tojson(indent=2) }}", "[] {}"},
      {"{{ [[], {}] | tojson }}", "[[], {}]"},
  });
}

// dict() and namespace() take mappings, then keyword arguments (later keys win).
TEST(TemplateTest, DictAndNamespaceSetMappingsThenKeywords) {
  EXPECT_EQ(Render("{{ dict({'a': 1, 'b': 2}, b=3) | tojson }}"), "{\"a\": 1, \"b\": 3}");
  EXPECT_EQ(Render("{% set ns = namespace({'a': 1}, b=2) %}{{ ns.a }} {{ ns.b }}"), "1 2");
  ExpectRenderError("{{ dict(1) }}", {"dict(): positional argument must be a mapping"});
  ExpectRenderError("{{ namespace(1) }}", {"namespace(): positional argument must be a mapping"});
}

TEST(TemplateTest, MapSelectReject) {
  Value ctx = Value::Dict({{"ms", Value::List({Value::Dict({{"role", Value("user")}, {"n", Value(1)}}),
                                               Value::Dict({{"role", Value("assistant")}, {"n", Value(2)}}),
                                               Value::Dict({{"role", Value("user")}, {"n", Value(3)}})})}});
  ExpectRenders({
      {"{{ ms | map(attribute='n') | list }}", "[1, 2, 3]"},
      {"{{ ms | selectattr('role', 'equalto', 'user') | map(attribute='n') | join(',') }}", "1,3"},
      {"{{ ms | rejectattr('role', 'eq', 'user') | map(attribute='n') | list }}", "[2]"},
  }, ctx);
  ExpectRenders({
      {"{{ [1, 2, 3, 4] | select('odd') | list }} {{ [1, 2, 3] | reject('even') | list }}",
       "[1, 3] [1, 3]"},
      {"{{ [0, 1, '', 'a'] | select | list }} {{ ['a', 'b'] | map('upper') | join }}",
       "[1, 'a'] AB"},
      {"{{ ['x', 'y'] | reject('equalto', 'x') | join(', ') }}", "y"},
  });
}

// ------------------------------------------------------------ methods

TEST(TemplateTest, StringMethods) {
  ExpectRenders({
      {"[{{ '  a  '.strip() }}][{{ '  a  '.lstrip() }}][{{ '  a  '.rstrip() }}][{{ 'xxaxx'.strip('x') }}]",
       "[a][a  ][  a][a]"},
      {"{{ 'a b  c'.split() }} {{ 'a,b,,c'.split(',') }} {{ 'a,b,c'.split(',', 1) }}",
       "['a', 'b', 'c'] ['a', 'b', '', 'c'] ['a', 'b,c']"},
      {"{{ 'abc'.startswith('ab') }} {{ 'abc'.endswith('bc') }} {{ 'abc'.startswith(('x', 'a')) }}",
       "True True True"},
      {"{{ 'aB'.upper() }} {{ 'aB'.lower() }} {{ 'hi there'.title() }} {{ 'a-a'.replace('-', '+') }}",
       "AB ab Hi There a+a"},
      {"{{ 'x</think>y'.split('</think>')[-1] }}", "y"},
  });
}

TEST(TemplateTest, DictAndListMethods) {
  Value ctx = Value::Dict({{"d", Value::Dict({{"a", Value(1)}})}});
  EXPECT_EQ(Render("{{ d.get('a') }} {{ d.get('z') }} {{ d.get('z', 5) }} {{ d.keys() }} {{ d.values() }} {{ d.items() }}", ctx),
            "1 None 5 ['a'] [1] [['a', 1]]");
  EXPECT_EQ(Render("{% set xs = [1] %}{% set _ = xs.append(2) %}{{ xs }}"), "[1, 2]");
}

TEST(TemplateTest, TemplateDoesNotMutateCallerContext) {
  Value xs = Value::List({Value(1)});
  Value ctx = Value::Dict({{"xs", xs}});
  EXPECT_EQ(Render("{% set _ = xs.append(2) %}{{ xs | length }}", ctx), "2");
  EXPECT_EQ(xs.list().size(), 1u);
}

// ------------------------------------------------------------ statements

TEST(TemplateTest, IfElifElse) {
  const char* src = "{% if x == 1 %}one{% elif x == 2 %}two{% else %}many{% endif %}";
  EXPECT_EQ(Render(src, Value::Dict({{"x", Value(1)}})), "one");
  EXPECT_EQ(Render(src, Value::Dict({{"x", Value(2)}})), "two");
  EXPECT_EQ(Render(src, Value::Dict({{"x", Value(7)}})), "many");
}

TEST(TemplateTest, ForLoopVariables) {
  EXPECT_EQ(Render("{% for x in ['a', 'b', 'c'] %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}"
                   "{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ x }};{% endfor %}"),
            "103TrueFalse3a;212FalseFalse3b;321FalseTrue3c;");
  EXPECT_EQ(Render("{% for x in [1, 2, 3] %}{{ loop.cycle('o', 'e') }}{% endfor %}"), "oeo");
}

TEST(TemplateTest, ForElseUnpackingAndFilter) {
  ExpectRenders({
      {"{% for x in [] %}{{ x }}{% else %}none{% endfor %}", "none"},
      {"{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}{{ v }}{% endfor %}", "a1b2"},
      {"{% for x in [1, 2, 3, 4] if x is even %}{{ x }}/{{ loop.length }}{{ ',' if not loop.last }}{% endfor %}",
       "2/2,4/2"},
      {"{% for x in range(10) %}{% if x == 3 %}{% break %}{% endif %}{% if x == 1 %}{% continue %}{% endif %}{{ x }}{% endfor %}",
       "02"},
  });
}

TEST(TemplateTest, RangeFunction) {
  EXPECT_EQ(Render("{{ range(3) | list }} {{ range(1, 4) | list }} {{ range(5, 0, -2) | list }}"),
            "[0, 1, 2] [1, 2, 3] [5, 3, 1]");
}

TEST(TemplateTest, SetScopingAndNamespace) {
  ExpectRenders({
      {"{% set x = 1 %}{% for i in [1, 2] %}{% set x = i %}{% endfor %}{{ x }}", "1"},
      {"{% set ns = namespace(x=1) %}{% for i in [1, 2] %}{% set ns.x = ns.x + i %}{% endfor %}{{ ns.x }}",
       "4"},
      {"{% if true %}{% set y = 'set in if' %}{% endif %}{{ y }}", "set in if"},
      {"{% set a, b = 1, 2 %}{{ a }}{{ b }}", "12"},
      {"{% set block %}x{{ 1 + 1 }}{% endset %}[{{ block }}]", "[x2]"},
  });
}

TEST(TemplateTest, MacrosWithDefaultsAndKeywords) {
  EXPECT_EQ(Render("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}"
                   "{{ greet('A') }} {{ greet('B', '?') }} {{ greet(punct='.', name='C') }}"),
            "Hi A! Hi B? Hi C.");
  EXPECT_EQ(Render("{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(3) }}"),
            "321");
}

TEST(TemplateTest, FilterBlock) {
  EXPECT_EQ(Render("{% filter upper %}ab{{ 'c' }}{% endfilter %}"), "ABC");
}

TEST(TemplateTest, GenerationBlockRendersBody) {
  EXPECT_EQ(Render("a{% generation %}b{% endgeneration %}c"), "abc");
}

// ------------------------------------------------------------ errors

TEST(TemplateTest, UnclosedTagsAreParseErrors) {
  ExpectRenderError("{% if x %}abc", {"endif", "line 1, column 1"});
  for (const char* source :
       {"{{ x ", "{# open", "{% for x in y %}", "{{ 'abc }}", "{% endfor %}", "{% raw %}x"}) {
    EXPECT_FALSE(RenderStatus(source).ok()) << source;
  }
}

TEST(TemplateTest, UnknownFilterAndTestAreNamed) {
  ExpectRenderError("line\n  {{ x | frobnicate }}",
                    {"unknown filter 'frobnicate'", "line 2, column 10"});
  ExpectRenderError("{{ x is shiny }}", {"unknown test 'shiny'"});
  ExpectRenderError("{% include 'x' %}", {"unknown tag 'include'"});
}

TEST(TemplateTest, RenderErrorsCarryLocation) {
  ExpectRenderError("ok\n{{ 1 // 0 }}", {"line 2", "zero"});
  ExpectRenderError("{{ 'a' + 1 }}", {"'str' and 'int'"});
  ExpectRenderError("{{ nothing() }}", {"'nothing' is undefined"});
}

TEST(TemplateTest, LimitsStopRunawayTemplates) {
  TemplateOptions small;
  small.max_output_bytes = 1000;
  small.max_loop_iterations = 500;
  EXPECT_EQ(RenderStatus("{% for i in range(100000) %}x{% endfor %}", Value::Dict(), small).code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(RenderStatus("{% for i in range(400) %}xxxxx{% endfor %}", Value::Dict(), small).code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(RenderStatus("{{ 'x' * 100000000 }}", Value::Dict(), small).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(RenderStatus("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}").code(), StatusCode::kResourceExhausted);
  std::string deep(5000, '(');
  EXPECT_FALSE(RenderStatus("{{ " + deep + "1 }}").ok());
  std::string nested;
  for (int i = 0; i < 500; ++i) nested += "{% if true %}";
  EXPECT_FALSE(RenderStatus(nested).ok());
}

}  // namespace
}  // namespace tern
