#pragma once
// The exchanges' per-operation metadata and framing, as pure functions over
// host words: what a rank announces before (collective transport) or in
// front of (ring transport, a "framed message") each message, and the
// receiver's checks of it. ExchangeBase (exchange_base.hpp) calls these and
// turns a fault into its error; the exchange-meta fuzz harness calls them on
// untrusted bytes (fuzz/README.md).
//
// Metadata: meta_words 64-bit words, [0] the message's words, [1] n,
// [2] the tensor in bits 0-31 and, in bits 32-63, the CRC32C of the 28 bytes
// of words 0, 1, 3 and word 2's low half (little-endian), [3] the step. A
// receiver checks the CRC first, so a flipped bit anywhere in the metadata is
// a corrupt message (exit code 3) before n, tensor and step are compared
// (a disagreement: exit code 4) or the size is trusted.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "qsgd/kernels/error.hpp"

namespace qsgd::comm::detail {

constexpr int meta_words = 4;

// The operation a message belongs to, as the receiver knows it.
struct OpId {
  std::uint64_t n = 0;
  std::uint32_t tensor = 0;
  std::uint64_t step = 0;
};

// A check's verdict: exit_code 0 when it passed; otherwise the error code,
// the exit code (exit_corrupt_message or exit_config_mismatch) and the text,
// which names the sender, step and tensor.
struct FrameFault {
  Errc code = Errc::invalid_argument;
  int exit_code = 0;
  std::string what;
  explicit operator bool() const { return exit_code != 0; }
};

// The CRC32C that metadata word 2 carries in its high half.
std::uint32_t meta_crc(const std::uint64_t* m);
// Fills m[0, meta_words) for a message of `words` words of operation `id`.
void set_meta(const OpId& id, std::uint64_t* m, std::uint64_t words);
// A peer's metadata: intact (CRC), the same operation, a size of 1..max_w
// words that holds at least a message header.
FrameFault check_meta(const OpId& id, int source, const std::uint64_t* m, std::uint64_t max_w);
// A framed message of `bytes` bytes: whole metadata words, else a fault.
FrameFault check_frame_bytes(const OpId& id, int source, std::size_t bytes);
// A framed message whose metadata m passed check_meta: its announced words
// and the bytes received agree.
FrameFault check_frame_size(const OpId& id, int source, const std::uint64_t* m, std::size_t bytes);

// The layout of K ranks' gathered metadata (meta_recv: meta_words each):
// every rank's is checked (check_meta), counts[r] = its words, displs[r] the
// words before it; the sum must fit an MPI count (INT_MAX) or
// Errc::invalid_argument (exit_exchange_error) names `owner`. wire: the bytes
// that come from ranks other than `self` (their messages and metadata).
FrameFault layout_meta(const OpId& id, const std::uint64_t* meta_recv, int K, int self, std::uint64_t max_w,
                       const char* owner, std::vector<int>& counts, std::vector<int>& displs, std::uint64_t& wire);

}  // namespace qsgd::comm::detail
