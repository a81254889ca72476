#include "jinja/builtins.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <map>

#include "jinja/builtin_helpers.h"
#include "jinja/operators.h"
#include "jinja/string_ops.h"

namespace tern {
namespace builtin_internal {

Status ArgError(const std::string& what, const std::string& message) {
  return InvalidArgument(what + ": " + message);
}

Value Arg(const CallArgs& args, size_t index, std::string_view name, Value fallback) {
  const Value* v = args.Get(index, name);
  return v != nullptr ? *v : fallback;
}

Value LookupPath(const Value& v, const std::string& path) {
  Value current = v;
  size_t start = 0;
  while (start <= path.size()) {
    size_t dot = path.find('.', start);
    std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    if (numeric && current.is_list()) {
      current = GetItem(current, Value(static_cast<int64_t>(std::stoll(part))));
    } else {
      current = GetAttr(current, part);
    }
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return current;
}

StatusOr<ValueList> Items(const Value& v, const std::string& filter) {
  if (v.is_dict()) {
    ValueList out;
    for (const auto& [k, val] : v.dict()) out.push_back(Value::List({Value(k), val}));
    return out;
  }
  if (v.is_undefined() || v.is_none()) return ValueList{};
  return ArgError(filter, "expected a mapping, got '" + v.TypeName() + "'");
}

}  // namespace builtin_internal

namespace {

using namespace builtin_internal;  // NOLINT: module-internal helpers

using TestFn = StatusOr<bool> (*)(const Value&, const CallArgs&);

// ------------------------------------------------------------------ tests

// `value % divisor == expected` with Python semantics (floats allowed).
StatusOr<bool> Remainder(const Value& v, const Value& divisor, const char* test, int64_t expected) {
  StatusOr<Value> rem = BinaryOp("%", v, divisor, 64);
  if (!rem.ok() || !rem->is_number()) {
    return ArgError(std::string("test '") + test + "'",
                    rem.ok() ? "expected a number, got '" + v.TypeName() + "'" : rem.status().message());
  }
  return rem->Equals(Value(expected));
}

StatusOr<bool> TestArgCompare(const Value& v, const CallArgs& args, const char* op) {
  const Value* other = args.Get(0, "value");
  if (other == nullptr) return ArgError(std::string("test '") + op + "'", "missing argument");
  return CompareOp(op, v, *other);
}

const std::map<std::string, TestFn, std::less<>>& Tests() {
  static const auto* tests = new std::map<std::string, TestFn, std::less<>>{
      {"defined", [](const Value& v, const CallArgs&) -> StatusOr<bool> { return !v.is_undefined(); }},
      {"undefined", [](const Value& v, const CallArgs&) -> StatusOr<bool> { return v.is_undefined(); }},
      {"none", [](const Value& v, const CallArgs&) -> StatusOr<bool> { return v.is_none(); }},
      {"string", [](const Value& v, const CallArgs&) -> StatusOr<bool> { return v.is_string(); }},
      {"number", [](const Value& v, const CallArgs&) -> StatusOr<bool> { return v.is_number() || v.is_bool(); }},
      {"integer", [](const Value& v, const CallArgs&) -> StatusOr<bool> { return v.is_int(); }},
      {"float", [](const Value& v, const CallArgs&) -> StatusOr<bool> { return v.is_float(); }},
      {"boolean", [](const Value& v, const CallArgs&) -> StatusOr<bool> { return v.is_bool(); }},
      {"mapping", [](const Value& v, const CallArgs&) -> StatusOr<bool> { return v.is_dict(); }},
      // Undefined iterates as empty, so it counts as iterable (as in Jinja).
      {"iterable", [](const Value& v, const CallArgs&) -> StatusOr<bool> {
         return v.is_list() || v.is_dict() || v.is_string() || v.is_undefined();
       }},
      {"sequence", [](const Value& v, const CallArgs&) -> StatusOr<bool> {
         return v.is_list() || v.is_dict() || v.is_string() || v.is_undefined();
       }},
      {"callable", [](const Value& v, const CallArgs&) -> StatusOr<bool> { return v.is_function(); }},
      {"true", [](const Value& v, const CallArgs&) -> StatusOr<bool> { return v.is_bool() && v.bool_value(); }},
      {"false", [](const Value& v, const CallArgs&) -> StatusOr<bool> { return v.is_bool() && !v.bool_value(); }},
      {"even", [](const Value& v, const CallArgs&) -> StatusOr<bool> { return Remainder(v, Value(2), "even", 0); }},
      {"odd", [](const Value& v, const CallArgs&) -> StatusOr<bool> { return Remainder(v, Value(2), "odd", 1); }},
      {"divisibleby", [](const Value& v, const CallArgs& args) -> StatusOr<bool> {
         const Value* d = args.Get(0, "num");
         if (d == nullptr) return ArgError("test 'divisibleby'", "missing divisor");
         return Remainder(v, *d, "divisibleby", 0);
       }},
      {"lower", [](const Value& v, const CallArgs&) -> StatusOr<bool> {
         return CharClassTest(v.ToString(), "islower");
       }},
      {"upper", [](const Value& v, const CallArgs&) -> StatusOr<bool> {
         return CharClassTest(v.ToString(), "isupper");
       }},
      {"sameas", [](const Value& v, const CallArgs& args) -> StatusOr<bool> {
         return TestArgCompare(v, args, "==");
       }},
      {"equalto", [](const Value& v, const CallArgs& args) { return TestArgCompare(v, args, "=="); }},
      {"eq", [](const Value& v, const CallArgs& args) { return TestArgCompare(v, args, "=="); }},
      {"==", [](const Value& v, const CallArgs& args) { return TestArgCompare(v, args, "=="); }},
      {"ne", [](const Value& v, const CallArgs& args) { return TestArgCompare(v, args, "!="); }},
      {"!=", [](const Value& v, const CallArgs& args) { return TestArgCompare(v, args, "!="); }},
      {"lt", [](const Value& v, const CallArgs& args) { return TestArgCompare(v, args, "<"); }},
      {"lessthan", [](const Value& v, const CallArgs& args) { return TestArgCompare(v, args, "<"); }},
      {"<", [](const Value& v, const CallArgs& args) { return TestArgCompare(v, args, "<"); }},
      {"le", [](const Value& v, const CallArgs& args) { return TestArgCompare(v, args, "<="); }},
      {"<=", [](const Value& v, const CallArgs& args) { return TestArgCompare(v, args, "<="); }},
      {"gt", [](const Value& v, const CallArgs& args) { return TestArgCompare(v, args, ">"); }},
      {"greaterthan", [](const Value& v, const CallArgs& args) { return TestArgCompare(v, args, ">"); }},
      {">", [](const Value& v, const CallArgs& args) { return TestArgCompare(v, args, ">"); }},
      {"ge", [](const Value& v, const CallArgs& args) { return TestArgCompare(v, args, ">="); }},
      {">=", [](const Value& v, const CallArgs& args) { return TestArgCompare(v, args, ">="); }},
      {"in", [](const Value& v, const CallArgs& args) { return TestArgCompare(v, args, "in"); }},
  };
  return *tests;
}

// namespace() and dict(): `target` with every key of the positional mappings,
// then the keyword arguments, set in order (later ones win).
StatusOr<Value> SetFromMappings(Value target, const char* fn, const CallArgs& args) {
  for (const Value& v : args.positional) {
    if (!v.is_dict()) return InvalidArgument(std::string(fn) + "(): positional argument must be a mapping");
    for (const auto& [k, val] : v.dict()) target.Set(k, val);
  }
  for (const auto& [k, v] : args.keyword) target.Set(k, v);
  return target;
}

}  // namespace

bool IsKnownTest(std::string_view name) { return Tests().find(name) != Tests().end(); }

StatusOr<bool> ApplyTest(const std::string& name, const Value& operand, const CallArgs& args) {
  auto it = Tests().find(name);
  if (it == Tests().end()) return InvalidArgument("unknown test '" + name + "'");
  return it->second(operand, args);
}

ValueDict BuiltinGlobals(const TemplateOptions& options) {
  ValueDict globals;
  int64_t max_items = options.max_loop_iterations;
  globals.emplace_back("range", Value::MakeFunction("range", [max_items](const CallArgs& args) -> StatusOr<Value> {
    std::vector<int64_t> nums;
    for (const Value& v : args.positional) {
      if (!AsInteger(v)) return InvalidArgument("range(): arguments must be integers");
      nums.push_back(v.int_value());
    }
    if (nums.empty() || nums.size() > 3) return InvalidArgument("range() takes 1 to 3 arguments");
    int64_t start = nums.size() == 1 ? 0 : nums[0];
    int64_t stop = nums.size() == 1 ? nums[0] : nums[1];
    int64_t step = nums.size() == 3 ? nums[2] : 1;
    if (step == 0) return InvalidArgument("range() step must not be zero");
    ValueList out;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
      if (static_cast<int64_t>(out.size()) >= max_items) {
        return ResourceExhausted("range() longer than the loop limit of " + std::to_string(max_items));
      }
      out.emplace_back(i);
    }
    return Value::List(std::move(out));
  }));
  globals.emplace_back("namespace", Value::MakeFunction("namespace", [](const CallArgs& args) {
    return SetFromMappings(Value::Namespace(), "namespace", args);
  }));
  globals.emplace_back("dict", Value::MakeFunction("dict", [](const CallArgs& args) {
    return SetFromMappings(Value::Dict(), "dict", args);
  }));
  return globals;
}

}  // namespace tern
