#pragma once
// Counter-based random numbers for the algorithm experiments: every draw is a
// pure function of its key, so a run is reproducible bit for bit whatever the
// order in which workers or ranks compute (the quantizer's own draws come
// from qsgd::RngKey; these are for data sets and minibatch indices).

#include <cmath>
#include <cstdint>

namespace qsgd::algorithms {

// splitmix64 finalizer: a bijection of 64-bit words with full avalanche.
inline std::uint64_t mix64(std::uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Hash of a key of up to four words (order matters).
inline std::uint64_t hash_key(std::uint64_t a, std::uint64_t b = 0, std::uint64_t c = 0, std::uint64_t d = 0) {
  return mix64(mix64(mix64(mix64(a) ^ b) ^ c) ^ d);
}

// Uniform on (0, 1) from a 64-bit word (53 bits, never 0 or 1).
inline double unit_open(std::uint64_t h) { return (static_cast<double>(h >> 11) + 0.5) * 0x1.0p-53; }

// Standard normal, Box-Muller on two independent words of the key (stream, i).
inline double normal(std::uint64_t stream, std::uint64_t i) {
  const double u1 = unit_open(hash_key(stream, 2 * i));
  const double u2 = unit_open(hash_key(stream, 2 * i + 1));
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

// Uniform integer in [0, range) (range > 0); the modulo bias is below 2^-40
// for the ranges used here (< 2^24).
inline std::uint64_t uniform_index(std::uint64_t h, std::uint64_t range) { return h % range; }

}  // namespace qsgd::algorithms
