#pragma once
// Host-side helpers for the qsgd::models tests.

#include <sys/stat.h>

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <Kokkos_Core.hpp>
#include <gtest/gtest.h>

#include "qsgd/models/types.hpp"

// In a test body: the Fashion-MNIST directory must exist. A missing dataset
// fails the test naming the package; it skips only when the environment
// says QSGD_ALLOW_MISSING_DATA=1 (documented in docs/reliability.md; the
// README's test command and CI never set it), so tests cannot vanish
// silently on a machine without the data.
#define QSGD_REQUIRE_DATASET(dir)                                                                         \
  do {                                                                                                    \
    struct stat qsgd_st_ {};                                                                              \
    if (::stat((dir).c_str(), &qsgd_st_) != 0) {                                                         \
      const char* qsgd_allow_ = std::getenv("QSGD_ALLOW_MISSING_DATA");                                   \
      if (qsgd_allow_ != nullptr && std::string(qsgd_allow_) == "1")                                      \
        GTEST_SKIP() << (dir) << " missing, skipped (QSGD_ALLOW_MISSING_DATA=1)";                         \
      FAIL() << (dir) << " missing: install the Debian package dataset-fashion-mnist "                   \
             << "(scripts/install-deps.sh), or set QSGD_ALLOW_MISSING_DATA=1 to skip";                     \
    }                                                                                                     \
  } while (0)

namespace qsgd::models::test {

inline std::vector<double> uniform(std::size_t n, double lo, double hi, std::uint64_t seed) {
  std::mt19937_64 g(seed);
  std::vector<double> v(n);
  for (auto& x : v) x = lo + (hi - lo) * (static_cast<double>(g() >> 11) * 0x1.0p-53);
  return v;
}

// Values in [lo, hi] whose magnitude is at least `gap` (away from ReLU's kink).
inline std::vector<double> uniform_away_from_zero(std::size_t n, double gap, double hi, std::uint64_t seed) {
  auto v = uniform(n, -hi, hi, seed);
  for (auto& x : v) {
    if (x >= 0 && x < gap) x += gap;
    if (x < 0 && x > -gap) x -= gap;
  }
  return v;
}

template <class S>
View2<S> to_device(const std::vector<double>& v, std::size_t rows, std::size_t cols) {
  View2<S> d("test", rows, cols);
  auto h = Kokkos::create_mirror_view(d);
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t j = 0; j < cols; ++j) h(i, j) = static_cast<S>(v[i * cols + j]);
  Kokkos::deep_copy(d, h);
  return d;
}

template <class ViewT>
std::vector<double> to_host(const ViewT& v) {
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
  std::vector<double> out(h.size());
  const auto* p = h.data();
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<double>(p[i]);
  return out;
}

inline double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::abs(x));
  return m;
}

inline double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b, double scale_a = 1.0) {
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(scale_a * a[i] - b[i]));
  return m;
}

}  // namespace qsgd::models::test
