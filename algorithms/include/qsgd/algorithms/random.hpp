#pragma once
// Counter-based random numbers for the algorithm experiments: every draw is a
// pure function of its key, so a run is reproducible bit for bit whatever the
// order in which workers or ranks compute (the quantizer's own draws come
// from qsgd::RngKey; these are for data sets and minibatch indices).

#include <cmath>
#include <cstdint>

#include "qsgd/kernels/counter_rng.hpp"

namespace qsgd::algorithms {

using qsgd::mix64;  // the splitmix64 finalizer (qsgd/kernels/counter_rng.hpp)
using qsgd::unit_open;

// Hash of a key of up to four words (order matters).
inline std::uint64_t hash_key(std::uint64_t a, std::uint64_t b = 0, std::uint64_t c = 0, std::uint64_t d = 0) {
  return mix64(mix64(mix64(mix64(a) ^ b) ^ c) ^ d);
}


// Standard normal, Box-Muller on two independent words of the key (stream, i).
inline double normal(std::uint64_t stream, std::uint64_t i) {
  const double u1 = unit_open(hash_key(stream, 2 * i));
  const double u2 = unit_open(hash_key(stream, 2 * i + 1));
  return qsgd::box_muller(u1, u2);
}

// Uniform integer in [0, range) (range > 0); the modulo bias is below 2^-40
// for the ranges used here (< 2^24).
inline std::uint64_t uniform_index(std::uint64_t h, std::uint64_t range) { return h % range; }

}  // namespace qsgd::algorithms
