#include "qsgd/models/detail/gemm.hpp"

#include <KokkosBlas3_gemm.hpp>

#include <sstream>
#include <stdexcept>

namespace qsgd::models::detail {
namespace {

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
  const char tas[2] = {ta, '\0'};
  const char tbs[2] = {tb, '\0'};
  KokkosBlas::gemm(tas, tbs, alpha, a, b, beta, c);
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
