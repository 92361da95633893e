#pragma once
// The optimization problems of the algorithm experiments (spec section 3).
// Each is a finite sum f(x) = (1/m) sum_j f_j(x) over a synthetic data set
// that is a pure function of a seed, computed in double on the host, with
// the constants the theory needs:
//
//   L        smoothness of f (largest Hessian eigenvalue, or a bound on it)
//   L_max    largest smoothness of one component f_j (what SVRG's step uses)
//   l        strong convexity: smallest Hessian eigenvalue of f (at x* for
//            logistic regression, where the asymptotic rate is decided); 0
//            for the non-convex problem
//   x*, f*   the exact optimum: closed form for the quadratics (Cholesky with
//            one step of refinement), Newton's method to a gradient norm of
//            1e-13 for logistic regression; not defined for the non-convex one
//
// Problems (docs/algorithms.md has the formulas and the default sizes):
//   least-squares  f_j = 1/2 (a_j.x - b_j)^2 + ridge/2 |x|^2, Gaussian rows
//                  with a geometric spread of column scales (condition kappa),
//                  optionally normalized rows; planted x plus N(0, noise^2)
//   logistic       f_j = log(1 + exp(-y_j a_j.x)) + ridge/2 |x|^2, labels drawn
//                  from the planted model's probabilities
//   quadratic      f = 1/2 (x - x*)' H (x - x*), H = Q diag(l..L) Q' with a
//                  random rotation Q (one component, m = 1)
//   robust         f_j = c^2/2 log(1 + (a_j.x - b_j)^2 / c^2) (Cauchy loss,
//                  non-convex), with a fraction of gross outliers in b

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>

#include "qsgd/algorithms/linalg.hpp"

namespace qsgd::algorithms {

struct Shard {
  std::size_t begin = 0, end = 0;
  std::size_t size() const { return end - begin; }
};

class Problem {
 public:
  virtual ~Problem() = default;

  const std::string& name() const { return name_; }
  // Parameters as a one-line JSON object, for result files.
  virtual std::string describe_json() const = 0;

  std::size_t dim() const { return n_; }
  std::size_t samples() const { return m_; }
  bool convex() const { return convex_; }
  bool has_optimum() const { return !x_star_.empty(); }

  double smoothness() const { return L_; }
  double component_smoothness() const { return L_max_; }
  double strong_convexity() const { return l_; }
  const Vec& optimum() const { return x_star_; }
  double optimal_value() const { return f_star_; }
  const Vec& initial_point() const { return x0_; }

  // f(x).
  virtual double loss(const Vec& x) const = 0;
  // g += w * grad f_j(x).
  virtual void add_sample_gradient(std::size_t j, const Vec& x, double w, Vec& g) const = 0;
  // Hessian of f at x.
  virtual Matrix hessian(const Vec& x) const = 0;
  // f(x) - f* (NaN without a known optimum). Quadratics compute it as
  // 1/2 (x - x*)' H (x - x*), free of the cancellation in f(x) - f*.
  virtual double suboptimality(const Vec& x) const;

  // g = (1/|S|) sum_{j in S} grad f_j(x) over the shard S = [begin, end).
  void shard_gradient(const Shard& s, const Vec& x, Vec& g) const;
  // g = grad f(x).
  void gradient(const Vec& x, Vec& g) const { shard_gradient(Shard{0, m_}, x, g); }
  double gradient_norm2(const Vec& x) const;

  // Worker w's contiguous share of the samples, w in [0, workers).
  Shard shard(int w, int workers) const;

 protected:
  Problem(std::string name, std::size_t n, std::size_t m, bool convex)
      : name_(std::move(name)), n_(n), m_(m), convex_(convex), x0_(n, 0.0) {}

  std::string name_;
  std::size_t n_ = 0, m_ = 0;
  bool convex_ = true;
  double L_ = 0, L_max_ = 0, l_ = 0;
  Vec x_star_;
  double f_star_ = std::numeric_limits<double>::quiet_NaN();
  Vec x0_;
};

struct LeastSquaresSpec {
  std::size_t n = 64;
  std::size_t m = 4096;
  double kappa = 10.0;  // column scales c_k from 1 down to 1/sqrt(kappa), geometric
  double noise = 1.0;   // standard deviation of the label noise
  double ridge = 0.0;
  bool normalize_rows = false;  // |a_j| = 1: every component has the same smoothness
  std::uint64_t seed = 1;
};

struct LogisticSpec {
  std::size_t n = 64;
  std::size_t m = 4096;
  double kappa = 10.0;  // column scales as for least squares
  double margin = 1.0;  // planted x ~ margin * N(0, I)
  double ridge = 1e-3;
  std::uint64_t seed = 2;
};

struct QuadraticSpec {
  std::size_t n = 64;
  double l = 0.1;  // eigenvalues geometric from l to L
  double L = 1.0;
  std::uint64_t seed = 3;
};

struct RobustSpec {
  std::size_t n = 64;
  std::size_t m = 4096;
  double c = 1.0;                 // Cauchy loss scale
  double noise = 0.1;             // inlier noise
  double outlier_fraction = 0.2;  // share of labels replaced by gross errors
  double outlier_scale = 10.0;
  std::uint64_t seed = 4;
};

std::unique_ptr<Problem> make_least_squares(const LeastSquaresSpec& spec);
std::unique_ptr<Problem> make_logistic(const LogisticSpec& spec);
std::unique_ptr<Problem> make_quadratic(const QuadraticSpec& spec);
std::unique_ptr<Problem> make_robust(const RobustSpec& spec);

}  // namespace qsgd::algorithms
