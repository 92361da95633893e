#pragma once
// C = alpha * op(A) * op(B) + beta * C on LayoutRight matrices, through
// KokkosBlas::gemm (the system BLAS on the host, cuBLAS on a CUDA build of
// KokkosKernels). Compiled into the library (src/gemm.cpp) so that
// KokkosKernels stays a private dependency: no public header includes it.
//
// trans is 'N' or 'T'. Unlike KokkosBlas::gemm, a zero inner dimension still
// applies beta to C, and mismatched shapes throw std::invalid_argument in
// every build type.

#include "qsgd/models/types.hpp"

namespace qsgd::models::detail {

void gemm(char transa, char transb, float alpha, const Mat<const float>& a, const Mat<const float>& b,
          float beta, const Mat<float>& c);
void gemm(char transa, char transb, double alpha, const Mat<const double>& a,
          const Mat<const double>& b, double beta, const Mat<double>& c);

}  // namespace qsgd::models::detail
