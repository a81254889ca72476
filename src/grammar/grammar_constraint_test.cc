#include "grammar/grammar_constraint.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "grammar/json_schema.h"

namespace tern::grammar {
namespace {

using ojson = nlohmann::ordered_json;

// A toy vocabulary: every printable ASCII byte, some multi-byte pieces, an
// empty control token (id 1) and end of generation (id 0).
std::shared_ptr<const TokenTrie> ToyTrie() {
  std::vector<std::string> pieces = {"", ""};
  for (int c = 0x20; c < 0x7F; ++c) pieces.push_back(std::string(1, (char)c));
  for (const char* p : {"{\"", "\": ", "\", \"", "name", "ab", "abc", "\"}", "true", "12", "}\n"}) {
    pieces.push_back(p);
  }
  return std::make_shared<TokenTrie>(pieces, std::vector<int32_t>{0});
}

std::shared_ptr<GrammarConstraint> Constraint(const char* schema) {
  StatusOr<Grammar> g = CompileJsonSchema(ojson::parse(schema));
  EXPECT_TRUE(g.ok()) << g.status().message();
  return std::make_shared<GrammarConstraint>(std::move(g).value(), ToyTrie());
}

std::string Text(const TokenTrie& trie, const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += trie.piece(id);
  return s;
}

// Samples uniformly among allowed tokens (plus jump-forward) until complete,
// end of generation or max_tokens.
std::vector<int32_t> RunOnce(const GrammarConstraint& c, int32_t max_tokens, std::mt19937& rng,
                         int32_t* num_forced) {
  std::unique_ptr<TokenConstraintState> s = c.NewState();
  std::vector<int32_t> out;
  const int32_t n = c.trie().vocab_size();
  while ((int32_t)out.size() < max_tokens && !s->IsComplete()) {
    std::vector<float> logits(n, 0.0f);
    s->MaskLogits(logits, max_tokens - (int32_t)out.size());
    std::vector<int32_t> allowed;
    for (int32_t id = 0; id < n; ++id) {
      if (!std::isinf(logits[id])) allowed.push_back(id);
    }
    EXPECT_FALSE(allowed.empty());
    const int32_t t = allowed[rng() % allowed.size()];
    if (t == 0) break;  // end of generation
    out.push_back(t);
    s->Accept(t);
    std::vector<int32_t> forced = s->ForcedTokens(max_tokens - (int32_t)out.size());
    *num_forced += (int32_t)forced.size();
    out.insert(out.end(), forced.begin(), forced.end());
  }
  return out;
}

TEST(GrammarConstraintTest, MaskAllowsExactlyTheTokensThatFit) {
  auto c = Constraint(R"({"type": "object", "properties": {"name": {"type": "string"}},
                          "required": ["name"]})");
  std::unique_ptr<TokenConstraintState> s = c->NewState();
  std::vector<float> logits(c->trie().vocab_size(), 1.0f);
  s->MaskLogits(logits, 100);
  for (int32_t id = 0; id < (int32_t)logits.size(); ++id) {
    const std::string& p = c->trie().piece(id);
    const bool ok = p == "{" || p == "{\"";
    EXPECT_EQ(!std::isinf(logits[id]), ok) << "'" << p << "'";
  }
  size_t len = 0;
  s->Accept(c->trie().LongestPrefixToken("{", &len));
  // `"name": "` is forced: cut into the longest pieces.
  std::vector<int32_t> forced = s->ForcedTokens(100);
  EXPECT_EQ(Text(c->trie(), forced), "\"name\": \"");
  EXPECT_EQ(forced.size(), 4u);  // `"`, `name`, `": `, `"`
}

TEST(GrammarConstraintTest, EveryRunCompletesValidWithinMaxTokens) {
  auto c = Constraint(R"({"type": "object", "properties": {
      "name": {"type": "string"}, "n": {"type": "integer"}, "ok": {"type": "boolean"},
      "xs": {"type": "array", "items": {"type": "string", "enum": ["ab", "abc"]}}},
      "required": ["name", "n", "ok", "xs"], "additionalProperties": false})");
  const int64_t min_bytes = c->MinOutputBytes();
  std::mt19937 rng(11);
  int32_t forced = 0, total = 0;
  for (int32_t max_tokens : {(int32_t)min_bytes, (int32_t)min_bytes + 5, 60, 200}) {
    for (int i = 0; i < 30; ++i) {
      std::vector<int32_t> out = RunOnce(*c, max_tokens, rng, &forced);
      total += (int32_t)out.size();
      EXPECT_LE((int32_t)out.size(), max_tokens);
      const std::string text = Text(c->trie(), out);
      EXPECT_TRUE(c->grammar().Accepts(text)) << max_tokens << ": " << text;
      ojson v = ojson::parse(text, nullptr, false);
      EXPECT_FALSE(v.is_discarded()) << text;
    }
  }
  EXPECT_GT(forced, 0);
  EXPECT_LT(forced, total);
  EXPECT_GT(c->num_masks_served(), c->num_masks_computed());  // the cache works
}

TEST(GrammarConstraintTest, FitsInTellsWhetherTheBudgetCanEverSuffice) {
  auto c = Constraint(R"({"type": "object", "properties": {"abc": {"const": "abc"}}, "required": ["abc"]})");
  EXPECT_EQ(c->MinOutputBytes(), (int64_t)std::string(R"({"abc": "abc"})").size());
  EXPECT_FALSE(c->FitsIn(5));
  EXPECT_TRUE(c->FitsIn(14));
}

}  // namespace
}  // namespace tern::grammar
