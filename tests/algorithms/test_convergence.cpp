// Convergence properties of the synchronous algorithms of spec section 3
// (label stats: stochastic, fixed seeds, margins derived below).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <qsgd/algorithms.hpp>
#include <vector>

namespace qa = qsgd::algorithms;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t k = v.size() / 2;
  return v.size() % 2 ? v[k] : 0.5 * (v[k - 1] + v[k]);
}

// Median over `seeds` seeds of the first step (evaluated every 5) at which
// suboptimality <= eps; +inf for a run that does not get there in `steps`.
double median_steps(const qa::Problem& p, const qa::WireConfig& wire, double eps, std::uint64_t steps, int seeds,
                    qa::Feedback feedback = qa::Feedback::none) {
  std::vector<double> its;
  for (int seed = 0; seed < seeds; ++seed) {
    qa::QsgdConfig c;
    c.feedback = feedback;
    c.workers = 4;
    c.batch = 4;
    c.steps = steps;
    c.step = qa::StepSchedule::inverse_time(p.strong_convexity(), p.smoothness());
    c.wire = wire;
    c.seed = static_cast<std::uint64_t>(seed);
    c.eval = qa::EvalSpec{5, false, false};
    c.stop_below = eps;
    const std::uint64_t it = qa::first_iteration_below(qa::run_qsgd(p, c).curve, eps);
    its.push_back(it == qa::never ? INFINITY : static_cast<double>(it));
  }
  return median(its);
}

qa::WireConfig levels(std::uint32_t s) {
  qa::WireConfig w;  // elias-dense, L2 scaling, one bucket: the analysis' quantizer
  w.s = s;
  return w;
}

// Convex QSGD needs at most about 2x the iterations of full precision at
// s = sqrt(n) (spec section 3).
//
// Why 2: with the O(1/t) schedule eta_t = 2/(l(t+1) + 4L), SGD's
// suboptimality in its variance-dominated phase is ~ C sigma^2 / (l^2 t), so
// the steps to reach eps scale with the update variance. Q_s adds
// E|Q(g) - g|^2 <= min(n/s^2, sqrt(n)/s) |g|^2 = |g|^2 at s = sqrt(n), and
// near x* E|g|^2 ~ sigma^2: the variance at most doubles. The check is the
// spec's: median steps (5 seeds) at s = sqrt(n) <= 2.0 x median steps in fp32.
//
// Margin, measured on these problems with 20-40 seeds (Release, same code):
// least squares: fp32 mean 560 steps (sd 85), s = 8: 688 (sd 90), ratio 1.23;
// the ratio of two medians of 5 has a standard deviation ~ 0.14, so 2.0 is
// more than 5 standard deviations above the expected ratio. Logistic
// regression (n = 32): 640 vs 800, ratio 1.25, similar spread.
//
// The check can fail: at s = 1 the variance bound is 1 + sqrt(n) = 9 (least
// squares), the measured ratio ~ 8.6, and the same check fails (asserted
// below, with the runs cut at 2x the fp32 median).
class ConvexQsgd : public ::testing::Test {
 protected:
  void check(const qa::Problem& p, double eps_relative, std::uint64_t max_steps) {
    const double eps = eps_relative * p.suboptimality(p.initial_point());
    const double fp32 = median_steps(p, qa::full_precision_wire(), eps, max_steps, 5);
    ASSERT_TRUE(std::isfinite(fp32)) << "full precision did not reach eps in " << max_steps << " steps";
    const double q = median_steps(p, levels(qa::sqrt_levels(p.dim())), eps, max_steps, 5);
    RecordProperty("fp32_median_steps", std::to_string(fp32));
    RecordProperty("qsgd_median_steps", std::to_string(q));
    EXPECT_LE(q, 2.0 * fp32) << p.name() << ": s = sqrt(n) took " << q << " steps, fp32 " << fp32;
    // Companion: s = 1 fails the same check.
    const auto cut = static_cast<std::uint64_t>(2.0 * fp32) + 5;
    const double s1 = median_steps(p, levels(1), eps, cut, 5);
    EXPECT_GT(s1, 2.0 * fp32) << p.name() << ": s = 1 should need more than twice the fp32 steps";
  }
};

TEST_F(ConvexQsgd, LeastSquaresWithinTwiceFullPrecision) {
  // n = 64, m = 4096, column scales spanning kappa = 10, noise 1.
  auto p = qa::make_least_squares({});
  check(*p, 1e-3, 3000);
}

// Error feedback with the contractive C = Q_s / B (spec section 4,
// data_parallel.hpp) at s = 2, where B = 5 on this problem and plain QSGD
// needs about 3.9x the fp32 steps: the messages sum to the gradients' sum
// less a bounded residual, so the iterates follow fp32 SGD's and the steps to
// the target come back to within the same 2x check (measured with 5 seeds:
// 500 against fp32's 500). The check can fail: plain s = 2 fails it, and the
// spec's unscaled formula (C = Q_s, not a contraction at B = 5) diverges:
// its residual grows until the quantizer's input leaves the float range,
// which run_qsgd reports in RunResult::diverged.
TEST_F(ConvexQsgd, ErrorFeedbackAtTwoLevelsWithinTwiceFullPrecision) {
  auto p = qa::make_least_squares({});
  const double eps = 1e-3 * p->suboptimality(p->initial_point());
  const double fp32 = median_steps(*p, qa::full_precision_wire(), eps, 3000, 5);
  ASSERT_TRUE(std::isfinite(fp32));
  const double ef = median_steps(*p, levels(2), eps, 3000, 5, qa::Feedback::ef);
  RecordProperty("ef_median_steps", std::to_string(ef));
  EXPECT_LE(ef, 2.0 * fp32) << "s = 2 with error feedback took " << ef << " steps, fp32 " << fp32;
  const auto cut = static_cast<std::uint64_t>(2.0 * fp32) + 5;
  EXPECT_GT(median_steps(*p, levels(2), eps, cut, 5), 2.0 * fp32) << "plain s = 2 should fail the same check";
  qa::QsgdConfig c;
  c.steps = 3000;
  c.step = qa::StepSchedule::inverse_time(p->strong_convexity(), p->smoothness());
  c.wire = levels(2);
  c.feedback = qa::Feedback::ef_unscaled;
  const qa::RunResult r = qa::run_qsgd(*p, c);
  EXPECT_NE(r.diverged.find("step "), std::string::npos) << "unscaled error feedback at B = 5 did not diverge";
}

