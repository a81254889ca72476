#include "quant/imatrix.h"

#include <cmath>
#include <algorithm>
#include <cstring>
#include <memory>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"

namespace tern::quant {
namespace {

constexpr const char kSuffix[] = ".imatrix";
constexpr size_t kSuffixLength = sizeof(kSuffix) - 1;

bool EndsWithSuffix(const std::string& s) {
  return s.size() > kSuffixLength && s.compare(s.size() - kSuffixLength, kSuffixLength, kSuffix) == 0;
}

}  // namespace

const std::vector<float>* Imatrix::Find(const std::string& weight_name) const {
  auto it = importance.find(weight_name);
  return it == importance.end() ? nullptr : &it->second;
}

Status ImatrixAccumulator::Add(const std::string& name, const float* x, int64_t num_tokens,
                               int64_t cols) {
  if (num_tokens < 0 || cols <= 0 || (num_tokens > 0 && x == nullptr)) {
    return InvalidArgument("imatrix: bad input for '" + name + "': " + std::to_string(num_tokens) +
                           " tokens of " + std::to_string(cols) + " columns");
  }
  auto [it, inserted] = index_.try_emplace(name, entries_.size());
  if (inserted) {
    entries_.push_back(Entry{name, 0, std::vector<double>(cols, 0.0)});
  }
  Entry& e = entries_[it->second];
  if ((int64_t)e.sum_sq.size() != cols) {
    return InvalidArgument("imatrix: weight '" + name + "' was seen with " +
                           std::to_string(e.sum_sq.size()) + " columns, now " +
                           std::to_string(cols));
  }
  // Sum each token row in float (vectorizes), then add to the double totals
  // so long calibration runs do not lose small contributions.
  std::vector<float> row_sum(cols, 0.0f);
  for (int64_t t = 0; t < num_tokens; ++t) {
    const float* row = x + t * cols;
    for (int64_t c = 0; c < cols; ++c) row_sum[c] += row[c] * row[c];
    if ((t & 63) == 63 || t + 1 == num_tokens) {
      for (int64_t c = 0; c < cols; ++c) {
        e.sum_sq[c] += row_sum[c];
        row_sum[c] = 0.0f;
      }
    }
  }
  e.num_tokens += num_tokens;
  return Status::Ok();
}

const ImatrixAccumulator::Entry* ImatrixAccumulator::FindEntry(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

std::vector<std::string> ImatrixAccumulator::Names() const {
  std::vector<std::string> names;
  for (const Entry& e : entries_) names.push_back(e.name);
  return names;
}

int64_t ImatrixAccumulator::NumTokens(const std::string& name) const {
  const Entry* e = FindEntry(name);
  return e ? e->num_tokens : 0;
}

std::vector<double> ImatrixAccumulator::SumOfSquares(const std::string& name) const {
  const Entry* e = FindEntry(name);
  return e ? e->sum_sq : std::vector<double>();
}

std::vector<float> ImatrixAccumulator::MeanOfSquares(const std::string& name) const {
  const Entry* e = FindEntry(name);
  if (!e) return {};
  std::vector<float> mean(e->sum_sq.size(), 0.0f);
  if (e->num_tokens == 0) return mean;
  for (size_t c = 0; c < mean.size(); ++c) mean[c] = (float)(e->sum_sq[c] / e->num_tokens);
  return mean;
}

Status ImatrixAccumulator::Save(const std::string& path, const std::string& dataset,
                                int64_t num_chunks) const {
  if (entries_.empty()) {
    return InvalidArgument("imatrix " + path + ": no weight MatMul was observed, nothing to save");
  }
  gguf::GgufWriter writer;
  writer.SetValue("general.type", gguf::Value::String("imatrix"));
  writer.SetValue("imatrix.dataset", gguf::Value::String(dataset));
  writer.SetValue("imatrix.chunks", gguf::Value::Uint32((uint32_t)std::max<int64_t>(num_chunks, 0)));
  for (const Entry& e : entries_) {
    const std::vector<float> mean = MeanOfSquares(e.name);
    TERN_RETURN_IF_ERROR(writer.AddTensor(e.name + kSuffix, DType::kF32, {(int64_t)mean.size()},
                                          mean.data(), mean.size() * sizeof(float)));
  }
  return writer.WriteFile(path);
}

namespace {

bool HasTensorEndingIn(const gguf::GgufFile& file, const std::string& suffix) {
  for (const gguf::TensorInfo& t : file.tensors()) {
    if (t.name.size() > suffix.size() &&
        t.name.compare(t.name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      return true;
    }
  }
  return false;
}

constexpr const char kMakeOne[] = "; make one with 'tern imatrix -m MODEL.gguf -f TEXT -o FILE'";

// Why file is not an imatrix, or OK.
Status CheckIsImatrix(const gguf::GgufFile& file, const std::string& path) {
  const std::string type = file.GetString("general.type").value_or("");
  const std::string arch = file.GetString("general.architecture").value_or("");
  const bool has_entries = HasTensorEndingIn(file, kSuffix);
  const std::string what = "imatrix " + path + ": ";
  if ((!type.empty() && type != "imatrix") || (!arch.empty() && !has_entries)) {
    std::string is = (type.empty() || type == "model") ? "a model GGUF"
                                                       : "a GGUF of general.type '" + type + "'";
    if (!arch.empty()) is += " (architecture " + arch + ")";
    return InvalidArgument(what + "this is " + is + " with " + std::to_string(file.tensors().size()) +
                           " tensors, not an importance matrix" + kMakeOne);
  }
  if (!has_entries && HasTensorEndingIn(file, ".in_sum2")) {
    return InvalidArgument(what + "this is llama.cpp's GGUF imatrix format ('<weight>.in_sum2' "
                           "tensors), which tern does not read" + kMakeOne);
  }
  if (!has_entries) {
    return InvalidArgument(what + "no '<weight>.imatrix' tensor in the file" + kMakeOne);
  }
  return Status::Ok();
}

}  // namespace

StatusOr<Imatrix> LoadImatrix(const std::string& path) {
  auto file_or = gguf::GgufFile::Open(path);
  if (!file_or.ok()) {
    if (file_or.status().code() == StatusCode::kDataLoss &&
        file_or.status().message().find("not a GGUF file") != std::string::npos) {
      return InvalidArgument("imatrix " + path + ": not a GGUF file (llama.cpp's older .dat "
                             "imatrix files are not read)" + std::string(kMakeOne));
    }
    return file_or.status().WithContext("imatrix");
  }
  std::unique_ptr<gguf::GgufFile> file = std::move(file_or).value();
  TERN_RETURN_IF_ERROR(CheckIsImatrix(*file, path));
  Imatrix out;
  out.path = path;
  out.dataset = file->GetString("imatrix.dataset").value_or("");
  out.num_chunks = file->GetInt("imatrix.chunks").value_or(0);
  for (const gguf::TensorInfo& t : file->tensors()) {
    if (!EndsWithSuffix(t.name)) continue;
    if (t.dtype != DType::kF32 || t.shape.size() != 1) {
      return InvalidArgument("imatrix " + path + ": tensor '" + t.name +
                             "' must be a 1-D F32 tensor, got " + DTypeName(t.dtype) + " with " +
                             std::to_string(t.shape.size()) + " dimensions");
    }
    std::vector<float> values(t.shape[0]);
    std::memcpy(values.data(), t.data, values.size() * sizeof(float));
    for (size_t c = 0; c < values.size(); ++c) {
      if (!std::isfinite(values[c]) || values[c] < 0) {
        return InvalidArgument("imatrix " + path + ": tensor '" + t.name + "' column " +
                               std::to_string(c) + " holds " + std::to_string(values[c]) +
                               " (must be finite and >= 0)");
      }
    }
    out.importance[t.name.substr(0, t.name.size() - kSuffixLength)] = std::move(values);
  }
  return out;
}

Status CheckImatrixFitsModel(const Imatrix& imatrix, const gguf::GgufFile& model,
                             const std::string& model_path) {
  for (const auto& [name, values] : imatrix.importance) {
    const gguf::TensorInfo* t = model.FindTensor(name);
    if (!t || t->shape.size() != 2) {
      return InvalidArgument("imatrix " + imatrix.path + ": entry '" + name + kSuffix + "' names " +
                             (t ? "a " + std::to_string(t->shape.size()) + "-D tensor" : "no tensor") +
                             " of " + model_path + " (a weight matrix was expected): "
                             "was it made for another model?");
    }
    if ((int64_t)values.size() != t->RowLength()) {
      return InvalidArgument("imatrix " + imatrix.path + ": entry '" + name + kSuffix + "' has " +
                             std::to_string(values.size()) + " columns, but tensor '" + name +
                             "' of " + model_path + " has rows of " +
                             std::to_string(t->RowLength()) + ": was it made for another model?");
    }
  }
  return Status::Ok();
}

}  // namespace tern::quant
