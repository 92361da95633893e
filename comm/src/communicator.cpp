// The MPI side of Communicator; the serial stand-in is in serial.cpp.

#include "qsgd/comm/communicator.hpp"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>

#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>  // Open MPI: MPIX_Query_cuda_support()
#endif

#include "qsgd/kernels/error.hpp"

namespace qsgd::comm {
namespace {

bool query_gpu_aware() {
  if (const char* e = std::getenv("QSGD_MPI_GPU_AWARE"); e != nullptr && *e != '\0') return e[0] == '1';
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
  return MPIX_Query_cuda_support() == 1;  // the library was built with CUDA; is it enabled now?
#else
  return false;
#endif
}

}  // namespace

Communicator Communicator::world() { return Communicator(MPI_COMM_WORLD); }

Communicator::Communicator(MPI_Comm comm) : comm_(comm), serial_(false) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized)
    throw Error(Errc::invalid_argument,
                "Communicator: MPI is not initialized (Communicator::serial() runs without MPI)");
  if (comm == MPI_COMM_NULL) throw Error(Errc::invalid_argument, "Communicator: MPI_COMM_NULL");
  MPI_Comm_rank(comm, &rank_);
  MPI_Comm_size(comm, &size_);
  gpu_aware_ = query_gpu_aware();
}

std::vector<std::uint64_t> Communicator::allgather(std::uint64_t v) const {
  if (serial_) return {v};
  std::vector<std::uint64_t> all(static_cast<std::size_t>(size_));
  MPI_Allgather(&v, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, comm_);
  return all;
}

void Communicator::barrier() const {
  if (!serial_) MPI_Barrier(comm_);
}

void Communicator::abort(int code, const std::string& what, bool collective) const {
  std::fprintf(stderr, "qsgd: rank %d: %s\n", rank_, what.c_str());
  std::fflush(stderr);
  if (serial_) std::exit(code);
  if (collective) MPI_Barrier(comm_);
  MPI_Abort(comm_, code);
  std::abort();  // MPI_Abort does not return
}

std::string Communicator::mismatch(std::uint64_t hash, const std::string& what, const std::string& description) const {
  const std::vector<std::uint64_t> all = allgather(hash);
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

OwnedComm::OwnedComm(const Communicator& parent) {
  if (!parent.is_serial()) MPI_Comm_dup(parent.mpi(), &comm_);
}

OwnedComm::~OwnedComm() {
  if (comm_ == MPI_COMM_NULL) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Comm_free(&comm_);
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
