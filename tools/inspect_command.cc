// tern inspect MODEL.gguf [--all]: a GGUF file's header, metadata, tensor
// table, totals and the KV-cache cost per token.
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/weight_summary.h"
#include "tools/arg_parser.h"
#include "tools/commands.h"
#include "tools/common_flags.h"
#include "tools/model_summary.h"

namespace tern {
namespace {

using gguf::GgufFile;
using gguf::HumanCount;
using gguf::TensorInfo;
using gguf::Value;
using gguf::ValueType;

constexpr size_t kSummaryItems = 8;        // array items shown without --all
constexpr size_t kSummaryStringBytes = 120;  // string bytes shown without --all

std::string Escape(const std::string& s, bool all) {
  std::string out = "\"";
  const size_t n = all ? s.size() : std::min(s.size(), kSummaryStringBytes);
  for (size_t i = 0; i < n; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\x%02x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += "\"";
  if (n < s.size()) out += "... (" + std::to_string(s.size()) + " bytes)";
  return out;
}

// Shortest "%g" text that reads back to the same float (1e-05, not
// 9.99999975e-06).
std::string ShortestFloat(float x) {
  char buf[64];
  if (std::fabs(x) < 1e15f && std::floor(x) == x) {
    std::snprintf(buf, sizeof(buf), "%.0f", x);  // 10000, not 1e+04
    return buf;
  }
  for (int precision = 1; precision <= 9; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*g", precision, x);
    if (std::strtof(buf, nullptr) == x) break;
  }
  return buf;
}

std::string FormatScalar(const Value& v, bool all) {
  char buf[64];
  switch (v.type) {
    case ValueType::kFloat32: return ShortestFloat(static_cast<float>(v.f));
    case ValueType::kFloat64: std::snprintf(buf, sizeof(buf), "%.17g", v.f); return buf;
    case ValueType::kBool: return v.u ? "true" : "false";
    case ValueType::kString: return Escape(v.str, all);
    case ValueType::kInt8:
    case ValueType::kInt16:
    case ValueType::kInt32:
    case ValueType::kInt64: return std::to_string(v.i);
    default: return std::to_string(v.u);
  }
}

std::string ArrayType(const Value& v) {
  return std::string("[") + gguf::ValueTypeName(v.elem_type) + " x " + std::to_string(v.array.size()) + "]";
}

// "[string x 512] "<unk>", "<s>", ..." (first items only unless all).
std::string FormatArray(const Value& v, bool all) {
  std::string out = ArrayType(v);
  const size_t n = all ? v.array.size() : std::min(v.array.size(), kSummaryItems);
  for (size_t i = 0; i < n; ++i) {
    const Value& item = v.array[i];
    out += (i ? ", " : " ");
    out += item.type == ValueType::kArray ? (all ? "(" + FormatArray(item, all) + ")" : ArrayType(item))
                                          : FormatScalar(item, all);
  }
  if (n < v.array.size()) out += ", ...";
  return out;
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// 292800 -> "292.8K"; 6738415616 -> "6.74B".
void PrintMetadata(const GgufFile& f, bool all) {
  size_t width = 0;
  for (const auto& [k, v] : f.metadata()) width = std::max(width, k.size());
  std::printf("\nmetadata (%zu keys):\n", f.metadata().size());
  for (const auto& [k, v] : f.metadata()) {
    if (v.type == ValueType::kArray) {
      std::printf("  %-*s  %s\n", (int)width, k.c_str(), FormatArray(v, all).c_str());
    } else {
      std::printf("  %-*s  %-7s %s\n", (int)width, k.c_str(), gguf::ValueTypeName(v.type),
                  FormatScalar(v, all).c_str());
    }
  }
}

void PrintTensors(const GgufFile& f) {
  size_t width = 4;
  for (const TensorInfo& t : f.tensors()) width = std::max(width, t.name.size());
  std::printf("\ntensors (%zu; shape in ggml order, row length first):\n", f.tensors().size());
  if (f.tensors().empty()) return;
  std::printf("  %-*s  %-7s  %-22s %12s\n", (int)width, "name", "dtype", "shape", "bytes");
  for (const TensorInfo& t : f.tensors()) {
    std::printf("  %-*s  %-7s  %-22s %12" PRIu64 "\n", (int)width, t.name.c_str(), DTypeName(t.dtype),
                ShapeString(t.shape).c_str(), t.num_bytes);
  }
}

// KV bytes per token at f16: block_count x head_count_kv x (key_length +
// value_length) x 2 bytes, i.e. 2 x layers x kv_heads x head_dim x 2 when K
// and V heads have the same size. Empty when the keys are missing.
std::string KvCacheLine(const GgufFile& f) {
  const std::optional<std::string> arch = f.GetString("general.architecture");
  if (!arch) return "";
  const std::string p = *arch + ".";
  const auto layers = f.GetInt(p + "block_count");
  const auto heads = f.GetInt(p + "attention.head_count");
  if (!layers || !heads || *layers <= 0 || *heads <= 0) return "";
  std::optional<int64_t> kv_heads = heads;
  if (f.Find(p + "attention.head_count_kv")) kv_heads = f.GetInt(p + "attention.head_count_kv");
  std::optional<int64_t> key_len = f.GetInt(p + "attention.key_length");
  if (!key_len) {
    const auto embd = f.GetInt(p + "embedding_length");
    if (!embd) return "";
    key_len = *embd / *heads;
  }
  const int64_t value_len = f.GetInt(p + "attention.value_length").value_or(*key_len);
  if (!kv_heads || *kv_heads <= 0 || *key_len <= 0 || value_len <= 0) return "";
  const int64_t bytes = *layers * *kv_heads * (*key_len + value_len) * 2;
  std::string detail;
  if (value_len == *key_len) {
    detail = "2 x " + std::to_string(*layers) + " layers x " + std::to_string(*kv_heads) + " KV heads x " +
             std::to_string(*key_len) + " head dim x 2 bytes";
  } else {
    detail = std::to_string(*layers) + " layers x " + std::to_string(*kv_heads) + " KV heads x (" +
             std::to_string(*key_len) + " + " + std::to_string(value_len) + ") K+V dims x 2 bytes";
  }
  return std::to_string(bytes) + " bytes per token at f16 (" + detail + "); " +
         FormatBytes(static_cast<double>(bytes) * 4096) + " per 4096 tokens";
}

void PrintTotals(const GgufFile& f) {
  struct PerDType {
    int64_t tensors = 0, params = 0;
    uint64_t bytes = 0;
  };
  std::map<uint32_t, PerDType> by_dtype;
  int64_t params = 0;
  uint64_t bytes = 0;
  for (const TensorInfo& t : f.tensors()) {
    PerDType& d = by_dtype[static_cast<uint32_t>(t.dtype)];
    ++d.tensors;
    d.params += t.NumElements();
    d.bytes += t.num_bytes;
    params += t.NumElements();
    bytes += t.num_bytes;
  }
  std::printf("\ntotals:\n");
  std::printf("  tensors:     %zu\n", f.tensors().size());
  std::printf("  parameters:  %" PRId64 " (%s)\n", params, HumanCount(params).c_str());
  std::printf("  tensor data: %" PRIu64 " bytes (%s)\n", bytes, FormatBytes(static_cast<double>(bytes)).c_str());
  for (const auto& [id, d] : by_dtype) {
    std::printf("  %-7s      %" PRIu64 " bytes (%s) in %" PRId64 " tensors, %" PRId64 " parameters\n",
                DTypeName(static_cast<DType>(id)), d.bytes, FormatBytes(static_cast<double>(d.bytes)).c_str(),
                d.tensors, d.params);
  }
  const std::string kv = KvCacheLine(f);
  if (!kv.empty()) std::printf("  KV cache:    %s\n", kv.c_str());
}

}  // namespace

int RunInspect(int argc, char** argv) {
  bool all = false;
  std::string model;
  std::vector<std::string> positional;
  ArgParser parser("inspect MODEL.gguf [--all]   (or: inspect -m MODEL.gguf)",
                   "Shows a GGUF file's header, metadata, tensor table, totals (tensors, "
                   "parameters, bytes per dtype) and the KV-cache bytes per token.");
  AddModelFlag(parser, &model, "the .gguf file (or give it as the argument)");
  parser.AddFlag("-a,--all", &all, "print every array item and whole strings (default: the first few)");
  parser.SetPositional("MODEL", &positional, "path of the .gguf file (or -m MODEL)");
  if (int rc = ParseOrExit(parser, argc, argv, "inspect"); rc >= 0) return rc;
  if (!model.empty() && !positional.empty()) {
    std::fprintf(stderr, "tern inspect: both -m/--model and the argument '%s' given; pass one\n",
                 positional[0].c_str());
    return 1;
  }
  if (!model.empty()) positional.push_back(model);
  if (positional.size() != 1) {
    std::fprintf(stderr, "tern inspect: expected one MODEL path, got %zu (see 'tern inspect --help')\n",
                 positional.size());
    return 1;
  }
  auto file = gguf::GgufFile::Open(positional[0]);
  if (!file.ok()) {
    std::fprintf(stderr, "tern inspect: %s\n", file.status().message().c_str());
    return 1;
  }
  const GgufFile& f = **file;
  std::printf("file:        %s\n", f.path().c_str());
  std::printf("size:        %" PRIu64 " bytes (%s)\n", f.file_size(),
              FormatBytes(static_cast<double>(f.file_size())).c_str());
  std::printf("GGUF:        version %u, alignment %" PRIu64 ", data at offset %" PRIu64 "\n", f.version(),
              f.alignment(), f.data_offset());
  PrintMetadata(f, all);
  PrintTensors(f);
  PrintTotals(f);
  // The hyper-parameters as tern reads them (architectures it runs only).
  if (auto config = ModelConfig::FromGguf(f); config.ok() && IsSupportedArchitecture(config->arch)) {
    std::printf("\nmodel (as tern runs it):\n%s", ModelSummary(*config, f).c_str());
  }
  return 0;
}

}  // namespace tern
