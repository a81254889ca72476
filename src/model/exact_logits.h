// The output head's leading logits, recomputed exactly.
//
// A quantized output matrix's kernels round the activations to 8 bits (one
// scale per 32 or 256 values), which moves a logit by up to a few tenths
// (docs/quantization.md, "Fidelity"): where the two leading tokens are
// closer than that, the rounding, not the weights, picks the top one.
// RefineTopLogits recomputes every logit within kRefineMargin of its row's
// largest (the kRefineMax largest where more are; ties by token id) from
// the token's dequantized weight row and the f32 activations, summed in
// double precision in column order, so the leading logits are the file's
// weights' exact dot products on every table and in every batch. The rest
// of the row is left as the kernel gave it. Float matrices (whose kernels
// read f32 activations) are left as they are.
//
// Thread rules: reentrant; rows are split over the pool's threads.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/thread_pool.h"
#include "kernels/kernels.h"

namespace tern {

inline constexpr float kRefineMargin = 1.0f;
inline constexpr size_t kRefineMax = 16;

// logits: num_rows rows of w.rows values, row r = w x (x + r * w.cols).
void RefineTopLogits(const kernels::WeightView& w, const float* x, int64_t num_rows,
                     float* logits, ThreadPool* pool);

}  // namespace tern
