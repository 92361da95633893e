#pragma once
// Provenance that needs MPI (programs that link it): the library's name.

#include <mpi.h>

#include <string>

namespace qsgd::bench {

// The first line of MPI_Get_library_version up to a comma ("Open MPI
// v4.1.4"), or "unknown" when the call fails.
inline std::string mpi_library() {
  char buf[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  if (MPI_Get_library_version(buf, &len) != MPI_SUCCESS) return "unknown";
  std::string s(buf, static_cast<std::size_t>(len));
  const auto nl = s.find_first_of("\n,");
  return nl == std::string::npos ? s : s.substr(0, nl);
}

}  // namespace qsgd::bench
