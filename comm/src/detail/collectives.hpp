#pragma once
// The collectives of the exchange strategies, posted as non-blocking MPI
// calls whose requests go into the operation's slots (completed by
// ExchangeBase's watched wait), or done as local copies when there is no
// peer (the serial communicator, or one rank). Every call's result goes
// through the exchange's check() (check_mpi, naming the strategy, step and
// tensor), and the time spent posting counts as communication (OpStats).
//
// CollectivePosts is a base of ExchangeBase (CRTP: Base is ExchangeBase,
// which makes it a friend); the strategies call this->post_*.

#include <mpi.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#include "qsgd/comm/exchange.hpp"
#include "wire_buffer.hpp"

namespace qsgd::comm::detail {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }
// Steady-clock time stamp in seconds (OpStats' network intervals).
inline double clock_seconds() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }

template <class Base, class OpT, class Mem>
class CollectivePosts {
 protected:
  // The next request slot of the phase; `what` names the collective.
  MPI_Request* new_request(OpT& op, const char* what) {
    open_wire(op);
    if (op.nreqs == 0) op.posted = what;
    return &op.reqs.at(static_cast<std::size_t>(op.nreqs++));
  }

  // Network intervals (OpStats): opened when a phase posts its first request,
  // closed when its completion is observed.
  static void open_wire(OpT& op) {
    if (op.on_wire) return;
    op.on_wire = true;
    if (op.stats.intervals < OpStats::max_intervals) op.stats.net_begin[op.stats.intervals] = clock_seconds();
  }
  static void close_wire(OpT& op) {
    if (!op.on_wire) return;
    op.on_wire = false;
    if (op.stats.intervals < OpStats::max_intervals) op.stats.net_end[op.stats.intervals++] = clock_seconds();
  }

  void post_allgather(OpT& op, const std::uint64_t* send, int count, std::uint64_t* recv) {
    const auto t0 = Clock::now();
    if (d().local())
      std::copy(send, send + count, recv);
    else
      d().check(op,
                MPI_Iallgather(send, count, MPI_UINT64_T, recv, count, MPI_UINT64_T, op.comm.get(),
                               new_request(op, "metadata allgather")),
                "MPI_Iallgather", "metadata allgather");
    op.stats.comm_s += seconds_since(t0);
  }

  void post_allgatherv(OpT& op, WireBuffer<Mem>& send, int count, WireBuffer<Mem>& recv, const std::vector<int>& counts,
                       const std::vector<int>& displs) {
    const auto t0 = Clock::now();
    if (d().local()) {
      Kokkos::deep_copy(d().exec_, recv.span(displs[0], count), send.span(0, count));
    } else {
      send.to_mpi(0, count);
      d().check(op,
                MPI_Iallgatherv(send.mpi(), count, MPI_UINT64_T, recv.mpi(), counts.data(), displs.data(), MPI_UINT64_T,
                                op.comm.get(), new_request(op, "message allgatherv")),
                "MPI_Iallgatherv", "message allgatherv");
    }
    op.stats.comm_s += seconds_since(t0);
  }

