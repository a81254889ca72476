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

using FilterFn = StatusOr<Value> (*)(const Value&, const CallArgs&, const TemplateOptions&);

// ------------------------------------------------------------------ filters

// Shared body of select/reject/selectattr/rejectattr.
StatusOr<Value> SelectImpl(const Value& seq, const CallArgs& args, bool by_attribute, bool keep,
                           const char* filter) {
  size_t next = 0;
  std::string attribute;
  if (by_attribute) {
    const Value* attr = args.Get(0, "attribute");
    if (attr == nullptr || !attr->is_string()) return ArgError(filter, "missing attribute name");
    attribute = attr->string_value();
    next = 1;
  }
  std::string test;
  CallArgs test_args;
  if (next < args.positional.size()) {
    if (!args.positional[next].is_string()) return ArgError(filter, "test name must be a string");
    test = args.positional[next].string_value();
    if (!IsKnownTest(test)) return ArgError(filter, "unknown test '" + test + "'");
    test_args.positional.assign(args.positional.begin() + static_cast<std::ptrdiff_t>(next) + 1,
                                args.positional.end());
  }
  if (!seq.Truthy()) return Value::List();
  TERN_ASSIGN_OR_RETURN(ValueList items, Iterate(seq));
  ValueList out;
  for (const Value& item : items) {
    Value subject = by_attribute ? LookupPath(item, attribute) : item;
    bool pass = subject.Truthy();
    if (!test.empty()) {
      TERN_ASSIGN_OR_RETURN(pass, ApplyTest(test, subject, test_args));
    }
    if (pass == keep) out.push_back(item);
  }
  return Value::List(std::move(out));
}

StatusOr<Value> MapFilter(const Value& seq, const CallArgs& args, const TemplateOptions& options) {
  if (!seq.Truthy()) return Value::List();
  TERN_ASSIGN_OR_RETURN(ValueList items, Iterate(seq));
  ValueList out;
  if (const Value* attr = args.Get(99, "attribute"); attr != nullptr) {
    Value fallback = Arg(args, 99, "default");
    for (const Value& item : items) {
      Value v = LookupPath(item, attr->ToString());
      out.push_back(v.is_undefined() ? fallback : v);
    }
    return Value::List(std::move(out));
  }
  if (args.positional.empty() || !args.positional[0].is_string()) {
    return ArgError("filter 'map'", "expected a filter name or attribute=");
  }
  const std::string& name = args.positional[0].string_value();
  if (!IsKnownFilter(name)) return ArgError("filter 'map'", "unknown filter '" + name + "'");
  CallArgs inner;
  inner.positional.assign(args.positional.begin() + 1, args.positional.end());
  inner.keyword = args.keyword;
  for (const Value& item : items) {
    TERN_ASSIGN_OR_RETURN(Value v, ApplyFilter(name, item, inner, options));
    out.push_back(std::move(v));
  }
  return Value::List(std::move(out));
}

StatusOr<Value> SortFilter(const Value& seq, const CallArgs& args) {
  TERN_ASSIGN_OR_RETURN(ValueList items, Iterate(seq));
  bool reverse = Arg(args, 0, "reverse", Value(false)).Truthy();
  bool case_sensitive = Arg(args, 1, "case_sensitive", Value(false)).Truthy();
  Value attribute = Arg(args, 2, "attribute");
  auto key = [&](const Value& v) {
    Value k = attribute.is_undefined() ? v : LookupPath(v, attribute.ToString());
    if (!case_sensitive && k.is_string()) return Value(AsciiLower(k.string_value()));
    return k;
  };
  Status error;
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    if (!error.ok()) return false;
    StatusOr<bool> less = CompareOp("<", key(reverse ? b : a), key(reverse ? a : b));
    if (!less.ok()) {
      error = less.status();
      return false;
    }
    return *less;
  });
  if (!error.ok()) return ArgError("filter 'sort'", error.message());
  return Value::List(std::move(items));
}

