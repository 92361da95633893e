#include "qsgd/algorithms/problems.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>

#include "qsgd/algorithms/random.hpp"

namespace qsgd::algorithms {

double Problem::suboptimality(const Vec& x) const {
  return has_optimum() ? loss(x) - f_star_ : std::numeric_limits<double>::quiet_NaN();
}

void Problem::shard_gradient(const Shard& s, const Vec& x, Vec& g) const {
  g.assign(n_, 0.0);
  const double w = 1.0 / static_cast<double>(s.size());
  for (std::size_t j = s.begin; j < s.end; ++j) add_sample_gradient(j, x, w, g);
}

double Problem::gradient_norm2(const Vec& x) const {
  Vec g;
  gradient(x, g);
  return norm2(g);
}

Shard Problem::shard(int w, int workers) const {
  const std::size_t k = static_cast<std::size_t>(workers), i = static_cast<std::size_t>(w);
  return Shard{m_ * i / k, m_ * (i + 1) / k};
}

namespace {

// Gaussian design: a_jk = N(0,1) * c_k, c_k geometric from 1 to 1/sqrt(kappa)
// (so the column variances span a factor kappa), rows optionally normalized.
Matrix gaussian_design(std::size_t m, std::size_t n, double kappa, bool normalize, std::uint64_t seed) {
  Matrix a(m, n);
  const std::uint64_t stream = hash_key(seed, 0xa11);
  for (std::size_t k = 0; k < n; ++k) {
    const double c = n > 1 ? std::pow(kappa, -0.5 * static_cast<double>(k) / static_cast<double>(n - 1)) : 1.0;
    for (std::size_t j = 0; j < m; ++j) a(j, k) = c * normal(stream, j * n + k);
  }
  if (normalize)
    for (std::size_t j = 0; j < m; ++j) {
      double s = 0.0;
      for (std::size_t k = 0; k < n; ++k) s += a(j, k) * a(j, k);
      s = 1.0 / std::sqrt(s);
      for (std::size_t k = 0; k < n; ++k) a(j, k) *= s;
    }
  return a;
}

// (1/m) A' diag(w) A + ridge I (w = nullptr: all ones).
Matrix gram(const Matrix& a, const Vec* w, double ridge) {
  const std::size_t m = a.rows, n = a.cols;
  Matrix g(n, n);
  for (std::size_t j = 0; j < m; ++j) {
    const double* r = a.row(j);
    const double wj = w ? (*w)[j] : 1.0;
    for (std::size_t p = 0; p < n; ++p) {
      const double v = wj * r[p];
      double* gp = g.row(p);
      for (std::size_t q = p; q < n; ++q) gp[q] += v * r[q];
    }
  }
  const double inv = 1.0 / static_cast<double>(m);
  for (std::size_t p = 0; p < n; ++p)
    for (std::size_t q = p; q < n; ++q) {
      g(p, q) *= inv;
      g(q, p) = g(p, q);
    }
  for (std::size_t p = 0; p < n; ++p) g(p, p) += ridge;
  return g;
}

double max_row_norm2(const Matrix& a) {
  double mx = 0.0;
  for (std::size_t j = 0; j < a.rows; ++j) {
    double s = 0.0;
    for (std::size_t k = 0; k < a.cols; ++k) s += a(j, k) * a(j, k);
    mx = std::max(mx, s);
  }
  return mx;
}

double row_dot(const Matrix& a, std::size_t j, const Vec& x) {
  const double* r = a.row(j);
  double s = 0.0;
  for (std::size_t k = 0; k < a.cols; ++k) s += r[k] * x[k];
  return s;
}

void add_row(const Matrix& a, std::size_t j, double alpha, Vec& g) {
  const double* r = a.row(j);
  for (std::size_t k = 0; k < a.cols; ++k) g[k] += alpha * r[k];
}

// log(1 + exp(-z)) without overflow.
double softplus_neg(double z) { return z > 0 ? std::log1p(std::exp(-z)) : -z + std::log1p(std::exp(z)); }
// 1 / (1 + exp(z)) without overflow.
double sigmoid_neg(double z) {
  if (z >= 0) {
    const double e = std::exp(-z);
    return e / (1.0 + e);
  }
  return 1.0 / (1.0 + std::exp(z));
}

class LeastSquares final : public Problem {
 public:
  explicit LeastSquares(const LeastSquaresSpec& s)
      : Problem("least-squares", s.n, s.m, true),
        spec_(s),
        a_(gaussian_design(s.m, s.n, s.kappa, s.normalize_rows, s.seed)) {
    Vec xt(n_);
    for (std::size_t k = 0; k < n_; ++k) xt[k] = normal(hash_key(s.seed, 0x7), k);
    b_ = matvec(a_, xt);
    for (std::size_t j = 0; j < m_; ++j) b_[j] += s.noise * normal(hash_key(s.seed, 0xb), j);
    h_ = gram(a_, nullptr, s.ridge);
    Vec atb(n_, 0.0);
    for (std::size_t j = 0; j < m_; ++j) add_row(a_, j, b_[j] / static_cast<double>(m_), atb);
    x_star_ = cholesky_solve(h_, atb);
    f_star_ = loss(x_star_);
    const Vec ev = symmetric_eigenvalues(h_);
    l_ = ev.front();
    L_ = ev.back();
    L_max_ = max_row_norm2(a_) + s.ridge;
  }

