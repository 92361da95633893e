#pragma once
// The one switch between the portable kernels (team-parallel inside a bucket,
// for GPUs and threaded backends) and the host fast path (one sequential loop
// per bucket that the compiler can vectorize). Both give bit-identical results:
// every reduction whose order could matter uses the same fixed order in both.

#include <Kokkos_Core.hpp>
#include <type_traits>

namespace qsgd::detail {

template <class ExecSpace>
constexpr bool use_host_loops() {
#if defined(KOKKOS_ENABLE_SERIAL)
  return std::is_same<ExecSpace, Kokkos::Serial>::value;
#else
  return false;
#endif
}

// Rank-1 Views in LayoutLeft or LayoutRight are plain arrays: the host loops
// index their data() pointer directly so the compiler sees simple strides.
template <class View>
constexpr bool is_contiguous() {
  using L = typename View::array_layout;
  return View::rank == 1 && (std::is_same<L, Kokkos::LayoutRight>::value || std::is_same<L, Kokkos::LayoutLeft>::value);
}

}  // namespace qsgd::detail
