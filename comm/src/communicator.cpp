// The MPI side of Communicator; the serial stand-in is in serial.cpp.

#include "qsgd/comm/communicator.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <thread>

#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>  // Open MPI: MPIX_Query_cuda_support()
#endif

#include "qsgd/kernels/error.hpp"
#include "qsgd/support/option_values.hpp"

namespace qsgd::comm {
namespace {

// QSGD_PEER_TIMEOUT: seconds (a non-negative number; 0 = no limit).
double peer_timeout_from_env() {
  const char* e = std::getenv("QSGD_PEER_TIMEOUT");
  if (e == nullptr || *e == '\0') return default_peer_timeout_s;
  try {
    return support::parse_real("QSGD_PEER_TIMEOUT", e, 0.0);
  } catch (const support::UsageError& err) {
    throw Error(Errc::invalid_argument, std::string(err.what()) + " (seconds; 0 = no limit)");
  }
}

// This process's rank in `comm` for a failure's message, or -1 where MPI
// cannot say (not initialized, finalized, no communicator).
int rank_for_message(MPI_Comm comm) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  int r = -1;
  if (initialized && !finalized && comm != MPI_COMM_NULL && MPI_Comm_rank(comm, &r) != MPI_SUCCESS) r = -1;
  return r;
}

// Prints "qsgd: rank R: <what>" and ends the job with exit_mpi_error. Not
// Communicator::abort: no barrier, and the rank comes from `comm` itself.
[[noreturn]] void end_job(MPI_Comm comm, const std::string& what) {
  const int r = rank_for_message(comm);
  if (r >= 0)
    std::fprintf(stderr, "qsgd: rank %d: %s\n", r, what.c_str());
  else
    std::fprintf(stderr, "qsgd: %s\n", what.c_str());
  std::fflush(stderr);
  if (r >= 0) MPI_Abort(comm, exit_mpi_error);
  std::exit(exit_mpi_error);
}

bool query_gpu_aware() {
  if (const char* e = std::getenv("QSGD_MPI_GPU_AWARE"); e != nullptr && *e != '\0') return e[0] == '1';
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
  return MPIX_Query_cuda_support() == 1;  // the library was built with CUDA; is it enabled now?
#else
  return false;
#endif
}

}  // namespace

std::string to_string(const MpiSite& site) {
  std::string s = site.what;
  if (site.owner != nullptr) s += std::string(" of ") + site.owner;
  if (site.step >= 0) s += " at step " + std::to_string(site.step);
  if (site.tensor >= 0) s += std::string(site.step >= 0 ? ", " : " at ") + "tensor " + std::to_string(site.tensor);
  return s;
}

void mpi_failed(int rc, const char* call, MPI_Comm comm, const MpiSite& site, const MPI_Status* statuses, int n) {
  if (rc == MPI_ERR_IN_STATUS && statuses != nullptr) {  // name the request that failed, not the summary code
    for (int i = 0; i < n; ++i) {
      const int e = statuses[i].MPI_ERROR;
      if (e != MPI_SUCCESS && e != MPI_ERR_PENDING) {
        rc = e;
        break;
      }
    }
  }
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) std::snprintf(text, sizeof text, "MPI error code %d", rc);
  end_job(comm, std::string("MPI error in ") + call + " on the " + to_string(site) + ": " + text);
}

void PeerWatch::expired() const {
  char line[96];
  std::snprintf(line, sizeof line, " for %.1f s (%s); a peer may have died (peer timeout %g s)",
                std::chrono::duration<double>(Clock::now() - last_).count(), call_, limit_s_);
  end_job(comm_, "no progress on the " + to_string(site_) + line);
}

