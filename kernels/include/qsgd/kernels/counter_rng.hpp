#pragma once
// Counter-based random numbers for stochastic rounding.
//
// Purpose: one uniform draw per coordinate that is a pure function of
//   (seed, step, rank, tensor, coordinate index),
// so a quantized vector is bit-identical on any backend, thread count or
// schedule (spec section 1).
// Algorithm: the key is folded into two 32-bit words on the host with the
// splitmix64 finalizer. Per coordinate, two rounds of a 32-bit
// multiply-xorshift permutation (constants of Wellons' "lowbias32") are
// applied, the first keyed by k0 on the low 32 index bits, the second keyed
// by k1 and the high 32 index bits. Each round is a bijection of the low index
// bits, so draws within one key never repeat for n <= 2^32.
// Cost: 4 integer multiplies and 6 shifts per coordinate; no memory traffic.
// Requirements: none (device-safe, no state).

#include <Kokkos_Core.hpp>
#include <cmath>
#include <cstdint>

#include "qsgd/kernels/config.hpp"

namespace qsgd {

struct StreamKey {
  std::uint32_t k0 = 0;
  std::uint32_t k1 = 0;
};

// The splitmix64 finalizer: a bijection of 64-bit words with full avalanche
// (folds the key here; the suite's input generators hash with it too).
KOKKOS_INLINE_FUNCTION std::uint64_t mix64(std::uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

namespace detail {

KOKKOS_INLINE_FUNCTION std::uint32_t lowbias32(std::uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}
}  // namespace detail

inline StreamKey make_stream_key(const RngKey& key) {
  std::uint64_t h = mix64(key.seed);
  h = mix64(h ^ key.step);
  h = mix64(h ^ ((std::uint64_t(key.rank) << 32) | key.tensor));
  return StreamKey{static_cast<std::uint32_t>(h), static_cast<std::uint32_t>(h >> 32)};
}

// 32 random bits for coordinate i.
KOKKOS_INLINE_FUNCTION std::uint32_t random_bits(const StreamKey& k, std::uint64_t i) {
  std::uint32_t x = detail::lowbias32(static_cast<std::uint32_t>(i) ^ k.k0);
  return detail::lowbias32(x ^ k.k1 ^ (static_cast<std::uint32_t>(i >> 32) * 0x9E3779B9u));
}

// Uniform on {0, 2^-24, ..., 1 - 2^-24}, exactly representable in float.
KOKKOS_INLINE_FUNCTION float uniform01(const StreamKey& k, std::uint64_t i) {
  return static_cast<float>(random_bits(k, i) >> 8) * (1.0f / 16777216.0f);
}

// The generators of the suite's inputs (benchmark gradients, theory
// experiments, test data) build on mix64 above and these two, defined here
// once; qsgd::models, which depends on nothing of the suite, keeps its own
// copies (qsgd/models/detail/host_rng.hpp).
//
// Uniform on (0, 1) from a 64-bit word: its 53 high bits, offset by half a
// step, so that neither 0 nor 1 occurs (log() stays finite).
inline double unit_open(std::uint64_t h) { return (static_cast<double>(h >> 11) + 0.5) * 0x1.0p-53; }

// A standard normal from two uniforms on (0, 1] and [0, 1) by Box-Muller
// (the cosine branch). libm's log and cos may differ in the last ulp between
// machines; the inputs built on it are recorded with their seeds.
inline double box_muller(double u1, double u2) {
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

}  // namespace qsgd
