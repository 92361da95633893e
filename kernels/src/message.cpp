#include "qsgd/kernels/message.hpp"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "qsgd/kernels/crc32c.hpp"
#include "qsgd/kernels/detail/arith.hpp"
#include "qsgd/kernels/detail/bitstream.hpp"
#include "qsgd/kernels/detail/rans.hpp"
#include "qsgd/kernels/error.hpp"

namespace qsgd {
namespace {

std::uint64_t bits_per_float(CodecKind c) { return c == CodecKind::fp32 ? 32 : 16; }

// Largest code length of one coordinate, and of one chunk's count word.
std::uint64_t max_coord_bits(CodecKind c, std::uint32_t s, std::uint32_t chunk) {
  switch (c) {
    case CodecKind::fixed: return 1 + detail::bit_width64(s);
    case CodecKind::elias_dense: return detail::omega_length(std::uint64_t(s) + 1) + 1;
    case CodecKind::elias_sparse: return detail::omega_length(chunk) + 1 + detail::omega_length(s);
    case CodecKind::rans: return 16;  // at most one 16-bit unit per symbol
    default: return bits_per_float(c);
  }
}

// Most payload bits of a rans message: the table (all symbols present), one
// unit per coordinate, the final states of every chunk.
std::uint64_t rans_max_bits(std::uint64_t n, std::uint32_t s, std::uint64_t nchunks) {
  if (n == 0) return 0;
  const std::uint64_t alphabet = 2 * std::uint64_t(s) + 1;
  const std::uint64_t table = (2 + 2 * std::min(alphabet, n) + 3) / 4 * 4;  // padded to whole words
  return 16 * (table + n + std::uint64_t(detail::rans_state_units) * nchunks);
}

}  // namespace

MessageLayout layout_of(const MessageHeader& h) {
  MessageLayout lay;
  const CodecKind c = static_cast<CodecKind>(h.codec);
  std::uint64_t w = header_bytes / 8;
  lay.offsets_word = w;
  if (is_variable_length(c)) w += h.nchunks;
  lay.scales_word = w;
  if (is_quantized(c)) {
    lay.buckets = h.n == 0 ? 0 : detail::ceil_div(h.n, h.d);
    w += detail::ceil_div(lay.buckets, 2);
  }
  lay.payload_word = w;
  lay.payload_words = detail::ceil_div(h.payload_bits, 64);
  lay.total_words = w + lay.payload_words;
  return lay;
}

MessageHeader make_header(const CodecConfig& cfg, std::uint64_t n, QuantizerKind kind) {
  MessageHeader h;
  h.codec = static_cast<std::uint8_t>(cfg.codec);
  h.n = n;
  if (is_quantized(cfg.codec)) {
    h.norm = static_cast<std::uint8_t>(cfg.norm);
    h.d = static_cast<std::uint32_t>(effective_bucket(cfg, n));
    h.s = cfg.s;
    h.quantizer = static_cast<std::uint8_t>(kind);
    if (cfg.codec == CodecKind::fixed) h.payload_bits = n * (1 + detail::bit_width64(cfg.s));
  } else {
    h.payload_bits = n * bits_per_float(cfg.codec);
  }
  if (is_variable_length(cfg.codec)) {
    h.chunk = cfg.chunk;
    h.nchunks = static_cast<std::uint32_t>(detail::ceil_div(n, cfg.chunk));
  } else {
    h.chunk = 0;
  }
  h.total_bytes = layout_of(h).total_words * 8;
  return h;
}

std::size_t max_message_bytes(const CodecConfig& cfg, std::uint64_t n) {
  validate(cfg);
  MessageHeader h = make_header(cfg, n, QuantizerKind::stochastic);
  const std::uint32_t s = is_quantized(cfg.codec) ? cfg.s : 0;
  h.payload_bits = n * max_coord_bits(cfg.codec, s, cfg.chunk);
  if (cfg.codec == CodecKind::rans) h.payload_bits = rans_max_bits(n, s, h.nchunks);
  if (cfg.codec == CodecKind::elias_sparse) h.payload_bits += std::uint64_t(h.nchunks) * detail::omega_length(std::uint64_t(cfg.chunk) + 1);
  return static_cast<std::size_t>(layout_of(h).total_words * 8);
}

MessageHeader parse_header(const void* data, std::size_t size, const Expect& expect) {
  auto bad = [](const std::string& what) -> void { throw Error(Errc::corrupt_message, what); };
  if (size < header_bytes) bad("message of " + std::to_string(size) + " bytes is shorter than its 64-byte header");
  if (size % 8 != 0) bad("message size " + std::to_string(size) + " is not a multiple of 8 bytes");
  MessageHeader h;
  std::memcpy(&h, data, sizeof(h));
  if (h.magic != message_magic) bad("bad magic number (not a qsgd message)");
  if (h.version != message_version)
    bad("format version " + std::to_string(h.version) + " (this build reads version " + std::to_string(message_version) + ")");
  if (h.codec > static_cast<std::uint8_t>(CodecKind::rans)) bad("unknown codec " + std::to_string(h.codec));
  if (h.norm > static_cast<std::uint8_t>(Norm::max)) bad("unknown norm " + std::to_string(h.norm));
  if (h.quantizer > static_cast<std::uint8_t>(QuantizerKind::deterministic))
    bad("unknown quantizer kind " + std::to_string(h.quantizer));
  for (std::uint8_t r : h.reserved)
    if (r != 0) bad("reserved header bytes are not zero");
  const CodecKind c = static_cast<CodecKind>(h.codec);
  if (expect.n != ~std::uint64_t(0) && h.n != expect.n)
    bad("n = " + std::to_string(h.n) + " but " + std::to_string(expect.n) + " elements were expected");
  const std::uint64_t n_limit = std::min(expect.n != ~std::uint64_t(0) ? expect.n : expect.max_n, max_elements);
  if (h.n > n_limit)
    bad("n = " + std::to_string(h.n) + " exceeds the receiver's limit " + std::to_string(n_limit) +
        (expect.n != ~std::uint64_t(0) ? "" : " (Expect::max_n; the library's default is 2^26)"));
  if (is_quantized(c)) {
    if (h.s < 1 || h.s > max_levels) bad("s = " + std::to_string(h.s) + " is outside 1.." + std::to_string(max_levels));
    if (c == CodecKind::rans && h.s > rans_max_s)
      bad("s = " + std::to_string(h.s) + " exceeds the rans limit " + std::to_string(rans_max_s));
    if (h.d < 1) bad("bucket size d = 0");
    if (h.norm != static_cast<std::uint8_t>(Norm::l2) && h.norm != static_cast<std::uint8_t>(Norm::max))
      bad("quantized message without an l2 or max norm");
    if (h.quantizer == 0) bad("quantized message without a quantizer kind");
  } else {
    if (h.d != 1 || h.s != 0 || h.norm != 0 || h.quantizer != 0) bad("float message with quantizer fields set");
  }
  if (is_variable_length(c)) {
    if (h.chunk < 1 || h.chunk > max_chunk)
      bad("chunk size " + std::to_string(h.chunk) + " is outside 1.." + std::to_string(max_chunk));
    if (h.nchunks != detail::ceil_div(h.n, h.chunk))
      bad("chunk count " + std::to_string(h.nchunks) + " does not match n and chunk size");
    // Most bits any valid payload can have.
    const std::uint64_t limit = c == CodecKind::rans
                                    ? rans_max_bits(h.n, h.s, h.nchunks)
                                    : h.n * max_coord_bits(c, h.s, h.chunk) +
                                          std::uint64_t(h.nchunks) * detail::omega_length(std::uint64_t(h.chunk) + 1);
    if (h.payload_bits > limit) bad("payload of " + std::to_string(h.payload_bits) + " bits exceeds the code's maximum");
    if (c == CodecKind::rans && h.payload_bits % 16 != 0)
      bad("rans payload of " + std::to_string(h.payload_bits) + " bits is not a whole number of 16-bit units");
    // Every coordinate costs at least one bit in the dense code, every chunk
    // at least one (its count) in the sparse code; a rans message has a
    // table of at least one symbol and the states of every chunk.
    const std::uint64_t least =
        c == CodecKind::elias_dense
            ? h.n
            : c == CodecKind::rans
                  ? (h.n == 0 ? 0 : 16 * (4 + std::uint64_t(detail::rans_state_units) * h.nchunks))
                  : h.nchunks;
    if (h.payload_bits < least)
      bad("payload of " + std::to_string(h.payload_bits) + " bits is too short for " + std::to_string(h.n) + " elements");
  } else {
    if (h.chunk != 0 || h.nchunks != 0) bad("chunk fields set on a fixed-size code");
    const std::uint64_t want = h.n * max_coord_bits(c, h.s, 0);
    if (h.payload_bits != want)
      bad("payload of " + std::to_string(h.payload_bits) + " bits, expected " + std::to_string(want));
  }
  const MessageLayout lay = layout_of(h);
  if (h.total_bytes != lay.total_words * 8)
    bad("total size field " + std::to_string(h.total_bytes) + " disagrees with the layout (" +
        std::to_string(lay.total_words * 8) + " bytes)");
  if (h.total_bytes != size)
    bad("message is " + std::to_string(size) + " bytes but its header says " + std::to_string(h.total_bytes));
  return h;
}

std::string describe(const MessageHeader& h) {
  std::ostringstream os;
  os << "codec " << to_string(static_cast<CodecKind>(h.codec)) << ", n " << h.n;
  if (is_quantized(static_cast<CodecKind>(h.codec)))
    os << ", d " << h.d << ", s " << h.s << ", norm " << to_string(static_cast<Norm>(h.norm));
  os << ", " << h.total_bytes << " bytes";
  return os.str();
}

std::uint32_t message_checksum_host(const void* data, std::size_t total_bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint32_t outer = 0xFFFFFFFFu;
  const std::size_t nblocks = checksum_blocks(total_bytes);
  for (std::size_t b = 0; b < nblocks; ++b) {
    std::size_t begin, len;
    checksum_block_range(b, total_bytes, begin, len);
    const detail::Le32 le(detail::crc32c_bytes_host(p + begin, len));
    outer = detail::crc32c_host(outer, le.b, 4);
  }
  return ~outer;
}

}  // namespace qsgd
