#pragma once
// How scatter-reduce splits a vector into one chunk per rank.

#include <cstdint>
#include <vector>

namespace qsgd::comm {

// Boundaries of K chunks of [0, n): chunk j is [bounds[j], bounds[j+1]).
// Boundaries are multiples of `align` (the quantization bucket size, so that
// every chunk holds whole buckets and its scales are those of the whole
// vector), except the last, which is n. The n / align units are dealt out as
// evenly as possible, the first ranks taking one more; when there are fewer
// units than ranks, the last chunks are empty (n < K, n = 0).
inline void partition(std::uint64_t n, int ranks, std::uint64_t align, std::vector<std::uint64_t>& bounds) {
  const std::uint64_t k = ranks < 1 ? 1 : static_cast<std::uint64_t>(ranks);
  const std::uint64_t a = align == 0 ? 1 : align;
  const std::uint64_t units = (n + a - 1) / a;
  const std::uint64_t q = units / k, r = units % k;
  bounds.resize(k + 1);
  for (std::uint64_t j = 0; j <= k; ++j) {
    const std::uint64_t u = j * q + (j < r ? j : r);
    const std::uint64_t b = u * a;
    bounds[j] = b < n ? b : n;
  }
}

// Alignment scatter-reduce uses for a codec with effective bucket size d on an
// n-vector: d when the vector has more than one bucket, else 1 (one bucket:
// every chunk carries the single scale, so any split is exact).
inline std::uint64_t partition_align(bool quantized, std::uint64_t d, std::uint64_t n) {
  return quantized && d < n ? d : 1;
}

}  // namespace qsgd::comm