TEST_F(ConvexQsgd, LogisticRegressionWithinTwiceFullPrecision) {
  qa::LogisticSpec spec;
  spec.n = 32;
  spec.m = 2048;
  auto p = qa::make_logistic(spec);
  check(*p, 1e-2, 3000);
}

// Quantized SVRG: suboptimality falls by at least the spec's factor 0.9 in
// every epoch.
//
// Ridge regression with normalized rows (n = 64, m = 4096, ridge 0.05): the
// components' smoothness L_max = 1.05 and l ~ 0.054. eta = 0.05 / L_max and
// T = ceil(50 L_max / l) ~ 970 inner steps, as the theory prescribes
// (eta = O(1/L), T = O(L/l)); the SVRG bound with the quantizer's second
// moment factor B = 2 (qsvrg.hpp) gives E[ratio] <= alpha = 0.75 < 0.9.
// Measured (3 seeds x 15 epochs): every epoch's ratio in [0.08, 0.125]. The
// check is on each epoch's realized ratio, <= 0.9, for 8 epochs and K = 4
// workers.
//
// The check can fail: quantizing the epoch's full gradient too (the spec's
// text, FullGradient::quantized) leaves a fixed error in H_p that does not
// vanish at x*; the suboptimality stalls near 1e-3 of its start and some
// epoch's ratio exceeds 0.9 (asserted below). The stall is where the
// analysis in qsvrg.hpp puts it: qsvrg_quantized_floor() predicts 3.4e-4,
// measured 1.6e-4 to 1.7e-4 (4 seeds, mean of the last epochs); asserted within a
// factor 5 either way (the prediction ignores that y_{p+1} averages inner
// iterates that have not fully converged to the epoch's minimizer).
class Qsvrg : public ::testing::Test {
 protected:
  std::unique_ptr<qa::Problem> p = [] {
    qa::LeastSquaresSpec s;
    s.ridge = 0.05;
    s.normalize_rows = true;
    return qa::make_least_squares(s);
  }();

  qa::QsvrgResult run(qa::FullGradient full, int epochs) {
    qa::QsvrgConfig c;
    c.workers = 4;
    c.epochs = epochs;
    c.wire = levels(0);  // s = sqrt(n)
    c.full = full;
    c.seed = 7;
    return qa::run_qsvrg(*p, c);
  }
  static std::vector<double> ratios(const qa::QsvrgResult& r) {
    std::vector<double> v;
    for (std::size_t e = 1; e < r.epochs.size(); ++e)
      v.push_back(r.epochs[e].suboptimality / r.epochs[e - 1].suboptimality);
    return v;
  }
};

TEST_F(Qsvrg, TheoryBoundIsBelowTheSpecFactor) {
  const qa::QsvrgConfig c = qa::QsvrgConfig{}.resolved(*p);
  const double alpha = qa::qsvrg_rate_bound(c.eta, c.inner_steps, p->strong_convexity(), p->component_smoothness(),
                                            qa::second_moment_blowup(p->dim(), qa::sqrt_levels(p->dim())));
  EXPECT_LE(alpha, 0.75 + 1e-9);
}

TEST_F(Qsvrg, EveryEpochContractsByAtLeastTheSpecFactor) {
  const qa::QsvrgResult r = run(qa::FullGradient::exact, 8);
  const std::vector<double> rs = ratios(r);
  ASSERT_EQ(rs.size(), 8u);
  for (std::size_t e = 0; e < rs.size(); ++e) EXPECT_LE(rs[e], 0.9) << "epoch " << e + 1;
}

TEST_F(Qsvrg, QuantizedEpochGradientStallsAndFailsTheCheck) {
  const qa::QsvrgResult r = run(qa::FullGradient::quantized, 12);
  const std::vector<double> rs = ratios(r);
  EXPECT_GT(*std::max_element(rs.begin(), rs.end()), 0.9);
  EXPECT_GT(r.epochs.back().suboptimality, 1e-6 * r.epochs.front().suboptimality);
  double stall = 0.0;
  for (std::size_t e = r.epochs.size() - 4; e < r.epochs.size(); ++e) stall += r.epochs[e].suboptimality / 4.0;
  const double predicted = qa::qsvrg_quantized_floor(*p, 4, qa::sqrt_levels(p->dim()));
  RecordProperty("stall", std::to_string(stall));
  RecordProperty("predicted_floor", std::to_string(predicted));
  EXPECT_GT(stall, predicted / 5.0);
  EXPECT_LT(stall, predicted * 5.0);
}

}  // namespace
