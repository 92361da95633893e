#pragma once
// The one versioned message format shared by every codec.
//
//   offset  size  field
//   0       4     magic "QSGD" (0x44475351 little-endian)
//   4       2     format version (1)
//   6       1     codec (CodecKind)
//   7       1     norm (Norm)
//   8       8     n, elements
//   16      4     d, bucket size in effect (1 for float codecs)
//   20      4     s, levels (0 for float codecs)
//   24      4     chunk, coordinates per chunk
//   28      4     number of chunks
//   32      8     payload bits
//   40      8     total message bytes (header included, multiple of 8)
//   48      1     quantizer kind (QuantizerKind)
//   49      11    reserved, zero
//   60      4     checksum (CRC32C tree, see crc32c.hpp)
//   64            chunk bit offsets: nchunks x u64 (variable-length codes only)
//   ...           scales: ceil(n/d) x f32, padded to 8 bytes (quantized codes only)
//   ...           payload: ceil(payload_bits/64) x u64, MSB-first bit order
//                 (rans: 16-bit units, the frequency table first; see
//                 detail/rans.hpp)
// All integers little-endian. Everything counts in bits per dimension.

#include <cstddef>
#include <cstdint>
#include <string>

#include "qsgd/kernels/config.hpp"

namespace qsgd {

constexpr std::uint32_t message_magic = 0x44475351u;  // "QSGD"
constexpr std::uint16_t message_version = 1;
constexpr std::size_t header_bytes = 64;
constexpr std::size_t checksum_offset = 60;

struct MessageHeader {
  std::uint32_t magic = message_magic;
  std::uint16_t version = message_version;
  std::uint8_t codec = 0;
  std::uint8_t norm = 0;
  std::uint64_t n = 0;
  std::uint32_t d = 1;
  std::uint32_t s = 0;
  std::uint32_t chunk = 1;
  std::uint32_t nchunks = 0;
  std::uint64_t payload_bits = 0;
  std::uint64_t total_bytes = 0;
  std::uint8_t quantizer = 0;
  std::uint8_t reserved[11] = {};
  std::uint32_t checksum = 0;
};
static_assert(sizeof(MessageHeader) == header_bytes, "header layout must be 64 bytes");

// Where each section sits, in 64-bit words from the start of the message.
struct MessageLayout {
  std::uint64_t offsets_word = 0;   // first chunk-offset word
  std::uint64_t scales_word = 0;    // first word of the scale section
  std::uint64_t payload_word = 0;   // first payload word
  std::uint64_t payload_words = 0;
  std::uint64_t total_words = 0;
  std::uint64_t buckets = 0;
};

// Layout implied by a header's shape fields (codec, n, d, nchunks, payload_bits).
MessageLayout layout_of(const MessageHeader& h);

// Header of an empty message for this configuration and size; the codec fills
// payload_bits, total_bytes and checksum.
MessageHeader make_header(const CodecConfig& cfg, std::uint64_t n, QuantizerKind kind);

// Upper bound of the encoded size of n elements, in bytes (for buffers).
std::size_t max_message_bytes(const CodecConfig& cfg, std::uint64_t n);

// The largest n a receiver accepts unless it says otherwise (Expect): 2^26
// coordinates, 256 MiB of fp32 values or int32 levels, above the largest
// tensor of the suite's models and the kernel benchmarks' default sizes.
constexpr std::uint64_t default_max_n = std::uint64_t(1) << 26;

// Expectations a receiver imposes on an untrusted message. A receiver that
// knows n says so (exact; max_n then does not apply), as every exchange does.
// Otherwise max_n caps what a forged header can make the decoder allocate or
// loop over: default_max_n unless the caller raises it (up to max_elements).
struct Expect {
  std::uint64_t n = ~std::uint64_t(0);  // exact element count, if set
  std::uint64_t max_n = default_max_n;  // upper bound when n is not fixed
};

// Reads and validates a header from untrusted bytes: magic, version, known
// codec and norm, shape limits, chunk count, payload size and total size equal
// to `size`. Throws qsgd::Error(corrupt_message) naming the field. The
// checksum is verified separately (it needs the whole message).
MessageHeader parse_header(const void* data, std::size_t size, const Expect& expect = {});

std::string describe(const MessageHeader& h);

}  // namespace qsgd
