// BuiltinHelpers: argument and attribute helpers shared by the filter, test
// and method implementations (builtins.cc, filters.cc, methods.cc). Internal
// to the jinja module.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"
#include "jinja/value.h"

namespace tern::builtin_internal {

Status ArgError(const std::string& what, const std::string& message);
// Positional-or-keyword argument with a default.
Value Arg(const CallArgs& args, size_t index, std::string_view name, Value fallback = Value());
// Follows a dotted attribute path ("a.b.0") as Jinja's attribute= does.
Value LookupPath(const Value& v, const std::string& path);
// [key, value] pairs of a dict (empty for undefined/none).
StatusOr<ValueList> Items(const Value& v, const std::string& filter);

}  // namespace tern::builtin_internal
