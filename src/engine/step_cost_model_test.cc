#include "engine/step_cost_model.h"

#include <gtest/gtest.h>

#include <random>

namespace tern {
namespace {

double Truth(const StepCostCoefficients& c, const StepShape& s) {
  return c.step_s + c.sampled_s * s.num_sampled + c.token_s * s.num_tokens +
         c.attended_s * (double)s.attended_positions / 512;
}

// A step of num_decodes decodes at random depths plus one prompt chunk.
StepShape RandomStep(std::mt19937& rng) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  StepShape s;
  const int num_decodes = pick(1, 32);
  for (int i = 0; i < num_decodes; ++i) s += StepShape::Chunk(pick(0, 1500), 1, true);
  if (pick(0, 2) != 0) s += StepShape::Chunk(pick(0, 2000), pick(1, 256), pick(0, 1) == 1);
  return s;
}

// The model observes n random steps, each taking the time `truth` gives it.
void ObserveRandomSteps(int n, const StepCostCoefficients& truth, std::mt19937& rng,
                        StepCostModel* model) {
  for (int i = 0; i < n; ++i) {
    const StepShape s = RandomStep(rng);
    model->Observe(s, Truth(truth, s));
  }
}

TEST(StepCostModelTest, ChunkCountsEveryAttendedPosition) {
  // Positions 10, 11, 12 attend 11 + 12 + 13 positions.
  const StepShape s = StepShape::Chunk(10, 3, true);
  EXPECT_EQ(s.num_tokens, 3);
  EXPECT_EQ(s.num_sampled, 1);
  EXPECT_EQ(s.attended_positions, 36);
  StepShape sum = s;
  sum += StepShape::Chunk(0, 1, false);
  EXPECT_EQ(sum.num_tokens, 4);
  EXPECT_EQ(sum.num_sampled, 1);
  EXPECT_EQ(sum.attended_positions, 37);
}

TEST(StepCostModelTest, LearnsTheCoefficientsOfVariedSteps) {
  const StepCostCoefficients truth{0.020, 0.0004, 0.0015, 0.003};
  StepCostModel model;
  std::mt19937 rng(7);
  ObserveRandomSteps(500, truth, rng, &model);
  const StepCostCoefficients& c = model.coefficients();
  EXPECT_NEAR(c.step_s, truth.step_s, 0.05 * truth.step_s);
  EXPECT_NEAR(c.sampled_s, truth.sampled_s, 0.1 * truth.sampled_s);
  EXPECT_NEAR(c.token_s, truth.token_s, 0.05 * truth.token_s);
  EXPECT_NEAR(c.attended_s, truth.attended_s, 0.05 * truth.attended_s);
  for (int i = 0; i < 20; ++i) {
    const StepShape s = RandomStep(rng);
    EXPECT_NEAR(model.Predict(s), Truth(truth, s), 0.03 * Truth(truth, s));
  }
  EXPECT_EQ(model.num_observations(), 500);
}

TEST(StepCostModelTest, FollowsTheMachineWhenItsSpeedChanges) {
  const StepCostCoefficients slow{0.040, 0.0008, 0.003, 0.006};
  const StepCostCoefficients fast{0.020, 0.0004, 0.0015, 0.003};
  StepCostModel model;
  std::mt19937 rng(3);
  ObserveRandomSteps(300, slow, rng, &model);
  ObserveRandomSteps(300, fast, rng, &model);
  const StepShape s = StepShape::Chunk(100, 64, true);
  EXPECT_NEAR(model.Predict(s), Truth(fast, s), 0.05 * Truth(fast, s));
}

TEST(StepCostModelTest, AnUnvariedDirectionKeepsThePriorAtTheMachinesScale) {
  // Only decode-only steps of 8 sequences at depth 0..7: T = S = 8 always, so
  // the fit cannot split the step cost from the token cost or learn the
  // attention; the prediction of those steps is still right, and a prompt
  // chunk costs more than a decode-only step, in the prior's proportions.
  StepCostModel model;
  for (int i = 0; i < 100; ++i) {
    StepShape s;
    for (int d = 0; d < 8; ++d) s += StepShape::Chunk(d, 1, true);
    model.Observe(s, 0.050);
  }
  StepShape decodes;
  for (int d = 0; d < 8; ++d) decodes += StepShape::Chunk(d, 1, true);
  EXPECT_NEAR(model.Predict(decodes), 0.050, 0.001);
  StepShape mixed = decodes;
  mixed += StepShape::Chunk(0, 64, false);
  EXPECT_GT(model.Predict(mixed), 2 * model.Predict(decodes));
  EXPECT_GT(model.coefficients().attended_s, 0);
}

TEST(StepCostModelTest, ClipsAStallOnceItHasData) {
  StepCostModel model;
  std::mt19937 rng(5);
  const StepCostCoefficients truth{0.020, 0.0004, 0.0015, 0.003};
  ObserveRandomSteps(100, truth, rng, &model);
  const StepShape s = StepShape::Chunk(0, 8, true);
  const double before = model.Predict(s);
  model.Observe(s, 100.0);  // the machine stalled for 100 s
  // Counted as 4x the prediction: the fit moves (this small step is far from
  // the others), but by a bounded amount, not toward 100 s.
  EXPECT_LT(model.Predict(s), 4 * before);
  ObserveRandomSteps(100, truth, rng, &model);
  EXPECT_NEAR(model.Predict(s), before, 0.05 * before);
}

TEST(StepCostModelTest, FixedCoefficientsNeverChange) {
  const StepCostCoefficients fixed{0.008, 0, 0.001, 0};
  StepCostModel model(fixed);
  model.Observe(StepShape::Chunk(0, 10, true), 5.0);
  EXPECT_EQ(model.coefficients().token_s, 0.001);
  EXPECT_DOUBLE_EQ(model.Predict(StepShape::Chunk(0, 10, true)), 0.018);
}

}  // namespace
}  // namespace tern