StatusOr<Value> MinMax(const Value& seq, const CallArgs& args, bool want_max, const char* filter) {
  TERN_ASSIGN_OR_RETURN(ValueList items, Iterate(seq));
  if (items.empty()) return Value();
  Value attribute = Arg(args, 1, "attribute");
  auto key = [&](const Value& v) {
    return attribute.is_undefined() ? v : LookupPath(v, attribute.ToString());
  };
  Value best = items[0];
  for (size_t i = 1; i < items.size(); ++i) {
    StatusOr<bool> less = CompareOp("<", key(items[i]), key(best));
    if (!less.ok()) return ArgError(filter, less.status().message());
    StatusOr<bool> greater = CompareOp(">", key(items[i]), key(best));
    if (want_max ? *greater : *less) best = items[i];
  }
  return best;
}

StatusOr<Value> RoundFilter(const Value& v, const CallArgs& args) {
  if (!v.is_number() && !v.is_bool()) return ArgError("filter 'round'", "expected a number");
  if (!v.is_float()) return Value(v.int_value());  // ints stay ints
  int64_t precision = Arg(args, 0, "precision", Value(0)).int_value();
  std::string method = Arg(args, 1, "method", Value("common")).ToString();
  double scale = std::pow(10.0, static_cast<double>(precision));
  double x = v.AsDouble() * scale;
  if (method == "common") x = std::nearbyint(x);  // half to even, as Python
  else if (method == "ceil") x = std::ceil(x);
  else if (method == "floor") x = std::floor(x);
  else return ArgError("filter 'round'", "method must be common, ceil or floor");
  return Value(x / scale);
}

StatusOr<Value> IndentFilter(const Value& v, const CallArgs& args) {
  Value width = Arg(args, 0, "width", Value(4));
  bool first = Arg(args, 1, "first", Value(false)).Truthy();
  bool blank = Arg(args, 2, "blank", Value(false)).Truthy();
  std::string pad = width.is_string() ? width.string_value()
                                      : std::string(static_cast<size_t>(std::clamp<int64_t>(width.int_value(), 0, 256)), ' ');
  std::vector<std::string> lines = SplitLines(v.ToString() + "\n");
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) {
      out += "\n";
      if (blank || !lines[i].empty()) out += pad;
    }
    out += lines[i];
  }
  if (first) out = pad + out;
  return Value(std::move(out));
}

StatusOr<Value> JoinFilter(const Value& seq, const CallArgs& args, const TemplateOptions& options) {
  TERN_ASSIGN_OR_RETURN(ValueList items, Iterate(seq));
  std::string sep = Arg(args, 0, "d", Value("")).ToString();
  Value attribute = Arg(args, 1, "attribute");
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += sep;
    out += (attribute.is_undefined() ? items[i] : LookupPath(items[i], attribute.ToString())).ToString();
    if (out.size() > options.max_output_bytes) return ResourceExhausted("filter 'join': result too large");
  }
  return Value(std::move(out));
}

StatusOr<Value> ToIntFilter(const Value& v, const CallArgs& args) {
  Value fallback = Arg(args, 0, "default", Value(0));
  if (v.is_int() || v.is_bool()) return Value(v.int_value());
  if (v.is_float()) {
    if (!std::isfinite(v.float_value()) || std::fabs(v.float_value()) > 9.2e18) return fallback;
    return Value(static_cast<int64_t>(v.float_value()));
  }
  if (v.is_string()) {
    std::string s = Strip(v.string_value(), std::nullopt, true, true);
    s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
    if (s.empty() || s.find_first_of("xX") != std::string::npos) return fallback;
    char* end = nullptr;
    errno = 0;
    long long i = std::strtoll(s.c_str(), &end, 10);
    if (*end == '\0' && errno == 0) return Value(static_cast<int64_t>(i));
    double d = std::strtod(s.c_str(), &end);
    if (*end == '\0' && std::isfinite(d) && std::fabs(d) < 9.2e18) return Value(static_cast<int64_t>(d));
  }
  return fallback;
}

