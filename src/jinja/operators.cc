#include "jinja/operators.h"

#include <cmath>

namespace tern {
namespace {

bool IsNumeric(const Value& v) { return v.is_number() || v.is_bool(); }
bool IsIntegral(const Value& v) { return v.is_int() || v.is_bool(); }

Status TypeError(const std::string& op, const Value& a, const Value& b) {
  return InvalidArgument("unsupported operand types for " + op + ": '" + a.TypeName() +
                         "' and '" + b.TypeName() + "'");
}

Status TooLarge(size_t max_bytes) {
  return ResourceExhausted("value larger than the output limit of " + std::to_string(max_bytes) +
                           " bytes");
}

int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t FloorMod(int64_t a, int64_t b) {
  int64_t m = a % b;
  if (m != 0 && ((m < 0) != (b < 0))) m += b;
  return m;
}

StatusOr<Value> Repeat(const Value& seq, int64_t times, size_t max_bytes) {
  if (times < 0) times = 0;
  if (seq.is_string()) {
    const std::string& s = seq.string_value();
    if (!s.empty() && static_cast<uint64_t>(times) > max_bytes / s.size()) return TooLarge(max_bytes);
    std::string out;
    out.reserve(s.size() * static_cast<size_t>(times));
    for (int64_t i = 0; i < times; ++i) out += s;
    return Value(std::move(out));
  }
  const ValueList& items = seq.list();
  if (!items.empty() && static_cast<uint64_t>(times) > max_bytes / (items.size() * sizeof(Value))) {
    return TooLarge(max_bytes);
  }
  ValueList out;
  for (int64_t i = 0; i < times; ++i) out.insert(out.end(), items.begin(), items.end());
  return Value::List(std::move(out));
}

StatusOr<Value> Arithmetic(const std::string& op, const Value& a, const Value& b) {
  if (IsIntegral(a) && IsIntegral(b)) {
    int64_t x = a.int_value(), y = b.int_value(), r = 0;
    if (op == "+") {
      if (__builtin_add_overflow(x, y, &r)) return OutOfRange("integer overflow in +");
      return Value(r);
    }
    if (op == "-") {
      if (__builtin_sub_overflow(x, y, &r)) return OutOfRange("integer overflow in -");
      return Value(r);
    }
    if (op == "*") {
      if (__builtin_mul_overflow(x, y, &r)) return OutOfRange("integer overflow in *");
      return Value(r);
    }
    if (op == "/") {
      if (y == 0) return InvalidArgument("division by zero");
      return Value(static_cast<double>(x) / static_cast<double>(y));
    }
    if (op == "//" || op == "%") {
      if (y == 0) return InvalidArgument("integer division or modulo by zero");
      if (x == INT64_MIN && y == -1) return OutOfRange("integer overflow in " + op);
      return Value(op == "//" ? FloorDiv(x, y) : FloorMod(x, y));
    }
    if (op == "**") {
      if (y < 0) return Value(std::pow(static_cast<double>(x), static_cast<double>(y)));
      int64_t result = 1;
      for (int64_t i = 0; i < y; ++i) {
        if (__builtin_mul_overflow(result, x, &result)) return OutOfRange("integer overflow in **");
        if (result == 0 || result == 1) break;
        if (result == -1) {
          result = ((y - i - 1) % 2 == 0) ? -1 : 1;
          break;
        }
      }
      return Value(result);
    }
  }
  double x = a.AsDouble(), y = b.AsDouble();
  if (op == "+") return Value(x + y);
  if (op == "-") return Value(x - y);
  if (op == "*") return Value(x * y);
  if (op == "/") {
    if (y == 0) return InvalidArgument("division by zero");
    return Value(x / y);
  }
  if (op == "//" || op == "%") {
    if (y == 0) return InvalidArgument("float division or modulo by zero");
    double m = std::fmod(x, y);
    if (m != 0 && ((m < 0) != (y < 0))) m += y;
    if (op == "%") return Value(m);
    return Value(std::floor((x - m) / y + 0.5));
  }
  if (op == "**") return Value(std::pow(x, y));
  return InvalidArgument("unknown operator '" + op + "'");
}

StatusOr<int> Order(const Value& a, const Value& b, const std::string& op) {
  if (IsNumeric(a) && IsNumeric(b)) {
    if (IsIntegral(a) && IsIntegral(b)) {
      return a.int_value() < b.int_value() ? -1 : (a.int_value() > b.int_value() ? 1 : 0);
    }
    double x = a.AsDouble(), y = b.AsDouble();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    int c = a.string_value().compare(b.string_value());
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.is_list() && b.is_list()) {
    const ValueList& x = a.list();
    const ValueList& y = b.list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (x[i].Equals(y[i])) continue;
      return Order(x[i], y[i], op);
    }
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  return InvalidArgument("'" + op + "' not supported between '" + a.TypeName() + "' and '" +
                         b.TypeName() + "'");
}

StatusOr<bool> Contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::kString:
      if (!item.is_string()) {
        return InvalidArgument("'in <string>' requires a string on the left, not '" +
                               item.TypeName() + "'");
      }
      return container.string_value().find(item.string_value()) != std::string::npos;
    case Value::Kind::kList:
      for (const Value& v : container.list()) {
        if (v.Equals(item)) return true;
      }
      return false;
    case Value::Kind::kDict:
      return container.Find(item.ToString()) != nullptr;
    case Value::Kind::kUndefined:
      return false;
    default:
      return InvalidArgument("argument of type '" + container.TypeName() + "' is not iterable");
  }
}

