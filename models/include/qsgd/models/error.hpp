#pragma once
// Exceptions of qsgd::models. Configuration mistakes throw
// std::invalid_argument; problems with input files and their contents throw
// DataError, whose message always names the file and what is wrong with it.
// Kernels never throw: they count problems (for example an out-of-range
// label) in a reduction and the host code throws afterwards.

#include <stdexcept>
#include <string>

namespace qsgd::models {

class DataError : public std::runtime_error {
 public:
  explicit DataError(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace qsgd::models
