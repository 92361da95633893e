#pragma once
// Small kernels on LayoutRight matrices shared by several layers.

#include <cstddef>

#include "qsgd/models/types.hpp"

namespace qsgd::models::detail {

// Purpose: v(i) = value. Kokkos::deep_copy(view, value) does the same but
//   builds a std::string label on every call (a heap allocation per step).
// Cost: writes n values.
template <class S>
void fill(const Vec<S>& v, S value) {
  Kokkos::parallel_for(
      QSGD_MODELS_LABEL("fill"), Kokkos::RangePolicy<ExecSpace>(0, v.extent(0)),
      KOKKOS_LAMBDA(std::size_t i) { v(i) = value; });
}

template <class S>
void fill(const Mat<S>& m, S value) {
  fill(Vec<S>(m.data(), m.size()), value);
}

// Purpose: y(i, j) += b(j) (bias of a dense or conv layer).
// Algorithm: one team per row, threads across the row (coalesced on a GPU,
//   a vectorizable loop on the host).
// Cost: reads rows*cols + cols values, writes rows*cols.
// Requirements: b.extent(0) == y.extent(1).
template <class S>
void add_row_vector(const Mat<S>& y, const Vec<const S>& b) {
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  const int cols = static_cast<int>(y.extent(1));
  Kokkos::parallel_for(
      QSGD_MODELS_LABEL("add_row_vector"), Policy(static_cast<int>(y.extent(0)), Kokkos::AUTO),
      KOKKOS_LAMBDA(const typename Policy::member_type& team) {
        const int i = team.league_rank();
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, cols), [&](int j) { y(i, j) += b(j); });
      });
}

// Purpose: db(j) += sum_i dy(i, j) (bias gradient).
// Algorithm: one thread per column summing down the rows in a fixed order
//   (deterministic); adjacent threads read adjacent columns (coalesced).
// Cost: reads rows*cols values, writes cols.
// Requirements: db.extent(0) == dy.extent(1).
template <class S>
void add_column_sums(const Vec<S>& db, const Mat<const S>& dy) {
  const std::size_t nrows = dy.extent(0);
  Kokkos::parallel_for(
      QSGD_MODELS_LABEL("add_column_sums"), Kokkos::RangePolicy<ExecSpace>(0, dy.extent(1)),
      KOKKOS_LAMBDA(std::size_t j) {
        S s = 0;
        for (std::size_t i = 0; i < nrows; ++i) s += dy(i, j);
        db(j) += s;
      });
}

}  // namespace qsgd::models::detail
