#pragma once
// qsgd::comm::Communicator: the ranks an exchange runs over.
//
// A thin value type over an MPI communicator (rank, size), with a serial
// stand-in that never calls MPI at all: Communicator::serial() is one rank in
// a process where MPI need not even be initialized, so the library and the
// programs built on it run without mpirun (ExaMiniMD's comm_serial). Every
// exchange strategy runs on both: at one rank its collectives are local
// copies.
//
// MPI faults (docs/exchange.md, "MPI errors and dead peers"). A Communicator
// sets MPI_ERRORS_RETURN on the communicator it wraps, and so does every
// duplicate the suite makes (OwnedComm), so that an MPI failure comes back to
// the suite instead of ending the job with the library's own message. Two
// rules, each in one place:
//   check_mpi()  every MPI call's result: a failure prints one line naming
//                the rank, the call, the operation (step and tensor where
//                known) and MPI_Error_string, and ends the job with
//                exit_mpi_error;
//   PeerWatch    every wait is a test loop watched by it: a wait that sees
//                no progress for the peer timeout (QSGD_PEER_TIMEOUT, 30 s
//                by default) prints "no progress on ...; a peer may have
//                died" and ends the job with exit_mpi_error. Open MPI 4.1
//                over TCP or shared memory returns no error when a peer
//                dies: its requests simply never complete.

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace qsgd::comm {

// Exit codes of a job that qsgd ends (MPI_Abort, or std::exit when serial).
// qsgd-train adds 5 (replicas diverged) and 6 (loss not finite).
constexpr int exit_exchange_error = 2;   // bad input or use (non-finite gradient, size mismatch)
constexpr int exit_corrupt_message = 3;  // a received message failed its checksum or validation
constexpr int exit_config_mismatch = 4;  // ranks disagree on the exchange configuration or shapes
constexpr int exit_mpi_error = 7;        // an MPI call failed, or a wait saw no progress for the
                                         // peer timeout (a peer died or hangs)

// Peer timeout when QSGD_PEER_TIMEOUT is not set, in seconds. It bounds one
// wait, so it must exceed the longest legitimate one: a bucket's transfer on
// the slowest link plus the longest skew between ranks (rank 0 writing a
// checkpoint, a rank that loads its data later).
constexpr double default_peer_timeout_s = 30.0;

// What an MPI call was for, named in the line a failure prints. Pointers and
// numbers only, so that making one costs nothing on the fast path; it is
// formatted only when something failed. The pointed-to strings must outlive
// the call, and the wait, that the site names.
struct MpiSite {
  const char* what = "";        // the operation: "ring allgather", "step record gather"
  const char* owner = nullptr;  // whose: a strategy ("scatter-reduce"), a program ("qsgd-train")
  std::int64_t step = -1;       // -1: not known
  std::int64_t tensor = -1;     // -1: not known
};
// "ring allgather of scatter-reduce at step 3, tensor 2"
std::string to_string(const MpiSite& site);

// Prints "qsgd: rank R: MPI error in <call> on the <site>: <MPI_Error_string>"
// on stderr and ends the job with exit_mpi_error (MPI_Abort on `comm`).
// For MPI_ERR_IN_STATUS the first failed status of statuses[0, n) is named.
[[noreturn]] void mpi_failed(int rc, const char* call, MPI_Comm comm, const MpiSite& site,
                             const MPI_Status* statuses = nullptr, int n = 0);

// The check every MPI call of the suite goes through. MPI errors always end
// the job, whatever the exchange's ErrorPolicy: after a failed call the state
// of the communicator and of its requests is undefined.
inline void check_mpi(int rc, const char* call, MPI_Comm comm, const MpiSite& site,
                      const MPI_Status* statuses = nullptr, int n = 0) {
  if (rc != MPI_SUCCESS) mpi_failed(rc, call, comm, site, statuses, n);
}

// The watchdog of one wait. The wait tests its requests in a loop and calls
// check() after every test that completed nothing; when `limit_s` seconds
// have passed since the wait began or since the last progress() (a request of
// the awaited operation completed), check() prints
//   "qsgd: rank R: no progress on the <site> for T s (<call>); a peer may
//    have died (peer timeout L s)"
// and ends the job with exit_mpi_error. limit_s <= 0: never.
class PeerWatch {
 public:
  PeerWatch(double limit_s, MPI_Comm comm, const MpiSite& site, const char* call)
      : limit_s_(limit_s), comm_(comm), site_(site), call_(call), last_(Clock::now()) {}
  void progress() { last_ = Clock::now(); }
  void check() const {
    if (limit_s_ > 0 && std::chrono::duration<double>(Clock::now() - last_).count() > limit_s_) expired();
  }
  // The pause of a test loop that found nothing done: a yield of the core,
  // as Open MPI's own blocking wait does with mpi_yield_when_idle. (Sleeping
  // once a wait grows long was measured and rejected: docs/exchange.md,
  // "Waiting on shared cores".)
  void pause() const;

 private:
  using Clock = std::chrono::steady_clock;
  [[noreturn]] void expired() const;
  double limit_s_;
  MPI_Comm comm_;
  MpiSite site_;
  const char* call_;
  Clock::time_point last_;
};

// Waits for reqs[0, n), watched: MPI_Testall and PeerWatch::pause() in a loop.
void wait_all(int n, MPI_Request* reqs, MPI_Comm comm, double limit_s, const MpiSite& site);

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

  // Seconds a wait may see no progress before the job ends (PeerWatch);
  // 0: no limit. QSGD_PEER_TIMEOUT, read when the Communicator is made, else
  // default_peer_timeout_s. Exchanges made on this communicator use it too.
  double peer_timeout() const { return peer_timeout_; }
  // A copy with another peer timeout (seconds >= 0; 0: no limit).
  Communicator with_peer_timeout(double seconds) const;

  // check_mpi() for a call made on this communicator.
  void check(int rc, const char* call, const MpiSite& site) const { check_mpi(rc, call, comm_, site); }
  // A non-blocking collective on this communicator, completed by a watched
  // wait: `post(MPI_Request*)` posts it and returns the MPI call's result.
  // The suite's blocking collectives are all made this way, so that a dead
  // peer cannot leave a rank blocked inside MPI. Not for the serial stand-in.
  template <class Post>
  void collective(const char* call, const MpiSite& site, Post&& post) const {
    MPI_Request req = MPI_REQUEST_NULL;
    check(post(&req), call, site);
    wait_all(1, &req, comm_, peer_timeout_, site);
  }

  // Collective. Every rank gets every rank's value (serial: {v}).
  std::vector<std::uint64_t> allgather(std::uint64_t v, const MpiSite& site = {"allgather"}) const;
  void barrier(const MpiSite& site = {"barrier"}) const;
  // Collective, in place: v[0, n) becomes its sum (max) over the ranks
  // (serial: unchanged). One MPI_Iallreduce in a watched wait.
  void allreduce_sum(double* v, int n, const MpiSite& site) const;
  void allreduce_max(double* v, int n, const MpiSite& site) const;
  // Collective: every rank's `bytes` bytes at `mine`, in rank order, into
  // all[0, size() * bytes) on every rank (allgather_bytes) or on `root` only
  // (gather_bytes; `all` is not touched elsewhere). Serial: a copy.
  void allgather_bytes(const void* mine, int bytes, void* all, const MpiSite& site) const;
  void gather_bytes(const void* mine, int bytes, void* all, int root, const MpiSite& site) const;
  // Collective: every rank's host name (gethostname, at most 255 bytes), in
  // rank order (serial: this host's).
  std::vector<std::string> host_names(const MpiSite& site = {"host name allgather"}) const;

  // MPI_Get_library_version without its trailing blanks ("Open MPI v4.1.4,
  // package: ..."), or "unknown" when the call fails; needs MPI initialized.
  static std::string mpi_library_version();

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
  double peer_timeout_ = default_peer_timeout_s;
};

