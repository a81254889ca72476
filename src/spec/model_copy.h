// Model files for speculative decoding's tests and benchmarks:
//
//   WritePerturbedCopy: the same model with noise on its weights, a draft
//     whose proposals the original accepts often but not always.
//   GrowModel: a bigger target that computes nearly the source's function,
//     so that the source is a draft with known, tunable acceptance:
//
//       every layer's FFN widened from n_ff to ffn_size hidden units: the new
//         gate/up rows random (at the scale of the layer's own), the new
//         ffn_down columns noise x rms(ffn_down) x N(0, 1);
//       extra_layers new layers after the source's: attention and FFN inputs
//         copied from the source's layers (cycled), both output projections
//         (attn_output, ffn_down) pure noise x rms(the copied one) x N(0, 1).
//
//     With noise 0 the target computes exactly the source's function (the
//     added units and layers add exact zeros to the residual stream) at the
//     cost of its bigger weights; the noise sets how often its argmax
//     differs from the source's. Source: an all-F32 llama-family model.
//
// Thread rules: pure functions of their inputs (they write one file).
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "gguf/gguf_file.h"

namespace tern {

// Copies src to out (metadata and tensors), adding noise x rms(w) x N(0, 1)
// to every element of each F32 weight matrix (2-D tensors; norms and other
// dtypes are copied unchanged). noise 0 writes an identical copy.
Status WritePerturbedCopy(const gguf::GgufFile& src, const std::string& out, double noise,
                          uint64_t seed);

struct GrowOptions {
  int64_t ffn_size = 0;      // new feed_forward_length (>= the source's)
  int32_t extra_layers = 0;  // layers added after the source's
  double noise = 0;          // scale of the output projections' noise
  uint64_t seed = 1;
};

// Writes the grown model to out; errors name the source's offending
// tensor or key.
Status GrowModel(const gguf::GgufFile& src, const std::string& out, const GrowOptions& options);

}  // namespace tern
