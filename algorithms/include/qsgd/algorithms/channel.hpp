#pragma once
// The wire of the algorithm experiments: a gradient in double goes through
// float, the real stochastic quantizer Q_s (or the deterministic one) and a
// real wire code (qsgd::Codec), and comes back decoded, exactly as it would
// between ranks. Every message's size is counted, so every experiment reports
// the bits it actually sent.
//
// Randomness: the stochastic rounding of a message is keyed by
// qsgd::RngKey{seed, step, rank, tensor}; the algorithms key it per worker
// (rank) and per step, so no two messages share random draws.

#include <Kokkos_Core.hpp>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <qsgd/kernels.hpp>
#include <string>

#include "qsgd/algorithms/linalg.hpp"

namespace qsgd::algorithms {

using HostExec = Kokkos::DefaultHostExecutionSpace;

struct WireConfig {
  CodecKind codec = CodecKind::elias_dense;
  std::uint32_t s = 0;   // levels; 0 means s = round(sqrt(n)), the theory's choice
  std::uint32_t d = 0;   // bucket size; 0 means one bucket of n (the analysis)
  Norm norm = Norm::l2;  // the analysis scales by the L2 norm

  bool quantized() const { return is_quantized(codec); }
  // "fp32", or e.g. "s=8 elias-dense l2 d=n".
  std::string label() const;
};

// The uncompressed baseline: float32 on the wire, no quantization.
WireConfig full_precision_wire();
// round(sqrt(n)), at least 1.
std::uint32_t sqrt_levels(std::size_t n);

class Channel {
 public:
  Channel(const WireConfig& cfg, std::size_t n);
  ~Channel();
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  std::size_t dim() const { return n_; }
  const WireConfig& config() const { return cfg_; }
  // The level count in effect (s after resolving 0 to sqrt(n); 0 for float codecs).
  std::uint32_t levels() const { return levels_; }

  // Converts g to float, quantizes it with `key` (quantized codecs) and
  // encodes it into the message buffer; returns the message size in bytes.
  std::size_t encode(const Vec& g, const RngKey& key);
  // The deterministic quantizer of spec section 1 (levels in {-1, 0, 1}, one
  // L2 bucket), encoded with this channel's code (a quantized codec).
  std::size_t encode_deterministic(const Vec& g);

  // acc += weight * decode(message buffer holding `bytes` bytes). The message
  // is checked as untrusted input (qsgd::Error on a corrupt one).
  void accumulate(std::size_t bytes, double weight, Vec& acc);
  // Encode then decode: what one worker's gradient contributes to an average.
  std::size_t send(const Vec& g, const RngKey& key, double weight, Vec& acc) {
    const std::size_t b = encode(g, key);
    accumulate(b, weight, acc);
    return b;
  }

  // The message buffer (64-bit words, host memory): the last encoded message,
  // or where a receiver puts one before accumulate().
  std::uint64_t* buffer();
  std::size_t buffer_words() const;

  std::uint64_t bits_sent() const { return bits_; }
  std::uint64_t messages_sent() const { return messages_; }
  void reset_counters() { bits_ = messages_ = 0; }

 private:
  struct Impl;
  WireConfig cfg_;
  std::size_t n_;
  std::uint32_t levels_ = 0;
  std::uint64_t bits_ = 0, messages_ = 0;
  std::unique_ptr<Impl> impl_;
};

}  // namespace qsgd::algorithms