// A private duplicate of a communicator, freed on destruction (serial: no-op),
// with MPI_ERRORS_RETURN set. Each in-flight exchange operation uses its own,
// so that non-blocking collectives of different operations never have to be
// posted in the same order on every rank. Destroy before MPI_Finalize.
class OwnedComm {
 public:
  OwnedComm() = default;
  // Collective (MPI_Comm_idup and a watched wait); `site` names it in errors.
  explicit OwnedComm(const Communicator& parent, const MpiSite& site = {"communicator duplicate"});
  ~OwnedComm();
  OwnedComm(OwnedComm&& o) noexcept;
  OwnedComm& operator=(OwnedComm&& o) noexcept;
  OwnedComm(const OwnedComm&) = delete;
  OwnedComm& operator=(const OwnedComm&) = delete;
  MPI_Comm get() const { return comm_; }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
};

// 64-bit FNV-1a of bytes: the hashes ranks compare to agree on a
// configuration (Communicator::check_consistent) and the fingerprint of
// floats below.
std::uint64_t fnv1a(const void* data, std::size_t bytes, std::uint64_t h = 0xcbf29ce484222325ull);
inline std::uint64_t fnv1a(const std::string& s, std::uint64_t h = 0xcbf29ce484222325ull) {
  return fnv1a(s.data(), s.size(), h);
}

// The bit pattern of floats [data, data + n) as one 64-bit value (FNV-1a of
// their bytes): replicas whose parameters, or ranks whose averaged gradients,
// agree bit for bit have the same fingerprint. The trainer records its
// parameters' as the trace attribute final_params_fnv1a.
inline std::uint64_t float_fingerprint(const float* data, std::size_t n) { return fnv1a(data, n * sizeof(float)); }

}  // namespace qsgd::comm
