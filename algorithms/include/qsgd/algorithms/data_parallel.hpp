#pragma once
// Synchronous data-parallel QSGD (spec section 3), K workers simulated in one
// process. Each step t:
//   1. worker i draws a minibatch of `batch` samples from its shard (indices
//      keyed by (seed, t, i)) and computes its stochastic gradient g_i;
//   2. it quantizes and encodes it, M_i = Encode(Q_s(g_i)), with the real
//      qsgd::Codec and the rounding keyed by RngKey{seed, t, i, 0};
//   3. every worker decodes the K messages and forms (1/K) sum_i Q_s(g_i);
//   4. x <- x - eta_t * average.
// With the fp32 wire the same loop is full-precision minibatch SGD. In one
// process the K replicas are one x: they would be equal anyway (every rank
// decodes the same messages; qsgd::comm's allgather guarantees bitwise equal
// averages).

#include <cstdint>
#include <string>

#include "qsgd/algorithms/channel.hpp"
#include "qsgd/algorithms/problems.hpp"
#include "qsgd/algorithms/curve.hpp"
#include "qsgd/kernels/feedback.hpp"

namespace qsgd::algorithms {

// Error feedback (qsgd/kernels/feedback.hpp), per worker, on the quantized
// wire; at s = 2 and d = 64, B = 5 and the residual of ef-unscaled grows.
using qsgd::Feedback;

struct QsgdConfig {
  int workers = 4;
  int batch = 4;               // samples per worker per step
  std::uint64_t steps = 1000;  // upper bound on steps
  StepSchedule step;
  WireConfig wire;
  std::uint64_t seed = 1;
  EvalSpec eval;
  double stop_below = 0.0;  // stop at the first evaluation with suboptimality <= this (0: never)
  Feedback feedback = Feedback::none;  // quantized wires only
};

struct RunResult {
  Curve curve;
  Vec x;  // final iterate
  std::uint64_t iterations = 0;
  std::uint64_t bits = 0;  // all bits sent
  std::uint64_t messages = 0;
  double seconds = 0.0;
  // Set when the run stopped early because a gradient could no longer be
  // quantized (it grew past the float range or became NaN: the iterate or an
  // error-feedback residual diverged): "step T: <the quantizer's error>".
  std::string diverged;
};

RunResult run_qsgd(const Problem& p, const QsgdConfig& cfg);

// Minibatch sample k of worker w at step t: uniform over the worker's shard.
std::size_t sample_index(const Shard& s, std::uint64_t seed, std::uint64_t step, int worker, int k);

}  // namespace qsgd::algorithms
