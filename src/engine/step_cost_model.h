// StepCostModel: predicts how long one engine step takes from what it
// computes, so that the scheduler can fill a step up to a latency target.
//
//   step_s = c_step + c_sampled x S + c_token x T + c_attended x A / 512
//
//   T  tokens computed in the step (decode tokens + prompt tokens)
//   S  sequences that sample a token (one lm_head row and a sampler call each)
//   A  attended positions: a token at position p attends over p + 1 KV
//      positions, so a chunk of n tokens starting at p0 adds n x p0 + n(n+1)/2
//
// The coefficients are fitted online from the engine's own step timings: an
// exponentially weighted least-squares fit (weight decay `decay` per step,
// ~20 steps of memory at 0.95, so the fit is local to the batch shapes of
// the moment: a CPU step is not quite linear over 1..512 tokens) with a weak
// ridge pull toward a prior. The first 2 steps of an engine (cold: first
// touch of the weights) only set the prior's scale. The
// prior's shape is fixed (a step costs as much as 8 tokens, 512 attended
// positions as much as one token, a sampled row a tenth of a token) and its
// scale follows the observations (an EWMA of observed / prior-predicted
// time), so a direction the steps have not varied yet (e.g. attention, while
// every context is short) is predicted from the prior at the machine's own
// speed. Coefficients are kept at or above small floors (token: 0.1, 512
// attended positions: 0.05 of the prior's token), so noise never makes
// prompt tokens look free. Before the first observation the prior is used at
// 1 ms per token. Tests pass fixed coefficients instead (no learning).
//
// Thread rules: owned by the scheduler (engine thread).
#pragma once

#include <array>
#include <cstdint>
#include <optional>

namespace tern {

// What a step computes (the features of the model).
struct StepShape {
  int32_t num_tokens = 0;
  int32_t num_sampled = 0;
  int64_t attended_positions = 0;

  // The shape of a chunk of num_tokens starting at start_position.
  static StepShape Chunk(int32_t start_position, int32_t num_tokens, bool samples);
  StepShape& operator+=(const StepShape& o);
};

struct StepCostCoefficients {
  double step_s = 0;       // per step
  double sampled_s = 0;    // per sampled sequence
  double token_s = 0;      // per computed token
  double attended_s = 0;   // per 512 attended positions
};

class StepCostModel {
 public:
  // fixed: use these coefficients and never learn (tests, experiments).
  explicit StepCostModel(std::optional<StepCostCoefficients> fixed = std::nullopt,
                         double decay = 0.95);

  double Predict(const StepShape& shape) const;
  // Adds one measured step.
  void Observe(const StepShape& shape, double seconds);
  const StepCostCoefficients& coefficients() const { return coef_; }
  int64_t num_observations() const { return num_observations_; }

 private:
  static constexpr int kN = 4;
  using Vec = std::array<double, kN>;
  static Vec Features(const StepShape& s);
  static double Dot(const Vec& a, const Vec& b);
  void Refit();

  bool fixed_;
  double decay_;
  StepCostCoefficients coef_;
  double scale_s_;      // seconds per prior unit (EWMA)
  double weight_ = 0;   // sum of decayed weights
  std::array<Vec, kN> gram_{};  // sum w x x^T
  Vec moment_{};                // sum w x y
  int64_t num_observations_ = 0;
};

}  // namespace tern
