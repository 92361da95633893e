// Asynchronous parameter-server QSGD with bounded staleness (spec section 3),
// run under mpirun at 2 ranks (one worker) and 3 ranks (two workers): rank 0
// is the server. Every rank runs every test (run_async is collective) and
// checks the result the server broadcasts.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <qsgd/algorithms.hpp>
#include <qsgd/comm/communicator.hpp>

namespace qa = qsgd::algorithms;

namespace {

const qsgd::comm::Communicator& world() {
  static const qsgd::comm::Communicator c = qsgd::comm::Communicator::world();
  return c;
}

// Bookkeeping every run must satisfy, whatever the timing: the staleness of
// every applied update is measured and <= tau, the histograms add up, and
// the shutdown left no push unaccounted for (every push the workers sent was
// received: applied, rejected, or discarded after STOP).
void check_accounting(const qa::AsyncResult& r, const qa::AsyncConfig& c) {
  EXPECT_EQ(r.applied, c.updates);
  EXPECT_EQ(r.staleness.size(), r.applied);
  EXPECT_EQ(std::accumulate(r.staleness_hist.begin(), r.staleness_hist.end(), std::uint64_t(0)), r.applied);
  EXPECT_EQ(std::accumulate(r.rejected_hist.begin(), r.rejected_hist.end(), std::uint64_t(0)), r.rejected);
  EXPECT_EQ(std::accumulate(r.applied_per_worker.begin(), r.applied_per_worker.end(), std::uint64_t(0)), r.applied);
  EXPECT_EQ(r.pushes, r.applied + r.rejected);
  EXPECT_EQ(r.sent, r.pushes + r.discarded);
  EXPECT_EQ(r.workers, world().size() - 1);
  if (c.tau >= 0) {
    EXPECT_LE(r.max_staleness, static_cast<std::uint64_t>(c.tau));
    EXPECT_LE(*std::max_element(r.staleness.begin(), r.staleness.end()), static_cast<std::uint32_t>(c.tau));
  }
  EXPECT_EQ(*std::max_element(r.staleness.begin(), r.staleness.end()), r.max_staleness);
}

// Mean of a measure over the last `k` evaluation points (the iterate
// fluctuates at the noise level; the mean of 5 points steadies the check).
template <class F>
double tail_mean(const qa::Curve& t, std::size_t k, F f) {
  double s = 0.0;
  for (std::size_t i = t.size() - k; i < t.size(); ++i) s += f(t[i]);
  return s / static_cast<double>(k);
}

qa::WireConfig sqrt_n_wire() { return qa::WireConfig{}; }  // elias-dense, s = sqrt(n), L2, one bucket

// Convex: logistic regression (n = 32, m = 2048). tau = 4, window 4 (eager
// pull), batch 8 drawn from the whole data set, 3000 applied updates,
// eta_v = 2/(l(v+1) + 4 L (1 + tau)) (the inverse-time schedule with L scaled
// by 1 + tau, the usual price of staleness).
//
// Threshold: the sequential full-precision SGD baseline (one worker, no
// staleness, same batch, schedule and number of updates) computed here,
// times 4: quantization at most doubles the update variance (B = 2 at
// s = sqrt(n)) and the O(1/t) phase's suboptimality is proportional to it;
// the other factor 2 covers staleness and the timing-dependent noise of one
// asynchronous run. Measured (Debug, 2 and 3 ranks, 22 runs, 12 of them
// with a second test process loading both cores): async / baseline in
// [0.75, 1.4], so 4 leaves a margin of nearly 3. Also an absolute check: at
// least 25x below f(x0) - f* (measured ~120x).
TEST(AsyncServer, ConvexConvergesWithBoundedStaleness) {
  qa::LogisticSpec spec;
  spec.n = 32;
  spec.m = 2048;
  const auto p = qa::make_logistic(spec);
  qa::AsyncConfig c;
  c.updates = 3000;
  c.batch = 8;
  c.tau = 4;
  c.window = 4;
  c.wire = sqrt_n_wire();
  c.seed = 11;
  c.eval = qa::EvalSpec{100, false, false};
  c.step = qa::StepSchedule::inverse_time(p->strong_convexity(), p->smoothness() * (1 + c.tau));
  const qa::AsyncResult r = qa::run_async(*p, c, world());
  check_accounting(r, c);

  qa::QsgdConfig b;
  b.workers = 1;
  b.batch = c.batch;
  b.steps = c.updates;
  b.step = c.step;
  b.wire = qa::full_precision_wire();
  b.seed = c.seed;
  b.eval = c.eval;
  const qa::RunResult base = qa::run_qsgd(*p, b);

  auto sub = [](const qa::CurvePoint& t) { return t.suboptimality; };
  const double async_final = tail_mean(r.curve, 5, sub), base_final = tail_mean(base.curve, 5, sub);
  const double f0 = r.curve.front().suboptimality;
  if (world().rank() == 0)
    std::printf("convex: async %.3e (max staleness %llu, rejected %llu), sequential fp32 %.3e, start %.3e\n",
                async_final, static_cast<unsigned long long>(r.max_staleness),
                static_cast<unsigned long long>(r.rejected), base_final, f0);
  EXPECT_LE(async_final, 4.0 * base_final);
  EXPECT_LE(async_final, f0 / 25.0);
}

// Non-convex: Cauchy-loss robust regression (n = 32, m = 2048, 20% gross
// outliers). x0 = 0 lies on the loss's flat, non-convex plateau (residuals
// ~ |x_true| >> c; test_problems.cpp shows a negative Hessian eigenvalue
// there), so the gradient first grows as x leaves it, then must go to zero.
// tau = 4, window 4, 3000 updates, Robbins-Monro steps
// eta_v = eta0 / (1 + v/300), eta0 = 1/(2 L (1 + tau)), under which
// grad f(x_v) -> 0 for unbiased bounded-variance (so also quantized)
// gradients. Checks, on |grad f|^2 (mean of the last 5 evaluations):
//   - <= 4x the sequential fp32 baseline's (same argument as above; measured
//     ratio in [0.8, 1.35] over 26 runs);
//   - <= 2.5e-2 x its peak along the run (measured 4-7e-3: the gradient fell
//     more than 100-fold from its peak);
// and the loss at least halves (measured 1.34 -> 0.36).
TEST(AsyncServer, NonConvexReachesAStationaryPoint) {
  qa::RobustSpec spec;
  spec.n = 32;
  spec.m = 2048;
  const auto p = qa::make_robust(spec);
  qa::AsyncConfig c;
  c.updates = 3000;
  c.batch = 8;
  c.tau = 4;
  c.window = 4;
  c.wire = sqrt_n_wire();
  c.seed = 12;
  c.eval = qa::EvalSpec{100, true, true};
  c.step = qa::StepSchedule::harmonic(1.0 / (2.0 * p->smoothness() * (1 + c.tau)), 300.0);
  const qa::AsyncResult r = qa::run_async(*p, c, world());
  check_accounting(r, c);

  qa::QsgdConfig b;
  b.workers = 1;
  b.batch = c.batch;
  b.steps = c.updates;
  b.step = c.step;
  b.wire = qa::full_precision_wire();
  b.seed = c.seed;
  b.eval = c.eval;
  const qa::RunResult base = qa::run_qsgd(*p, b);

  auto gn = [](const qa::CurvePoint& t) { return t.grad_norm2; };
  const double async_final = tail_mean(r.curve, 5, gn), base_final = tail_mean(base.curve, 5, gn);
  double peak = 0, bpeak = 0;  // peaks of |grad f|^2 along the runs
  for (const auto& t : r.curve) peak = std::max(peak, t.grad_norm2);
  for (const auto& t : base.curve) bpeak = std::max(bpeak, t.grad_norm2);
  if (world().rank() == 0)
    std::printf(
        "non-convex: async |g|^2 %.3e (peak %.3e, max staleness %llu, rejected %llu), sequential fp32 %.3e "
        "(peak %.3e), loss %.3f -> %.3f\n",
        async_final, peak, static_cast<unsigned long long>(r.max_staleness),
        static_cast<unsigned long long>(r.rejected), base_final, bpeak, r.curve.front().loss, r.curve.back().loss);
  EXPECT_LE(async_final, 4.0 * base_final);
  EXPECT_LE(async_final, 2.5e-2 * peak);
  EXPECT_LE(r.curve.back().loss, 0.5 * r.curve.front().loss);
}

// The staleness check can fail. With lazy pull and window 6, each worker
// computes its first 6 gradients on version 0, so the server meets
// staleness >= 5 deterministically (the 6th push of a worker is applied after
// at least 5 others). Without enforcement (tau < 0) the measured maximum
// exceeds 2, so "max staleness <= 2" fails; with tau = 2 the server rejects
// those pushes and the bound holds.
TEST(AsyncServer, StalenessBoundIsEnforced) {
  qa::LeastSquaresSpec spec;
  spec.n = 16;
  spec.m = 512;
  const auto p = qa::make_least_squares(spec);
  qa::AsyncConfig c;
  c.updates = 200;
  c.batch = 4;
  c.window = 6;
  c.lazy_pull = true;
  c.wire = sqrt_n_wire();
  c.eval = qa::EvalSpec{50, false, false};
  c.step = qa::StepSchedule::constant(0.01);

  c.tau = -1;
  const qa::AsyncResult unbounded = qa::run_async(*p, c, world());
  check_accounting(unbounded, c);
  EXPECT_GE(unbounded.max_staleness, 5u);
  EXPECT_EQ(unbounded.rejected, 0u);

  c.tau = 2;
  const qa::AsyncResult bounded = qa::run_async(*p, c, world());
  check_accounting(bounded, c);
  EXPECT_LE(bounded.max_staleness, 2u);
  EXPECT_GT(bounded.rejected, 0u);
}

// Every rank ends with the server's parameters, and a run can follow
// another on the same communicator (each uses a private duplicate).
TEST(AsyncServer, EveryRankGetsTheFinalParameters) {
  qa::LeastSquaresSpec spec;
  spec.n = 16;
  spec.m = 512;
  const auto p = qa::make_least_squares(spec);
  qa::AsyncConfig c;
  c.updates = 100;
  c.eval = qa::EvalSpec{10, false, false};
  c.step = qa::StepSchedule::constant(0.05);
  const qa::AsyncResult r = qa::run_async(*p, c, world());
  std::vector<double> x0(r.x.size());
  std::copy(r.x.begin(), r.x.end(), x0.begin());
  MPI_Bcast(x0.data(), static_cast<int>(x0.size()), MPI_DOUBLE, 0, MPI_COMM_WORLD);
  EXPECT_EQ(r.x, x0);
  EXPECT_LT(r.curve.back().suboptimality, r.curve.front().suboptimality);
}

}  // namespace
