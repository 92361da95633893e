#pragma once
// WireBuffer: the words an exchange hands to MPI, with host staging (in
// StagingSpace: page-locked on CUDA and HIP) when MPI cannot read the
// execution space's memory.

#include <Kokkos_Core.hpp>
#include <cstddef>
#include <cstdint>

#include "qsgd/comm/exchange.hpp"

namespace qsgd::comm::detail {

// Words that travel through MPI: a View in the execution space's memory, plus
// a host copy when MPI cannot read that memory (not host-accessible, and the
// MPI is not GPU-aware). Storage only grows.
template <class Mem>
class WireBuffer {
 public:
  using words_view = Kokkos::View<std::uint64_t*, Mem>;
  using host_view = Kokkos::View<std::uint64_t*, StagingSpace>;

  void set_staged(bool staged) { staged_ = staged; }
  bool staged() const { return staged_; }

  void reserve(std::size_t words) {
    if (dev_.extent(0) < words)
      dev_ = words_view(Kokkos::view_alloc(Kokkos::WithoutInitializing, "qsgd::comm::wire"), words);
    if (staged_ && host_.extent(0) < words)
      host_ = host_view(Kokkos::view_alloc(Kokkos::WithoutInitializing, "qsgd::comm::wire_host"), words);
  }
  std::size_t capacity() const { return dev_.extent(0); }
  const words_view& dev() const { return dev_; }
  words_view span(std::size_t off, std::size_t words) const {
    return Kokkos::subview(dev_, Kokkos::make_pair(off, off + words));
  }
  std::uint64_t* mpi(std::size_t off = 0) { return (staged_ ? host_.data() : dev_.data()) + off; }

  // Device -> host before MPI reads; host -> device after MPI wrote.
  void to_mpi(std::size_t off, std::size_t words) {
    if (staged_ && words > 0)
      Kokkos::deep_copy(Kokkos::subview(host_, Kokkos::make_pair(off, off + words)), span(off, words));
  }
  void from_mpi(std::size_t off, std::size_t words) {
    if (staged_ && words > 0)
      Kokkos::deep_copy(span(off, words), Kokkos::subview(host_, Kokkos::make_pair(off, off + words)));
  }

 private:
  words_view dev_;
  host_view host_;
  bool staged_ = false;
};

}  // namespace qsgd::comm::detail
