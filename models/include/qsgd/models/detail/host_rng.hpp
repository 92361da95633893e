#pragma once
// Portable host-side random helpers on top of std::mt19937_64, whose output
// sequence the C++ standard fixes exactly (the std:: distributions it does
// not, so they are avoided).
//
// qsgd::models depends on Kokkos and KokkosKernels only, not on
// qsgd::kernels (docs/architecture.md), so it keeps these few lines rather
// than include qsgd/kernels/counter_rng.hpp, whose qsgd::mix64 is the same
// splitmix64 finalizer; every other part of the suite uses that one.

#include <cmath>
#include <cstdint>
#include <random>

namespace qsgd::models::detail {

// SplitMix64 finalizer: decorrelates nearby seeds (seed, seed+1, ...).
inline std::uint64_t mix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

inline std::uint64_t mix64(std::uint64_t a, std::uint64_t b) { return mix64(mix64(a) ^ (b + 0x632BE59BD9B4E019ull)); }

// Uniform in [0, 1) with 53 random bits.
inline double uniform01(std::mt19937_64& g) { return static_cast<double>(g() >> 11) * 0x1.0p-53; }

// Uniform integer in [0, bound), bound >= 1, unbiased (rejection of the top
// partial range).
inline std::uint64_t uniform_below(std::mt19937_64& g, std::uint64_t bound) {
  const std::uint64_t limit = ~std::uint64_t(0) - (~std::uint64_t(0) % bound);  // multiple of bound
  std::uint64_t r;
  do {
    r = g();
  } while (r >= limit);
  return r % bound;
}

// Standard normal by Box-Muller (one value per call; the pair's second value
// is dropped, which keeps the sequence simple to reproduce).
inline double normal01(std::mt19937_64& g) {
  const double u1 = 1.0 - uniform01(g);  // (0, 1]
  const double u2 = uniform01(g);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586476925 * u2);
}

}  // namespace qsgd::models::detail
