#pragma once
// The one exception type of the library. Kernels never throw: they report an
// error code through a reduction, and the host-side wrapper throws this with a
// message that names the cause (field, chunk, coordinate).

#include <stdexcept>
#include <string>

namespace qsgd {

enum class Errc {
  invalid_argument,  // a configuration or call that cannot work
  non_finite_input,  // NaN or Inf in a gradient
  out_of_range,      // a finite value that the chosen codec cannot represent
  corrupt_message,   // failed header, offset, code or checksum validation
  buffer_too_small,  // caller-provided output buffer cannot hold the result
};

const char* to_string(Errc e);

class Error : public std::runtime_error {
 public:
  Error(Errc code, const std::string& what)
      : std::runtime_error(std::string(to_string(code)) + ": " + what), code_(code) {}
  Errc code() const noexcept { return code_; }

 private:
  Errc code_;
};

}  // namespace qsgd
