// Deterministic quantized gradient descent converges linearly on a strongly
// convex quadratic (spec section 3), at the rate derived in
// deterministic_gd.hpp:
//   f(x_{t+1}) - f* <= rho (f(x_t) - f*),  rho = 1 - 2 l eta (1 - L eta sqrt(n)/2).
// The run is deterministic (no random rounding), so the bound is checked at
// every step, exactly. The only slack is float rounding: the gradient is sent
// as float, which perturbs g.Q(g) >= |g|^2 and |Q|^2 <= sqrt(n)|g|^2 by a
// relative ~ (2 + n^(1/4)) 2^-24 < 1e-6, i.e. rho is checked as
// 1 - 2 l eta (1 - L eta sqrt(n)/2) (1 - 1e-6). Steps are checked while
// f - f* > 1e-20 (f(x0) - f*), far above where double rounding of x - x*
// (about 1e-32 relative) could matter.
#include <gtest/gtest.h>

#include <cmath>
#include <qsgd/algorithms.hpp>

namespace qa = qsgd::algorithms;

namespace {

struct Check {
  double worst_step = 0.0;      // max over t of (f_{t+1} - f*) / (f_t - f*)
  bool envelope_holds = true;   // f_t - f* <= rho^t (f_0 - f*) for every t
  double final_relative = 0.0;  // (f_T - f*) / (f_0 - f*)
};

Check check_run(const qa::Problem& p, double eta, std::uint64_t iters, double rho) {
  qa::DqgdConfig c;
  c.eta = eta;
  c.iterations = iters;
  const qa::RunResult r = qa::run_dqgd(p, c);
  Check k;
  const double f0 = r.curve.front().suboptimality;
  for (std::size_t t = 1; t < r.curve.size(); ++t) {
    const double prev = r.curve[t - 1].suboptimality, cur = r.curve[t].suboptimality;
    if (prev > 1e-20 * f0) k.worst_step = std::max(k.worst_step, cur / prev);
    if (cur > std::pow(rho, static_cast<double>(r.curve[t].iteration)) * f0 && cur > 1e-20 * f0)
      k.envelope_holds = false;
  }
  k.final_relative = r.curve.back().suboptimality / f0;
  return k;
}

double slack_rho(double eta, double l, double L, std::size_t n) {
  return 1.0 - 2.0 * l * eta * (1.0 - L * eta * std::sqrt(double(n)) / 2.0) * (1.0 - 1e-6);
}

class DeterministicQgd : public ::testing::Test {
 protected:
  // n = 64, eigenvalues geometric in [0.1, 1] under a random rotation.
  std::unique_ptr<qa::Problem> p = qa::make_quadratic({});
  std::size_t n = p->dim();
  double l = p->strong_convexity(), L = p->smoothness();
};

TEST_F(DeterministicQgd, SpecStepIsLinearAtTheDerivedRate) {
  // eta = l / (L^2 sqrt(n)) = 0.0125; rho = 1 - 2 (0.1)(0.0125)(1 - 0.05) = 0.997625.
  const double eta = qa::dqgd_spec_step(l, L, n);
  const double rho = slack_rho(eta, l, L, n);
  EXPECT_NEAR(qa::dqgd_rate_bound(eta, l, L, n), 0.997625, 1e-9);
  const Check k = check_run(*p, eta, 1500, rho);
  EXPECT_LE(k.worst_step, rho);
  EXPECT_TRUE(k.envelope_holds);
  // rho^1500 = 0.028: the bound itself guarantees this much progress.
  EXPECT_LE(k.final_relative, std::pow(rho, 1500.0));
}

TEST_F(DeterministicQgd, LargestStepOfTheAnalysisIsLinear) {
  // eta = 1 / (L sqrt(n)), half the largest step the derivation allows:
  // rho = 1 - l / (L sqrt(n)) = 0.9875.
  const double eta = 1.0 / (L * std::sqrt(double(n)));
  const double rho = slack_rho(eta, l, L, n);
  const Check k = check_run(*p, eta, 600, rho);
  EXPECT_LE(k.worst_step, rho);
  EXPECT_TRUE(k.envelope_holds);
}

TEST_F(DeterministicQgd, TooLargeAStepFailsTheSameCheck) {
  // The check can fail: at eta = 8 / (L sqrt(n)) (beyond 2 / (L sqrt(n)),
  // where the derivation gives no contraction) some steps increase f and the
  // run stalls in a cycle at about 3.6e-2 (f(x0) - f*), which the spec step's
  // envelope rho^t passes below at t ~ 1400.
  const double eta = 8.0 / (L * std::sqrt(double(n)));
  const double rho_spec = slack_rho(qa::dqgd_spec_step(l, L, n), l, L, n);
  const Check k = check_run(*p, eta, 3000, rho_spec);
  EXPECT_GT(k.worst_step, 1.0);
  EXPECT_FALSE(k.envelope_holds);
  EXPECT_GT(k.final_relative, 1e-2);
}

}  // namespace