void wait_all(int n, MPI_Request* reqs, MPI_Comm comm, double limit_s, const MpiSite& site) {
  PeerWatch watch(limit_s, comm, site, "MPI_Testall");
  // Statuses only to name a failed request; on the stack for the exchanges'
  // few requests (no allocation per operation in steady state).
  MPI_Status small[8];
  std::vector<MPI_Status> large(n > 8 ? static_cast<std::size_t>(n) : 0);
  MPI_Status* statuses = n > 8 ? large.data() : small;
  for (;;) {
    int done = 0;
    check_mpi(MPI_Testall(n, reqs, &done, statuses), "MPI_Testall", comm, site, statuses, n);
    if (done) return;
    watch.check();
    watch.pause();
  }
}

void PeerWatch::pause() const {
  std::this_thread::yield();  // as Open MPI's own blocking wait does with mpi_yield_when_idle
}

Communicator Communicator::world() { return Communicator(MPI_COMM_WORLD); }

Communicator::Communicator(MPI_Comm comm) : comm_(comm), serial_(false) {
  int initialized = 0;
  if (MPI_Initialized(&initialized) != MPI_SUCCESS || !initialized)
    throw Error(Errc::invalid_argument,
                "Communicator: MPI is not initialized (Communicator::serial() runs without MPI)");
  if (comm == MPI_COMM_NULL) throw Error(Errc::invalid_argument, "Communicator: MPI_COMM_NULL");
  // Before this, a failure would end the job with the library's own message.
  check(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler", {"communicator setup"});
  check(MPI_Comm_rank(comm, &rank_), "MPI_Comm_rank", {"communicator setup"});
  check(MPI_Comm_size(comm, &size_), "MPI_Comm_size", {"communicator setup"});
  gpu_aware_ = query_gpu_aware();
  peer_timeout_ = peer_timeout_from_env();
}

Communicator Communicator::with_peer_timeout(double seconds) const {
  if (!(seconds >= 0)) throw Error(Errc::invalid_argument, "peer timeout must be >= 0 seconds (0 = no limit)");
  Communicator c = *this;
  c.peer_timeout_ = seconds;
  return c;
}

std::vector<std::uint64_t> Communicator::allgather(std::uint64_t v, const MpiSite& site) const {
  if (serial_) return {v};
  std::vector<std::uint64_t> all(static_cast<std::size_t>(size_));
  collective("MPI_Iallgather", site, [&](MPI_Request* r) {
    return MPI_Iallgather(&v, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, comm_, r);
  });
  return all;
}

void Communicator::barrier(const MpiSite& site) const {
  if (!serial_) collective("MPI_Ibarrier", site, [&](MPI_Request* r) { return MPI_Ibarrier(comm_, r); });
}

namespace {
void allreduce_in_place(const Communicator& c, double* v, int n, MPI_Op op, const MpiSite& site) {
  if (c.is_serial() || n == 0) return;
  c.collective("MPI_Iallreduce", site, [&](MPI_Request* r) {
    return MPI_Iallreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, op, c.mpi(), r);
  });
}
}  // namespace

void Communicator::allreduce_sum(double* v, int n, const MpiSite& site) const {
  allreduce_in_place(*this, v, n, MPI_SUM, site);
}

void Communicator::allreduce_max(double* v, int n, const MpiSite& site) const {
  allreduce_in_place(*this, v, n, MPI_MAX, site);
}

void Communicator::allgather_bytes(const void* mine, int bytes, void* all, const MpiSite& site) const {
  if (serial_) {
    if (bytes > 0) std::memcpy(all, mine, static_cast<std::size_t>(bytes));
    return;
  }
  collective("MPI_Iallgather", site, [&](MPI_Request* r) {
    return MPI_Iallgather(mine, bytes, MPI_BYTE, all, bytes, MPI_BYTE, comm_, r);
  });
}

void Communicator::gather_bytes(const void* mine, int bytes, void* all, int root, const MpiSite& site) const {
  if (serial_) {
    if (bytes > 0) std::memcpy(all, mine, static_cast<std::size_t>(bytes));
    return;
  }
  collective("MPI_Igather", site, [&](MPI_Request* r) {
    return MPI_Igather(mine, bytes, MPI_BYTE, all, bytes, MPI_BYTE, root, comm_, r);
  });
}

