#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <map>

#include "jinja/builtin_helpers.h"
#include "jinja/builtins.h"
#include "jinja/operators.h"
#include "jinja/string_ops.h"

namespace tern {
namespace {

using namespace builtin_internal;  // NOLINT: module-internal helpers

// ------------------------------------------------------------------ methods

StatusOr<std::optional<Value>> StringMethod(const std::string& s, const std::string& name,
                                            const CallArgs& args, const TemplateOptions& options) {
  auto chars = [&]() -> std::optional<std::string> {
    Value c = Arg(args, 0, "chars");
    if (c.is_string()) return c.string_value();
    return std::nullopt;
  };
  if (name == "strip") return std::optional<Value>(Value(Strip(s, chars(), true, true)));
  if (name == "lstrip") return std::optional<Value>(Value(Strip(s, chars(), true, false)));
  if (name == "rstrip") return std::optional<Value>(Value(Strip(s, chars(), false, true)));
  if (name == "upper") return std::optional<Value>(Value(AsciiUpper(s)));
  if (name == "lower") return std::optional<Value>(Value(AsciiLower(s)));
  if (name == "title") return std::optional<Value>(Value(TitleCase(s)));
  if (name == "capitalize") return std::optional<Value>(Value(Capitalize(s)));
  if (name == "split" || name == "rsplit") {
    Value sep = Arg(args, 0, "sep");
    int64_t maxsplit = Arg(args, 1, "maxsplit", Value(-1)).int_value();
    std::vector<std::string> parts;
    if (sep.is_undefined() || sep.is_none()) {
      parts = SplitWhitespace(s, name == "split" ? maxsplit : -1);
    } else {
      if (sep.ToString().empty()) return InvalidArgument("method 'split': empty separator");
      parts = SplitOn(s, sep.ToString(), name == "split" ? maxsplit : -1);
    }
    ValueList out(parts.begin(), parts.end());
    return std::optional<Value>(Value::List(std::move(out)));
  }
  if (name == "splitlines") {
    std::vector<std::string> parts = SplitLines(s);
    return std::optional<Value>(Value::List(ValueList(parts.begin(), parts.end())));
  }
  if (name == "startswith" || name == "endswith") {
    Value arg = Arg(args, 0, "prefix");
    ValueList options_list = arg.is_list() ? arg.list() : ValueList{arg};
    bool match = false;
    for (const Value& o : options_list) {
      if (!o.is_string()) return InvalidArgument("method '" + name + "': expected a string");
      match = match || (name == "startswith" ? StartsWith(s, o.string_value())
                                             : EndsWith(s, o.string_value()));
    }
    return std::optional<Value>(Value(match));
  }
  if (name == "replace") {
    const Value* old_s = args.Get(0, "old");
    const Value* new_s = args.Get(1, "new");
    if (old_s == nullptr || new_s == nullptr) return InvalidArgument("method 'replace': needs old and new");
    int64_t count = Arg(args, 2, "count", Value(-1)).int_value();
    TERN_ASSIGN_OR_RETURN(Value r, Replace(s, old_s->ToString(), new_s->ToString(), count,
                                           options.max_output_bytes));
    return std::optional<Value>(r);
  }
  if (name == "find" || name == "index" || name == "count") {
    std::string sub = Arg(args, 0, "sub").ToString();
    if (name == "count") {
      if (sub.empty()) return std::optional<Value>(Value(static_cast<int64_t>(Utf8Length(s) + 1)));
      int64_t n = 0;
      for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++n;
      return std::optional<Value>(Value(n));
    }
    size_t p = s.find(sub);
    if (p == std::string::npos) {
      if (name == "index") return InvalidArgument("method 'index': substring not found");
      return std::optional<Value>(Value(-1));
    }
    return std::optional<Value>(Value(static_cast<int64_t>(Utf8Length(s.substr(0, p)))));
  }
  if (name == "join") {
    TERN_ASSIGN_OR_RETURN(ValueList items, Iterate(Arg(args, 0, "iterable")));
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) out += s;
      out += items[i].ToString();
      if (out.size() > options.max_output_bytes) return ResourceExhausted("method 'join': result too large");
    }
    return std::optional<Value>(Value(std::move(out)));
  }
  if (name == "isdigit" || name == "isalpha" || name == "isalnum" || name == "isspace" ||
      name == "islower" || name == "isupper") {
    return std::optional<Value>(Value(CharClassTest(s, name)));
  }
  return std::optional<Value>();
}

