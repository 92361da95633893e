// Unit tests of the problem definitions and the wire (label unit): the
// reference optimum is exact, the constants are right, the non-convex problem
// is non-convex, and the channel is the real quantizer and codec.
#include <gtest/gtest.h>

#include <cmath>
#include <qsgd/algorithms.hpp>

namespace qa = qsgd::algorithms;

namespace {

// |grad f(x*)| relative to |grad f(x0)|: the optimum is exact when this is at
// the level of double rounding (n * 1e-16 with headroom).
double relative_optimality(const qa::Problem& p) {
  return std::sqrt(p.gradient_norm2(p.optimum()) / p.gradient_norm2(p.initial_point()));
}

TEST(Problems, LeastSquaresOptimumIsExact) {
  auto p = qa::make_least_squares({});
  EXPECT_LT(relative_optimality(*p), 1e-12);
  EXPECT_GT(p->strong_convexity(), 0.0);
  EXPECT_LE(p->strong_convexity(), p->smoothness());
  // The column scales span a factor kappa = 10: the Hessian's condition
  // number is near it (sampling widens it a little at m/n = 64).
  const double kappa = p->smoothness() / p->strong_convexity();
  EXPECT_GT(kappa, 8.0);
  EXPECT_LT(kappa, 16.0);
  // The quadratic identity f(x) - f* = 1/2 (x - x*)' H (x - x*).
  const qa::Vec& x0 = p->initial_point();
  EXPECT_NEAR(p->suboptimality(x0), p->loss(x0) - p->optimal_value(), 1e-12 * p->loss(x0));
}

TEST(Problems, LogisticOptimumIsExact) {
  auto p = qa::make_logistic({});
  EXPECT_LT(relative_optimality(*p), 1e-12);
  EXPECT_GT(p->strong_convexity(), 0.0);
  EXPECT_LE(p->strong_convexity(), p->smoothness());
  // x* minimizes: a small step in any coordinate direction raises f.
  qa::Vec x = p->optimum();
  for (std::size_t k = 0; k < 4; ++k) {
    x[k] += 1e-4;
    EXPECT_GT(p->loss(x), p->optimal_value());
    x[k] -= 1e-4;
  }
}

TEST(Problems, QuadraticHasTheRequestedSpectrum) {
  auto p = qa::make_quadratic({});
  const qa::Vec ev = qa::symmetric_eigenvalues(p->hessian(p->initial_point()));
  EXPECT_NEAR(ev.front(), 0.1, 1e-12);
  EXPECT_NEAR(ev.back(), 1.0, 1e-12);
  EXPECT_LT(relative_optimality(*p), 1e-14);
}

TEST(Problems, RobustRegressionIsNonConvex) {
  auto p = qa::make_robust({});
  EXPECT_FALSE(p->convex());
  EXPECT_FALSE(p->has_optimum());
  // Far from the data (x = 0: residuals ~ |x_true| = 8 >> c) the Cauchy loss
  // bends down: the Hessian has a negative eigenvalue there.
  const qa::Vec ev = qa::symmetric_eigenvalues(p->hessian(p->initial_point()));
  EXPECT_LT(ev.front(), 0.0);
  // L bounds the curvature everywhere (rho'' in [-1/8, 1]).
  EXPECT_LE(ev.back(), p->smoothness() * (1 + 1e-12));
}

TEST(Problems, GradientsMatchFiniteDifferences) {
  auto check = [](const qa::Problem& p) {
    qa::Vec x(p.dim());
    for (std::size_t k = 0; k < x.size(); ++k) x[k] = 0.3 * qa::normal(77, k);
    qa::Vec g;
    p.gradient(x, g);
    for (std::size_t k = 0; k < 5; ++k) {
      const double h = 1e-5;
      qa::Vec a = x, b = x;
      a[k] += h;
      b[k] -= h;
      const double fd = (p.loss(a) - p.loss(b)) / (2 * h);
      EXPECT_NEAR(g[k], fd, 1e-6 * (1 + std::fabs(fd))) << p.name() << " coordinate " << k;
    }
  };
  check(*qa::make_least_squares({}));
  check(*qa::make_logistic({}));
  check(*qa::make_quadratic({}));
  check(*qa::make_robust({}));
}

TEST(Problems, ShardsPartitionTheSamples) {
  auto p = qa::make_least_squares({});
  std::size_t next = 0;
  for (int w = 0; w < 3; ++w) {
    const qa::Shard s = p->shard(w, 3);
    EXPECT_EQ(s.begin, next);
    next = s.end;
  }
  EXPECT_EQ(next, p->samples());
}

TEST(Channel, Fp32IsTheFloatRounding) {
  const std::size_t n = 50;
  qa::Channel ch(qa::full_precision_wire(), n);
  qa::Vec g(n), acc(n, 0.0);
  for (std::size_t i = 0; i < n; ++i) g[i] = qa::normal(5, i);
  const std::size_t bytes = ch.send(g, {}, 1.0, acc);
  for (std::size_t i = 0; i < n; ++i) EXPECT_EQ(acc[i], static_cast<double>(static_cast<float>(g[i])));
  EXPECT_EQ(ch.bits_sent(), 8 * bytes);
  EXPECT_GE(bytes, 4 * n);
}

TEST(Channel, QuantizedIsTheKernelQuantizer) {
  // The channel's output equals qsgd::quantize + dequantize with the same key:
  // it is the library's Q_s, not a re-implementation.
  const std::size_t n = 100;
  qa::WireConfig w;  // elias-dense, s = sqrt(n) = 10, one L2 bucket
  qa::Channel ch(w, n);
  EXPECT_EQ(ch.levels(), 10u);
  qa::Vec g(n), acc(n, 0.0);
  for (std::size_t i = 0; i < n; ++i) g[i] = qa::normal(6, i);
  const qsgd::RngKey key{9, 4, 2, 0};
  ch.send(g, key, 1.0, acc);

  Kokkos::View<float*, Kokkos::HostSpace> v("v", n), out("out", n);
  for (std::size_t i = 0; i < n; ++i) v(i) = static_cast<float>(g[i]);
  qsgd::CodecConfig c{qsgd::CodecKind::elias_dense, 10, 0, qsgd::Norm::l2};
  qsgd::Quantized<Kokkos::HostSpace> q;
  qsgd::quantize(qa::HostExec(), c, v, n, key, q);
  qsgd::dequantize(qa::HostExec(), q, out);
  for (std::size_t i = 0; i < n; ++i) EXPECT_EQ(acc[i], static_cast<double>(out(i))) << i;
}

TEST(Channel, DeterministicQuantizerProperties) {
  // Spec section 1: v.Q(v) >= |v|^2, |I| <= sqrt(n), |Q(v)|^2 <= sqrt(n)|v|^2.
  const std::size_t n = 64;
  qa::WireConfig w;
  w.codec = qsgd::CodecKind::elias_sparse;
  qa::Channel ch(w, n);
  for (std::uint64_t seed = 0; seed < 20; ++seed) {
    qa::Vec g(n), q(n, 0.0);
    for (std::size_t i = 0; i < n; ++i) g[i] = qa::normal(seed, i) * (i % 7 == 0 ? 5.0 : 1.0);
    ch.accumulate(ch.encode_deterministic(g), 1.0, q);
    std::size_t nnz = 0;
    for (double e : q) nnz += e != 0.0;
    const double g2 = qa::norm2(g);
    EXPECT_GE(qa::dot(g, q), g2 * (1 - 1e-6));
    EXPECT_LE(nnz, 8u);
    EXPECT_LE(qa::norm2(q), std::sqrt(double(n)) * g2 * (1 + 1e-6));
  }
}

}  // namespace
