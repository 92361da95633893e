#include <sstream>

#include "qsgd/kernels/codec.hpp"
#include "qsgd/kernels/quantize.hpp"

namespace qsgd {

void throw_non_finite(std::uint64_t index, const char* where) {
  throw Error(Errc::non_finite_input,
              std::string(where) + ": NaN or Inf in the input at element " + std::to_string(index));
}

namespace detail {

void throw_corrupt(const MessageHeader& h, const std::string& what) {
  throw Error(Errc::corrupt_message, what + " [" + describe(h) + "]");
}

void throw_out_of_range(CodecKind codec, std::uint64_t index, float value) {
  std::ostringstream os;
  os << "encode: element " << index << " = " << value << " overflows " << to_string(codec);
  throw Error(Errc::out_of_range, os.str());
}

}  // namespace detail
}  // namespace qsgd
