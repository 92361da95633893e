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

// y(i, j) += b(j), the host shape: a thread per row walking its columns (a
// vectorizable loop).
template <class E, class S>
void add_row_vector_rows(const E& exec, const Mat<S>& y, const Vec<const S>& b) {
  const std::size_t cols = y.extent(1);
  Kokkos::parallel_for(
      QSGD_MODELS_LABEL("add_row_vector"), Kokkos::RangePolicy<E>(exec, 0, y.extent(0)),
      KOKKOS_LAMBDA(std::size_t i) {
        for (std::size_t j = 0; j < cols; ++j) y(i, j) += b(j);
      });
}

// The device shape: a thread per element, consecutive threads on
// consecutive columns of a row (coalesced; no idle lanes when a row is
// shorter than a team, as conv1's 16 columns are).
template <class E, class S>
void add_row_vector_elements(const E& exec, const Mat<S>& y, const Vec<const S>& b) {
  const std::size_t cols = y.extent(1);
  if (cols == 0) return;
  Kokkos::parallel_for(
      QSGD_MODELS_LABEL("add_row_vector"), Kokkos::RangePolicy<E>(exec, 0, y.extent(0) * cols),
      KOKKOS_LAMBDA(std::size_t k) {
        const std::size_t i = k / cols;
        const std::size_t j = k - i * cols;
        y(i, j) += b(j);
      });
}

// Purpose: y(i, j) += b(j) (bias of a dense or conv layer); one rounded
//   addition per element, so both shapes give the same bits.
// Algorithm: the host shape where the host can reach the memory, the
//   device shape otherwise.
// Cost: reads rows*cols + cols values, writes rows*cols.
// Requirements: b.extent(0) == y.extent(1).
template <class S>
void add_row_vector(const Mat<S>& y, const Vec<const S>& b) {
  if constexpr (Kokkos::SpaceAccessibility<ExecSpace, Kokkos::HostSpace>::accessible)
    add_row_vector_rows(ExecSpace(), y, b);
  else
    add_row_vector_elements(ExecSpace(), y, b);
}

// The order of a column sum, the same on every backend: lane l (of
// column_lanes) adds rows l, l + column_lanes, l + 2 column_lanes, ... in
// increasing order, then the lanes' sums are added in lane order.
constexpr int column_lanes = 32;

// The host shape: a thread per column walking the rows in order.
template <class E, class S>
void add_column_sums_rows(const E& exec, const Vec<S>& db, const Mat<const S>& dy) {
  const std::size_t nrows = dy.extent(0);
  constexpr std::size_t L = column_lanes;
  Kokkos::parallel_for(
      QSGD_MODELS_LABEL("add_column_sums"), Kokkos::RangePolicy<E>(exec, 0, dy.extent(1)),
      KOKKOS_LAMBDA(std::size_t j) {
        S part[L] = {};
        for (std::size_t i = 0; i < nrows; ++i) part[i % L] += dy(i, j);
        S s = 0;
        for (std::size_t l = 0; l < L; ++l) s += part[l];
        db(j) += s;
      });
}

// The device shape: a team per column, a lane per partial sum (team size
// column_lanes on a device; on the host a team has one thread, which runs
// the lanes one after the other: the same sums, how the tests run it).
template <class E, class S>
void add_column_sums_lanes(const E& exec, const Vec<S>& db, const Mat<const S>& dy) {
  using Policy = Kokkos::TeamPolicy<E>;
  using Parts = Kokkos::View<S*, typename E::scratch_memory_space, Kokkos::MemoryUnmanaged>;
  const std::size_t nrows = dy.extent(0);
  constexpr std::size_t L = column_lanes;
  const int team = Kokkos::SpaceAccessibility<E, Kokkos::HostSpace>::accessible ? 1 : column_lanes;
  Kokkos::parallel_for(
      QSGD_MODELS_LABEL("add_column_sums"),
      Policy(exec, static_cast<int>(dy.extent(1)), team).set_scratch_size(0, Kokkos::PerTeam(Parts::shmem_size(L))),
      KOKKOS_LAMBDA(const typename Policy::member_type& m) {
        const std::size_t j = static_cast<std::size_t>(m.league_rank());
        const Parts part(m.team_scratch(0), L);
        Kokkos::parallel_for(Kokkos::TeamThreadRange(m, L), [&](std::size_t l) {
          S s = 0;
          for (std::size_t i = l; i < nrows; i += L) s += dy(i, j);
          part(l) = s;
        });
        m.team_barrier();
        Kokkos::single(Kokkos::PerTeam(m), [&]() {
          S s = 0;
          for (std::size_t l = 0; l < L; ++l) s += part(l);
          db(j) += s;
        });
      });
}

// Purpose: db(j) += sum_i dy(i, j) (bias gradient), in the order above.
// Algorithm: the host shape where the host can reach the memory, the
//   device shape otherwise (no GPU thread walks a column: conv1's have
//   100,352 rows).
// Cost: reads rows*cols values, writes cols.
// Requirements: db.extent(0) == dy.extent(1).
template <class S>
void add_column_sums(const Vec<S>& db, const Mat<const S>& dy) {
  if constexpr (Kokkos::SpaceAccessibility<ExecSpace, Kokkos::HostSpace>::accessible)
    add_column_sums_rows(ExecSpace(), db, dy);
  else
    add_column_sums_lanes(ExecSpace(), db, dy);
}

}  // namespace qsgd::models::detail
