#pragma once
// SGD with momentum and weight decay on a flat parameter View, with a
// learning-rate schedule: linear warm-up, then constant, step or cosine
// decay. Same update as torch.optim.SGD (dampening 0), with the gradient
// scaled by c (1, or clip_coefficient's for gradient-norm clipping):
//   g   = c * grad + weight_decay * p
//   buf = momentum * buf + g                (buf starts at 0, so buf_1 = g_1)
//   p   = p - lr * buf                      (Nesterov: p - lr * (g + momentum * buf))
// in float, one fused elementwise kernel: deterministic (each coordinate is
// updated by one thread in a fixed order of operations, and the build turns
// off FMA contraction).

#include <cstddef>
#include <cstdint>

#include "qsgd/models/types.hpp"

namespace qsgd::models {

enum class LrDecay { constant, step, cosine };

struct LrSchedule {
  double base_lr = 0.1;
  // Steps 0 .. warmup_steps-1 use base_lr * (step + 1) / warmup_steps.
  std::size_t warmup_steps = 0;
  LrDecay decay = LrDecay::constant;
  // step: lr = base_lr * gamma^floor((step - warmup_steps) / step_size).
  std::size_t step_size = 1;
  double gamma = 0.1;
  // cosine: lr = min_lr + (base_lr - min_lr) (1 + cos(pi s / S)) / 2 with
  // s = step - warmup_steps, S = total_steps - warmup_steps; min_lr from S on.
  std::size_t total_steps = 0;
  double min_lr = 0;

  // Learning rate of step `step` (counting from 0). Throws
  // std::invalid_argument for an inconsistent schedule.
  double at(std::size_t step) const;
  void validate() const;
};

struct SgdConfig {
  LrSchedule lr;
  double momentum = 0.9;
  double weight_decay = 0;  // applied to every tensor, biases included
  bool nesterov = false;
};

// The factor torch.nn.utils.clip_grad_norm_ scales gradients by:
// min(1, max_norm / (norm + 1e-6)), as a float. max_norm <= 0 means no
// clipping (1). Throws std::invalid_argument for a norm that is not finite
// or negative: a NaN would otherwise poison every parameter silently.
float clip_coefficient(double norm, double max_norm);

class Sgd {
 public:
  using Flat = Kokkos::View<float*, Kokkos::LayoutRight, MemSpace>;
  using ConstFlat = Kokkos::View<const float*, Kokkos::LayoutRight, MemSpace>;

  Sgd(const Flat& params, const SgdConfig& config);

  // One update of params with `grad` (the model's grads(), or an averaged
  // gradient of the same length) times `grad_scale` at lr =
  // schedule.at(steps()). A scale of 1 leaves every bit as without it.
  // Returns the coordinates of `grad` that are NaN or infinite, counted in
  // the same pass (the caller decides: a training run ends; the update has
  // then already taken them into params).
  std::size_t step(const ConstFlat& grad, float grad_scale = 1.0f);
  std::size_t steps() const { return steps_; }
  // Position in the learning-rate schedule (a resumed run continues there).
  void set_steps(std::size_t steps) { steps_ = steps; }
  double next_lr() const { return config_.lr.at(steps_); }
  const Flat& momentum_buffer() const { return buf_; }
  const SgdConfig& config() const { return config_; }

 private:
  Flat params_;
  Flat buf_;
  SgdConfig config_;
  std::size_t steps_ = 0;
};

}  // namespace qsgd::models
