#include "jinja/value.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unordered_set>

namespace tern {

const Value* CallArgs::Get(size_t index, std::string_view name) const {
  if (index < positional.size()) return &positional[index];
  for (const auto& [key, value] : keyword) {
    if (key == name) return &value;
  }
  return nullptr;
}

Value::Value(std::string s)
    : kind_(Kind::kString), str_(std::make_shared<const std::string>(std::move(s))) {}

Value Value::None() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}

Value Value::List(ValueList items) {
  Value v;
  v.kind_ = Kind::kList;
  v.list_ = std::make_shared<ValueList>(std::move(items));
  return v;
}

Value Value::Dict(ValueDict items) {
  Value v;
  v.kind_ = Kind::kDict;
  v.dict_ = std::make_shared<ValueDict>();
  for (auto& [key, value] : items) v.Set(key, std::move(value));
  return v;
}

Value Value::Namespace(ValueDict items) {
  Value v = Dict(std::move(items));
  v.namespace_ = true;
  return v;
}

Value Value::MakeFunction(std::string name, Function fn) {
  Value v;
  v.kind_ = Kind::kFunction;
  v.fn_ = std::make_shared<const FunctionBox>(FunctionBox{std::move(name), std::move(fn)});
  return v;
}

bool Value::is_namespace() const { return kind_ == Kind::kDict && namespace_; }

double Value::AsDouble() const {
  if (kind_ == Kind::kFloat) return float_;
  return static_cast<double>(int_);
}

const Value* Value::Find(std::string_view key) const {
  if (kind_ != Kind::kDict) return nullptr;
  for (const auto& [k, v] : *dict_) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Value::Set(const std::string& key, Value value) const {
  if (kind_ != Kind::kDict) return;
  for (auto& [k, v] : *dict_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  dict_->emplace_back(key, std::move(value));
}

bool Value::Truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
    case Kind::kInt:
      return int_ != 0;
    case Kind::kFloat:
      return float_ != 0;
    case Kind::kString:
      return !str_->empty();
    case Kind::kList:
      return !list_->empty();
    case Kind::kDict:
      return !dict_->empty();
    case Kind::kFunction:
      return true;
  }
  return false;
}

std::string FormatFloat(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == 0) return std::signbit(v) ? "-0.0" : "0.0";
  char buf[64];
  int precision = 1;
  for (; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  int exponent = static_cast<int>(std::floor(std::log10(std::fabs(v))));
  // log10 can be off by one near powers of ten; confirm with %e.
  std::snprintf(buf, sizeof(buf), "%.*e", precision - 1, v);
  const char* e = std::strchr(buf, 'e');
  if (e != nullptr) exponent = std::atoi(e + 1);
  if (exponent >= -4 && exponent < 16) {
    int decimals = precision - 1 - exponent;
    if (decimals < 0) decimals = 0;
    std::snprintf(buf, sizeof(buf), "%.*f", decimals, v);
    std::string s = buf;
    if (s.find('.') == std::string::npos) s += ".0";
    return s;
  }
  return buf;  // already "d.ddde+XX"
}

namespace {

std::string ReprString(const std::string& s) {
  bool has_single = s.find('\'') != std::string::npos;
  bool has_double = s.find('"') != std::string::npos;
  char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == static_cast<unsigned char>(quote)) {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += quote;
  return out;
}

void AppendJsonString(const std::string& s, std::string* out) {
  *out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': *out += "\\\""; break;
      case '\\': *out += "\\\\"; break;
      case '\n': *out += "\\n"; break;
      case '\r': *out += "\\r"; break;
      case '\t': *out += "\\t"; break;
      case '\b': *out += "\\b"; break;
      case '\f': *out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          *out += buf;
        } else {
          *out += static_cast<char>(c);
        }
    }
  }
  *out += '"';
}

void AppendJson(const Value& v, int indent, int depth, std::string* out);

// Appends a JSON array or object: `open`, then append_item(i) for each of the
// n items (separated, and on their own lines when indent >= 0), then `close`.
template <typename AppendItem>
void AppendJsonItems(size_t n, char open, char close, int indent, int depth, std::string* out,
                     AppendItem append_item) {
  auto newline = [&](int d) {
    *out += '\n';
    out->append(static_cast<size_t>(indent) * d, ' ');
  };
  *out += open;
  if (n == 0) {
    *out += close;
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    if (i > 0) *out += indent >= 0 ? "," : ", ";
    if (indent >= 0) newline(depth + 1);
    append_item(i);
  }
  if (indent >= 0) newline(depth);
  *out += close;
}

void AppendJson(const Value& v, int indent, int depth, std::string* out) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
    case Value::Kind::kFunction:
      *out += "null";
      return;
    case Value::Kind::kBool:
      *out += v.bool_value() ? "true" : "false";
      return;
    case Value::Kind::kInt:
      *out += std::to_string(v.int_value());
      return;
    case Value::Kind::kFloat: {
      double f = v.float_value();
      if (std::isnan(f)) *out += "NaN";
      else if (std::isinf(f)) *out += f > 0 ? "Infinity" : "-Infinity";
      else *out += FormatFloat(f);
      return;
    }
    case Value::Kind::kString:
      AppendJsonString(v.string_value(), out);
      return;
    case Value::Kind::kList: {
      const ValueList& items = v.list();
      AppendJsonItems(items.size(), '[', ']', indent, depth, out,
                      [&](size_t i) { AppendJson(items[i], indent, depth + 1, out); });
      return;
    }
    case Value::Kind::kDict: {
      const ValueDict& items = v.dict();
      AppendJsonItems(items.size(), '{', '}', indent, depth, out, [&](size_t i) {
        AppendJsonString(items[i].first, out);
        *out += ": ";
        AppendJson(items[i].second, indent, depth + 1, out);
      });
      return;
    }
  }
}

}  // namespace

