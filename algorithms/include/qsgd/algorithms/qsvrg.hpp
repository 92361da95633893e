#pragma once
// Quantized SVRG (spec section 3) for a strongly convex finite sum
// f = (1/m) sum_j f_j, data split over K workers (h_i: mean of worker i's
// shard), K workers simulated in one process:
//
//   epoch p, snapshot y_p:
//     each worker sends its shard's full gradient grad h_i(y_p); the average
//     H_p = (1/K) sum_i [decoded message i] is assembled (= grad f(y_p));
//     x_0 = y_p;
//     inner step t = 0..T-1: worker i samples j from its shard and sends
//       Q(grad f_j(x_t) - grad f_j(y_p) + H_p, sqrt(n)) (RngKey{seed, pT+t, i, 1});
//       u_t = average of the K decoded messages; x_{t+1} = x_t - eta u_t;
//     y_{p+1} = (1/T) sum_{t=1..T} x_t (the mean inner iterate).
//
// How the epoch's full gradients travel is a choice:
//   FullGradient::exact      fp32 on the wire (32n bits per worker per epoch).
//                            As we read the paper (its bit count per epoch has
//                            a full-precision term F n), this is its QSVRG.
//   FullGradient::quantized  Q(grad h_i(y_p), sqrt(n)) as the spec's text says.
//                            Its error e_p = H_p - grad f(y_p) is zero-mean but
//                            stays fixed for the whole epoch, and it does not
//                            vanish at x*: the shard gradients grad h_i(x*) are
//                            not zero (only their mean is), so E|e_p|^2 ~
//                            (1/K^2) sum_i (sqrt(n)/s)|grad h_i(x*)|^2 > 0 and
//                            the epoch converges to the minimizer of
//                            f + e_p.x, leaving a floor of about
//                            E|e_p|^2 / (2 l). docs/algorithms.md shows it.
//
// Linear rate (Johnson & Zhang 2013, Theorem 1, with the quantizer's second
// moment bound E|Q(v)|^2 <= B |v|^2, B = 1 + min(n/s^2, sqrt(n)/s) = 2 at
// s = sqrt(n), and L = L_max, the components' smoothness):
//   E[f(y_{p+1}) - f*] <= alpha (f(y_p) - f*),
//   alpha = 1 / (l eta T (1 - 2 B L eta)) + 2 B L eta / (1 - 2 B L eta).
// The defaults eta = 0.05 / L_max and T = ceil(50 L_max / l) give
// alpha = 0.5 + 0.25 = 0.75 < 0.9 (the spec's factor).

#include <cstdint>

#include "qsgd/algorithms/channel.hpp"
#include "qsgd/algorithms/data_parallel.hpp"
#include "qsgd/algorithms/problems.hpp"
#include "qsgd/algorithms/curve.hpp"

namespace qsgd::algorithms {

enum class FullGradient { exact, quantized };
std::string to_string(FullGradient f);

struct QsvrgConfig {
  int workers = 4;
  double eta = 0.0;               // 0: 0.05 / L_max
  std::uint64_t inner_steps = 0;  // T; 0: ceil(50 L_max / l)
  int epochs = 10;
  WireConfig wire;  // the inner steps' code (s = 0: sqrt(n))
  FullGradient full = FullGradient::exact;
  std::uint64_t seed = 1;
  std::uint64_t inner_every = 0;  // also record the inner iterates every this many steps (0: no)

  // eta and T resolved against a problem.
  QsvrgConfig resolved(const Problem& p) const;
};

struct QsvrgResult {
  Curve epochs;  // iteration = epoch p, suboptimality of the snapshot y_p
  Curve inner;   // iteration = global inner step, suboptimality of x_t
  Vec y;
  double eta = 0.0;
  std::uint64_t inner_steps = 0;
  std::uint64_t bits = 0;
  double seconds = 0.0;
};

QsvrgResult run_qsvrg(const Problem& p, const QsvrgConfig& cfg);

// alpha above; +infinity when the bound is vacuous (2 B L eta >= 1).
double qsvrg_rate_bound(double eta, std::uint64_t inner_steps, double l, double L_max, double blowup);
// B = 1 + min(n/s^2, sqrt(n)/s): the second-moment blow-up of Q_s (spec section 1, one bucket).
double second_moment_blowup(std::size_t n, std::uint32_t s);

// The floor of FullGradient::quantized: at y_p = x* an epoch converges toward
// the minimizer of f + e.x, whose suboptimality is e'H^-1 e / 2, and
//   E[e'H^-1 e] / 2 = (1 / (2 K^2)) sum_i sum_k (H^-1)_kk Var[Q_s(g_i)_k],
// g_i = grad h_i(x*), with the exact per-coordinate variance of Q_s (one L2
// bucket): (|g_i| / s)^2 p (1 - p), p the fractional part of s |g_ik| / |g_i|.
double qsvrg_quantized_floor(const Problem& p, int workers, std::uint32_t s);

}  // namespace qsgd::algorithms
