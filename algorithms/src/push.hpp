#pragma once
// The asynchronous parameter server's push (async_server.cpp): a worker's
// gradient message behind a header of push_header_words 64-bit words:
// [0] the parameter version the worker computed it at, [1] the worker's step,
// [2] the message's bytes; then the message's words (qsgd::Codec, checked by
// the channel as untrusted input when it is accumulated). The server checks
// the push's size before it receives it and the header before it decodes;
// the async-push fuzz harness calls the same checks on untrusted bytes
// (fuzz/README.md).

#include <cstddef>
#include <cstdint>
#include <string>

namespace qsgd::algorithms::detail {

constexpr int push_header_words = 3;

struct PushHeader {
  std::uint64_t version = 0, step = 0, bytes = 0;
};

// "" when a push of `count` words fits a server whose channel holds
// `channel_words` message words; otherwise what is wrong.
std::string push_size_fault(std::size_t count, std::size_t channel_words);
// The header of a push of `count` words (count passed push_size_fault) to a
// server at `version`: throws qsgd::Error(corrupt_message) for a version from
// the future or message bytes beyond the push.
PushHeader parse_push(const std::uint64_t* in, std::size_t count, std::uint64_t version);

}  // namespace qsgd::algorithms::detail
