// The parameter server's push checks (push.hpp).
#include "push.hpp"

#include <qsgd/kernels/error.hpp>

namespace qsgd::algorithms::detail {

std::string push_size_fault(std::size_t count, std::size_t channel_words) {
  if (count < static_cast<std::size_t>(push_header_words) || count - push_header_words > channel_words)
    return "size " + std::to_string(count) + " words outside [" + std::to_string(push_header_words) + ", " +
           std::to_string(push_header_words + channel_words) + "]";
  return "";
}

PushHeader parse_push(const std::uint64_t* in, std::size_t count, std::uint64_t version) {
  PushHeader h{in[0], in[1], in[2]};
  if (h.version > version)
    throw Error(Errc::corrupt_message, "version " + std::to_string(h.version) + " from the future (server at " +
                                           std::to_string(version) + ")");
  if (h.bytes > 8 * static_cast<std::uint64_t>(count - push_header_words))
    throw Error(Errc::corrupt_message, "message bytes " + std::to_string(h.bytes) + " exceed the push's " +
                                           std::to_string(8 * (count - push_header_words)));
  return h;
}

}  // namespace qsgd::algorithms::detail