std::vector<std::string> Communicator::host_names(const MpiSite& site) const {
  constexpr int width = 256;
  char name[width] = {};
  if (gethostname(name, width - 1) != 0) std::snprintf(name, width, "unknown");
  std::vector<char> all(static_cast<std::size_t>(width) * static_cast<std::size_t>(size_));
  allgather_bytes(name, width, all.data(), site);
  std::vector<std::string> out;
  for (int r = 0; r < size_; ++r) out.emplace_back(&all[static_cast<std::size_t>(width) * static_cast<std::size_t>(r)]);
  return out;
}

std::string Communicator::mpi_library_version() {
  char v[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  if (MPI_Get_library_version(v, &len) != MPI_SUCCESS) return "unknown";
  std::string s(v, static_cast<std::size_t>(len));
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\0')) s.pop_back();
  return s;
}

void Communicator::abort(int code, const std::string& what, bool collective) const {
  std::fprintf(stderr, "qsgd: rank %d: %s\n", rank_, what.c_str());
  std::fflush(stderr);
  if (serial_) std::exit(code);
  if (collective) barrier({"barrier before the abort"});
  MPI_Abort(comm_, code);
  std::abort();  // MPI_Abort does not return
}

std::string Communicator::mismatch(std::uint64_t hash, const std::string& what, const std::string& description) const {
  const std::string check_name = "consistency check of the " + what;
  const std::vector<std::uint64_t> all = allgather(hash, {check_name.c_str()});
  bool same = true;
  for (std::uint64_t h : all) same = same && h == all[0];
  if (same) return {};
  // Groups of ranks by hash, in order of their lowest rank.
  std::vector<std::uint64_t> order;
  std::map<std::uint64_t, std::vector<int>> groups;
  for (int r = 0; r < static_cast<int>(all.size()); ++r) {
    auto& g = groups[all[static_cast<std::size_t>(r)]];
    if (g.empty()) order.push_back(all[static_cast<std::size_t>(r)]);
    g.push_back(r);
  }
  std::ostringstream os;
  os << what << " differs across ranks: ";
  for (std::size_t i = 0; i < order.size(); ++i) {
    const auto& g = groups[order[i]];
    os << (i ? ", " : "") << (g.size() == 1 ? "rank {" : "ranks {");
    for (std::size_t j = 0; j < g.size(); ++j) os << (j ? ", " : "") << g[j];
    os << "} " << (g.size() == 1 ? "has" : "have") << " hash 0x" << std::hex << order[i] << std::dec;
  }
  os << "; rank " << rank_ << " has: " << description;
  return os.str();
}

OwnedComm::OwnedComm(const Communicator& parent, const MpiSite& site) {
  if (parent.is_serial()) return;
  MPI_Request req = MPI_REQUEST_NULL;
  parent.check(MPI_Comm_idup(parent.mpi(), &comm_, &req), "MPI_Comm_idup", site);
  wait_all(1, &req, parent.mpi(), parent.peer_timeout(), site);
  // A duplicate inherits its parent's handler; set it anyway, so that this
  // holds whatever communicator the parent wraps.
  check_mpi(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler", comm_, site);
}

OwnedComm::~OwnedComm() {
  if (comm_ == MPI_COMM_NULL) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) check_mpi(MPI_Comm_free(&comm_), "MPI_Comm_free", MPI_COMM_WORLD, {"communicator release"});
}

OwnedComm::OwnedComm(OwnedComm&& o) noexcept : comm_(o.comm_) { o.comm_ = MPI_COMM_NULL; }

OwnedComm& OwnedComm::operator=(OwnedComm&& o) noexcept {
  if (this != &o) {
    this->~OwnedComm();
    comm_ = o.comm_;
    o.comm_ = MPI_COMM_NULL;
  }
  return *this;
}

std::uint64_t fnv1a(const void* data, std::size_t bytes, std::uint64_t h) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < bytes; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace qsgd::comm