// Python slice.indices(): clamps start/stop for a sequence of `length`.
void SliceIndices(int64_t length, const Value* start_v, const Value* stop_v, int64_t step,
                  int64_t* start, int64_t* stop) {
  auto clamp = [&](const Value* v, int64_t dflt, bool is_start) {
    if (v == nullptr || v->is_none() || v->is_undefined()) return dflt;
    int64_t i = v->int_value();
    if (i < 0) {
      i += length;
      if (i < 0) i = step < 0 ? -1 : 0;
    } else if (i >= length) {
      i = step < 0 ? length - 1 : length;
    }
    (void)is_start;
    return i;
  };
  *start = clamp(start_v, step < 0 ? length - 1 : 0, true);
  *stop = clamp(stop_v, step < 0 ? -1 : length, false);
}

}  // namespace

std::optional<int64_t> AsInteger(const Value& v) {
  if (IsIntegral(v)) return v.int_value();
  return std::nullopt;
}

StatusOr<Value> BinaryOp(const std::string& op, const Value& a, const Value& b, size_t max_bytes) {
  if (op == "~") {
    std::string out = a.ToString();
    std::string right = b.ToString();
    if (out.size() + right.size() > max_bytes) return TooLarge(max_bytes);
    return Value(out + right);
  }
  if (IsNumeric(a) && IsNumeric(b)) return Arithmetic(op, a, b);
  if (op == "+") {
    bool a_str = a.is_string() || a.is_undefined();
    bool b_str = b.is_string() || b.is_undefined();
    if (a_str && b_str) {
      size_t size = a.ToString().size() + b.ToString().size();
      if (size > max_bytes) return TooLarge(max_bytes);
      return Value(a.ToString() + b.ToString());
    }
    if (a.is_list() && b.is_list()) {
      ValueList out = a.list();
      out.insert(out.end(), b.list().begin(), b.list().end());
      if (out.size() * sizeof(Value) > max_bytes) return TooLarge(max_bytes);
      return Value::List(std::move(out));
    }
    return TypeError(op, a, b);
  }
  if (op == "*") {
    if ((a.is_string() || a.is_list()) && IsIntegral(b)) return Repeat(a, b.int_value(), max_bytes);
    if ((b.is_string() || b.is_list()) && IsIntegral(a)) return Repeat(b, a.int_value(), max_bytes);
  }
  return TypeError(op, a, b);
}

StatusOr<bool> CompareOp(const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return a.Equals(b);
  if (op == "!=") return !a.Equals(b);
  if (op == "in") return Contains(b, a);
  if (op == "not in") {
    TERN_ASSIGN_OR_RETURN(bool in, Contains(b, a));
    return !in;
  }
  TERN_ASSIGN_OR_RETURN(int order, Order(a, b, op));
  if (op == "<") return order < 0;
  if (op == "<=") return order <= 0;
  if (op == ">") return order > 0;
  if (op == ">=") return order >= 0;
  return InvalidArgument("unknown comparison '" + op + "'");
}

