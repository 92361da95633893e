#pragma once
// What an algorithm run records: its convergence curve and what it sent.

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "qsgd/algorithms/linalg.hpp"

namespace qsgd::algorithms {

class Problem;

constexpr double not_measured = std::numeric_limits<double>::quiet_NaN();
constexpr std::uint64_t never = ~std::uint64_t(0);

struct CurvePoint {
  std::uint64_t iteration = 0;          // steps, applied updates or epochs (the run says which)
  double suboptimality = not_measured;  // f(x) - f*
  double loss = not_measured;           // f(x)
  double grad_norm2 = not_measured;     // |grad f(x)|^2
  std::uint64_t bits = 0;               // all bits sent by all workers so far
};

using Curve = std::vector<CurvePoint>;

// What to measure at each evaluation point. Suboptimality is cheap for the
// quadratics (O(n^2)); loss and gradient norm cost a pass over the data.
struct EvalSpec {
  std::uint64_t every = 10;  // evaluate every this many iterations (and at 0 and the end)
  bool loss = false;
  bool grad_norm = false;
};

CurvePoint evaluate(const Problem& p, const Vec& x, std::uint64_t iteration, std::uint64_t bits, const EvalSpec& e);

// First recorded iteration whose suboptimality is <= eps, or `never`.
std::uint64_t first_iteration_below(const Curve& t, double eps);

// Step sizes eta_t.
//   constant:      eta_t = eta
//   inverse_time:  eta_t = 2 / (l (t + 1) + 4 L): 1/(2L) at t = 0, ~2/(l t)
//                  later, the O(1/t) schedule under which SGD on an
//                  l-strongly convex L-smooth f has E[f - f*] = O(sigma^2 / (l^2 t)),
//                  so the iterations to a given suboptimality scale with the
//                  gradient variance sigma^2 (what quantization inflates).
//   harmonic:      eta_t = eta / (1 + t / t0): Robbins-Monro steps (sum eta_t
//                  infinite, sum eta_t^2 finite), under which SGD on an
//                  L-smooth non-convex f with unbiased bounded-variance
//                  gradients (quantized ones included) has grad f(x_t) -> 0.
struct StepSchedule {
  enum class Kind { constant, inverse_time, harmonic };
  Kind kind = Kind::constant;
  double eta = 0.0;
  double l = 0.0, L = 0.0;
  double t0 = 1.0;

  static StepSchedule constant(double eta_) { return {Kind::constant, eta_, 0.0, 0.0, 1.0}; }
  static StepSchedule inverse_time(double l_, double L_) { return {Kind::inverse_time, 0.0, l_, L_, 1.0}; }
  static StepSchedule harmonic(double eta_, double t0_) { return {Kind::harmonic, eta_, 0.0, 0.0, t0_}; }
  double at(std::uint64_t t) const {
    const double td = static_cast<double>(t);
    switch (kind) {
      case Kind::constant:
        return eta;
      case Kind::inverse_time:
        return 2.0 / (l * (td + 1.0) + 4.0 * L);
      case Kind::harmonic:
        return eta / (1.0 + td / t0);
    }
    return eta;
  }
  std::string describe_json() const;
};

}  // namespace qsgd::algorithms