  std::string describe_json() const override {
    std::ostringstream os;
    os.precision(17);
    os << "{\"name\":\"" << name_ << "\",\"n\":" << n_ << ",\"m\":" << m_ << ",\"kappa\":" << spec_.kappa
       << ",\"noise\":" << spec_.noise << ",\"ridge\":" << spec_.ridge
       << ",\"normalize_rows\":" << (spec_.normalize_rows ? "true" : "false") << ",\"seed\":" << spec_.seed
       << ",\"L\":" << L_ << ",\"L_max\":" << L_max_ << ",\"l\":" << l_ << ",\"f_star\":" << f_star_ << "}";
    return os.str();
  }

  double loss(const Vec& x) const override {
    double s = 0.0;
    for (std::size_t j = 0; j < m_; ++j) {
      const double r = row_dot(a_, j, x) - b_[j];
      s += 0.5 * r * r;
    }
    return s / static_cast<double>(m_) + 0.5 * spec_.ridge * norm2(x);
  }

  void add_sample_gradient(std::size_t j, const Vec& x, double w, Vec& g) const override {
    add_row(a_, j, w * (row_dot(a_, j, x) - b_[j]), g);
    if (spec_.ridge != 0.0) axpy(w * spec_.ridge, x, g);
  }

  Matrix hessian(const Vec&) const override { return h_; }

  double suboptimality(const Vec& x) const override {
    Vec d(n_);
    for (std::size_t k = 0; k < n_; ++k) d[k] = x[k] - x_star_[k];
    return 0.5 * dot(d, matvec(h_, d));
  }

 private:
  LeastSquaresSpec spec_;
  Matrix a_;
  Vec b_;
  Matrix h_;
};

class Logistic final : public Problem {
 public:
  explicit Logistic(const LogisticSpec& s)
      : Problem("logistic", s.n, s.m, true), spec_(s), a_(gaussian_design(s.m, s.n, s.kappa, false, s.seed)), y_(s.m) {
    Vec xt(n_);
    for (std::size_t k = 0; k < n_; ++k) xt[k] = s.margin * normal(hash_key(s.seed, 0x7), k);
    for (std::size_t j = 0; j < m_; ++j) {
      const double p = 1.0 / (1.0 + std::exp(-row_dot(a_, j, xt)));
      y_[j] = unit_open(hash_key(s.seed, 0x1ab, j)) < p ? 1.0 : -1.0;
    }
    // Newton's method from 0 with backtracking: quadratic convergence down
    // to the gradient's rounding floor (~1e-15 here). A step is accepted
    // when it does not raise f beyond rounding (near x* the decrease
    // g'H^-1 g / 2 is below the loss' rounding error, so a strict test would
    // reject the very steps that converge).
    Vec x(n_, 0.0), g;
    double prev = INFINITY;
    for (int it = 0; it < 50; ++it) {
      gradient(x, g);
      const double gn = std::sqrt(norm2(g));
      if (gn < 1e-14 || (gn >= prev && gn < 1e-10)) break;
      prev = gn;
      const Vec step = cholesky_solve(hessian(x), g);
      const double f0 = loss(x);
      double t = 1.0;
      Vec xn(n_);
      for (int bt = 0; bt < 60; ++bt, t *= 0.5) {
        for (std::size_t k = 0; k < n_; ++k) xn[k] = x[k] - t * step[k];
        if (loss(xn) <= f0 + 1e-14 * std::fabs(f0)) break;
      }
      x = xn;
    }
    x_star_ = x;
    f_star_ = loss(x_star_);
    l_ = symmetric_eigenvalues(hessian(x_star_)).front();
    // sigma' <= 1/4 everywhere: L = lambda_max(A'A/m)/4 + ridge bounds every Hessian.
    L_ = 0.25 * symmetric_eigenvalues(gram(a_, nullptr, 0.0)).back() + s.ridge;
    L_max_ = 0.25 * max_row_norm2(a_) + s.ridge;
  }

