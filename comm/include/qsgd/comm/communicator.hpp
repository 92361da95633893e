#pragma once
// qsgd::comm::Communicator: the ranks an exchange runs over.
//
// A thin value type over an MPI communicator (rank, size), with a serial
// stand-in that never calls MPI at all: Communicator::serial() is one rank in
// a process where MPI need not even be initialized, so the library and the
// programs built on it run without mpirun (ExaMiniMD's comm_serial). Every
// exchange strategy runs on both: at one rank its collectives are local
// copies.

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

namespace qsgd::comm {

// Exit codes of a job that qsgd ends (MPI_Abort, or std::exit when serial).
constexpr int exit_exchange_error = 2;   // bad input or use (non-finite gradient, size mismatch)
constexpr int exit_corrupt_message = 3;  // a received message failed its checksum or validation
constexpr int exit_config_mismatch = 4;  // ranks disagree on the exchange configuration or shapes

class Communicator {
 public:
  // One rank, no MPI calls ever made.
  static Communicator serial();
  // MPI_COMM_WORLD (MPI must be initialized).
  static Communicator world();
  // Wraps `comm` without duplicating or freeing it; MPI must be initialized.
  explicit Communicator(MPI_Comm comm);

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool is_serial() const { return serial_; }
  // The wrapped communicator; MPI_COMM_NULL when serial.
  MPI_Comm mpi() const { return comm_; }

  // Whether MPI accepts device (non-host-accessible) pointers. Asked at run
  // time where the MPI offers it (Open MPI: MPIX_Query_cuda_support() from
  // <mpi-ext.h>); false otherwise. QSGD_MPI_GPU_AWARE=0 or 1 overrides it.
  bool gpu_aware() const { return gpu_aware_; }

  // Collective. Every rank gets every rank's value (serial: {v}).
  std::vector<std::uint64_t> allgather(std::uint64_t v) const;
  void barrier() const;

  // Prints "qsgd: rank R: <what>" on stderr and ends the job with `code`:
  // MPI_Abort(comm, code) under MPI, std::exit(code) when serial. With
  // `collective` (every rank calls it, e.g. after a failed consistency check)
  // the ranks meet in a barrier first, so that every rank's line is printed.
  [[noreturn]] void abort(int code, const std::string& what, bool collective = false) const;

  // Collective consistency check: every rank passes a hash of what must agree
  // (configuration, sizes) and a one-line description of it. Returns an
  // empty string when all hashes are equal; otherwise, on every rank, a
  // message that names the groups of ranks that differ, e.g.
  //   "<what> differs across ranks: ranks {0, 2} have hash 0x1f.., ranks {1}
  //    have hash 0x9c..; rank 1 has: <description>".
  std::string mismatch(std::uint64_t hash, const std::string& what, const std::string& description) const;

 private:
  Communicator() = default;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  bool serial_ = true;
  bool gpu_aware_ = false;
};

// A private duplicate of a communicator, freed on destruction (serial: no-op).
// Each in-flight exchange operation uses its own, so that non-blocking
// collectives of different operations never have to be posted in the same
// order on every rank. Destroy before MPI_Finalize.
class OwnedComm {
 public:
  OwnedComm() = default;
  explicit OwnedComm(const Communicator& parent);  // collective (MPI_Comm_dup)
  ~OwnedComm();
  OwnedComm(OwnedComm&& o) noexcept;
  OwnedComm& operator=(OwnedComm&& o) noexcept;
  OwnedComm(const OwnedComm&) = delete;
  OwnedComm& operator=(const OwnedComm&) = delete;
  MPI_Comm get() const { return comm_; }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
};

// 64-bit FNV-1a, for configuration hashes.
std::uint64_t fnv1a(const void* data, std::size_t bytes, std::uint64_t h = 0xcbf29ce484222325ull);
inline std::uint64_t fnv1a(const std::string& s, std::uint64_t h = 0xcbf29ce484222325ull) {
  return fnv1a(s.data(), s.size(), h);
}

}  // namespace qsgd::comm
