#include "gguf/gguf_value.h"

#include <limits>

namespace tern::gguf {

const char* ValueTypeName(ValueType t) {
  switch (t) {
    case ValueType::kUint8: return "uint8";
    case ValueType::kInt8: return "int8";
    case ValueType::kUint16: return "uint16";
    case ValueType::kInt16: return "int16";
    case ValueType::kUint32: return "uint32";
    case ValueType::kInt32: return "int32";
    case ValueType::kFloat32: return "float32";
    case ValueType::kBool: return "bool";
    case ValueType::kString: return "string";
    case ValueType::kArray: return "array";
    case ValueType::kUint64: return "uint64";
    case ValueType::kInt64: return "int64";
    case ValueType::kFloat64: return "float64";
  }
  return "unknown";
}

bool IsKnownValueType(uint32_t id) { return id <= static_cast<uint32_t>(ValueType::kFloat64); }

uint64_t MinEncodedBytes(ValueType t) {
  switch (t) {
    case ValueType::kUint8:
    case ValueType::kInt8:
    case ValueType::kBool: return 1;
    case ValueType::kUint16:
    case ValueType::kInt16: return 2;
    case ValueType::kUint32:
    case ValueType::kInt32:
    case ValueType::kFloat32: return 4;
    case ValueType::kUint64:
    case ValueType::kInt64:
    case ValueType::kFloat64:
    case ValueType::kString: return 8;   // uint64 length
    case ValueType::kArray: return 12;   // uint32 elem type + uint64 count
  }
  return 1;
}

bool IsIntegerType(ValueType t) {
  switch (t) {
    case ValueType::kUint8:
    case ValueType::kInt8:
    case ValueType::kUint16:
    case ValueType::kInt16:
    case ValueType::kUint32:
    case ValueType::kInt32:
    case ValueType::kUint64:
    case ValueType::kInt64: return true;
    default: return false;
  }
}

namespace {
bool IsSigned(ValueType t) {
  return t == ValueType::kInt8 || t == ValueType::kInt16 || t == ValueType::kInt32 ||
         t == ValueType::kInt64;
}
}  // namespace

std::optional<int64_t> Value::AsInt() const {
  if (type == ValueType::kBool) return static_cast<int64_t>(u != 0);
  if (!IsIntegerType(type)) return std::nullopt;
  if (IsSigned(type)) return i;
  if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
  return static_cast<int64_t>(u);
}

std::optional<double> Value::AsFloat() const {
  if (type == ValueType::kFloat32 || type == ValueType::kFloat64) return f;
  if (!IsIntegerType(type)) return std::nullopt;
  return IsSigned(type) ? static_cast<double>(i) : static_cast<double>(u);
}

std::optional<bool> Value::AsBool() const {
  if (type == ValueType::kBool) return u != 0;
  if (!IsIntegerType(type)) return std::nullopt;
  return IsSigned(type) ? i != 0 : u != 0;
}

const std::string* Value::AsString() const {
  return type == ValueType::kString ? &str : nullptr;
}

namespace {
Value Signed(ValueType t, int64_t v) {
  Value out;
  out.type = t;
  out.i = v;
  return out;
}
Value Unsigned(ValueType t, uint64_t v) {
  Value out;
  out.type = t;
  out.u = v;
  return out;
}
Value Floating(ValueType t, double v) {
  Value out;
  out.type = t;
  out.f = v;
  return out;
}
}  // namespace

Value Value::Uint8(uint8_t v) { return Unsigned(ValueType::kUint8, v); }
Value Value::Int8(int8_t v) { return Signed(ValueType::kInt8, v); }
Value Value::Uint16(uint16_t v) { return Unsigned(ValueType::kUint16, v); }
Value Value::Int16(int16_t v) { return Signed(ValueType::kInt16, v); }
Value Value::Uint32(uint32_t v) { return Unsigned(ValueType::kUint32, v); }
Value Value::Int32(int32_t v) { return Signed(ValueType::kInt32, v); }
Value Value::Uint64(uint64_t v) { return Unsigned(ValueType::kUint64, v); }
Value Value::Int64(int64_t v) { return Signed(ValueType::kInt64, v); }
Value Value::Float32(float v) { return Floating(ValueType::kFloat32, v); }
Value Value::Float64(double v) { return Floating(ValueType::kFloat64, v); }
Value Value::Bool(bool v) { return Unsigned(ValueType::kBool, v ? 1 : 0); }

Value Value::String(std::string v) {
  Value out;
  out.type = ValueType::kString;
  out.str = std::move(v);
  return out;
}

Value Value::Array(ValueType elem_type, std::vector<Value> items) {
  Value out;
  out.type = ValueType::kArray;
  out.elem_type = elem_type;
  out.array = std::move(items);
  return out;
}

}  // namespace tern::gguf
