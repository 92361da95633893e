#include <sstream>

#include "qsgd/kernels/codec.hpp"
#include "qsgd/kernels/quantize.hpp"

namespace qsgd {

void throw_non_finite(std::uint64_t index, const char* where) {
  throw Error(Errc::non_finite_input,
              std::string(where) + ": NaN or Inf in the input at element " + std::to_string(index));
}

void throw_norm_overflow(std::uint64_t bucket, std::uint32_t d, const char* where) {
  throw Error(Errc::out_of_range, std::string(where) + ": the L2 norm of bucket " + std::to_string(bucket) +
                                      " (elements from " + std::to_string(bucket * d) +
                                      ") exceeds the float range; use max-norm scaling or rescale the input");
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
