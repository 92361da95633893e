#pragma once
// The one switch between the portable kernels (team-parallel inside a bucket,
// for GPUs and threaded backends) and the host fast path (one sequential loop
// per bucket that the compiler can vectorize). Both give bit-identical results:
// every reduction whose order could matter uses the same fixed order in both.

#include <Kokkos_Core.hpp>
#include <cstdint>
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

// The GPU shapes of the per-group and per-chunk kernels (team per group or
// chunk, lanes per coordinate; docs/parallelism.md) run on the spaces the
// host cannot access; host spaces keep a work item per group or chunk and
// their SIMD paths. Both shapes write the same bits (tested on the host).
template <class ExecSpace>
constexpr bool use_device_shapes() {
  return !Kokkos::SpaceAccessibility<ExecSpace, Kokkos::HostSpace>::accessible;
}
// Teams per launch of those kernels: a league size is an int, and Kokkos 3.4
// computes a team reduce's league x team size in 32 bits on Cuda.
constexpr std::uint64_t max_league = std::uint64_t(1) << 24;
// The teams of one launch over work items [first, total).
constexpr std::uint64_t league_slice(std::uint64_t total, std::uint64_t first) {
  return total - first < max_league ? total - first : max_league;
}

// Rank-1 Views in LayoutLeft or LayoutRight are plain arrays: the host loops
// index their data() pointer directly so the compiler sees simple strides.
template <class View>
constexpr bool is_contiguous() {
  using L = typename View::array_layout;
  return View::rank == 1 && (std::is_same<L, Kokkos::LayoutRight>::value || std::is_same<L, Kokkos::LayoutLeft>::value);
}

}  // namespace qsgd::detail
