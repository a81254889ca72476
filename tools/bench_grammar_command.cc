// `tern bench grammar`: what structured output costs per decode step. Runs a
// batch of JSON-schema-constrained requests through the serving engine (so
// jump-forward and the engine's real step times are in it), then replays the
// same outputs through fresh constraint states alone — the mask of every
// sampled token (the logits row copied and masked, as the model runner does),
// its Accept and the jump-forward search — and reports that time per step as
// a share of the engine's measured step time. The replay runs twice: cold
// (a fresh grammar, its mask cache empty, as the real run began) and warm.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "grammar/grammar_constraint.h"
#include "grammar/json_schema.h"
#include "server/structured_output.h"
#include "tokenizer/tokenizer.h"
#include "tools/arg_parser.h"
#include "tools/commands.h"
#include "tools/engine_flags.h"

namespace tern {
namespace {

using SteadyClock = std::chrono::steady_clock;

constexpr const char* kDefaultSchema = R"({"type": "object", "properties": {
  "name": {"type": "string", "maxLength": 24}, "age": {"type": "integer"},
  "mood": {"enum": ["happy", "sad", "calm"]},
  "pets": {"type": "array", "maxItems": 3, "items": {"type": "object",
    "properties": {"kind": {"enum": ["cat", "dog"]}, "legs": {"type": "integer"}},
    "required": ["kind", "legs"], "additionalProperties": false}},
  "note": {"type": "string", "maxLength": 40}},
  "required": ["name", "age", "mood", "pets", "note"], "additionalProperties": false})";

int Fail(const std::string& msg) {
  std::fprintf(stderr, "tern bench grammar: %s\n", msg.c_str());
  return 1;
}

struct Replay {
  double seconds = 0;
  int64_t rounds = 0;
  int64_t masks = 0;
  int64_t mismatches = 0;  // forced tokens that differ from the run's (should be 0)
};

// Feeds every request's output through a fresh state, round robin (one
// sampled token per request per round, as decode steps go).
Replay ReplayOutputs(const grammar::GrammarConstraint& c, const std::vector<std::vector<int32_t>>& outputs,
                     int32_t max_tokens, int32_t n_vocab) {
  Replay r;
  std::vector<std::unique_ptr<TokenConstraintState>> states;
  for (size_t i = 0; i < outputs.size(); ++i) states.push_back(c.NewState());
  std::vector<size_t> pos(outputs.size(), 0);
  std::vector<float> row(n_vocab), masked;
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  for (float& x : row) x = normal(rng);
  bool any = true;
  while (any) {
    any = false;
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (pos[i] >= outputs[i].size()) continue;
      any = true;
      const int32_t token = outputs[i][pos[i]];
      const int32_t remaining = max_tokens - (int32_t)pos[i];
      const auto t0 = SteadyClock::now();
      masked.assign(row.begin(), row.end());
      states[i]->MaskLogits(masked, remaining);
      states[i]->Accept(token);
      std::vector<int32_t> forced = states[i]->ForcedTokens(remaining - 1);
      r.seconds += std::chrono::duration<double>(SteadyClock::now() - t0).count();
      ++r.masks;
      ++pos[i];
      for (int32_t f : forced) {
        if (pos[i] < outputs[i].size() && outputs[i][pos[i]] != f) ++r.mismatches;
        ++pos[i];
      }
    }
    r.rounds += any;
  }
  return r;
}

}  // namespace

