// A GGUF metadata value: a scalar, a string, or an array (arrays may nest).
//
// Invariants: for kArray every element has type == elem_type (the reader
// guarantees it; the writer rejects values that break it). Plain value type,
// no thread rules beyond those of std::string/std::vector.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tern::gguf {

// Type ids as stored in the file.
enum class ValueType : uint32_t {
  kUint8 = 0, kInt8 = 1, kUint16 = 2, kInt16 = 3, kUint32 = 4, kInt32 = 5,
  kFloat32 = 6, kBool = 7, kString = 8, kArray = 9, kUint64 = 10,
  kInt64 = 11, kFloat64 = 12,
};
const char* ValueTypeName(ValueType t);
// True for the ids above (file bytes may hold anything).
bool IsKnownValueType(uint32_t id);
// Bytes the encoding of one value of this type takes at least (strings and
// arrays: their length/count prefix). Used to bound counts before allocating.
uint64_t MinEncodedBytes(ValueType t);
bool IsIntegerType(ValueType t);  // the eight integer types (not bool)

struct Value {
  ValueType type = ValueType::kUint32;
  // Scalars: integers in i (signed types) or u (unsigned and bool), floats in f.
  int64_t i = 0;
  uint64_t u = 0;
  double f = 0;
  std::string str;              // kString
  ValueType elem_type = ValueType::kUint8;  // kArray: element type
  std::vector<Value> array;     // kArray: elements

  // Typed reads that convert between numeric types where lossless enough.
  std::optional<int64_t> AsInt() const;     // any integer type or bool
  std::optional<double> AsFloat() const;    // any numeric type
  std::optional<bool> AsBool() const;       // bool or integer
  const std::string* AsString() const;      // kString only

  friend bool operator==(const Value&, const Value&) = default;

  static Value Uint8(uint8_t v);
  static Value Int8(int8_t v);
  static Value Uint16(uint16_t v);
  static Value Int16(int16_t v);
  static Value Uint32(uint32_t v);
  static Value Int32(int32_t v);
  static Value Uint64(uint64_t v);
  static Value Int64(int64_t v);
  static Value Float32(float v);
  static Value Float64(double v);
  static Value Bool(bool v);
  static Value String(std::string v);
  static Value Array(ValueType elem_type, std::vector<Value> items);
};

}  // namespace tern::gguf
