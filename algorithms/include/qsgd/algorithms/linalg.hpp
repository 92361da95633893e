#pragma once
// Dense linear algebra in double for the problem definitions: small (n up to
// a few hundred) symmetric matrices, row-major. Exactness of the reference
// optimum x* matters more than speed here.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace qsgd::algorithms {

using Vec = std::vector<double>;

double dot(const Vec& a, const Vec& b);
double norm2(const Vec& a);                     // squared Euclidean norm
void axpy(double alpha, const Vec& x, Vec& y);  // y += alpha * x

// Row-major dense matrix.
struct Matrix {
  std::size_t rows = 0, cols = 0;
  std::vector<double> a;
  Matrix() = default;
  Matrix(std::size_t r, std::size_t c) : rows(r), cols(c), a(r * c, 0.0) {}
  double& operator()(std::size_t i, std::size_t j) { return a[i * cols + j]; }
  double operator()(std::size_t i, std::size_t j) const { return a[i * cols + j]; }
  const double* row(std::size_t i) const { return a.data() + i * cols; }
  double* row(std::size_t i) { return a.data() + i * cols; }
};

Vec matvec(const Matrix& m, const Vec& x);

// Solves S x = b for symmetric positive definite S (Cholesky). Throws
// std::runtime_error when S is not numerically positive definite.
Vec cholesky_solve(const Matrix& s, const Vec& b);

// Eigenvalues of a symmetric matrix, ascending (cyclic Jacobi rotations, to
// full double precision). With `vectors`, its columns become the eigenvectors.
Vec symmetric_eigenvalues(Matrix s, Matrix* vectors = nullptr);

// An orthogonal matrix from a Gaussian one (modified Gram-Schmidt, applied
// twice for orthogonality to machine precision).
Matrix random_orthogonal(std::size_t n, std::uint64_t seed);

}  // namespace qsgd::algorithms
