#include "qsgd/algorithms/deterministic_gd.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace qsgd::algorithms {

double dqgd_spec_step(double l, double L, std::size_t n) { return l / (L * L * std::sqrt(static_cast<double>(n))); }

double dqgd_rate_bound(double eta, double l, double L, std::size_t n) {
  return 1.0 - 2.0 * l * eta * (1.0 - L * eta * std::sqrt(static_cast<double>(n)) / 2.0);
}

RunResult run_dqgd(const Problem& p, const DqgdConfig& cfg) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::size_t n = p.dim();
  const double eta = cfg.eta > 0 ? cfg.eta : dqgd_spec_step(p.strong_convexity(), p.smoothness(), n);
  WireConfig wire = full_precision_wire();
  if (cfg.quantize) {
    wire.codec = cfg.codec;
    wire.s = 1;
    wire.d = 0;
    wire.norm = Norm::l2;
  }
  Channel ch(wire, n);
  const EvalSpec eval{cfg.eval_every, false, false};
  RunResult r;
  Vec x = p.initial_point(), g(n), q(n);
  r.curve.push_back(evaluate(p, x, 0, 0, eval));
  std::uint64_t t = 0;
  while (t < cfg.iterations) {
    p.gradient(x, g);
    std::fill(q.begin(), q.end(), 0.0);
    const std::size_t bytes = cfg.quantize ? ch.encode_deterministic(g) : ch.encode(g, RngKey{});
    ch.accumulate(bytes, 1.0, q);
    axpy(-eta, q, x);
    ++t;
    if (t % cfg.eval_every == 0 || t == cfg.iterations) {
      r.curve.push_back(evaluate(p, x, t, ch.bits_sent(), eval));
      if (cfg.stop_below > 0 && r.curve.back().suboptimality <= cfg.stop_below) break;
    }
  }
  r.x = x;
  r.iterations = t;
  r.bits = ch.bits_sent();
  r.messages = ch.messages_sent();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace qsgd::algorithms
