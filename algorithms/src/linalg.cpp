#include "qsgd/algorithms/linalg.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <utility>

#include "qsgd/algorithms/random.hpp"

namespace qsgd::algorithms {

double dot(const Vec& a, const Vec& b) {
  double s = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

double norm2(const Vec& a) { return dot(a, a); }

void axpy(double alpha, const Vec& x, Vec& y) {
  for (std::size_t i = 0; i < x.size(); ++i) y[i] += alpha * x[i];
}

Vec matvec(const Matrix& m, const Vec& x) {
  Vec y(m.rows, 0.0);
  for (std::size_t i = 0; i < m.rows; ++i) {
    const double* r = m.row(i);
    double s = 0.0;
    for (std::size_t j = 0; j < m.cols; ++j) s += r[j] * x[j];
    y[i] = s;
  }
  return y;
}

Vec cholesky_solve(const Matrix& s, const Vec& b) {
  const std::size_t n = s.rows;
  Matrix l(n, n);
  for (std::size_t j = 0; j < n; ++j) {
    double d = s(j, j);
    for (std::size_t k = 0; k < j; ++k) d -= l(j, k) * l(j, k);
    if (!(d > 0.0)) throw std::runtime_error("cholesky_solve: matrix is not positive definite");
    l(j, j) = std::sqrt(d);
    for (std::size_t i = j + 1; i < n; ++i) {
      double v = s(i, j);
      for (std::size_t k = 0; k < j; ++k) v -= l(i, k) * l(j, k);
      l(i, j) = v / l(j, j);
    }
  }
  Vec y(n);
  for (std::size_t i = 0; i < n; ++i) {
    double v = b[i];
    for (std::size_t k = 0; k < i; ++k) v -= l(i, k) * y[k];
    y[i] = v / l(i, i);
  }
  Vec x(n);
  for (std::size_t i = n; i-- > 0;) {
    double v = y[i];
    for (std::size_t k = i + 1; k < n; ++k) v -= l(k, i) * x[k];
    x[i] = v / l(i, i);
  }
  // One step of iterative refinement: r = b - S x, x += S^-1 r (same factor).
  Vec r = matvec(s, x);
  for (std::size_t i = 0; i < n; ++i) r[i] = b[i] - r[i];
  for (std::size_t i = 0; i < n; ++i) {
    double v = r[i];
    for (std::size_t k = 0; k < i; ++k) v -= l(i, k) * y[k];
    y[i] = v / l(i, i);
  }
  for (std::size_t i = n; i-- > 0;) {
    double v = y[i];
    for (std::size_t k = i + 1; k < n; ++k) v -= l(k, i) * r[k];
    r[i] = v / l(i, i);
  }
  for (std::size_t i = 0; i < n; ++i) x[i] += r[i];
  return x;
}

Vec symmetric_eigenvalues(Matrix s, Matrix* vectors) {
  const std::size_t n = s.rows;
  Matrix v(n, n);
  for (std::size_t i = 0; i < n; ++i) v(i, i) = 1.0;
  for (int sweep = 0; sweep < 100; ++sweep) {
    double off = 0.0, total = 0.0;
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < n; ++j) {
        total += s(i, j) * s(i, j);
        if (i != j) off += s(i, j) * s(i, j);
      }
    if (off <= 1e-30 * total) break;
    for (std::size_t p = 0; p + 1 < n; ++p)
      for (std::size_t q = p + 1; q < n; ++q) {
        const double apq = s(p, q);
        if (apq == 0.0) continue;
        // Rotation that zeroes s(p, q) (Golub & Van Loan, Algorithm 8.5.1).
        const double tau = (s(q, q) - s(p, p)) / (2.0 * apq);
        const double t = (tau >= 0 ? 1.0 : -1.0) / (std::fabs(tau) + std::sqrt(1.0 + tau * tau));
        const double c = 1.0 / std::sqrt(1.0 + t * t), sn = t * c;
        for (std::size_t k = 0; k < n; ++k) {
          const double skp = s(k, p), skq = s(k, q);
          s(k, p) = c * skp - sn * skq;
          s(k, q) = sn * skp + c * skq;
        }
        for (std::size_t k = 0; k < n; ++k) {
          const double spk = s(p, k), sqk = s(q, k);
          s(p, k) = c * spk - sn * sqk;
          s(q, k) = sn * spk + c * sqk;
        }
        for (std::size_t k = 0; k < n; ++k) {
          const double vkp = v(k, p), vkq = v(k, q);
          v(k, p) = c * vkp - sn * vkq;
          v(k, q) = sn * vkp + c * vkq;
        }
      }
  }
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t(0));
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return s(a, a) < s(b, b); });
  Vec ev(n);
  for (std::size_t i = 0; i < n; ++i) ev[i] = s(order[i], order[i]);
  if (vectors) {
    *vectors = Matrix(n, n);
    for (std::size_t k = 0; k < n; ++k)
      for (std::size_t i = 0; i < n; ++i) (*vectors)(k, i) = v(k, order[i]);
  }
  return ev;
}

Matrix random_orthogonal(std::size_t n, std::uint64_t seed) {
  Matrix q(n, n);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j) q(i, j) = normal(hash_key(seed, 0x0a7), i * n + j);
  // Columns orthonormalized in order; two passes of MGS.
  for (std::size_t j = 0; j < n; ++j) {
    for (int pass = 0; pass < 2; ++pass)
      for (std::size_t k = 0; k < j; ++k) {
        double p = 0.0;
        for (std::size_t i = 0; i < n; ++i) p += q(i, k) * q(i, j);
        for (std::size_t i = 0; i < n; ++i) q(i, j) -= p * q(i, k);
      }
    double nn = 0.0;
    for (std::size_t i = 0; i < n; ++i) nn += q(i, j) * q(i, j);
    nn = std::sqrt(nn);
    for (std::size_t i = 0; i < n; ++i) q(i, j) /= nn;
  }
  return q;
}

}  // namespace qsgd::algorithms
