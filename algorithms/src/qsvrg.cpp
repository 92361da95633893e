#include "qsgd/algorithms/qsvrg.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <vector>

#include "qsgd/kernels/config.hpp"

namespace qsgd::algorithms {

std::string to_string(FullGradient f) { return f == FullGradient::exact ? "exact" : "quantized"; }

QsvrgConfig QsvrgConfig::resolved(const Problem& p) const {
  QsvrgConfig c = *this;
  if (c.eta <= 0) c.eta = 0.05 / p.component_smoothness();
  if (c.inner_steps == 0)
    c.inner_steps = static_cast<std::uint64_t>(std::ceil(50.0 * p.component_smoothness() / p.strong_convexity()));
  return c;
}

double second_moment_blowup(std::size_t n, std::uint32_t s) { return second_moment_bound(n, s); }

double qsvrg_rate_bound(double eta, std::uint64_t inner_steps, double l, double L_max, double blowup) {
  const double a = 2.0 * blowup * L_max * eta;
  if (a >= 1.0) return std::numeric_limits<double>::infinity();
  return 1.0 / (l * eta * static_cast<double>(inner_steps) * (1.0 - a)) + a / (1.0 - a);
}

double qsvrg_quantized_floor(const Problem& p, int workers, std::uint32_t s) {
  const std::size_t n = p.dim();
  const Vec& xs = p.optimum();
  const Matrix h = p.hessian(xs);
  Vec hinv_diag(n), e(n, 0.0);
  for (std::size_t k = 0; k < n; ++k) {
    e[k] = 1.0;
    hinv_diag[k] = cholesky_solve(h, e)[k];
    e[k] = 0.0;
  }
  const double sd = static_cast<double>(s);
  double total = 0.0;
  Vec g;
  for (int w = 0; w < workers; ++w) {
    p.shard_gradient(p.shard(w, workers), xs, g);
    double scale = 0.0;
    for (double v : g) scale += static_cast<double>(static_cast<float>(v)) * static_cast<double>(static_cast<float>(v));
    scale = std::sqrt(scale);
    if (scale == 0.0) continue;
    for (std::size_t k = 0; k < n; ++k) {
      const double a = std::fabs(static_cast<double>(static_cast<float>(g[k]))) / scale * sd;
      const double pr = a - std::floor(a);
      total += hinv_diag[k] * (scale / sd) * (scale / sd) * pr * (1.0 - pr);
    }
  }
  return total / (2.0 * workers * workers);
}

QsvrgResult run_qsvrg(const Problem& p, const QsvrgConfig& cfg_in) {
  const auto t0 = std::chrono::steady_clock::now();
  const QsvrgConfig cfg = cfg_in.resolved(p);
  const std::size_t n = p.dim();
  const int K = cfg.workers;
  Channel inner(cfg.wire, n);
  WireConfig full_wire = cfg.full == FullGradient::exact ? full_precision_wire() : cfg.wire;
  if (cfg.full == FullGradient::quantized) full_wire.s = 0;  // sqrt(n), as the spec says
  Channel full(full_wire, n);
  std::vector<Shard> shards;
  for (int w = 0; w < K; ++w) shards.push_back(p.shard(w, K));

  QsvrgResult r;
  r.eta = cfg.eta;
  r.inner_steps = cfg.inner_steps;
  const std::uint64_t T = cfg.inner_steps;
  const double inv_k = 1.0 / K;
  Vec y = p.initial_point(), h(n), x(n), xsum(n), u(n), v(n), g(n);
  const EvalSpec eval{1, false, false};
  auto bits = [&] { return inner.bits_sent() + full.bits_sent(); };
  r.epochs.push_back(evaluate(p, y, 0, 0, eval));
  for (int ep = 0; ep < cfg.epochs; ++ep) {
    const std::uint64_t pe = static_cast<std::uint64_t>(ep);
    std::fill(h.begin(), h.end(), 0.0);
    for (int w = 0; w < K; ++w) {
      p.shard_gradient(shards[w], y, g);
      full.send(g, RngKey{cfg.seed, pe, static_cast<std::uint32_t>(w), 0}, inv_k, h);
    }
    x = y;
    std::fill(xsum.begin(), xsum.end(), 0.0);
    for (std::uint64_t t = 0; t < T; ++t) {
      const std::uint64_t step = pe * T + t;
      std::fill(u.begin(), u.end(), 0.0);
      for (int w = 0; w < K; ++w) {
        const std::size_t j = sample_index(shards[w], cfg.seed, step, w, 0);
        v = h;
        p.add_sample_gradient(j, x, 1.0, v);
        p.add_sample_gradient(j, y, -1.0, v);
        inner.send(v, RngKey{cfg.seed, step, static_cast<std::uint32_t>(w), 1}, inv_k, u);
      }
      axpy(-cfg.eta, u, x);
      axpy(1.0, x, xsum);
      if (cfg.inner_every && (step + 1) % cfg.inner_every == 0)
        r.inner.push_back(evaluate(p, x, step + 1, bits(), eval));
    }
    for (std::size_t k = 0; k < n; ++k) y[k] = xsum[k] / static_cast<double>(T);
    r.epochs.push_back(evaluate(p, y, pe + 1, bits(), eval));
  }
  r.y = y;
  r.bits = bits();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace qsgd::algorithms