StatusOr<Value> ToFloatFilter(const Value& v, const CallArgs& args) {
  Value fallback = Arg(args, 0, "default", Value(0.0));
  if (v.is_number() || v.is_bool()) return Value(v.AsDouble());
  if (v.is_string()) {
    std::string s = Strip(v.string_value(), std::nullopt, true, true);
    if (s.find_first_of("xX") != std::string::npos) return fallback;  // no hex floats
    char* end = nullptr;
    double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && *end == '\0') return Value(d);
  }
  return fallback;
}

const std::map<std::string, FilterFn, std::less<>>& Filters() {
  using A = const CallArgs&;
  using O = const TemplateOptions&;
  static const auto* filters = new std::map<std::string, FilterFn, std::less<>>{
      {"trim", [](const Value& v, A args, O) -> StatusOr<Value> {
         Value chars = Arg(args, 0, "chars");
         std::optional<std::string> set;
         if (chars.is_string()) set = chars.string_value();
         return Value(Strip(v.ToString(), set, true, true));
       }},
      {"upper", [](const Value& v, A, O) -> StatusOr<Value> { return Value(AsciiUpper(v.ToString())); }},
      {"lower", [](const Value& v, A, O) -> StatusOr<Value> { return Value(AsciiLower(v.ToString())); }},
      {"capitalize", [](const Value& v, A, O) -> StatusOr<Value> { return Value(Capitalize(v.ToString())); }},
      {"title", [](const Value& v, A, O) -> StatusOr<Value> {
         // Words start after whitespace or one of -({[< (str.title() differs).
         std::string s = v.ToString();
         bool word_start = true;
         for (char& c : s) {
           bool sep = std::isspace(static_cast<unsigned char>(c)) || c == '-' || c == '(' || c == '{' ||
                      c == '[' || c == '<';
           if (sep) {
             word_start = true;
             continue;
           }
           c = word_start ? static_cast<char>(std::toupper(static_cast<unsigned char>(c)))
                          : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
           word_start = false;
         }
         return Value(std::move(s));
       }},
      {"length", [](const Value& v, A, O) -> StatusOr<Value> {
         if (v.is_string()) return Value(static_cast<int64_t>(Utf8Length(v.string_value())));
         if (v.is_list()) return Value(static_cast<int64_t>(v.list().size()));
         if (v.is_dict()) return Value(static_cast<int64_t>(v.dict().size()));
         if (v.is_undefined()) return Value(0);
         return ArgError("filter 'length'", "object of type '" + v.TypeName() + "' has no length");
       }},
      {"first", [](const Value& v, A, O) -> StatusOr<Value> {
         TERN_ASSIGN_OR_RETURN(ValueList items, Iterate(v));
         return items.empty() ? Value() : items.front();
       }},
      {"last", [](const Value& v, A, O) -> StatusOr<Value> {
         TERN_ASSIGN_OR_RETURN(ValueList items, Iterate(v));
         return items.empty() ? Value() : items.back();
       }},
      {"join", [](const Value& v, A args, O options) { return JoinFilter(v, args, options); }},
      {"default", [](const Value& v, A args, O) -> StatusOr<Value> {
         Value fallback = Arg(args, 0, "default_value", Value(""));
         bool boolean = Arg(args, 1, "boolean", Value(false)).Truthy();
         if (v.is_undefined() || (boolean && !v.Truthy())) return fallback;
         return v;
       }},
      {"replace", [](const Value& v, A args, O options) -> StatusOr<Value> {
         const Value* old_s = args.Get(0, "old");
         const Value* new_s = args.Get(1, "new");
         if (old_s == nullptr || new_s == nullptr) return ArgError("filter 'replace'", "needs old and new");
         int64_t count = Arg(args, 2, "count", Value(-1)).int_value();
         return Replace(v.ToString(), old_s->ToString(), new_s->ToString(), count,
                        options.max_output_bytes);
       }},
      {"list", [](const Value& v, A, O) -> StatusOr<Value> {
         TERN_ASSIGN_OR_RETURN(ValueList items, Iterate(v));
         return Value::List(std::move(items));
       }},
      {"items", [](const Value& v, A, O) -> StatusOr<Value> {
         TERN_ASSIGN_OR_RETURN(ValueList items, Items(v, "filter 'items'"));
         return Value::List(std::move(items));
       }},
      {"dictsort", [](const Value& v, A args, O) -> StatusOr<Value> {
         TERN_ASSIGN_OR_RETURN(ValueList items, Items(v, "filter 'dictsort'"));
         CallArgs sort_args;
         sort_args.keyword = {{"reverse", Arg(args, 2, "reverse", Value(false))},
                              {"case_sensitive", Arg(args, 0, "case_sensitive", Value(false))},
                              {"attribute", Value(Arg(args, 1, "by", Value("key")).ToString() == "value" ? "1" : "0")}};
         return SortFilter(Value::List(std::move(items)), sort_args);
       }},
      {"keys", [](const Value& v, A, O) -> StatusOr<Value> {
         if (!v.is_dict()) return ArgError("filter 'keys'", "expected a mapping");
         TERN_ASSIGN_OR_RETURN(ValueList keys, Iterate(v));
         return Value::List(std::move(keys));
       }},
      {"values", [](const Value& v, A, O) -> StatusOr<Value> {
         if (!v.is_dict()) return ArgError("filter 'values'", "expected a mapping");
         ValueList out;
         for (const auto& [k, val] : v.dict()) out.push_back(val);
         return Value::List(std::move(out));
       }},
      {"tojson", [](const Value& v, A args, O) -> StatusOr<Value> {
         Value indent = Arg(args, 0, "indent");
         int width = AsInteger(indent) ? static_cast<int>(std::clamp<int64_t>(indent.int_value(), 0, 64)) : -1;
         return Value(v.ToJson(width));
       }},
      {"string", [](const Value& v, A, O) -> StatusOr<Value> { return Value(v.ToString()); }},
      {"int", [](const Value& v, A args, O) { return ToIntFilter(v, args); }},
      {"float", [](const Value& v, A args, O) { return ToFloatFilter(v, args); }},
      {"abs", [](const Value& v, A, O) -> StatusOr<Value> {
         if (v.is_float()) return Value(std::fabs(v.float_value()));
         if (AsInteger(v)) {
           if (v.int_value() == INT64_MIN) return OutOfRange("filter 'abs': integer overflow");
           return Value(v.int_value() < 0 ? -v.int_value() : v.int_value());
         }
         return ArgError("filter 'abs'", "expected a number, got '" + v.TypeName() + "'");
       }},
      {"round", [](const Value& v, A args, O) { return RoundFilter(v, args); }},
      {"reverse", [](const Value& v, A, O) -> StatusOr<Value> {
         if (v.is_string()) {
           TERN_ASSIGN_OR_RETURN(ValueList chars, Iterate(v));
           std::string out;
           for (auto it = chars.rbegin(); it != chars.rend(); ++it) out += it->string_value();
           return Value(std::move(out));
         }
         TERN_ASSIGN_OR_RETURN(ValueList items, Iterate(v));
         std::reverse(items.begin(), items.end());
         return Value::List(std::move(items));
       }},
      {"sort", [](const Value& v, A args, O) { return SortFilter(v, args); }},
      {"unique", [](const Value& v, A args, O) -> StatusOr<Value> {
         TERN_ASSIGN_OR_RETURN(ValueList items, Iterate(v));
         bool case_sensitive = Arg(args, 0, "case_sensitive", Value(false)).Truthy();
         Value attribute = Arg(args, 1, "attribute");
         ValueList out, seen;
         for (const Value& item : items) {
           Value k = attribute.is_undefined() ? item : LookupPath(item, attribute.ToString());
           if (!case_sensitive && k.is_string()) k = Value(AsciiLower(k.string_value()));
           bool dup = std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return s.Equals(k); });
           if (dup) continue;
           seen.push_back(k);
           out.push_back(item);
         }
         return Value::List(std::move(out));
       }},
      {"map", [](const Value& v, A args, O options) { return MapFilter(v, args, options); }},
      {"select", [](const Value& v, A args, O) { return SelectImpl(v, args, false, true, "filter 'select'"); }},
      {"reject", [](const Value& v, A args, O) { return SelectImpl(v, args, false, false, "filter 'reject'"); }},
      {"selectattr", [](const Value& v, A args, O) {
         return SelectImpl(v, args, true, true, "filter 'selectattr'");
       }},
      {"rejectattr", [](const Value& v, A args, O) {
         return SelectImpl(v, args, true, false, "filter 'rejectattr'");
       }},
      {"attr", [](const Value& v, A args, O) -> StatusOr<Value> {
         return GetAttr(v, Arg(args, 0, "name").ToString());
       }},
      {"safe", [](const Value& v, A, O) -> StatusOr<Value> { return v; }},
      {"escape", [](const Value& v, A, O) -> StatusOr<Value> { return Value(HtmlEscape(v.ToString())); }},
      {"indent", [](const Value& v, A args, O) { return IndentFilter(v, args); }},
      {"startswith", [](const Value& v, A args, O) -> StatusOr<Value> {
         return Value(StartsWith(v.ToString(), Arg(args, 0, "prefix").ToString()));
       }},
      {"endswith", [](const Value& v, A args, O) -> StatusOr<Value> {
         return Value(EndsWith(v.ToString(), Arg(args, 0, "suffix").ToString()));
       }},
      {"sum", [](const Value& v, A args, O options) -> StatusOr<Value> {
         TERN_ASSIGN_OR_RETURN(ValueList items, Iterate(v));
         Value attribute = Arg(args, 0, "attribute");
         Value total = Arg(args, 1, "start", Value(0));
         for (const Value& item : items) {
           Value x = attribute.is_undefined() ? item : LookupPath(item, attribute.ToString());
           TERN_ASSIGN_OR_RETURN(total, BinaryOp("+", total, x, options.max_output_bytes));
         }
         return total;
       }},
      {"min", [](const Value& v, A args, O) { return MinMax(v, args, false, "filter 'min'"); }},
      {"max", [](const Value& v, A args, O) { return MinMax(v, args, true, "filter 'max'"); }},
      {"center", [](const Value& v, A args, O) -> StatusOr<Value> {
         std::string s = v.ToString();
         int64_t width = std::clamp<int64_t>(Arg(args, 0, "width", Value(80)).int_value(), 0, 4096);
         int64_t len = static_cast<int64_t>(Utf8Length(s));
         if (width <= len) return Value(s);
         int64_t margin = width - len;
         int64_t left = margin / 2 + (margin & width & 1);
         return Value(std::string(static_cast<size_t>(left), ' ') + s +
                      std::string(static_cast<size_t>(margin - left), ' '));
       }},
      {"wordcount", [](const Value& v, A, O) -> StatusOr<Value> {
         // Runs of word characters (letters, digits, '_', non-ASCII bytes).
         int64_t words = 0;
         bool in_word = false;
         for (unsigned char c : v.ToString()) {
           bool word_char = std::isalnum(c) || c == '_' || c >= 0x80;
           if (word_char && !in_word) ++words;
           in_word = word_char;
         }
         return Value(words);
       }},
  };
  return *filters;
}

std::string_view CanonicalFilter(std::string_view name) {
  if (name == "d") return "default";
  if (name == "count") return "length";
  if (name == "e" || name == "forceescape") return "escape";
  return name;
}

}  // namespace

bool IsKnownFilter(std::string_view name) {
  return Filters().find(CanonicalFilter(name)) != Filters().end();
}

StatusOr<Value> ApplyFilter(const std::string& name, const Value& operand, const CallArgs& args,
                            const TemplateOptions& options) {
  auto it = Filters().find(CanonicalFilter(name));
  if (it == Filters().end()) return InvalidArgument("unknown filter '" + name + "'");
  return it->second(operand, args, options);
}

}  // namespace tern
