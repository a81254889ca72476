// Operators: Python semantics of the template's arithmetic, comparison,
// membership, item access, slicing and iteration over Values. Pure functions;
// errors name the operator and operand types. Results whose size would pass
// `max_bytes` (string/list repetition and concatenation) are errors.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "base/status.h"
#include "jinja/value.h"

namespace tern {

// op in {+, -, *, /, //, %, **, ~}.
StatusOr<Value> BinaryOp(const std::string& op, const Value& a, const Value& b, size_t max_bytes);
// op in {==, !=, <, <=, >, >=, in, not in}.
StatusOr<bool> CompareOp(const std::string& op, const Value& a, const Value& b);
// -x and +x.
StatusOr<Value> UnaryMinus(const Value& v);

// obj.name / obj[key]: undefined when absent (never an error).
Value GetAttr(const Value& object, const std::string& name);
Value GetItem(const Value& object, const Value& key);
// obj[start:stop:step] on lists and strings; null parts are omitted parts.
StatusOr<Value> Slice(const Value& object, const Value* start, const Value* stop, const Value* step);

// The items a for loop visits: list items, dict keys, string code points;
// undefined and none give nothing.
StatusOr<ValueList> Iterate(const Value& v);

// Integer value of an int/bool, or nullopt.
std::optional<int64_t> AsInteger(const Value& v);

}  // namespace tern
