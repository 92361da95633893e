#include "qsgd/algorithms/data_parallel.hpp"

#include <algorithm>
#include <chrono>
#include <vector>

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

  RunResult r;
  Vec x = p.initial_point(), g(n), avg(n);
  r.curve.push_back(evaluate(p, x, 0, 0, cfg.eval));
  const double inv_k = 1.0 / cfg.workers, inv_b = 1.0 / cfg.batch;
  std::uint64_t t = 0;
  while (t < cfg.steps) {
    std::fill(avg.begin(), avg.end(), 0.0);
    for (int w = 0; w < cfg.workers; ++w) {
      std::fill(g.begin(), g.end(), 0.0);
      for (int k = 0; k < cfg.batch; ++k)
        p.add_sample_gradient(sample_index(shards[w], cfg.seed, t, w, k), x, inv_b, g);
      ch.send(g, RngKey{cfg.seed, t, static_cast<std::uint32_t>(w), 0}, inv_k, avg);
    }
    axpy(-cfg.step.at(t), avg, x);
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
