#pragma once
// The summary statistics the suite's benchmarks report, defined once:
//   median      the middle sample (the mean of the two middle ones for an
//               even count);
//   minimum     the smallest sample (maximum: the largest);
//   percentile  nearest rank: the smallest sample with at least a fraction p
//               of the samples at or below it (p99 of 10 samples is the
//               largest; of 200, the 198th smallest).
// All take the samples by value (they sort a copy) and need at least one.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <vector>

namespace qsgd::bench {

inline void require_samples(const std::vector<double>& x) {
  if (x.empty()) throw std::invalid_argument("statistics of no samples");
}

inline double median_of(std::vector<double> x) {
  require_samples(x);
  std::sort(x.begin(), x.end());
  const std::size_t m = x.size() / 2;
  return x.size() % 2 ? x[m] : 0.5 * (x[m - 1] + x[m]);
}

inline double minimum_of(const std::vector<double>& x) {
  require_samples(x);
  return *std::min_element(x.begin(), x.end());
}

inline double maximum_of(const std::vector<double>& x) {
  require_samples(x);
  return *std::max_element(x.begin(), x.end());
}

inline double percentile(std::vector<double> x, double p) {
  require_samples(x);
  std::sort(x.begin(), x.end());
  std::size_t k = static_cast<std::size_t>(std::ceil(p * static_cast<double>(x.size())));
  k = std::min(std::max<std::size_t>(k, 1), x.size());
  return x[k - 1];
}

}  // namespace qsgd::bench