int RunBenchGrammar(int argc, char** argv) {
  EngineFlags flags;
  int batch = 16, max_tokens = 96;
  std::string schema_path, prompt = "Once upon a time";
  ArgParser p("bench grammar -m MODEL [-b 16] [-n 96] [--schema FILE] [engine options]",
              "Cost of structured output: a batch of JSON-schema requests decoded by the engine, "
              "then their mask + grammar-advance + jump-forward work replayed alone and reported "
              "per decode step as a share of the engine's step time, with the share of output "
              "tokens that jump-forward appended without sampling.");
  AddEngineFlags(p, &flags);
  p.AddInt("-b,--batch", "N", &batch, "concurrent requests (default 16)");
  p.AddInt("-n,--max-tokens", "N", &max_tokens, "max_tokens per request (default 96)");
  p.AddString("--schema", "FILE", &schema_path, "JSON schema file (default: a built-in person schema)");
  p.AddString("-p,--prompt", "TEXT", &prompt, "prompt of every request (default \"Once upon a time\")");
  if (int rc = ParseOrExit(p, argc, argv, "bench grammar"); rc >= 0) return rc;
  if (batch < 1 || max_tokens < 1) return Fail("-b and -n must be positive");
  std::string schema_text = kDefaultSchema;
  if (!schema_path.empty()) {
    std::ifstream in(schema_path);
    if (!in) return Fail("cannot read --schema " + schema_path);
    std::stringstream ss;
    ss << in.rdbuf();
    schema_text = ss.str();
  }
  nlohmann::ordered_json schema = nlohmann::ordered_json::parse(schema_text, nullptr, false);
  if (schema.is_discarded()) return Fail("--schema " + schema_path + " is not valid JSON");
  flags.config.max_num_seqs = std::max(flags.config.max_num_seqs, batch);
  StatusOr<EngineConfig> config = flags.ToConfig();
  if (!config.ok()) return Fail(config.status().message());
  StatusOr<std::unique_ptr<Engine>> created = Engine::Create(*config);
  if (!created.ok()) return Fail(created.status().message());
  Engine& engine = **created;
  const auto trie_start = SteadyClock::now();
  std::shared_ptr<const grammar::TokenTrie> trie = TokenTrieFor(engine.tokenizer());
  const double trie_s = std::chrono::duration<double>(SteadyClock::now() - trie_start).count();
  auto make = [&]() -> StatusOr<std::shared_ptr<const grammar::GrammarConstraint>> {
    StatusOr<grammar::Grammar> g = grammar::CompileJsonSchema(schema);
    if (!g.ok()) return g.status();
    return std::shared_ptr<const grammar::GrammarConstraint>(
        std::make_shared<grammar::GrammarConstraint>(std::move(*g), trie));
  };
  StatusOr<std::shared_ptr<const grammar::GrammarConstraint>> constraint = make();
  if (!constraint.ok()) return Fail("--schema: " + constraint.status().message());
  if (!(*constraint)->FitsIn(max_tokens)) return Fail("-n is below the schema's shortest output");

  const std::vector<int32_t> prompt_ids = engine.tokenizer().Encode(prompt, true, false);
  const EngineStats before = engine.GetStats();
  const auto start = SteadyClock::now();
  std::vector<std::shared_ptr<OutputChannel>> channels;
  for (int i = 0; i < batch; ++i) {
    EngineRequest req;
    req.prompt_token_ids = prompt_ids;
    req.sampling.temperature = 1.0f;
    req.sampling.seed = 1000 + i;
    req.sampling.has_seed = true;
    req.sampling.max_tokens = max_tokens;
    req.sampling.constraint = *constraint;
    StatusOr<std::shared_ptr<OutputChannel>> ch = engine.AddRequest(std::move(req));
    if (!ch.ok()) return Fail(ch.status().message());
    channels.push_back(*ch);
  }
  std::vector<std::vector<int32_t>> outputs(batch);
  for (int i = 0; i < batch; ++i) {
    for (;;) {
      std::optional<RequestOutput> o = channels[i]->Pop(std::chrono::milliseconds(100));
      if (!o) continue;
      outputs[i].insert(outputs[i].end(), o->new_token_ids.begin(), o->new_token_ids.end());
      if (o->finished) break;
    }
  }
  const double run_s = std::chrono::duration<double>(SteadyClock::now() - start).count();
  const EngineStats after = engine.GetStats();
  const uint64_t steps = after.num_steps_total - before.num_steps_total;
  const uint64_t generated = after.generation_tokens_total - before.generation_tokens_total;
  const uint64_t forced = after.forced_tokens_total - before.forced_tokens_total;
  const int32_t n_vocab = engine.tokenizer().vocab_size();

  StatusOr<std::shared_ptr<const grammar::GrammarConstraint>> fresh = make();
  const Replay cold = ReplayOutputs(**fresh, outputs, max_tokens, n_vocab);
  const Replay warm = ReplayOutputs(**fresh, outputs, max_tokens, n_vocab);
  const double step_s = run_s / (double)std::max<uint64_t>(steps, 1);
  auto share = [&](const Replay& r) {
    return r.seconds / (double)std::max<int64_t>(r.rounds, 1) / step_s;
  };
  std::printf("model vocab %d tokens, trie built in %.1f ms (%zu nodes)\n", n_vocab, trie_s * 1e3,
              trie->nodes().size());
  std::printf("engine run: %d requests, %llu steps, %.3f s (%.1f ms/step), %llu tokens\n", batch,
              (unsigned long long)steps, run_s, step_s * 1e3, (unsigned long long)generated);
  std::printf("jump-forward: %llu of %llu output tokens forced (%.1f%%)\n", (unsigned long long)forced,
              (unsigned long long)generated, generated ? 100.0 * (double)forced / (double)generated : 0.0);
  for (const auto& [name, r] : {std::pair<const char*, const Replay&>{"cold", cold}, {"warm", warm}}) {
    std::printf("constraint work (%s cache): %lld masks in %lld rounds, %.3f ms/round = %.2f%% of a step "
                "(%.1f us/mask)%s\n",
                name, (long long)r.masks, (long long)r.rounds, r.seconds / std::max<int64_t>(r.rounds, 1) * 1e3,
                100.0 * share(r), r.seconds / std::max<int64_t>(r.masks, 1) * 1e6,
                r.mismatches ? " (replay diverged!)" : "");
  }
  std::printf("mask cache: %lld computed of %lld looked up (both replays)\n",
              (long long)(*fresh)->num_masks_computed() , (long long)(*fresh)->num_masks_served());
  return 0;
}

}  // namespace tern
