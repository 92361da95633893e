#pragma once
// Deterministic test vectors for the benchmarks and the codec report.
//
// Every value is a pure function of (seed, index) through splitmix64, so an
// input is the same on every machine and does not depend on the standard
// library's distribution algorithms (which are implementation-defined).
// Normals use Box-Muller; libm's log/cos may differ in the last ulp between
// platforms, which does not matter for throughput or bits/dim.

#include <Kokkos_Core.hpp>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "qsgd/kernels/counter_rng.hpp"

namespace qsgd::bench {

using qsgd::mix64;

// Uniform on (0, 1): 53 random bits, offset by half a step so that log() is finite.
inline double uniform_open(std::uint64_t seed, std::uint64_t i, std::uint64_t stream) {
  return qsgd::unit_open(mix64(mix64(seed ^ (stream * 0xD1B54A32D192ED03ull)) ^ i));
}

// Standard normal number `stream` of coordinate i.
inline double normal(std::uint64_t seed, std::uint64_t i, std::uint64_t stream = 0) {
  const double u1 = uniform_open(seed, i, 2 * stream);
  const double u2 = uniform_open(seed, i, 2 * stream + 1);
  return qsgd::box_muller(u1, u2);
}

// Student-t with 3 degrees of freedom: Z / sqrt(chi2_3 / 3). Heavy tails
// (finite variance 3, infinite fourth moment), like gradients with outliers.
inline double student_t3(std::uint64_t seed, std::uint64_t i) {
  double chi2 = 0.0;
  for (std::uint64_t k = 1; k <= 3; ++k) {
    const double z = normal(seed, i, k);
    chi2 += z * z;
  }
  return normal(seed, i, 0) / std::sqrt(chi2 / 3.0);
}

enum class InputKind { gaussian, student_t3, sparse90, layered };

inline const std::vector<InputKind>& all_inputs() {
  static const std::vector<InputKind> all{InputKind::gaussian, InputKind::student_t3, InputKind::sparse90,
                                          InputKind::layered};
  return all;
}

inline std::string to_string(InputKind k) {
  switch (k) {
    case InputKind::gaussian: return "gaussian";
    case InputKind::student_t3: return "student-t3";
    case InputKind::sparse90: return "sparse90";
    case InputKind::layered: return "layered";
  }
  return "?";
}

inline std::string describe(InputKind k) {
  switch (k) {
    case InputKind::gaussian: return "i.i.d. N(0,1)";
    case InputKind::student_t3: return "i.i.d. Student-t, 3 degrees of freedom (heavy tails)";
    case InputKind::sparse90: return "90% exact zeros (Bernoulli), N(0,1) elsewhere";
    case InputKind::layered:
      return "gradient-like flat buffer: consecutive layers of fan_in x 100 weights, fan_in cycling "
             "64..4096, each N(0,1) / sqrt(fan_in); layer edges do not align with buckets";
  }
  return "?";
}

// Parses a name from to_string(); returns false when unknown.
inline bool parse_input(const std::string& name, InputKind& out) {
  for (InputKind k : all_inputs())
    if (to_string(k) == name) {
      out = k;
      return true;
    }
  return false;
}

// Value of coordinate i of input `kind`.
inline float input_value(InputKind kind, std::uint64_t seed, std::uint64_t i) {
  switch (kind) {
    case InputKind::gaussian: return static_cast<float>(normal(seed, i));
    case InputKind::student_t3: return static_cast<float>(student_t3(seed, i));
    case InputKind::sparse90:
      return uniform_open(seed, i, 101) < 0.9 ? 0.0f : static_cast<float>(normal(seed, i));
    case InputKind::layered: break;
  }
  // Layer sizes fan_in * 100 for fan_in = 64, 128, ..., 4096, repeated: as in
  // a framework's flat gradient buffer, buckets straddle layer edges. Its own
  // random stream, so that it is not the Gaussian input rescaled.
  constexpr std::uint64_t fan_out = 100, period = fan_out * (64 + 128 + 256 + 512 + 1024 + 2048 + 4096);
  std::uint64_t r = i % period, fan_in = 64;
  while (r >= fan_out * fan_in) {
    r -= fan_out * fan_in;
    fan_in *= 2;
  }
  return static_cast<float>(normal(seed, i, 7) / std::sqrt(static_cast<double>(fan_in)));
}

// Fills a host vector of n values.
inline std::vector<float> make_input_host(InputKind kind, std::uint64_t n, std::uint64_t seed) {
  std::vector<float> h(n);
  for (std::uint64_t i = 0; i < n; ++i) h[i] = input_value(kind, seed, i);
  return h;
}

// The same values in a View of `MemSpace`.
template <class MemSpace>
Kokkos::View<float*, MemSpace> make_input(InputKind kind, std::uint64_t n, std::uint64_t seed) {
  Kokkos::View<float*, MemSpace> v(Kokkos::view_alloc(Kokkos::WithoutInitializing, "qsgd::bench::input"), n);
  auto h = Kokkos::create_mirror_view(v);
  for (std::uint64_t i = 0; i < n; ++i) h(i) = input_value(kind, seed, i);
  Kokkos::deep_copy(v, h);
  return v;
}

}  // namespace qsgd::bench
