// JSON schema -> Grammar. The output language is compact JSON written the way
// Python's json.dumps writes it (", " between items, ": " after keys, no other
// whitespace), properties in the schema's order, so keys and punctuation are
// forced (jump-forward) and every output parses.
//
// Supported keywords: type (one or a list), properties, required,
// additionalProperties (false / true / a schema: declared properties only
// when there are any, else a map of that schema), enum, const, items,
// minItems, maxItems, minLength, maxLength, pattern (regex.h subset), format
// (date, time, date-time, uuid, email), anyOf, oneOf (compiled as anyOf),
// allOf with one schema, $ref to "#", "#/$defs/..." or "#/definitions/...";
// annotations (title, description, default, examples, $schema, $id,
// $comment, $defs, definitions, deprecated, readOnly, writeOnly) are ignored.
// Any other keyword is an error naming it and where it is. Integers have at
// most 16 digits and numbers a 16-digit fraction and a 2-digit exponent, so
// every number round-trips through a double-precision parser.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"
#include "grammar/grammar.h"

namespace tern::grammar {

// The schema in key order as sent (ordered_json): properties come out in it.
// prefix/suffix: literal text around the JSON (tool-call markup).
StatusOr<Grammar> CompileJsonSchema(const nlohmann::ordered_json& schema,
                                    std::string_view prefix = "", std::string_view suffix = "");
// Any JSON object (response_format json_object).
StatusOr<Grammar> CompileJsonObject();
// Any JSON value.
StatusOr<Grammar> CompileJsonValue();

// v as the grammars write it (", " and ": ", keys in order).
std::string DumpCompact(const nlohmann::ordered_json& v);

}  // namespace tern::grammar
