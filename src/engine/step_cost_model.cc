#include "engine/step_cost_model.h"

#include <algorithm>
#include <cmath>

namespace tern {
namespace {

// The prior in units of one token's cost: step, sampled, token, 512 attended.
constexpr std::array<double, 4> kPriorUnits = {8.0, 0.1, 1.0, 1.0};
// Ridge strength: the prior counts as this many observations of a typical
// step along each direction.
constexpr double kRidge = 0.02;
// An observation longer than this many times the prediction (a stall of the
// machine, not of the step) is clipped once the model has data.
constexpr double kClipRatio = 4.0;
constexpr double kScaleAlpha = 0.1;
// The first steps of an engine touch the weights for the first time (page
// faults) and would pull the fit for many steps after: they set the scale
// only.
constexpr int64_t kWarmupSteps = 2;
// Lower bounds in prior units, so that a noisy fit never makes prompt tokens
// look free: a token costs at least a tenth, 512 attended positions at least
// a twentieth of the prior's token.
constexpr std::array<double, 4> kFloorUnits = {0.0, 0.0, 0.1, 0.05};
// Seconds per prior unit before the first observation (the first step of an
// engine is a prefill with nothing decoding, where no target applies).
constexpr double kInitialScaleS = 1e-3;

}  // namespace

StepShape StepShape::Chunk(int32_t start_position, int32_t num_tokens, bool samples) {
  StepShape s;
  s.num_tokens = num_tokens;
  s.num_sampled = samples ? 1 : 0;
  s.attended_positions =
      (int64_t)num_tokens * start_position + (int64_t)num_tokens * (num_tokens + 1) / 2;
  return s;
}

StepShape& StepShape::operator+=(const StepShape& o) {
  num_tokens += o.num_tokens;
  num_sampled += o.num_sampled;
  attended_positions += o.attended_positions;
  return *this;
}

StepCostModel::StepCostModel(std::optional<StepCostCoefficients> fixed, double decay)
    : fixed_(fixed.has_value()), decay_(decay), scale_s_(kInitialScaleS) {
  coef_ = fixed ? *fixed
                : StepCostCoefficients{kPriorUnits[0] * scale_s_, kPriorUnits[1] * scale_s_,
                                       kPriorUnits[2] * scale_s_, kPriorUnits[3] * scale_s_};
}

StepCostModel::Vec StepCostModel::Features(const StepShape& s) {
  return {1.0, (double)s.num_sampled, (double)s.num_tokens, (double)s.attended_positions / 512.0};
}

double StepCostModel::Dot(const Vec& a, const Vec& b) {
  double sum = 0;
  for (int i = 0; i < kN; ++i) sum += a[i] * b[i];
  return sum;
}

double StepCostModel::Predict(const StepShape& shape) const {
  const Vec c = {coef_.step_s, coef_.sampled_s, coef_.token_s, coef_.attended_s};
  return std::max(0.0, Dot(Features(shape), c));
}

void StepCostModel::Observe(const StepShape& shape, double seconds) {
  if (fixed_ || !(seconds > 0) || shape.num_tokens <= 0) return;
  const Vec x = Features(shape);
  if (num_observations_ > kWarmupSteps + 8) seconds = std::min(seconds, kClipRatio * Predict(shape));
  const double prior_units = Dot(x, kPriorUnits);
  const double ratio = seconds / prior_units;
  scale_s_ = num_observations_ == 0 ? ratio : (1 - kScaleAlpha) * scale_s_ + kScaleAlpha * ratio;
  if (++num_observations_ <= kWarmupSteps) {
    // Cold steps (first touch of the weights): the scale only.
    coef_ = {kPriorUnits[0] * scale_s_, kPriorUnits[1] * scale_s_, kPriorUnits[2] * scale_s_,
             kPriorUnits[3] * scale_s_};
    return;
  }
  weight_ = weight_ * decay_ + 1;
  for (int i = 0; i < kN; ++i) {
    moment_[i] = moment_[i] * decay_ + x[i] * seconds;
    for (int j = 0; j < kN; ++j) gram_[i][j] = gram_[i][j] * decay_ + x[i] * x[j];
  }
  Refit();
}

// Solves (G + R) c = m + R c0, R = kRidge x diag(max(G_ii / W, 1)), c0 the
// scaled prior, by Gauss-Jordan elimination with partial pivoting (4 x 4),
// then applies the floors.
void StepCostModel::Refit() {
  std::array<std::array<double, kN + 1>, kN> a{};
  for (int i = 0; i < kN; ++i) {
    const double r = kRidge * std::max(gram_[i][i] / weight_, 1.0);
    for (int j = 0; j < kN; ++j) a[i][j] = gram_[i][j];
    a[i][i] += r;
    a[i][kN] = moment_[i] + r * kPriorUnits[i] * scale_s_;
  }
  for (int col = 0; col < kN; ++col) {
    int pivot = col;
    for (int row = col + 1; row < kN; ++row) {
      if (std::fabs(a[row][col]) > std::fabs(a[pivot][col])) pivot = row;
    }
    std::swap(a[col], a[pivot]);
    if (std::fabs(a[col][col]) < 1e-300) return;  // keep the last fit
    for (int row = 0; row < kN; ++row) {
      if (row == col) continue;
      const double f = a[row][col] / a[col][col];
      for (int k = col; k <= kN; ++k) a[row][k] -= f * a[col][k];
    }
  }
  Vec c;
  for (int i = 0; i < kN; ++i) c[i] = std::max(kFloorUnits[i] * scale_s_, a[i][kN] / a[i][i]);
  coef_ = {c[0], c[1], c[2], c[3]};
}

}  // namespace tern
