#include "qsgd/models/detail/gemm.hpp"

// The host builds multiply through KokkosKernels (the system BLAS); a CUDA
// build calls cuBLAS (QSGD_MODELS_CUBLAS, set by CMake when Kokkos has the
// CUDA backend), loaded at run time (detail/cublas_runtime.hpp): Debian ships
// KokkosKernels for the host only, and building it for CUDA would cost the
// CUDA stage most of its time budget.
#if !defined(QSGD_MODELS_CUBLAS)
#include <KokkosBlas3_gemm.hpp>
#endif

#include <sstream>
#include <stdexcept>
#include <string>

#include "qsgd/models/blas.hpp"
#include "qsgd/models/detail/cublas_runtime.hpp"

namespace qsgd::models {

std::string device_blas() {
#if defined(QSGD_MODELS_CUBLAS)
  const auto& rt = detail::cublas_runtime();
  return "cuBLAS " + rt.version + " (" + rt.path + ")";
#else
  return "";
#endif
}

}  // namespace qsgd::models

namespace qsgd::models::detail {
namespace {

#if defined(QSGD_MODELS_CUBLAS)
void cublas_check(int st, const char* what) {
  if (st != 0) {
    throw std::runtime_error(std::string("qsgd::models::gemm: ") + what + " failed: cuBLAS status " +
                             std::to_string(st) + " (" + cublas_runtime().path + ")");
  }
}

// One handle per process, created at the first product, on the stream of
// Kokkos' default Cuda instance (so that it orders with the layers' kernels),
// destroyed when Kokkos finalizes (before the CUDA context goes).
void* cublas_handle() {
  static void* h = [] {
    const auto& rt = cublas_runtime();
    void* made = nullptr;
    cublas_check(rt.create(&made), "cublasCreate");
    cublas_check(rt.set_stream(made, Kokkos::Cuda().cuda_stream()), "cublasSetStream");
    Kokkos::push_finalize_hook([made] { cublas_runtime().destroy(made); });
    return made;
  }();
  return h;
}

constexpr int op_n = 0, op_t = 1;  // CUBLAS_OP_N, CUBLAS_OP_T

// Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: the same
// buffers, the operands swapped, each leading dimension its row length.
inline int gemm_call(void* h, int ob, int oa, int n, int m, int k, const float* alpha, const float* b, int ldb,
                     const float* a, int lda, const float* beta, float* c, int ldc) {
  return cublas_runtime().sgemm(h, ob, oa, n, m, k, alpha, b, ldb, a, lda, beta, c, ldc);
}
inline int gemm_call(void* h, int ob, int oa, int n, int m, int k, const double* alpha, const double* b, int ldb,
                     const double* a, int lda, const double* beta, double* c, int ldc) {
  return cublas_runtime().dgemm(h, ob, oa, n, m, k, alpha, b, ldb, a, lda, beta, c, ldc);
}

template <class S>
void device_gemm(char ta, char tb, S alpha, const Mat<const S>& a, const Mat<const S>& b, S beta, const Mat<S>& c,
                 std::size_t m, std::size_t n, std::size_t k) {
  constexpr std::size_t most = 2147483647;
  if (m > most || n > most || k > most || a.extent(1) > most || b.extent(1) > most || c.extent(1) > most) {
    throw std::invalid_argument("qsgd::models::gemm: a dimension exceeds cuBLAS's int range");
  }
  if ((a.extent(0) > 1 && a.stride(0) != a.extent(1)) || (b.extent(0) > 1 && b.stride(0) != b.extent(1)) ||
      (c.extent(0) > 1 && c.stride(0) != c.extent(1))) {
    throw std::invalid_argument("qsgd::models::gemm: a matrix with padded rows");
  }
  const auto ld = [](std::size_t cols) { return static_cast<int>(cols > 0 ? cols : 1); };
  cublas_check(gemm_call(cublas_handle(), tb == 'N' ? op_n : op_t, ta == 'N' ? op_n : op_t,
                         static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &alpha, b.data(),
                         ld(b.extent(1)), a.data(), ld(a.extent(1)), &beta, c.data(), ld(c.extent(1))),
               "cublas gemm");
}
#endif

template <class S>
void gemm_impl(char ta, char tb, S alpha, const Mat<const S>& a, const Mat<const S>& b, S beta,
               const Mat<S>& c) {
  if ((ta != 'N' && ta != 'T') || (tb != 'N' && tb != 'T')) {
    throw std::invalid_argument("qsgd::models::gemm: trans must be 'N' or 'T'");
  }
  const std::size_t m = ta == 'N' ? a.extent(0) : a.extent(1);
  const std::size_t ka = ta == 'N' ? a.extent(1) : a.extent(0);
  const std::size_t kb = tb == 'N' ? b.extent(0) : b.extent(1);
  const std::size_t n = tb == 'N' ? b.extent(1) : b.extent(0);
  if (ka != kb || m != c.extent(0) || n != c.extent(1)) {
    std::ostringstream os;
    os << "qsgd::models::gemm: shapes do not match: op" << ta << "(A) " << m << "x" << ka << ", op"
       << tb << "(B) " << kb << "x" << n << ", C " << c.extent(0) << "x" << c.extent(1);
    throw std::invalid_argument(os.str());
  }
  if (m == 0 || n == 0) return;
  if (ka == 0) {  // KokkosBlas returns early here without applying beta
    auto cc = c;
    Kokkos::parallel_for(
        QSGD_MODELS_LABEL("gemm_scale"),
        Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>({0, 0}, {c.extent(0), c.extent(1)}),
        KOKKOS_LAMBDA(std::size_t i, std::size_t j) { cc(i, j) = beta == S(0) ? S(0) : beta * cc(i, j); });
    return;
  }
#if defined(QSGD_MODELS_CUBLAS)
  device_gemm(ta, tb, alpha, a, b, beta, c, m, n, ka);
#else
  const char tas[2] = {ta, '\0'};
  const char tbs[2] = {tb, '\0'};
  KokkosBlas::gemm(tas, tbs, alpha, a, b, beta, c);
#endif
}

}  // namespace

void gemm(char ta, char tb, float alpha, const Mat<const float>& a, const Mat<const float>& b, float beta,
          const Mat<float>& c) {
  gemm_impl<float>(ta, tb, alpha, a, b, beta, c);
}

void gemm(char ta, char tb, double alpha, const Mat<const double>& a, const Mat<const double>& b,
          double beta, const Mat<double>& c) {
  gemm_impl<double>(ta, tb, alpha, a, b, beta, c);
}

}  // namespace qsgd::models::detail