  std::string describe_json() const override {
    std::ostringstream os;
    os.precision(17);
    os << "{\"name\":\"" << name_ << "\",\"n\":" << n_ << ",\"m\":" << m_ << ",\"kappa\":" << spec_.kappa
       << ",\"margin\":" << spec_.margin << ",\"ridge\":" << spec_.ridge << ",\"seed\":" << spec_.seed
       << ",\"L\":" << L_ << ",\"L_max\":" << L_max_ << ",\"l\":" << l_ << ",\"f_star\":" << f_star_ << "}";
    return os.str();
  }

  double loss(const Vec& x) const override {
    double s = 0.0;
    for (std::size_t j = 0; j < m_; ++j) s += softplus_neg(y_[j] * row_dot(a_, j, x));
    return s / static_cast<double>(m_) + 0.5 * spec_.ridge * norm2(x);
  }

  void add_sample_gradient(std::size_t j, const Vec& x, double w, Vec& g) const override {
    const double z = y_[j] * row_dot(a_, j, x);
    add_row(a_, j, -w * y_[j] * sigmoid_neg(z), g);
    axpy(w * spec_.ridge, x, g);
  }

  Matrix hessian(const Vec& x) const override {
    Vec w(m_);
    for (std::size_t j = 0; j < m_; ++j) {
      const double p = sigmoid_neg(row_dot(a_, j, x));
      w[j] = p * (1.0 - p);
    }
    return gram(a_, &w, spec_.ridge);
  }

 private:
  LogisticSpec spec_;
  Matrix a_;
  Vec y_;
};

class Quadratic final : public Problem {
 public:
  explicit Quadratic(const QuadraticSpec& s) : Problem("quadratic", s.n, 1, true), spec_(s), h_(s.n, s.n) {
    const Matrix q = random_orthogonal(n_, s.seed);
    Vec lam(n_);
    for (std::size_t k = 0; k < n_; ++k)
      lam[k] = n_ > 1 ? s.l * std::pow(s.L / s.l, static_cast<double>(k) / static_cast<double>(n_ - 1)) : s.l;
    for (std::size_t p = 0; p < n_; ++p)
      for (std::size_t r = 0; r < n_; ++r) {
        double v = 0.0;
        for (std::size_t k = 0; k < n_; ++k) v += q(p, k) * lam[k] * q(r, k);
        h_(p, r) = v;
      }
    x_star_.resize(n_);
    for (std::size_t k = 0; k < n_; ++k) x_star_[k] = normal(hash_key(s.seed, 0x7), k);
    f_star_ = 0.0;
    l_ = s.l;
    L_ = s.L;
    L_max_ = s.L;
  }

  std::string describe_json() const override {
    std::ostringstream os;
    os.precision(17);
    os << "{\"name\":\"" << name_ << "\",\"n\":" << n_ << ",\"l\":" << l_ << ",\"L\":" << L_
       << ",\"seed\":" << spec_.seed << ",\"f_star\":0}";
    return os.str();
  }