StatusOr<Value> UnaryMinus(const Value& v) {
  if (v.is_float()) return Value(-v.float_value());
  if (IsIntegral(v)) {
    if (v.int_value() == INT64_MIN) return OutOfRange("integer overflow in unary -");
    return Value(-v.int_value());
  }
  return InvalidArgument("bad operand type for unary -: '" + v.TypeName() + "'");
}

Value GetAttr(const Value& object, const std::string& name) {
  if (object.is_dict()) {
    const Value* found = object.Find(name);
    if (found != nullptr) return *found;
  }
  return Value();
}

Value GetItem(const Value& object, const Value& key) {
  if (object.is_dict()) {
    const Value* found = object.Find(key.ToString());
    return found != nullptr ? *found : Value();
  }
  std::optional<int64_t> index = AsInteger(key);
  if (!index.has_value()) return Value();
  if (object.is_list()) {
    int64_t n = static_cast<int64_t>(object.list().size());
    int64_t i = *index < 0 ? *index + n : *index;
    if (i < 0 || i >= n) return Value();
    return object.list()[static_cast<size_t>(i)];
  }
  if (object.is_string()) {
    std::vector<size_t> bounds = Utf8Boundaries(object.string_value());
    int64_t n = static_cast<int64_t>(bounds.size()) - 1;
    int64_t i = *index < 0 ? *index + n : *index;
    if (i < 0 || i >= n) return Value();
    size_t begin = bounds[static_cast<size_t>(i)];
    return Value(object.string_value().substr(begin, bounds[static_cast<size_t>(i) + 1] - begin));
  }
  return Value();
}

StatusOr<Value> Slice(const Value& object, const Value* start, const Value* stop, const Value* step) {
  for (const Value* part : {start, stop, step}) {
    if (part != nullptr && !part->is_none() && !part->is_undefined() && !AsInteger(*part)) {
      return InvalidArgument("slice indices must be integers or none, not '" + part->TypeName() + "'");
    }
  }
  int64_t step_value = 1;
  if (step != nullptr && !step->is_none() && !step->is_undefined()) step_value = step->int_value();
  if (step_value == 0) return InvalidArgument("slice step cannot be zero");
  if (object.is_list() || object.is_string()) {
    std::vector<size_t> bounds;
    int64_t length = 0;
    if (object.is_list()) {
      length = static_cast<int64_t>(object.list().size());
    } else {
      bounds = Utf8Boundaries(object.string_value());
      length = static_cast<int64_t>(bounds.size()) - 1;
    }
    int64_t begin = 0, end = 0;
    SliceIndices(length, start, stop, step_value, &begin, &end);
    ValueList items;
    std::string text;
    for (int64_t i = begin; step_value > 0 ? i < end : i > end; i += step_value) {
      if (object.is_list()) {
        items.push_back(object.list()[static_cast<size_t>(i)]);
      } else {
        size_t b = bounds[static_cast<size_t>(i)];
        text.append(object.string_value(), b, bounds[static_cast<size_t>(i) + 1] - b);
      }
    }
    if (object.is_list()) return Value::List(std::move(items));
    return Value(std::move(text));
  }
  return Value();  // like item access: undefined rather than an error
}

StatusOr<ValueList> Iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kList:
      return v.list();
    case Value::Kind::kDict: {
      ValueList keys;
      for (const auto& [key, value] : v.dict()) keys.emplace_back(key);
      return keys;
    }
    case Value::Kind::kString: {
      std::vector<size_t> bounds = Utf8Boundaries(v.string_value());
      ValueList chars;
      for (size_t i = 0; i + 1 < bounds.size(); ++i) {
        chars.emplace_back(v.string_value().substr(bounds[i], bounds[i + 1] - bounds[i]));
      }
      return chars;
    }
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return ValueList{};
    default:
      return InvalidArgument("'" + v.TypeName() + "' object is not iterable");
  }
}

}  // namespace tern
