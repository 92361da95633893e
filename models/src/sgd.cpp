#include "qsgd/models/sgd.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

namespace qsgd::models {

void LrSchedule::validate() const {
  if (!(base_lr >= 0) || !(min_lr >= 0)) throw std::invalid_argument("LrSchedule: negative learning rate");
  if (decay == LrDecay::step && step_size == 0) throw std::invalid_argument("LrSchedule: step decay needs step_size > 0");
  if (decay == LrDecay::cosine && total_steps <= warmup_steps) {
    throw std::invalid_argument("LrSchedule: cosine decay needs total_steps > warmup_steps");
  }
}

double LrSchedule::at(std::size_t step) const {
  validate();
  if (step < warmup_steps) {
    return base_lr * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  }
  const std::size_t s = step - warmup_steps;
  switch (decay) {
    case LrDecay::constant:
      return base_lr;
    case LrDecay::step:
      return base_lr * std::pow(gamma, static_cast<double>(s / step_size));
    case LrDecay::cosine: {
      const std::size_t span = total_steps - warmup_steps;
      if (s >= span) return min_lr;
      const double pi = 3.14159265358979323846;
      return min_lr + (base_lr - min_lr) * 0.5 * (1.0 + std::cos(pi * static_cast<double>(s) / static_cast<double>(span)));
    }
  }
  return base_lr;
}

float clip_coefficient(double norm, double max_norm) {
  if (!std::isfinite(norm) || norm < 0)
    throw std::invalid_argument("clip_coefficient: gradient norm " + std::to_string(norm) + " is not finite or negative");
  if (!(max_norm > 0)) return 1.0f;
  const double c = max_norm / (norm + 1e-6);
  return c < 1.0 ? static_cast<float>(c) : 1.0f;
}

Sgd::Sgd(const Flat& params, const SgdConfig& config)
    : params_(params), buf_(QSGD_MODELS_LABEL("sgd_momentum"), params.extent(0)), config_(config) {
  config_.lr.validate();
  if (!(config.momentum >= 0) || !(config.weight_decay >= 0)) {
    throw std::invalid_argument("Sgd: momentum and weight decay must be >= 0");
  }
}

// Purpose: the fused SGD update of the header comment.
// Algorithm: one thread per coordinate.
// Cost: reads p, grad, buf; writes p, buf: 20 bytes per coordinate.
// grad_scale * grad(i) with grad_scale == 1 is grad(i) exactly (IEEE), so an
// unclipped step has the bits it had before the scale existed.
std::size_t Sgd::step(const ConstFlat& grad, float grad_scale) {
  if (grad.extent(0) != params_.extent(0)) {
    throw std::invalid_argument("Sgd::step: gradient has " + std::to_string(grad.extent(0)) + " elements, parameters " +
                                std::to_string(params_.extent(0)));
  }
  const float lr = static_cast<float>(config_.lr.at(steps_));
  const float mu = static_cast<float>(config_.momentum);
  const float wd = static_cast<float>(config_.weight_decay);
  const bool nesterov = config_.nesterov;
  const auto p = params_;
  const auto buf = buf_;
  std::size_t non_finite = 0;
  // x - x is 0 for every finite x and NaN for NaN and +-Inf (no fast-math,
  // no contraction in this build): the count costs no extra pass.
  Kokkos::parallel_reduce(
      QSGD_MODELS_LABEL("sgd_step"), Kokkos::RangePolicy<ExecSpace>(0, p.extent(0)),
      KOKKOS_LAMBDA(std::size_t i, std::size_t & bad) {
        const float gi = grad(i);
        bad += (gi - gi == 0.0f) ? 0 : 1;
        const float g = grad_scale * gi + wd * p(i);
        const float b = mu * buf(i) + g;
        buf(i) = b;
        p(i) = p(i) - lr * (nesterov ? g + mu * b : b);
      },
      non_finite);
  ++steps_;
  return non_finite;
}

}  // namespace qsgd::models
