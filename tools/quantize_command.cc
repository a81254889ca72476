// tern quantize IN.gguf OUT.gguf TYPE: rewrites a GGUF file with its weight
// matrices in another format. Every tensor is read through DequantizeRow, so
// any input format works; metadata is copied and general.file_type updated.
//
// Which tensors change: 2-D tensors named *.weight. 1-D tensors (norms) are
// written as F32; anything else is copied unchanged. A tensor already in its
// target type is copied byte for byte. Presets mix types per tensor by the
// recipes GGUF users know under those names (PresetType); --tensor-type
// overrides any choice; a row length that does
// not fit the chosen format's block falls back (K-quant -> 32-block format ->
// F16) and the summary lists it.
//
// Checks before any tensor is converted (cheap first, so a mistake costs
// milliseconds): the output is not the input (never in place), the input
// opens, the imatrix is an imatrix made for this model (names and sizes), no
// already-quantized weight would be quantized again without
// --allow-requantize, and a file can be created in the output folder. The
// output is written to a temp file beside it and renamed (gguf::GgufWriter),
// so a failure leaves no partial file.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/file_checks.h"
#include "base/status.h"
#include "base/thread_pool.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "quant/imatrix.h"
#include "quant/quant.h"
#include "tools/arg_parser.h"
#include "tools/commands.h"
#include "tools/common_flags.h"

