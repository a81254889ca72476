#include "gguf/gguf_writer.h"

#include "base/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

namespace tern::gguf {
namespace {

// Appends little-endian encodings to a byte buffer (the host is little-endian;
// gguf/byte_reader.h asserts it).
class Encoder {
 public:
  explicit Encoder(std::vector<uint8_t>* out) : out_(out) {}

  template <typename T>
  void Put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    out_->insert(out_->end(), p, p + sizeof(T));
  }
  void PutString(const std::string& s) {
    Put<uint64_t>(s.size());
    out_->insert(out_->end(), s.begin(), s.end());
  }

  // Encodes the value body (no type tag). Arrays must be homogeneous.
  Status PutValue(const std::string& key, const Value& v, int depth) {
    switch (v.type) {
      case ValueType::kUint8: Put(static_cast<uint8_t>(v.u)); break;
      case ValueType::kInt8: Put(static_cast<int8_t>(v.i)); break;
      case ValueType::kUint16: Put(static_cast<uint16_t>(v.u)); break;
      case ValueType::kInt16: Put(static_cast<int16_t>(v.i)); break;
      case ValueType::kUint32: Put(static_cast<uint32_t>(v.u)); break;
      case ValueType::kInt32: Put(static_cast<int32_t>(v.i)); break;
      case ValueType::kUint64: Put(static_cast<uint64_t>(v.u)); break;
      case ValueType::kInt64: Put(static_cast<int64_t>(v.i)); break;
      case ValueType::kFloat32: Put(static_cast<float>(v.f)); break;
      case ValueType::kFloat64: Put(static_cast<double>(v.f)); break;
      case ValueType::kBool: Put(static_cast<uint8_t>(v.u != 0)); break;
      case ValueType::kString: PutString(v.str); break;
      case ValueType::kArray: return PutArray(key, v, depth);
      default:
        return InvalidArgument("gguf writer: key '" + key + "': unknown value type " +
                               std::to_string(static_cast<uint32_t>(v.type)));
    }
    return Status::Ok();
  }

 private:
  Status PutArray(const std::string& key, const Value& v, int depth) {
    if (depth >= kMaxArrayDepth) {
      return InvalidArgument("gguf writer: key '" + key + "': arrays nested deeper than " +
                             std::to_string(kMaxArrayDepth));
    }
    if (!IsKnownValueType(static_cast<uint32_t>(v.elem_type))) {
      return InvalidArgument("gguf writer: key '" + key + "': unknown array element type");
    }
    Put(static_cast<uint32_t>(v.elem_type));
    Put<uint64_t>(v.array.size());
    for (size_t i = 0; i < v.array.size(); ++i) {
      const Value& item = v.array[i];
      if (item.type != v.elem_type) {
        return InvalidArgument("gguf writer: key '" + key + "': array element " + std::to_string(i) +
                               " is " + ValueTypeName(item.type) + ", array holds " +
                               ValueTypeName(v.elem_type));
      }
      TERN_RETURN_IF_ERROR(PutValue(key, item, depth + 1));
    }
    return Status::Ok();
  }

  std::vector<uint8_t>* out_;
};

uint64_t AlignUp(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

}  // namespace

void GgufWriter::SetValue(const std::string& key, Value value) {
  for (auto& [k, v] : kv_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  kv_.emplace_back(key, std::move(value));
}

void GgufWriter::CopyMetadataFrom(const GgufFile& file) {
  for (const auto& [k, v] : file.metadata()) SetValue(k, v);
}

Status GgufWriter::AddTensor(const std::string& name, DType dtype,
                             const std::vector<int64_t>& shape, const void* data,
                             uint64_t num_bytes) {
  const std::string where = "gguf writer: tensor '" + name + "': ";
  for (const PendingTensor& t : tensors_) {
    if (t.name == name) return InvalidArgument(where + "duplicate tensor name");
  }
  const std::optional<DTypeTraits> traits = GetDTypeTraits(static_cast<uint32_t>(dtype));
  if (!traits) return InvalidArgument(where + "unknown dtype");
  if (shape.empty() || shape.size() > kMaxDims) {
    return InvalidArgument(where + "needs 1.." + std::to_string(kMaxDims) + " dimensions, got " +
                           std::to_string(shape.size()));
  }
  uint64_t rows = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] <= 0) return InvalidArgument(where + "dimension " + std::to_string(d) + " is not positive");
    if (d > 0 && __builtin_mul_overflow(rows, static_cast<uint64_t>(shape[d]), &rows)) {
      return InvalidArgument(where + "shape overflows");
    }
  }
  if (shape[0] % traits->block_size != 0) {
    return InvalidArgument(where + "row length " + std::to_string(shape[0]) + " is not a multiple of the " +
                           traits->name + " block size " + std::to_string(traits->block_size));
  }
  uint64_t expected = 0;
  const uint64_t row_bytes = static_cast<uint64_t>(RowBytes(dtype, shape[0]));
  if (__builtin_mul_overflow(rows, row_bytes, &expected)) return InvalidArgument(where + "shape overflows");
  if (num_bytes != expected) {
    return InvalidArgument(where + std::to_string(num_bytes) + " bytes given, " + traits->name +
                           " of this shape needs " + std::to_string(expected));
  }
  if (data == nullptr) return InvalidArgument(where + "no data");
  const auto* p = static_cast<const uint8_t*>(data);
  tensors_.push_back({name, dtype, shape, std::vector<uint8_t>(p, p + num_bytes)});
  return Status::Ok();
}

Status GgufWriter::WriteFile(const std::string& path) const {
  uint64_t alignment = kDefaultAlignment;
  for (const auto& [k, v] : kv_) {
    if (k != "general.alignment") continue;
    if (v.type != ValueType::kUint32 || v.u == 0 || (v.u & (v.u - 1)) != 0) {
      return InvalidArgument(path + ": general.alignment must be a uint32 power of two");
    }
    alignment = v.u;
  }

  std::vector<uint8_t> head;
  Encoder enc(&head);
  enc.Put(kGgufMagic);
  enc.Put<uint32_t>(3);
  enc.Put<uint64_t>(tensors_.size());
  enc.Put<uint64_t>(kv_.size());
  for (const auto& [k, v] : kv_) {
    enc.PutString(k);
    enc.Put(static_cast<uint32_t>(v.type));
    TERN_RETURN_IF_ERROR(enc.PutValue(k, v, 0).WithContext(path));
  }
  uint64_t offset = 0;
  for (const PendingTensor& t : tensors_) {
    enc.PutString(t.name);
    enc.Put(static_cast<uint32_t>(t.shape.size()));
    for (int64_t d : t.shape) enc.Put(static_cast<uint64_t>(d));
    enc.Put(static_cast<uint32_t>(t.dtype));
    enc.Put(offset);
    offset = AlignUp(offset + t.data.size(), alignment);
  }
  head.resize(AlignUp(head.size(), alignment), 0);

  AtomicFile file(path);
  TERN_RETURN_IF_ERROR(file.Create());
  TERN_RETURN_IF_ERROR(file.Write(head.data(), head.size()));
  const std::vector<uint8_t> zeros(alignment, 0);
  for (const PendingTensor& t : tensors_) {
    TERN_RETURN_IF_ERROR(file.Write(t.data.data(), t.data.size()));
    const uint64_t pad = AlignUp(t.data.size(), alignment) - t.data.size();
    TERN_RETURN_IF_ERROR(file.Write(zeros.data(), pad));
  }
  return file.Commit();
}

}  // namespace tern::gguf