StatusOr<std::optional<Value>> DictMethod(const Value& d, const std::string& name, const CallArgs& args) {
  if (name == "items") {
    TERN_ASSIGN_OR_RETURN(ValueList items, Items(d, "method 'items'"));
    return std::optional<Value>(Value::List(std::move(items)));
  }
  if (name == "keys") {
    TERN_ASSIGN_OR_RETURN(ValueList keys, Iterate(d));
    return std::optional<Value>(Value::List(std::move(keys)));
  }
  if (name == "values") {
    ValueList out;
    for (const auto& [k, v] : d.dict()) out.push_back(v);
    return std::optional<Value>(Value::List(std::move(out)));
  }
  if (name == "get") {
    const Value* key = args.Get(0, "key");
    if (key == nullptr) return InvalidArgument("method 'get': missing key");
    const Value* found = d.Find(key->ToString());
    Value fallback = Arg(args, 1, "default", Value::None());
    return std::optional<Value>(found != nullptr ? *found : fallback);
  }
  if (name == "update") {
    const Value* other = args.Get(0, "other");
    bool cycle = other != nullptr && other->Reaches(d);
    for (const auto& [k, v] : args.keyword) cycle = cycle || v.Reaches(d);
    if (cycle) return InvalidArgument("method 'update': a dict cannot contain itself");
    if (other != nullptr && other->is_dict()) {
      for (const auto& [k, v] : other->dict()) d.Set(k, v);
    }
    for (const auto& [k, v] : args.keyword) d.Set(k, v);
    return std::optional<Value>(Value::None());
  }
  return std::optional<Value>();
}

StatusOr<std::optional<Value>> ListMethod(const Value& l, const std::string& name, const CallArgs& args,
                                          const TemplateOptions& options) {
  ValueList& items = l.list();
  if (name == "append" || name == "extend") {
    const Value* item = args.Get(0, "object");
    if (item == nullptr) return InvalidArgument("method '" + name + "': missing argument");
    if ((items.size() + 1) * sizeof(Value) > options.max_output_bytes) {
      return ResourceExhausted("method '" + name + "': list too large");
    }
    if (item->Reaches(l)) {
      return InvalidArgument("method '" + name + "': a list cannot contain itself");
    }
    if (name == "append") {
      items.push_back(*item);
    } else {
      TERN_ASSIGN_OR_RETURN(ValueList more, Iterate(*item));
      items.insert(items.end(), more.begin(), more.end());
    }
    return std::optional<Value>(Value::None());
  }
  if (name == "pop") {
    if (items.empty()) return InvalidArgument("method 'pop': pop from empty list");
    int64_t n = static_cast<int64_t>(items.size());
    int64_t i = Arg(args, 0, "index", Value(-1)).int_value();
    if (i < 0) i += n;
    if (i < 0 || i >= n) return InvalidArgument("method 'pop': index out of range");
    Value out = items[static_cast<size_t>(i)];
    items.erase(items.begin() + i);
    return std::optional<Value>(out);
  }
  if (name == "index" || name == "count") {
    Value target = Arg(args, 0, "value");
    int64_t count = 0;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].Equals(target)) continue;
      if (name == "index") return std::optional<Value>(Value(static_cast<int64_t>(i)));
      ++count;
    }
    if (name == "index") return InvalidArgument("method 'index': value not in list");
    return std::optional<Value>(Value(count));
  }
  return std::optional<Value>();
}

}  // namespace

StatusOr<std::optional<Value>> CallMethod(const Value& object, const std::string& name,
                                          const CallArgs& args, const TemplateOptions& options) {
  if (object.is_string()) return StringMethod(object.string_value(), name, args, options);
  if (object.is_dict() && !object.is_namespace()) return DictMethod(object, name, args);
  if (object.is_list()) return ListMethod(object, name, args, options);
  return std::optional<Value>();
}

}  // namespace tern
