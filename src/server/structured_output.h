// Structured outputs on the OpenAI API: `response_format` ({"type": "text" |
// "json_object" | "json_schema", "json_schema": {"name", "schema", "strict"}})
// and the guided_json / guided_regex / guided_choice / guided_grammar (GBNF)
// extra fields, parsed
// into an OutputConstraintSpec, then compiled (src/grammar) into the
// TokenConstraint the engine masks with. Compiled constraints are shared by
// requests with the same spec (ConstraintCache), so their mask caches warm up
// across requests.
//
// Thread rules: pure functions; the cache is thread-safe.
#pragma once

#include <memory>
#include <optional>
#include <string_view>

#include <nlohmann/json.hpp>

#include "grammar/constraint_cache.h"
#include "server/api_error.h"
#include "server/completion_request.h"

namespace tern {

class Tokenizer;

// Reads response_format and guided_* from the request object (body: the same
// request as text, re-read in key order for schemas). At most one of them.
std::optional<ApiError> ParseOutputConstraint(const nlohmann::json& obj, std::string_view body,
                                              OutputConstraintSpec* out);

// The vocabulary's pieces as the grammar sees them: pieces[id] (TokenPiece)
// and the end-of-generation ids.
std::shared_ptr<const grammar::TokenTrie> BuildTokenTrie(const std::vector<std::string>& pieces,
                                                         std::vector<int32_t> eog_ids);

// The trie of a tokenizer's vocabulary: TokenToPiece without special tokens,
// end-of-generation ids aside (what EngineBackend and `tern bench grammar` use).
std::shared_ptr<const grammar::TokenTrie> TokenTrieFor(const Tokenizer& tokenizer);

// Compiles spec for a request of max_tokens (400 naming spec.param when the
// spec is invalid or its shortest output cannot fit in max_tokens).
std::optional<ApiError> ResolveConstraint(const OutputConstraintSpec& spec, int32_t max_tokens,
                                          grammar::ConstraintCache* cache,
                                          std::shared_ptr<const TokenConstraint>* out);

}  // namespace tern
