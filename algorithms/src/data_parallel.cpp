#include "qsgd/algorithms/data_parallel.hpp"

#include <algorithm>
#include <chrono>
#include <vector>

#include "qsgd/algorithms/qsvrg.hpp"
#include "qsgd/algorithms/random.hpp"

namespace qsgd::algorithms {

std::size_t sample_index(const Shard& s, std::uint64_t seed, std::uint64_t step, int worker, int k) {
  const std::uint64_t h =
      hash_key(seed ^ 0x5a3b1e0fcafeull, step, static_cast<std::uint64_t>(worker), static_cast<std::uint64_t>(k));
  return s.begin + static_cast<std::size_t>(uniform_index(h, s.size()));
}

RunResult run_qsgd(const Problem& p, const QsgdConfig& cfg) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::size_t n = p.dim();
  Channel ch(cfg.wire, n);
  std::vector<Shard> shards;
  for (int w = 0; w < cfg.workers; ++w) shards.push_back(p.shard(w, cfg.workers));

  const Feedback fb = cfg.wire.quantized() ? cfg.feedback : Feedback::none;
  // C = Q_s / B (ef, ef21) or Q_s (ef_unscaled): qsgd/kernels/feedback.hpp.
  const std::size_t d = cfg.wire.d == 0 ? n : cfg.wire.d;
  const double c_scale = feedback_scale(fb, second_moment_blowup(d, ch.levels()));
  // ef: residuals e_i; ef21: states h_i and their mean.
  std::vector<Vec> state(fb == Feedback::none ? 0 : static_cast<std::size_t>(cfg.workers), Vec(n, 0.0));
  Vec h_mean(n, 0.0), c(n);

  RunResult r;
  Vec x = p.initial_point(), g(n), avg(n);
  const double inv_k = 1.0 / cfg.workers, inv_b = 1.0 / cfg.batch;
  // Step t of every worker: its gradient, compressed (with feedback), into
  // avg (ef21: into its h_i and h_mean).
  const auto step_workers = [&](std::uint64_t t) {
    for (int w = 0; w < cfg.workers; ++w) {
      std::fill(g.begin(), g.end(), 0.0);
      for (int k = 0; k < cfg.batch; ++k)
        p.add_sample_gradient(sample_index(shards[w], cfg.seed, t, w, k), x, inv_b, g);
      const RngKey key{cfg.seed, t, static_cast<std::uint32_t>(w), 0};
      if (fb == Feedback::none) {
        ch.send(g, key, inv_k, avg);
        continue;
      }
      Vec& st = state[static_cast<std::size_t>(w)];
      // The vector compressed: g + e (ef) or g - h (ef21), into g.
      axpy(fb == Feedback::ef21 ? -1.0 : 1.0, st, g);
      std::fill(c.begin(), c.end(), 0.0);
      ch.send(g, key, c_scale, c);  // c = C(g)
      if (fb == Feedback::ef21) {
        axpy(1.0, c, st);         // h_i += c_i
        axpy(inv_k, c, h_mean);   // the mean of the h_i follows
      } else {
        for (std::size_t k = 0; k < n; ++k) st[k] = g[k] - c[k];  // e_i = p_i - C(p_i)
        axpy(inv_k, c, avg);
      }
    }
  };

  r.curve.push_back(evaluate(p, x, 0, 0, cfg.eval));
  std::uint64_t t = 0;
  while (t < cfg.steps) {
    std::fill(avg.begin(), avg.end(), 0.0);
    try {
      step_workers(t);
    } catch (const Error& e) {
      // Only an input the quantizer cannot take (NaN/Inf, or an L2 norm
      // beyond the float range) is a divergence; anything else is a fault.
      if (e.code() != Errc::non_finite_input && e.code() != Errc::out_of_range) throw;
      r.diverged = "step " + std::to_string(t) + ": " + e.what();
      break;
    }
    axpy(-cfg.step.at(t), fb == Feedback::ef21 ? h_mean : avg, x);
    ++t;
    if (t % cfg.eval.every == 0 || t == cfg.steps) {
      r.curve.push_back(evaluate(p, x, t, ch.bits_sent(), cfg.eval));
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