std::string Value::ToString() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "";
    case Kind::kString:
      return *str_;
    default:
      return Repr();
  }
}

std::string Value::Repr() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "";
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return int_ ? "True" : "False";
    case Kind::kInt:
      return std::to_string(int_);
    case Kind::kFloat:
      return FormatFloat(float_);
    case Kind::kString:
      return ReprString(*str_);
    case Kind::kList: {
      std::string out = "[";
      for (size_t i = 0; i < list_->size(); ++i) {
        if (i > 0) out += ", ";
        out += (*list_)[i].Repr();
      }
      return out + "]";
    }
    case Kind::kDict: {
      std::string out = "{";
      for (size_t i = 0; i < dict_->size(); ++i) {
        if (i > 0) out += ", ";
        out += ReprString((*dict_)[i].first) + ": " + (*dict_)[i].second.Repr();
      }
      return out + "}";
    }
    case Kind::kFunction:
      return "<function " + fn_->name + ">";
  }
  return "";
}

std::string Value::ToJson(int indent) const {
  std::string out;
  AppendJson(*this, indent, 0, &out);
  return out;
}

std::string Value::TypeName() const {
  switch (kind_) {
    case Kind::kUndefined: return "undefined";
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "str";
    case Kind::kList: return "list";
    case Kind::kDict: return namespace_ ? "namespace" : "dict";
    case Kind::kFunction: return "function";
  }
  return "?";
}

bool Value::Equals(const Value& other) const {
  bool numeric_a = kind_ == Kind::kBool || is_number();
  bool numeric_b = other.kind_ == Kind::kBool || other.is_number();
  if (numeric_a && numeric_b) {
    if (kind_ != Kind::kFloat && other.kind_ != Kind::kFloat) return int_ == other.int_;
    return AsDouble() == other.AsDouble();
  }
  if (kind_ != other.kind_) return false;
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return true;
    case Kind::kString:
      return *str_ == *other.str_;
    case Kind::kList: {
      if (list_ == other.list_) return true;
      if (list_->size() != other.list_->size()) return false;
      for (size_t i = 0; i < list_->size(); ++i) {
        if (!(*list_)[i].Equals((*other.list_)[i])) return false;
      }
      return true;
    }
    case Kind::kDict: {
      if (dict_ == other.dict_) return true;
      if (dict_->size() != other.dict_->size()) return false;
      for (const auto& [key, value] : *dict_) {
        const Value* o = other.Find(key);
        if (o == nullptr || !value.Equals(*o)) return false;
      }
      return true;
    }
    case Kind::kFunction:
      return fn_ == other.fn_;
    default:
      return false;
  }
}

bool Value::Reaches(const Value& container) const {
  const void* target = container.kind_ == Kind::kList   ? (const void*)container.list_.get()
                       : container.kind_ == Kind::kDict ? (const void*)container.dict_.get()
                                                        : nullptr;
  if (target == nullptr) return false;
  std::vector<const Value*> stack = {this};
  std::unordered_set<const void*> seen;  // shared sub-containers are walked once
  while (!stack.empty()) {
    const Value* v = stack.back();
    stack.pop_back();
    if (v->kind_ == Kind::kList) {
      if (v->list_.get() == target) return true;
      if (!seen.insert(v->list_.get()).second) continue;
      for (const Value& item : *v->list_) stack.push_back(&item);
    } else if (v->kind_ == Kind::kDict) {
      if (v->dict_.get() == target) return true;
      if (!seen.insert(v->dict_.get()).second) continue;
      for (const auto& [k, item] : *v->dict_) stack.push_back(&item);
    }
  }
  return false;
}

Value Value::DeepCopy() const {
  if (kind_ == Kind::kList) {
    ValueList items;
    items.reserve(list_->size());
    for (const Value& v : *list_) items.push_back(v.DeepCopy());
    return List(std::move(items));
  }
  if (kind_ == Kind::kDict) {
    Value copy = Dict();
    copy.namespace_ = namespace_;
    for (const auto& [k, v] : *dict_) copy.dict_->emplace_back(k, v.DeepCopy());
    return copy;
  }
  return *this;
}

std::vector<size_t> Utf8Boundaries(std::string_view s) {
  std::vector<size_t> bounds;
  bounds.reserve(s.size() + 1);
  size_t i = 0;
  while (i < s.size()) {
    bounds.push_back(i);
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t len = 1;
    if (c >= 0xF0 && c < 0xF8) len = 4;
    else if (c >= 0xE0) len = (c < 0xF0) ? 3 : 1;
    else if (c >= 0xC0) len = 2;
    // Only continue over real continuation bytes; invalid bytes count alone.
    size_t j = 1;
    while (j < len && i + j < s.size() &&
           (static_cast<unsigned char>(s[i + j]) & 0xC0) == 0x80) {
      ++j;
    }
    i += j;
  }
  bounds.push_back(s.size());
  return bounds;
}

size_t Utf8Length(std::string_view s) { return Utf8Boundaries(s).size() - 1; }

}  // namespace tern
