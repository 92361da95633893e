#pragma once
// Provenance that needs MPI (programs that link qsgd::comm): the library's
// name, the short form of Communicator::mpi_library_version().

#include <string>

#include "qsgd/comm/communicator.hpp"

namespace qsgd::bench {

// The MPI library's version string up to its first comma or line end
// ("Open MPI v4.1.4"), or "unknown".
inline std::string mpi_library() {
  const std::string s = comm::Communicator::mpi_library_version();
  return s.substr(0, s.find_first_of("\n,"));
}

}  // namespace qsgd::bench