  // In place: buf[i] becomes the largest buf[i] of any rank (shared-scale's
  // agreement on bucket scales).
  void post_allreduce_max(OpT& op, float* buf, int count) {
    if (d().local()) return;
    const auto t0 = Clock::now();
    d().check(op,
              MPI_Iallreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_MAX, op.comm.get(),
                             new_request(op, "scale allreduce")),
              "MPI_Iallreduce", "scale allreduce");
    op.stats.comm_s += seconds_since(t0);
  }

  void post_alltoall(OpT& op, const std::uint64_t* send, int count, std::uint64_t* recv) {
    const auto t0 = Clock::now();
    if (d().local())
      std::copy(send, send + count, recv);
    else
      d().check(op,
                MPI_Ialltoall(send, count, MPI_UINT64_T, recv, count, MPI_UINT64_T, op.comm.get(),
                              new_request(op, "metadata alltoall")),
                "MPI_Ialltoall", "metadata alltoall");
    op.stats.comm_s += seconds_since(t0);
  }

  void post_alltoallv(OpT& op, WireBuffer<Mem>& send, const std::vector<int>& scounts, const std::vector<int>& sdispls,
                      WireBuffer<Mem>& recv, const std::vector<int>& counts, const std::vector<int>& displs) {
    const auto t0 = Clock::now();
    if (d().local()) {
      Kokkos::deep_copy(d().exec_, recv.span(displs[0], counts[0]), send.span(sdispls[0], scounts[0]));
    } else {
      const std::size_t total = static_cast<std::size_t>(sdispls.back()) + static_cast<std::size_t>(scounts.back());
      send.to_mpi(0, total);
      d().check(op,
                MPI_Ialltoallv(send.mpi(), scounts.data(), sdispls.data(), MPI_UINT64_T, recv.mpi(), counts.data(),
                               displs.data(), MPI_UINT64_T, op.comm.get(), new_request(op, "message alltoallv")),
                "MPI_Ialltoallv", "message alltoallv");
    }
    op.stats.comm_s += seconds_since(t0);
  }

  void post_gather(OpT& op, const std::uint64_t* send, int count, std::uint64_t* recv, int root) {
    const auto t0 = Clock::now();
    if (d().local())
      std::copy(send, send + count, recv);
    else
      d().check(op,
                MPI_Igather(send, count, MPI_UINT64_T, recv, count, MPI_UINT64_T, root, op.comm.get(),
                            new_request(op, "metadata gather")),
                "MPI_Igather", "metadata gather");
    op.stats.comm_s += seconds_since(t0);
  }

  // At the root, recv/counts/displs are used; elsewhere they are ignored.
  void post_gatherv(OpT& op, WireBuffer<Mem>& send, int count, WireBuffer<Mem>& recv, const std::vector<int>& counts,
                    const std::vector<int>& displs, int root) {
    const auto t0 = Clock::now();
    if (d().local()) {
      Kokkos::deep_copy(d().exec_, recv.span(displs[0], count), send.span(0, count));
    } else {
      send.to_mpi(0, count);
      const bool at_root = d().rank() == root;
      d().check(op,
                MPI_Igatherv(send.mpi(), count, MPI_UINT64_T, at_root ? recv.mpi() : nullptr,
                             at_root ? counts.data() : nullptr, at_root ? displs.data() : nullptr, MPI_UINT64_T, root,
                             op.comm.get(), new_request(op, "message gatherv")),
                "MPI_Igatherv", "message gatherv");
    }
    op.stats.comm_s += seconds_since(t0);
  }

  void post_bcast(OpT& op, std::uint64_t* buf, int count, int root) {
    const auto t0 = Clock::now();
    if (!d().local())
      d().check(op, MPI_Ibcast(buf, count, MPI_UINT64_T, root, op.comm.get(), new_request(op, "metadata broadcast")),
                "MPI_Ibcast", "metadata broadcast");
    op.stats.comm_s += seconds_since(t0);
  }

  void post_bcast(OpT& op, WireBuffer<Mem>& buf, int count, int root) {
    const auto t0 = Clock::now();
    if (!d().local()) {
      if (d().rank() == root) buf.to_mpi(0, count);
      d().check(op,
                MPI_Ibcast(buf.mpi(), count, MPI_UINT64_T, root, op.comm.get(), new_request(op, "message broadcast")),
                "MPI_Ibcast", "message broadcast");
    }
    op.stats.comm_s += seconds_since(t0);
  }

  void from_mpi(OpT& op, WireBuffer<Mem>& buf, std::size_t off, std::size_t words) {
    const auto t0 = Clock::now();
    buf.from_mpi(off, words);
    op.stats.comm_s += seconds_since(t0);
  }

 private:
  Base& d() { return static_cast<Base&>(*this); }
};

}  // namespace qsgd::comm::detail