namespace tern {
namespace {

using gguf::GgufFile;
using gguf::TensorInfo;

// ---- Presets -------------------------------------------------------------------

// Which recipe of per-tensor types a preset follows. The names and recipes
// are the ones GGUF users know from the common quantizer (same name, same
// tensor-type mix on the same model), so comparisons between files of one
// name compare like with like.
enum class Mix { kNone, kQ2_K, kQ3_K_S, kQ3_K_M, kQ3_K_L, kQ4_K_S, kQ4_K_M, kQ5_K_S, kQ5_K_M, kLegacy };

struct Preset {
  const char* name;
  DType base;
  uint32_t file_type;  // general.file_type
  Mix mix;
};

constexpr Preset kPresets[] = {
    {"F32", DType::kF32, 0, Mix::kNone},         {"F16", DType::kF16, 1, Mix::kNone},
    {"BF16", DType::kBF16, 32, Mix::kNone},      {"Q8_0", DType::kQ8_0, 7, Mix::kLegacy},
    {"Q4_0", DType::kQ4_0, 2, Mix::kLegacy},     {"Q4_1", DType::kQ4_1, 3, Mix::kLegacy},
    {"Q5_0", DType::kQ5_0, 8, Mix::kLegacy},     {"Q5_1", DType::kQ5_1, 9, Mix::kLegacy},
    {"Q2_K", DType::kQ2_K, 10, Mix::kQ2_K},      {"Q3_K_S", DType::kQ3_K, 11, Mix::kQ3_K_S},
    {"Q3_K_M", DType::kQ3_K, 12, Mix::kQ3_K_M},  {"Q3_K_L", DType::kQ3_K, 13, Mix::kQ3_K_L},
    {"Q4_K_S", DType::kQ4_K, 14, Mix::kQ4_K_S},  {"Q4_K_M", DType::kQ4_K, 15, Mix::kQ4_K_M},
    {"Q5_K_S", DType::kQ5_K, 16, Mix::kQ5_K_S},  {"Q5_K_M", DType::kQ5_K, 17, Mix::kQ5_K_M},
    {"Q6_K", DType::kQ6_K, 18, Mix::kLegacy},
};

std::string Upper(std::string s) {
  for (char& c : s) c = (char)std::toupper((unsigned char)c);
  return s;
}

std::optional<Preset> FindPreset(const std::string& name) {
  std::string upper = Upper(name);
  if (upper == "Q3_K") upper = "Q3_K_M";
  if (upper == "Q4_K") upper = "Q4_K_M";
  if (upper == "Q5_K") upper = "Q5_K_M";
  for (const Preset& p : kPresets) {
    if (upper == p.name) return p;
  }
  return std::nullopt;
}

std::string PresetNames() {
  std::string out;
  for (const Preset& p : kPresets) out += (out.empty() ? "" : ", ") + std::string(p.name);
  return out;
}

// ---- Tensor type choice ------------------------------------------------------------

struct Override {
  std::string pattern;
  DType dtype;
};

// Glob with * and ?; a pattern without wildcards matches as a substring
// ("attn_v" matches "blk.3.attn_v.weight").
bool GlobMatch(const char* p, const char* s) {
  if (*p == '\0') return *s == '\0';
  if (*p == '*') return GlobMatch(p + 1, s) || (*s && GlobMatch(p, s + 1));
  if (*s && (*p == '?' || *p == *s)) return GlobMatch(p + 1, s + 1);
  return false;
}

bool PatternMatches(const std::string& pattern, const std::string& name) {
  if (pattern.find_first_of("*?") == std::string::npos) {
    return name.find(pattern) != std::string::npos;
  }
  return GlobMatch(pattern.c_str(), name.c_str());
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Layer index of "blk.N.xxx", or -1.
int LayerIndex(const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return -1;
  int layer = 0;
  size_t i = 4;
  if (i >= name.size() || !std::isdigit((unsigned char)name[i])) return -1;
  while (i < name.size() && std::isdigit((unsigned char)name[i])) layer = layer * 10 + (name[i++] - '0');
  return layer;
}

// Layers that get more bits in the _M recipes: the first and last eighth of
// the layers and every third layer in between.
bool UseMoreBits(int layer, int num_layers) {
  return layer < num_layers / 8 || layer >= 7 * num_layers / 8 ||
         (layer - num_layers / 8) % 3 == 2;
}

bool IsQuantizable(const TensorInfo& t) {
  return t.shape.size() == 2 && EndsWith(t.name, ".weight");
}

// What the recipe needs to know of the model.
struct MixModel {
  int num_layers = 0;
  int gqa = 1;                  // query heads per KV head
  bool tied_embeddings = false;  // no output.weight: token_embd is also the output
  bool large_llama = false;     // 80 layers: attn_v is 8x smaller than attn_q
  bool has_imatrix = false;
};

bool IsQuantizedType(DType t) { return t != DType::kF32 && t != DType::kF16 && t != DType::kBF16; }

// The output projection (and a tied token_embd): 6 bits unless the preset
// is 8-bit already or its rows do not fit the preset's blocks (then Q8_0).
DType OutputType(const Preset& preset, int64_t row_length) {
  if (row_length % BlockSize(preset.base) != 0) return DType::kQ8_0;
  return preset.base == DType::kQ8_0 ? DType::kQ8_0 : DType::kQ6_K;
}

DType AttnVType(Mix mix, int layer, const MixModel& m, DType t) {
  switch (mix) {
    case Mix::kQ2_K: t = m.gqa >= 4 ? DType::kQ4_K : DType::kQ3_K; break;
    case Mix::kQ3_K_M: t = layer < 2 ? DType::kQ5_K : DType::kQ4_K; break;
    case Mix::kQ3_K_L: t = DType::kQ5_K; break;
    case Mix::kQ4_K_M: case Mix::kQ5_K_M:
      if (UseMoreBits(layer, m.num_layers)) t = DType::kQ6_K;
      break;
    case Mix::kQ4_K_S:
      if (layer < 4) t = DType::kQ5_K;
      break;
    default: break;
  }
  if (m.large_llama && (t == DType::kQ3_K || t == DType::kQ4_K)) t = DType::kQ5_K;
  return t;
}

DType FfnDownType(Mix mix, DType base, int layer, const MixModel& m, DType t) {
  const int n = m.num_layers;
  switch (mix) {
    case Mix::kQ2_K: return DType::kQ3_K;
    case Mix::kQ3_K_M: return layer < n / 16 ? DType::kQ5_K : DType::kQ4_K;
    case Mix::kQ3_K_L: return DType::kQ5_K;
    case Mix::kQ4_K_M: case Mix::kQ5_K_M: return UseMoreBits(layer, n) ? DType::kQ6_K : t;
    case Mix::kQ4_K_S: return layer < n / 8 ? DType::kQ5_K : t;
    case Mix::kLegacy:
      // With an imatrix the first eighth of Q4_0/Q5_0 ffn_down keeps a min.
      if (m.has_imatrix && layer < n / 8 && base == DType::kQ4_0) return DType::kQ4_1;
      if (m.has_imatrix && layer < n / 8 && base == DType::kQ5_0) return DType::kQ5_1;
      return t;
    default: return t;
  }
}

DType AttnOutputType(Mix mix, DType t) {
  switch (mix) {
    case Mix::kQ2_K: return DType::kQ3_K;
    case Mix::kQ3_K_M: return DType::kQ4_K;
    case Mix::kQ3_K_L: return DType::kQ5_K;
    default: return t;
  }
}

DType AttnQkvType(Mix mix, DType t) {
  switch (mix) {
    case Mix::kQ3_K_M: case Mix::kQ3_K_L: return DType::kQ4_K;
    case Mix::kQ4_K_M: return DType::kQ5_K;
    case Mix::kQ5_K_M: return DType::kQ6_K;
    default: return t;
  }
}

// The preset's type for one weight matrix, before the row-length fallback.
DType PresetType(const Preset& preset, const TensorInfo& t, const MixModel& m) {
  if (preset.mix == Mix::kNone || !IsQuantizedType(preset.base)) return preset.base;
  const std::string& name = t.name;
  if (name == "output.weight" || (m.tied_embeddings && name == "token_embd.weight")) {
    return OutputType(preset, t.RowLength());
  }
  const int layer = LayerIndex(name);
  if (layer < 0) return preset.base;
  if (EndsWith(name, ".attn_v.weight")) return AttnVType(preset.mix, layer, m, preset.base);
  if (EndsWith(name, ".ffn_down.weight")) {
    return FfnDownType(preset.mix, preset.base, layer, m, preset.base);
  }
  if (EndsWith(name, ".attn_output.weight")) return AttnOutputType(preset.mix, preset.base);
  if (EndsWith(name, ".attn_qkv.weight")) return AttnQkvType(preset.mix, preset.base);
  return preset.base;
}

// A format whose blocks fit rows of row_length: K-quants fall back to the
// 32-block format of about the same bits, and that to F16.
DType FitRow(DType t, int64_t row_length) {
  while (row_length % BlockSize(t) != 0) {
    switch (t) {
      case DType::kQ2_K: case DType::kQ3_K: t = DType::kQ4_0; break;
      case DType::kQ4_K: t = DType::kQ5_0; break;
      case DType::kQ5_K: t = DType::kQ5_1; break;
      case DType::kQ6_K: case DType::kQ8_K: t = DType::kQ8_0; break;
      default: t = DType::kF16; break;
    }
  }
  return t;
}

struct Plan {
  DType wanted = DType::kF32;  // before the row-length fallback
  DType dtype = DType::kF32;   // what is written
  bool copy = false;           // write the input bytes unchanged
};

Plan PlanTensor(const TensorInfo& t, const Preset& preset, bool pure,
                const std::vector<Override>& overrides, const MixModel& model) {
  Plan plan;
  if (!IsQuantizable(t)) {
    plan.copy = !(t.shape.size() == 1 && quant::CanDequantize(t.dtype));
    plan.wanted = plan.dtype = plan.copy ? t.dtype : DType::kF32;
    return plan;
  }
  plan.wanted = pure ? preset.base : PresetType(preset, t, model);
  for (const Override& o : overrides) {
    if (PatternMatches(o.pattern, t.name)) {
      plan.wanted = o.dtype;
      break;
    }
  }
  plan.dtype = FitRow(plan.wanted, t.RowLength());
  plan.copy = plan.dtype == t.dtype || !quant::CanDequantize(t.dtype);
  if (plan.copy) plan.dtype = t.dtype;
  return plan;
}

// ---- Conversion --------------------------------------------------------------------

// What the imatrix did for one converted tensor.
enum class ImatrixUse {
  kNone,     // no --imatrix
  kUsed,     // its entry weighted the rounding error
  kNoEntry,  // the format takes importance, the imatrix has no entry
  kIgnored,  // the format does not take importance (F16, Q8_0, ...)
};

ImatrixUse FindImportance(const quant::Imatrix* imatrix, const TensorInfo& t, DType dtype,
                          const float** importance) {
  *importance = nullptr;
  if (!imatrix) return ImatrixUse::kNone;
  if (!quant::UsesImportance(dtype)) return ImatrixUse::kIgnored;
  const std::vector<float>* entry = imatrix->Find(t.name);
  if (!entry) return ImatrixUse::kNoEntry;
  *importance = entry->data();  // its size was checked by CheckImatrixFitsModel
  return ImatrixUse::kUsed;
}

bool IsFloatType(DType t) { return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16; }

// The per-tensor line's imatrix note.
std::string ImatrixUseText(ImatrixUse use, DType dtype) {
  switch (use) {
    case ImatrixUse::kUsed: return ", imatrix used";
    case ImatrixUse::kNoEntry: return ", no imatrix entry";
    case ImatrixUse::kIgnored:
      return IsFloatType(dtype) ? "" : std::string(", imatrix not used by ") + DTypeName(dtype);
    case ImatrixUse::kNone: break;
  }
  return "";
}

std::vector<uint8_t> Convert(const TensorInfo& t, DType dtype, const float* importance,
                             ThreadPool& pool) {
  const int64_t row = t.RowLength(), rows = t.NumRows();
  const int64_t in_row_bytes = RowBytes(t.dtype, row), out_row_bytes = RowBytes(dtype, row);
  std::vector<uint8_t> out(out_row_bytes * rows);
  pool.ParallelFor(rows, [&](int64_t begin, int64_t end, int) {
    std::vector<float> values(row);
    for (int64_t r = begin; r < end; ++r) {
      quant::DequantizeRow(t.dtype, t.data + r * in_row_bytes, values.data(), row);
      quant::QuantizeRow(dtype, values.data(), out.data() + r * out_row_bytes, row, importance);
    }
  });
  return out;
}

// ---- Summary -----------------------------------------------------------------------

struct TypeTotals {
  int num_tensors = 0;
  int64_t num_elements = 0;
  uint64_t num_bytes = 0;
};

double BitsPerWeight(uint64_t bytes, int64_t elements) {
  return elements > 0 ? 8.0 * (double)bytes / (double)elements : 0.0;
}

void PrintSummary(const std::map<std::string, TypeTotals>& by_type, uint64_t bytes_before,
                  uint64_t bytes_after, int64_t elements, const std::vector<std::string>& notes,
                  const std::string& out_path) {
  std::printf("%-8s %8s %14s %12s %8s\n", "type", "tensors", "elements", "size", "bpw");
  for (const auto& [name, t] : by_type) {
    std::printf("%-8s %8d %14lld %12s %8.3f\n", name.c_str(), t.num_tensors,
                (long long)t.num_elements, FormatBytes((double)t.num_bytes).c_str(),
                BitsPerWeight(t.num_bytes, t.num_elements));
  }
  std::printf("size: %s -> %s, %.3f -> %.3f bits per weight\n",
              FormatBytes((double)bytes_before).c_str(), FormatBytes((double)bytes_after).c_str(),
              BitsPerWeight(bytes_before, elements), BitsPerWeight(bytes_after, elements));
  for (const std::string& note : notes) std::printf("%s\n", note.c_str());
  std::printf("wrote %s\n", out_path.c_str());
}

struct Options {
  std::string in_path, out_path;
  Preset preset;
  bool pure = false;
  bool allow_requantize = false;
  std::vector<Override> overrides;
  std::string imatrix_path;
  int num_threads = 0;  // 0: physical cores
};

MixModel DescribeForMix(const GgufFile& file, bool has_imatrix) {
  MixModel m;
  m.has_imatrix = has_imatrix;
  int max_layer = -1;
  bool has_output = false;
  for (const TensorInfo& t : file.tensors()) {
    max_layer = std::max(max_layer, LayerIndex(t.name));
    has_output |= t.name == "output.weight";
  }
  m.num_layers = max_layer + 1;
  m.tied_embeddings = !has_output;
  if (auto arch = file.GetString("general.architecture")) {
    if (auto n = file.GetInt(*arch + ".block_count")) m.num_layers = (int)*n;
    auto heads = file.GetInt(*arch + ".attention.head_count");
    auto kv_heads = file.GetInt(*arch + ".attention.head_count_kv");
    if (heads && kv_heads && *kv_heads > 0) m.gqa = (int)(*heads / *kv_heads);
    m.large_llama = *arch == "llama" && m.num_layers == 80;
  }
  return m;
}

// Everything known before the first tensor is converted.
struct Job {
  std::unique_ptr<GgufFile> in;
  std::optional<quant::Imatrix> imatrix;
  std::vector<Plan> plans;  // per input tensor
  int num_requantized = 0;
};

// A weight already in a quantized format that would be quantized again.
bool IsRequantized(const TensorInfo& t, const Plan& plan) {
  return IsQuantizable(t) && !plan.copy && !IsFloatType(t.dtype) && !IsFloatType(plan.dtype);
}

Status CheckRequantize(const Options& opt, Job& job) {
  const TensorInfo* first = nullptr;
  DType first_to = DType::kF32;
  for (size_t i = 0; i < job.plans.size(); ++i) {
    const TensorInfo& t = job.in->tensors()[i];
    if (!IsRequantized(t, job.plans[i])) continue;
    if (!first) {
      first = &t;
      first_to = job.plans[i].dtype;
    }
    ++job.num_requantized;
  }
  if (!first || opt.allow_requantize) return Status::Ok();
  return InvalidArgument(
      opt.in_path + " holds already-quantized weights: " + std::to_string(job.num_requantized) +
      " would be quantized again (e.g. " + first->name + ": " + DTypeName(first->dtype) + " -> " +
      DTypeName(first_to) + "), which adds a second rounding error to the first and loses more "
      "quality than quantizing the F32/F16/BF16 original; pass --allow-requantize to do it anyway");
}

// The checks of the header comment, cheapest first; nothing is converted yet.
StatusOr<Job> Prepare(const Options& opt) {
  if (SameFile(opt.in_path, opt.out_path)) {
    return InvalidArgument("output " + opt.out_path + " is the input file: tern quantize never "
                           "writes in place (the input stays memory-mapped while it is read, "
                           "and replacing it would lose the original); write to another file");
  }
  Job job;
  TERN_ASSIGN_OR_RETURN(job.in, GgufFile::Open(opt.in_path));
  if (!opt.imatrix_path.empty()) {
    TERN_ASSIGN_OR_RETURN(job.imatrix, quant::LoadImatrix(opt.imatrix_path));
    TERN_RETURN_IF_ERROR(quant::CheckImatrixFitsModel(*job.imatrix, *job.in, opt.in_path));
  }
  const MixModel model = DescribeForMix(*job.in, job.imatrix.has_value());
  for (const TensorInfo& t : job.in->tensors()) {
    job.plans.push_back(PlanTensor(t, opt.preset, opt.pure, opt.overrides, model));
  }
  TERN_RETURN_IF_ERROR(CheckRequantize(opt, job));
  TERN_RETURN_IF_ERROR(CheckWritableFile(opt.out_path, "output"));
  return job;
}

// Per-tensor imatrix use, for the summary.
struct ImatrixReport {
  int num_used = 0;
  int num_ignored = 0;
  std::vector<std::string> no_entry;

  void Add(ImatrixUse use, const std::string& name) {
    if (use == ImatrixUse::kUsed) ++num_used;
    if (use == ImatrixUse::kIgnored) ++num_ignored;
    if (use == ImatrixUse::kNoEntry) no_entry.push_back(name);
  }
  // "imatrix F: used for 30 of 31 tensors; no entry: token_embd.weight; ..."
  std::string Line(const std::string& path) const {
    const int num_takers = num_used + (int)no_entry.size();
    std::string line = "imatrix " + path + ": used for " + std::to_string(num_used) + " of " +
                       std::to_string(num_takers) + " tensors";
    if (!no_entry.empty()) {
      line += "; no entry:";
      for (const std::string& name : no_entry) line += " " + name;
    }
    if (num_ignored > 0) {
      line += "; " + std::to_string(num_ignored) + " more in formats without importance";
    }
    return line;
  }
};

std::string FallbackReason(const TensorInfo& t, const Plan& plan) {
  if (plan.copy && plan.dtype != plan.wanted && !quant::CanDequantize(t.dtype)) {
    return std::string("kept as ") + DTypeName(t.dtype) + ", a format tern cannot convert from";
  }
  if (plan.dtype == plan.wanted) return "";
  std::string why = std::string(DTypeName(plan.wanted)) + " -> " + DTypeName(plan.dtype) +
                    ", rows of " + std::to_string(t.RowLength()) + " do not fit blocks of " +
                    std::to_string(BlockSize(plan.wanted));
  if (plan.dtype == DType::kF16 && BlockSize(plan.wanted) != 32) why += " or 32";
  return why;
}

Status Run(const Options& opt) {
  TERN_ASSIGN_OR_RETURN(Job job, Prepare(opt));
  const GgufFile& in = *job.in;
  const quant::Imatrix* imatrix = job.imatrix ? &*job.imatrix : nullptr;
  gguf::GgufWriter writer;
  writer.CopyMetadataFrom(in);
  writer.SetValue("general.file_type", gguf::Value::Uint32(opt.preset.file_type));
  if (!IsFloatType(opt.preset.base)) {
    writer.SetValue("general.quantization_version", gguf::Value::Uint32(2));
  }

  ThreadPool pool(opt.num_threads > 0 ? opt.num_threads : ThreadPool::DefaultNumThreads());
  std::map<std::string, TypeTotals> by_type;
  std::map<std::string, std::vector<std::string>> fallbacks;  // reason -> tensors
  ImatrixReport report;
  uint64_t bytes_before = 0, bytes_after = 0;
  int64_t elements = 0;
  const size_t num_tensors = in.tensors().size();
  for (size_t i = 0; i < num_tensors; ++i) {
    const TensorInfo& t = in.tensors()[i];
    const Plan& plan = job.plans[i];
    if (const std::string why = FallbackReason(t, plan); !why.empty()) {
      fallbacks[why].push_back(t.name);
    }
    const float* importance = nullptr;
    const ImatrixUse use = plan.copy || !IsQuantizable(t)
                               ? ImatrixUse::kNone
                               : FindImportance(imatrix, t, plan.dtype, &importance);
    report.Add(use, t.name);
    std::fprintf(stderr, "[%zu/%zu] %-32s %s -> %s%s\n", i + 1, num_tensors, t.name.c_str(),
                 DTypeName(t.dtype), DTypeName(plan.dtype), ImatrixUseText(use, plan.dtype).c_str());
    std::vector<uint8_t> converted;
    const void* data = t.data;
    uint64_t num_bytes = t.num_bytes;
    if (!plan.copy) {
      converted = Convert(t, plan.dtype, importance, pool);
      data = converted.data();
      num_bytes = converted.size();
    }
    TERN_RETURN_IF_ERROR(writer.AddTensor(t.name, plan.dtype, t.shape, data, num_bytes));
    TypeTotals& totals = by_type[DTypeName(plan.dtype)];
    ++totals.num_tensors;
    totals.num_elements += t.NumElements();
    totals.num_bytes += num_bytes;
    bytes_before += t.num_bytes;
    bytes_after += num_bytes;
    elements += t.NumElements();
  }
  TERN_RETURN_IF_ERROR(writer.WriteFile(opt.out_path));
  std::vector<std::string> notes;
  for (const auto& [why, names] : fallbacks) {
    std::string note = "fallback (" + why + "):";
    for (const std::string& name : names) note += " " + name;
    notes.push_back(note);
  }
  if (imatrix) notes.push_back(report.Line(opt.imatrix_path));
  if (job.num_requantized > 0) {
    notes.push_back("requantized (--allow-requantize): " + std::to_string(job.num_requantized) +
                    " already-quantized tensors");
  }
  PrintSummary(by_type, bytes_before, bytes_after, elements, notes, opt.out_path);
  return Status();
}

StatusOr<Override> ParseOverride(const std::string& text) {
  const size_t eq = text.rfind('=');
  if (eq == std::string::npos || eq == 0) {
    return InvalidArgument("--tensor-type '" + text + "': expected PATTERN=TYPE");
  }
  const std::string type_name = text.substr(eq + 1);
  const std::optional<DType> dtype = ParseDType(type_name);
  if (!dtype || !quant::CanQuantize(*dtype)) {
    return InvalidArgument("--tensor-type '" + text + "': unknown type '" + type_name + "'");
  }
  return Override{text.substr(0, eq), *dtype};
}

}  // namespace

int RunQuantize(int argc, char** argv) {
  ArgParser parser(
      "quantize IN.gguf OUT.gguf TYPE [--imatrix FILE] [--tensor-type PATTERN=TYPE ...] [--pure] "
      "[--allow-requantize]",
      "Writes IN.gguf with its weight matrices in TYPE, one of " + PresetNames() +
          ". Each preset mixes types per tensor as files of the same name usually do: output "
          "(and a tied token_embd) at Q6_K, _M presets give attn_v/ffn_down of the first and last "
          "eighth and every third layer Q6_K, _S/_L and Q2_K/Q3_K raise attn_v, ffn_down and "
          "attn_output by their own rules (docs/quantization.md). Rows that do not fit a format's "
          "blocks fall back to a format that fits. OUT must not be IN (never in place); it is "
          "written to a temp file beside it and renamed, so a failure leaves no partial file.");
  std::vector<std::string> positional;
  std::vector<std::string> tensor_types;
  Options opt;
  parser.SetPositional("IN OUT TYPE", &positional, "input file, output file, target type");
  parser.AddString("--imatrix", "FILE", &opt.imatrix_path,
                   "importance matrix from 'tern imatrix' (GGUF of '<weight>.imatrix' F32 "
                   "tensors) made for this model: checked against its tensors before any work, "
                   "each tensor line says whether it was used (default: none)");
  parser.AddList("--tensor-type", "PATTERN=TYPE", &tensor_types,
                 "type for tensors matching PATTERN (glob, or substring without wildcards); "
                 "first match wins; repeatable (default: none)");
  AddThreadsFlag(parser, &opt.num_threads);
  parser.AddFlag("--pure", &opt.pure, "every weight matrix in TYPE, no mixed preset (default off)");
  parser.AddFlag("--allow-requantize", &opt.allow_requantize,
                 "allow quantizing weights that are already quantized (a second rounding error: "
                 "lower quality than starting from F32/F16/BF16); converting them to "
                 "F32/F16/BF16 needs no flag (default off)");
  if (int rc = ParseOrExit(parser, argc, argv, "quantize"); rc >= 0) return rc;

  if (positional.size() != 3) {
    std::fprintf(stderr, "tern quantize: expected IN.gguf OUT.gguf TYPE (see 'tern quantize --help')\n");
    return 1;
  }
  opt.in_path = positional[0];
  opt.out_path = positional[1];
  const std::optional<Preset> preset = FindPreset(positional[2]);
  if (!preset) {
    std::fprintf(stderr, "tern quantize: unknown type '%s' (expected one of %s)\n",
                 positional[2].c_str(), PresetNames().c_str());
    return 1;
  }
  opt.preset = *preset;
  for (const std::string& text : tensor_types) {
    StatusOr<Override> o = ParseOverride(text);
    if (!o.ok()) {
      std::fprintf(stderr, "tern quantize: %s\n", o.status().message().c_str());
      return 1;
    }
    opt.overrides.push_back(*o);
  }
  const Status st = Run(opt);
  if (!st.ok()) {
    std::fprintf(stderr, "tern quantize: %s\n", st.message().c_str());
    return 1;
  }
  return 0;
}

}  // namespace tern
