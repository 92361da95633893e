#pragma once
// Configuration types shared by every kernel: which quantizer, which code,
// which scaling, and the key of the counter-based random stream.

#include <cmath>
#include <cstdint>
#include <string>

namespace qsgd {

// Wire codes (spec section 2) plus the uncompressed baselines. The numeric
// values are part of the message format: never renumber.
enum class CodecKind : std::uint8_t {
  fp32 = 0,          // baseline: raw float32
  fp16 = 1,          // baseline: IEEE half, round to nearest even
  bf16 = 2,          // baseline: bfloat16, round to nearest even
  fixed = 3,         // 1 sign bit + ceil(log2(s+1)) level bits per coordinate
  elias_sparse = 4,  // per chunk: omega(count+1), then (omega(gap), sign, omega(level))
  elias_dense = 5,   // per coordinate: omega(level+1), sign when level != 0
  rans = 6,          // interleaved rANS over (sign, level) with a per-message frequency table
};

// Bucket scaling (spec section 1). `none` is used by the float baselines.
enum class Norm : std::uint8_t { none = 0, l2 = 1, max = 2 };

// How levels were produced; recorded in the message so that reports and
// decoders know what they hold.
enum class QuantizerKind : std::uint8_t { none = 0, stochastic = 1, deterministic = 2 };

inline bool is_quantized(CodecKind c) {
  return c == CodecKind::fixed || c == CodecKind::elias_sparse || c == CodecKind::elias_dense || c == CodecKind::rans;
}
inline bool is_variable_length(CodecKind c) {
  return c == CodecKind::elias_sparse || c == CodecKind::elias_dense || c == CodecKind::rans;
}

struct CodecConfig {
  CodecKind codec = CodecKind::fixed;
  std::uint32_t s = 16;       // levels: quantized values are scale * sign * l / s, l in 0..s
  std::uint32_t d = 512;      // bucket size; 0 means one bucket over the whole vector
  Norm norm = Norm::max;
  std::uint32_t chunk = 4096; // coordinates per independently decodable chunk (variable codes)
};

// Key of the counter-based generator (spec section 1): every draw is a pure
// function of (seed, step, rank, tensor, coordinate index).
struct RngKey {
  std::uint64_t seed = 0;
  std::uint64_t step = 0;
  std::uint32_t rank = 0;
  std::uint32_t tensor = 0;
};

// Largest s accepted. Levels, gaps and counts must stay far below 2^32 so that
// every Elias omega codeword fits a 64-bit register.
constexpr std::uint32_t max_levels = 1u << 24;
// Largest s of the rans codec: its alphabet of signed levels, 2s + 1 symbols,
// must fit a 15-bit table (and s = sqrt(n) stays below it up to n = 2^28).
constexpr std::uint32_t rans_max_s = (1u << 14) - 1;
// Largest chunk of the variable-length codes. It bounds the work a message
// can ask for: elias-sparse codes a chunk of zeros in one bit, so a message of
// B bytes (each chunk also costs a 64-bit offset) decodes to at most
// B / 8 x max_chunk coordinates; elias-dense spends at least one bit per
// coordinate (n <= 8 B); the fixed-size codes exactly their width.
constexpr std::uint32_t max_chunk = 1u << 16;
// Largest n accepted in one message (levels are indexed with 64-bit integers,
// but the chunk count is stored in 32 bits).
constexpr std::uint64_t max_elements = std::uint64_t(1) << 40;

std::string to_string(CodecKind c);
std::string to_string(Norm n);
CodecKind parse_codec(const std::string& s);  // throws qsgd::Error on unknown names
Norm parse_norm(const std::string& s);

// Throws qsgd::Error naming the offending field when the configuration is unusable.
void validate(const CodecConfig& cfg);

// Bucket size actually used for a vector of n elements.
inline std::uint64_t effective_bucket(const CodecConfig& cfg, std::uint64_t n) {
  return cfg.d == 0 ? (n == 0 ? 1 : n) : cfg.d;
}

// B = 1 + min(d/s^2, sqrt(d)/s), the second-moment bound of Q_s on a bucket
// of d coordinates (spec section 1): E||Q_s(v)||^2 <= B ||v||^2. It holds for
// the max norm too (its scale is at most the L2 one). Q_s / B is a
// contraction, E||Q_s(v)/B - v||^2 <= (1 - 1/B) ||v||^2: the compressor
// error feedback needs.
inline double second_moment_bound(std::uint64_t d, std::uint32_t s) {
  const double dd = static_cast<double>(d), sd = static_cast<double>(s);
  const double a = dd / (sd * sd), b = std::sqrt(dd) / sd;
  return 1.0 + (a < b ? a : b);
}

}  // namespace qsgd
