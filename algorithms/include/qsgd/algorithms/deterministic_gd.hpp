#pragma once
// Gradient descent with the deterministic quantizer (spec sections 1 and 3):
//   x_{t+1} = x_t - eta Q(grad f(x_t)),
// Q keeping the smallest set I of largest-magnitude coordinates whose
// magnitudes sum to >= |g|_2 and sending |g|_2 sign(g_i) on I
// (qsgd::quantize_deterministic, encoded with a real wire code).
//
// Linear rate, derived from the quantizer's two properties
//   g.Q(g) >= |g|^2   and   |Q(g)|^2 <= sqrt(n) |g|^2
// and L-smoothness: f(x - eta Q) <= f(x) - eta g.Q + (L/2) eta^2 |Q|^2
//                               <= f(x) - eta (1 - L eta sqrt(n) / 2) |g|^2;
// with l-strong convexity |g|^2 >= 2 l (f - f*), so
//   f(x_{t+1}) - f* <= rho (f(x_t) - f*),  rho = 1 - 2 l eta (1 - L eta sqrt(n) / 2),
// a contraction for every 0 < eta < 2 / (L sqrt(n)). The spec's step
// eta = l / (L^2 sqrt(n)) gives rho = 1 - (2 l^2 / (L^2 sqrt(n))) (1 - l / (2L)).

#include <cstdint>

#include "qsgd/algorithms/channel.hpp"
#include "qsgd/algorithms/data_parallel.hpp"
#include "qsgd/algorithms/problems.hpp"
#include "qsgd/algorithms/curve.hpp"

namespace qsgd::algorithms {

struct DqgdConfig {
  double eta = 0.0;  // 0: the spec's l / (L^2 sqrt(n))
  std::uint64_t iterations = 1000;
  bool quantize = true;                       // false: plain gradient descent (fp32 on the wire), for comparison
  CodecKind codec = CodecKind::elias_sparse;  // at most sqrt(n) non-zeros: the sparse code fits
  std::uint64_t eval_every = 1;
  double stop_below = 0.0;  // stop once suboptimality <= this (0: never)
};

RunResult run_dqgd(const Problem& p, const DqgdConfig& cfg);

double dqgd_spec_step(double l, double L, std::size_t n);
// rho above; >= 1 (no guarantee) when eta >= 2 / (L sqrt(n)).
double dqgd_rate_bound(double eta, double l, double L, std::size_t n);

}  // namespace qsgd::algorithms
