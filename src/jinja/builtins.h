// Builtins: the filters (`x | trim`), tests (`x is defined`), methods of
// strings, lists and dicts (`s.strip()`, `d.items()`), and global functions
// (range, namespace, dict) of the template language. Pure functions of their
// arguments; errors name the filter/test/method. String case mapping is ASCII
// only (other bytes pass through unchanged). Implemented in builtins.cc
// (tests, globals), filters.cc and methods.cc.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "jinja/template_options.h"
#include "jinja/value.h"

namespace tern {

// Reserved variable holding the rendered body inside `{% filter %}` blocks.
inline constexpr const char* kFilterBlockBodyName = "\x01filter_body";

bool IsKnownFilter(std::string_view name);
bool IsKnownTest(std::string_view name);

StatusOr<Value> ApplyFilter(const std::string& name, const Value& operand, const CallArgs& args,
                            const TemplateOptions& options);
StatusOr<bool> ApplyTest(const std::string& name, const Value& operand, const CallArgs& args);

// Calls `object.name(args)`. Returns nullopt when `object` has no such method
// (the caller then looks for a callable attribute).
StatusOr<std::optional<Value>> CallMethod(const Value& object, const std::string& name,
                                          const CallArgs& args, const TemplateOptions& options);

// Global functions available to every template: range, namespace, dict.
ValueDict BuiltinGlobals(const TemplateOptions& options);

}  // namespace tern
