// The optimizer against hand computations (values chosen so that every
// intermediate is exact in binary floating point, so the comparisons are
// exact), the learning-rate schedules, and determinism.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "qsgd/models/sgd.hpp"
#include "test_util.hpp"

namespace qsgd::models {
namespace {

Sgd::Flat flat(std::initializer_list<float> v) {
  Sgd::Flat f("flat", v.size());
  auto h = Kokkos::create_mirror_view(f);
  std::size_t i = 0;
  for (float x : v) h(i++) = x;
  Kokkos::deep_copy(f, h);
  return f;
}

SgdConfig config(double lr, double momentum, double wd, bool nesterov = false) {
  SgdConfig c;
  c.lr.base_lr = lr;
  c.momentum = momentum;
  c.weight_decay = wd;
  c.nesterov = nesterov;
  return c;
}

TEST(Sgd, MomentumAndWeightDecayByHand) {
  // lr 0.5, momentum 0.5, weight decay 0.25, p0 = 1, grads 0.5 then 0.25:
  //   step 1: g = 0.5 + 0.25*1 = 0.75; buf = 0.75; p = 1 - 0.5*0.75 = 0.625
  //   step 2: g = 0.25 + 0.25*0.625 = 0.40625; buf = 0.5*0.75 + 0.40625 = 0.78125;
  //           p = 0.625 - 0.5*0.78125 = 0.234375
  // Second coordinate p0 = -2, grads -1 then 0:
  //   step 1: g = -1 - 0.5 = -1.5; buf = -1.5; p = -2 + 0.75 = -1.25
  //   step 2: g = 0 - 0.3125 = -0.3125; buf = -0.75 - 0.3125 = -1.0625; p = -1.25 + 0.53125 = -0.71875
  auto p = flat({1.0f, -2.0f});
  Sgd sgd(p, config(0.5, 0.5, 0.25));
  sgd.step(flat({0.5f, -1.0f}));
  EXPECT_EQ(test::to_host(p), (std::vector<double>{0.625, -1.25}));
  EXPECT_EQ(test::to_host(sgd.momentum_buffer()), (std::vector<double>{0.75, -1.5}));
  sgd.step(flat({0.25f, 0.0f}));
  EXPECT_EQ(test::to_host(p), (std::vector<double>{0.234375, -0.71875}));
  EXPECT_EQ(test::to_host(sgd.momentum_buffer()), (std::vector<double>{0.78125, -1.0625}));
  EXPECT_EQ(sgd.steps(), 2u);
}

TEST(Sgd, NesterovByHand) {
  // lr 0.5, momentum 0.5, no decay, p0 = 1, grads 1 then 1:
  //   step 1: buf = 1; p = 1 - 0.5*(1 + 0.5*1) = 0.25
  //   step 2: buf = 0.5 + 1 = 1.5; p = 0.25 - 0.5*(1 + 0.75) = -0.625
  auto p = flat({1.0f});
  Sgd sgd(p, config(0.5, 0.5, 0.0, true));
  sgd.step(flat({1.0f}));
  EXPECT_EQ(test::to_host(p), std::vector<double>{0.25});
  sgd.step(flat({1.0f}));
  EXPECT_EQ(test::to_host(p), std::vector<double>{-0.625});
}

TEST(Sgd, PlainSgdAndScheduleDriveTheStep) {
  // Momentum 0: p -= lr_t * g with lr from a 2-step warm-up of base 1:
  // lr_0 = 0.5, lr_1 = 1, lr_2 = 1.
  auto p = flat({0.0f});
  SgdConfig c = config(1.0, 0.0, 0.0);
  c.lr.warmup_steps = 2;
  Sgd sgd(p, c);
  EXPECT_EQ(sgd.next_lr(), 0.5);
  for (int i = 0; i < 3; ++i) sgd.step(flat({1.0f}));
  EXPECT_EQ(test::to_host(p), std::vector<double>{-2.5});
}

TEST(Sgd, DeterministicAndChecksLength) {
  auto run = [] {
    auto p = flat({0.1f, 0.2f, 0.3f, -0.7f});
    Sgd sgd(p, config(0.05, 0.9, 1e-4));
    for (int i = 0; i < 10; ++i) sgd.step(flat({0.3f, -0.1f, 0.01f * static_cast<float>(i), 1e-3f}));
    return test::to_host(p);
  };
  EXPECT_EQ(run(), run());
  auto p = flat({1.0f, 2.0f});
  Sgd sgd(p, config(0.1, 0.9, 0.0));
  EXPECT_THROW(sgd.step(flat({1.0f})), std::invalid_argument);
  EXPECT_THROW(Sgd(p, config(0.1, -0.5, 0.0)), std::invalid_argument);
}

TEST(Sgd, ClipCoefficientIsTorchsRule) {
  // torch.nn.utils.clip_grad_norm_: coef = max_norm / (norm + 1e-6), applied
  // only when below 1; max_norm <= 0 here means no clipping.
  EXPECT_EQ(clip_coefficient(4.0, 1.0), static_cast<float>(1.0 / (4.0 + 1e-6)));
  EXPECT_EQ(clip_coefficient(0.5, 1.0), 1.0f);
  EXPECT_EQ(clip_coefficient(1.0, 1.0), static_cast<float>(1.0 / (1.0 + 1e-6)));  // at the bound: 1 - 1e-6, as torch
  EXPECT_EQ(clip_coefficient(1e9, 0.0), 1.0f);
  EXPECT_EQ(clip_coefficient(0.0, 1.0), 1.0f);
  EXPECT_LT(clip_coefficient(3.0, 1.5), 0.5f);
  EXPECT_GT(clip_coefficient(3.0, 1.5), 0.4999f);
  EXPECT_THROW(clip_coefficient(std::nan(""), 1.0), std::invalid_argument);
  EXPECT_THROW(clip_coefficient(HUGE_VAL, 0.0), std::invalid_argument);
  EXPECT_THROW(clip_coefficient(-1.0, 1.0), std::invalid_argument);
}

TEST(Sgd, GradScaleMultipliesTheGradientOnly) {
  // lr 0.5, momentum 0.5, weight decay 0.25, scale 0.5, p0 = 1, grad 1:
  //   g = 0.5*1 + 0.25*1 = 0.75; buf = 0.75; p = 1 - 0.375 = 0.625
  // (weight decay is not scaled: torch clips .grad before the optimizer adds it).
  auto p = flat({1.0f});
  Sgd sgd(p, config(0.5, 0.5, 0.25));
  sgd.step(flat({1.0f}), 0.5f);
  EXPECT_EQ(test::to_host(p), std::vector<double>{0.625});
  EXPECT_EQ(test::to_host(sgd.momentum_buffer()), std::vector<double>{0.75});
  // A scale of 1 gives the bits of the unscaled step.
  auto run = [](bool explicit_one) {
    auto q = flat({0.1f, 0.2f, 0.3f, -0.7f});
    Sgd s(q, config(0.05, 0.9, 1e-4));
    for (int i = 0; i < 10; ++i) {
      const auto g = flat({0.3f, -0.1f, 0.01f * static_cast<float>(i), 1e-3f});
      if (explicit_one) s.step(g, 1.0f);
      else s.step(g);
    }
    return test::to_host(q);
  };
  EXPECT_EQ(run(true), run(false));
}

TEST(LrSchedule, WarmupThenStepDecay) {
  LrSchedule s;
  s.base_lr = 0.4;
  s.warmup_steps = 4;
  s.decay = LrDecay::step;
  s.step_size = 10;
  s.gamma = 0.5;
  EXPECT_DOUBLE_EQ(s.at(0), 0.1);
  EXPECT_DOUBLE_EQ(s.at(3), 0.4);
  EXPECT_DOUBLE_EQ(s.at(4), 0.4);
  EXPECT_DOUBLE_EQ(s.at(13), 0.4);
  EXPECT_DOUBLE_EQ(s.at(14), 0.2);
  EXPECT_DOUBLE_EQ(s.at(34), 0.05);
}

TEST(LrSchedule, WarmupThenCosine) {
  LrSchedule s;
  s.base_lr = 1.0;
  s.min_lr = 0.1;
  s.warmup_steps = 10;
  s.decay = LrDecay::cosine;
  s.total_steps = 110;
  EXPECT_DOUBLE_EQ(s.at(4), 0.5);
  EXPECT_DOUBLE_EQ(s.at(10), 1.0);
  EXPECT_NEAR(s.at(60), 0.55, 1e-15);  // half way: min + (base - min) / 2
  EXPECT_NEAR(s.at(35), 0.1 + 0.9 * 0.5 * (1 + std::cos(3.14159265358979323846 / 4)), 1e-15);
  EXPECT_DOUBLE_EQ(s.at(110), 0.1);
  EXPECT_DOUBLE_EQ(s.at(1000), 0.1);
  for (std::size_t t = 10; t < 110; ++t) EXPECT_GE(s.at(t), s.at(t + 1));
}

TEST(LrSchedule, ConstantAndInvalid) {
  LrSchedule s;
  s.base_lr = 0.3;
  EXPECT_DOUBLE_EQ(s.at(0), 0.3);
  EXPECT_DOUBLE_EQ(s.at(1000000), 0.3);
  s.decay = LrDecay::cosine;
  s.total_steps = 0;
  EXPECT_THROW(s.at(0), std::invalid_argument);
  s.decay = LrDecay::step;
  s.step_size = 0;
  EXPECT_THROW(s.validate(), std::invalid_argument);
}

// The update counts the gradient's NaN and infinite coordinates in its own
// pass (the trainer ends a run on any); finite ones, the largest included,
// count nothing.
TEST(Sgd, StepCountsTheGradientsNonFiniteCoordinates) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  auto p = flat({0.0f, 0.0f, 0.0f, 0.0f, 0.0f});
  Sgd sgd(p, config(0.1, 0.0, 0.0));
  EXPECT_EQ(sgd.step(flat({1.0f, -std::numeric_limits<float>::max(), 0.0f, 1e-45f, 3.0f})), 0u);
  EXPECT_EQ(sgd.step(flat({nan, 1.0f, inf, -inf, 0.0f})), 3u);
}

}  // namespace
}  // namespace qsgd::models
