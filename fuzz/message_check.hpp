#pragma once
// The decoder contract (docs/reliability.md; codec.hpp, message.hpp),
// checked on one message held in a buffer of exactly its size, so that
// AddressSanitizer sees any read past its end:
//
//  1. parse_header with the default Expect accepts only an n within the
//     bound its size allows, at each code's least cost per coordinate
//     (docs/reliability.md, "Bounded work from untrusted bytes"), and within
//     the library's default cap (qsgd::default_max_n, 2^26).
//  2. Every entry point (read_header, validate_message, decode to values,
//     decode_accumulate, decode to levels) accepts the message or throws
//     qsgd::Error: corrupt_message for anything wrong with the bytes, and
//     invalid_argument only for levels asked of a float codec. read_header
//     accepts exactly when parse_header does and the CRC32C tree (computed
//     here on the host) matches; the decoding entry points all agree.
//  3. The host paths (fixed-width SIMD, rANS host loops) and the portable
//     kernels agree: same outcomes, same output bits (detail/fixed_simd.hpp).
//  4. What an accepted message decodes to is consistent: every coordinate
//     written and nothing past n; values finite; decode_accumulate with
//     weight 1 into zeros equals decode; levels within [-s, s] and each value
//     is LevelUnit(scale, s).value(level) bit for bit (detail/sinks.hpp);
//     re-encoding the decoded levels or values gives a message that decodes
//     to the same bits, and, when the message is canonical (as the encoder
//     wrote it), the same bytes.
//
// Outputs are sized from the accepted header, and the decoders run with a
// receiver's cap on n (Expect::max_n, as docs/reliability.md prescribes for
// a receiver that does not know n), so that the harness's own allocations
// stay within libFuzzer's -malloc_limit_mb.

#include <Kokkos_Core.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <qsgd/kernels.hpp>

#include "common.hpp"

namespace qsgd_fuzz {

using Exec = Kokkos::DefaultExecutionSpace;
using Mem = Exec::memory_space;
using Codec = qsgd::Codec<Exec>;
using Words = Kokkos::View<std::uint64_t*, Mem>;
using Values = Kokkos::View<float*, Mem>;
using Quant = qsgd::Quantized<Mem>;
static_assert(Kokkos::SpaceAccessibility<Kokkos::HostSpace, Mem>::accessible,
              "the harnesses read decoder outputs directly: they need a host-accessible memory space");

constexpr std::uint64_t receiver_max_n = std::uint64_t(1) << 20;
constexpr std::size_t guard_cells = 16;               // cells past n that no decoder may touch
constexpr std::uint32_t sentinel_bits = 0x7fa5a5a5u;  // a NaN: no accepted decode writes one
constexpr std::int32_t sum_sentinel = 0x5a5a5a5a;     // past n in decode_add_levels's sums

// Kokkos for the whole process: initialized once and never finalized (the
// harnesses keep Views in static state, and libFuzzer may exit from anywhere).
inline void init_kokkos() {
  if (!Kokkos::is_initialized()) Kokkos::initialize();
}


// docs/reliability.md: the largest n a header may claim in a message of
// `bytes` bytes whatever Expect says: fixed-width and float codes exactly
// their width (the fixed code at least 2 bits: sign and one level bit),
// elias-dense at least 1 bit, elias-sparse one 64-bit offset per chunk of
// at most max_chunk coordinates, rans 128 bits of final states per chunk.
inline std::uint64_t documented_max_n(qsgd::CodecKind c, std::uint64_t bytes) {
  using qsgd::CodecKind;
  switch (c) {
    case CodecKind::fp32: return bytes / 4;
    case CodecKind::fp16:
    case CodecKind::bf16: return bytes / 2;
    case CodecKind::fixed: return bytes * 8 / 2;
    case CodecKind::elias_dense: return bytes * 8;
    case CodecKind::elias_sparse: return bytes / 8 * qsgd::max_chunk;
    case CodecKind::rans: return bytes * 8 / 128 * qsgd::max_chunk;
  }
  return 0;
}

enum Api { api_read_header, api_validate, api_values, api_accumulate, api_levels, api_add_levels, api_count };
constexpr const char* api_name[api_count] = {"read_header",     "validate_message", "decode(values)",
                                             "decode_accumulate", "decode(levels)", "decode_add_levels"};

struct Outcome {
  bool ok = false;
  qsgd::Errc code = qsgd::Errc::invalid_argument;
  std::string what;
  qsgd::MessageHeader h{};
};

// Every entry point on one message, with the host paths on or off.
struct Decoded {
  Outcome o[api_count];
  std::vector<float> values, acc;  // n + guard_cells each
  std::vector<std::int32_t> levels;
  std::vector<std::int32_t> sums;  // decode_add_levels into levels of 1 (n + guard_cells)
  std::vector<float> scales;
};

class MessageChecker {
 public:
  MessageChecker();

  // words: the message in a buffer of exactly ceil(bytes / 8) words.
  // canonical: the bytes are exactly what the encoder wrote.
  void check(const std::vector<std::uint64_t>& words, std::size_t bytes, const qsgd::Expect& expect, bool canonical);

 private:
  // hx: the header parse_header accepted, or null.
  Decoded decode_all(const Words& msg, std::size_t bytes, const qsgd::Expect& expect, std::uint64_t n,
                     const qsgd::MessageHeader* hx);
  void reencode(const qsgd::MessageHeader& h, const Decoded& dec, const std::vector<std::uint64_t>& words,
                std::size_t bytes, bool canonical);

  Codec codec_;
  Quant q_;
};

}  // namespace qsgd_fuzz
