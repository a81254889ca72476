// Importance matrix ("imatrix"): per weight matrix, the mean over calibration
// tokens of the squared input of each column, E[x_col^2]. The rounding error
// of weight column c adds to a MatMul's output error in proportion to x_c^2,
// so these means are the per-column importance QuantizeRow takes.
//
// ImatrixAccumulator sums x^2 per column and counts tokens, weight by weight,
// from the rows a forward pass multiplies (Add mirrors MatMulObserver::OnMatMul
// of model/model.h; the quant module does not depend on model/).
//
// File format: a GGUF file, one F32 tensor "<weight name>.imatrix" of shape
// [cols] per weight (the mean of squares), in first-seen order; metadata
// general.type = "imatrix", imatrix.dataset (calibration file name, string),
// imatrix.chunks (uint32, windows run). `tern quantize --imatrix` reads it.
// Only this format is read: a model GGUF, llama.cpp's GGUF imatrix
// ("<weight>.in_sum2" / ".counts") and its older .dat files are refused with
// a message that says which of them the file is.
//
// Invariant: a weight's column count never changes after its first Add.
// Thread rules: not thread-safe; the forward thread calls Add.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"

namespace tern::gguf {
class GgufFile;
}

namespace tern::quant {

// A loaded imatrix file.
struct Imatrix {
  std::string path;  // the file it was loaded from
  std::string dataset;
  int64_t num_chunks = 0;
  // weight name (without ".imatrix") -> per-column mean of squares.
  std::map<std::string, std::vector<float>> importance;

  // The importance of weight_name, or nullptr.
  const std::vector<float>* Find(const std::string& weight_name) const;
};

class ImatrixAccumulator {
 public:
  // x: [num_tokens, cols] row-major, the input multiplied by weight name.
  // Fails (and adds nothing) when cols differ from an earlier Add of name,
  // or num_tokens < 0 or cols <= 0.
  Status Add(const std::string& name, const float* x, int64_t num_tokens, int64_t cols);

  // Number of weights seen so far.
  int num_weights() const { return (int)entries_.size(); }
  // Names in first-seen order.
  std::vector<std::string> Names() const;
  // Tokens seen by weight name (0 when unseen).
  int64_t NumTokens(const std::string& name) const;
  // Per-column sum of x^2 of name (empty when unseen).
  std::vector<double> SumOfSquares(const std::string& name) const;
  // Per-column mean of x^2 (sum / tokens; zeros when no token was seen).
  std::vector<float> MeanOfSquares(const std::string& name) const;

  // Writes the file described above. Fails when no weight was seen.
  Status Save(const std::string& path, const std::string& dataset, int64_t num_chunks) const;

 private:
  struct Entry {
    std::string name;
    int64_t num_tokens = 0;
    std::vector<double> sum_sq;  // [cols]
  };
  const Entry* FindEntry(const std::string& name) const;

  std::vector<Entry> entries_;
  std::map<std::string, size_t> index_;  // name -> entries_ position
};

// Reads an imatrix file: every F32 1-D tensor named "*.imatrix" (other
// tensors are ignored). Fails with the path and tensor on a non-F32 or
// non-1-D ".imatrix" tensor, on non-finite or negative values; fails with the
// path and what the file is instead when it is not an imatrix (not GGUF, a
// model: general.type other than "imatrix" or an architecture and no
// ".imatrix" tensor, llama.cpp's imatrix format, no ".imatrix" tensor).
StatusOr<Imatrix> LoadImatrix(const std::string& path);

// Checks that imatrix was made for model (model_path names it in messages):
// every entry names a 2-D tensor of the model, and its column count equals
// that tensor's row length. Errors name the imatrix file, the tensor and
// both sizes. Weights without an entry are fine (their quantization runs
// without importance; the caller reports them).
Status CheckImatrixFitsModel(const Imatrix& imatrix, const gguf::GgufFile& model,
                             const std::string& model_path);

}  // namespace tern::quant
