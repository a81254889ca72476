// Value: the dynamic value of the template interpreter (undefined, none,
// bool, int64, double, string, list, dict with insertion order, function).
//
// Lists and dicts have Python reference semantics: copying a Value shares the
// underlying storage, so `ns.x = 1` on a namespace or `xs.append(y)` is seen
// through every copy. Dict keys are strings (other keys are converted with
// ToString). Strings hold UTF-8 bytes; indexing, slicing and length count code
// points like Python does.
//
// Thread rules: a Value and its copies must be used by one thread at a time
// (shared storage is not synchronised). Values built once and never mutated
// may be read from several threads.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace tern {

class Value;

using ValueList = std::vector<Value>;
using ValueDict = std::vector<std::pair<std::string, Value>>;

// Arguments of a call: positional then keyword.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;

  // The argument at `index` or named `name`; nullptr when absent.
  const Value* Get(size_t index, std::string_view name) const;
};

using Function = std::function<StatusOr<Value>(const CallArgs&)>;

class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kFunction };

  Value() = default;  // undefined
  Value(bool b) : kind_(Kind::kBool), int_(b) {}  // NOLINT: implicit
  Value(int v) : kind_(Kind::kInt), int_(v) {}  // NOLINT
  Value(int64_t v) : kind_(Kind::kInt), int_(v) {}  // NOLINT
  Value(unsigned v) : kind_(Kind::kInt), int_(v) {}  // NOLINT
  // Sizes and counts; values above INT64_MAX saturate.
  Value(uint64_t v)  // NOLINT
      : kind_(Kind::kInt), int_(v > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(v)) {}
  Value(double v) : kind_(Kind::kFloat), float_(v) {}  // NOLINT
  Value(const char* s) : Value(std::string(s)) {}  // NOLINT
  Value(std::string_view s) : Value(std::string(s)) {}  // NOLINT
  Value(std::string s);  // NOLINT

  static Value Undefined() { return Value(); }
  static Value None();
  static Value List(ValueList items = {});
  static Value List(std::initializer_list<Value> items) { return List(ValueList(items)); }
  static Value Dict(ValueDict items = {});
  static Value Dict(std::initializer_list<std::pair<std::string, Value>> items) {
    return Dict(ValueDict(items));
  }
  // A dict whose attributes may be assigned with `{% set ns.x = ... %}`.
  static Value Namespace(ValueDict items = {});
  static Value MakeFunction(std::string name, Function fn);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_function() const { return kind_ == Kind::kFunction; }
  bool is_namespace() const;

  bool bool_value() const { return int_ != 0; }
  int64_t int_value() const { return int_; }
  double float_value() const { return float_; }
  // Numeric value of an int, float or bool as double.
  double AsDouble() const;
  const std::string& string_value() const { return *str_; }
  // Shared storage; callers may mutate (reference semantics).
  ValueList& list() const { return *list_; }
  ValueDict& dict() const { return *dict_; }
  const Function& function() const { return fn_->fn; }
  const std::string& function_name() const { return fn_->name; }

  // Dict access. Find returns nullptr when absent; Set replaces or appends.
  const Value* Find(std::string_view key) const;
  void Set(const std::string& key, Value value) const;

  // Python truthiness; undefined and none are false.
  bool Truthy() const;
  // Text as `{{ value }}` prints it (Python str(); undefined is "").
  std::string ToString() const;
  // Python repr() (strings quoted), used inside lists and dicts.
  std::string Repr() const;
  // JSON text in the style of Python json.dumps(ensure_ascii=False):
  // separators ", " and ": ", or newlines and `indent` spaces when indent >= 0.
  std::string ToJson(int indent = -1) const;
  // Python type name ("str", "int", "list", ...) for error messages.
  std::string TypeName() const;

  // Python ==, with 1 == 1.0 == True and deep list/dict comparison.
  bool Equals(const Value& other) const;
  // True when this value is `container` (the very same list or dict) or
  // holds it at any depth. Mutators refuse a value that reaches its target,
  // so values never form cycles (which would make repr, tojson and equality
  // recurse forever).
  bool Reaches(const Value& container) const;

  // A copy that shares no list/dict storage with this value.
  Value DeepCopy() const;

 private:
  struct FunctionBox {
    std::string name;
    Function fn;
  };

  Kind kind_ = Kind::kUndefined;
  bool namespace_ = false;
  int64_t int_ = 0;
  double float_ = 0;
  std::shared_ptr<const std::string> str_;
  std::shared_ptr<ValueList> list_;
  std::shared_ptr<ValueDict> dict_;
  std::shared_ptr<const FunctionBox> fn_;
};

// UTF-8 helpers: byte offsets of each code point start, plus the end offset.
std::vector<size_t> Utf8Boundaries(std::string_view s);
size_t Utf8Length(std::string_view s);
// Python repr of a float ("1.0", "0.1", "1e+20", "inf", "nan").
std::string FormatFloat(double v);

}  // namespace tern
