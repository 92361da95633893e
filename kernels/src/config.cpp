#include "qsgd/kernels/config.hpp"

#include <cmath>
#include <limits>
#include <sstream>

#include "qsgd/kernels/error.hpp"

namespace qsgd {

const char* to_string(Errc e) {
  switch (e) {
    case Errc::invalid_argument: return "invalid argument";
    case Errc::non_finite_input: return "non-finite input";
    case Errc::out_of_range: return "value out of range";
    case Errc::corrupt_message: return "corrupt message";
    case Errc::buffer_too_small: return "buffer too small";
  }
  return "error";
}

std::string to_string(CodecKind c) {
  switch (c) {
    case CodecKind::fp32: return "fp32";
    case CodecKind::fp16: return "fp16";
    case CodecKind::bf16: return "bf16";
    case CodecKind::fixed: return "fixed";
    case CodecKind::elias_sparse: return "elias-sparse";
    case CodecKind::elias_dense: return "elias-dense";
    case CodecKind::rans: return "rans";
  }
  return "codec#" + std::to_string(static_cast<int>(c));
}

std::string to_string(Norm n) {
  switch (n) {
    case Norm::none: return "none";
    case Norm::l2: return "l2";
    case Norm::max: return "max";
  }
  return "norm#" + std::to_string(static_cast<int>(n));
}

CodecKind parse_codec(const std::string& s) {
  for (CodecKind c : {CodecKind::fp32, CodecKind::fp16, CodecKind::bf16, CodecKind::fixed, CodecKind::elias_sparse,
                      CodecKind::elias_dense, CodecKind::rans})
    if (s == to_string(c)) return c;
  throw Error(Errc::invalid_argument,
              "unknown codec '" + s + "' (expected fp32, fp16, bf16, fixed, elias-sparse, elias-dense or rans)");
}

Norm parse_norm(const std::string& s) {
  if (s == "l2") return Norm::l2;
  if (s == "max") return Norm::max;
  throw Error(Errc::invalid_argument, "unknown norm '" + s + "' (expected l2 or max)");
}

void validate(const CodecConfig& cfg) {
  const int c = static_cast<int>(cfg.codec);
  if (c < 0 || c > static_cast<int>(CodecKind::rans))
    throw Error(Errc::invalid_argument, "codec value " + std::to_string(c) + " is not a known codec");
  if (!is_quantized(cfg.codec)) return;
  if (cfg.s < 1 || cfg.s > max_levels)
    throw Error(Errc::invalid_argument,
                "s = " + std::to_string(cfg.s) + " is outside 1.." + std::to_string(max_levels));
  if (cfg.codec == CodecKind::rans && cfg.s > rans_max_s)
    throw Error(Errc::invalid_argument,
                "s = " + std::to_string(cfg.s) + " exceeds the rans codec's limit " + std::to_string(rans_max_s));
  if (cfg.norm != Norm::l2 && cfg.norm != Norm::max)
    throw Error(Errc::invalid_argument, "a quantized codec needs norm l2 or max, not " + to_string(cfg.norm));
  if (is_variable_length(cfg.codec) && (cfg.chunk == 0 || cfg.chunk > max_chunk))
    throw Error(Errc::invalid_argument,
                "chunk = " + std::to_string(cfg.chunk) + " is outside 1.." + std::to_string(max_chunk) + " coordinates");
}

}  // namespace qsgd