  double loss(const Vec& x) const override { return suboptimality(x); }

  void add_sample_gradient(std::size_t, const Vec& x, double w, Vec& g) const override {
    Vec d(n_);
    for (std::size_t k = 0; k < n_; ++k) d[k] = x[k] - x_star_[k];
    axpy(w, matvec(h_, d), g);
  }

  Matrix hessian(const Vec&) const override { return h_; }

  double suboptimality(const Vec& x) const override {
    Vec d(n_);
    for (std::size_t k = 0; k < n_; ++k) d[k] = x[k] - x_star_[k];
    return 0.5 * dot(d, matvec(h_, d));
  }

 private:
  QuadraticSpec spec_;
  Matrix h_;
};

class Robust final : public Problem {
 public:
  explicit Robust(const RobustSpec& s)
      : Problem("robust", s.n, s.m, false), spec_(s), a_(gaussian_design(s.m, s.n, 1.0, false, s.seed)) {
    Vec xt(n_);
    for (std::size_t k = 0; k < n_; ++k) xt[k] = normal(hash_key(s.seed, 0x7), k);
    b_ = matvec(a_, xt);
    for (std::size_t j = 0; j < m_; ++j) {
      const bool outlier = unit_open(hash_key(s.seed, 0x017, j)) < s.outlier_fraction;
      b_[j] += (outlier ? s.outlier_scale : s.noise) * normal(hash_key(s.seed, 0xb), j);
    }
    // rho'' = (1 - r^2/c^2) / (1 + r^2/c^2)^2 lies in [-1/8, 1], so
    // |Hessian| <= lambda_max(A'A/m).
    L_ = symmetric_eigenvalues(gram(a_, nullptr, 0.0)).back();
    L_max_ = max_row_norm2(a_);
    l_ = 0.0;
  }

  std::string describe_json() const override {
    std::ostringstream os;
    os.precision(17);
    os << "{\"name\":\"" << name_ << "\",\"n\":" << n_ << ",\"m\":" << m_ << ",\"c\":" << spec_.c
       << ",\"noise\":" << spec_.noise << ",\"outlier_fraction\":" << spec_.outlier_fraction
       << ",\"outlier_scale\":" << spec_.outlier_scale << ",\"seed\":" << spec_.seed << ",\"L\":" << L_
       << ",\"L_max\":" << L_max_ << "}";
    return os.str();
  }

  double loss(const Vec& x) const override {
    const double c2 = spec_.c * spec_.c;
    double s = 0.0;
    for (std::size_t j = 0; j < m_; ++j) {
      const double r = row_dot(a_, j, x) - b_[j];
      s += 0.5 * c2 * std::log1p(r * r / c2);
    }
    return s / static_cast<double>(m_);
  }

  void add_sample_gradient(std::size_t j, const Vec& x, double w, Vec& g) const override {
    const double r = row_dot(a_, j, x) - b_[j];
    add_row(a_, j, w * r / (1.0 + r * r / (spec_.c * spec_.c)), g);
  }

  Matrix hessian(const Vec& x) const override {
    const double c2 = spec_.c * spec_.c;
    Vec w(m_);
    for (std::size_t j = 0; j < m_; ++j) {
      const double r = row_dot(a_, j, x) - b_[j];
      const double u = r * r / c2;
      w[j] = (1.0 - u) / ((1.0 + u) * (1.0 + u));
    }
    return gram(a_, &w, 0.0);
  }

 private:
  RobustSpec spec_;
  Matrix a_;
  Vec b_;
};

}  // namespace

std::unique_ptr<Problem> make_least_squares(const LeastSquaresSpec& spec) {
  return std::make_unique<LeastSquares>(spec);
}
std::unique_ptr<Problem> make_logistic(const LogisticSpec& spec) { return std::make_unique<Logistic>(spec); }
std::unique_ptr<Problem> make_quadratic(const QuadraticSpec& spec) { return std::make_unique<Quadratic>(spec); }
std::unique_ptr<Problem> make_robust(const RobustSpec& spec) { return std::make_unique<Robust>(spec); }

}  // namespace qsgd::algorithms
