#include "qsgd/models/data/sampler.hpp"

#include <numeric>
#include <random>
#include <stdexcept>
#include <string>

#include "qsgd/models/detail/host_rng.hpp"

namespace qsgd::models {

ShardRange shard_range(std::size_t n, int rank, int ranks, ShardPolicy policy) {
  if (ranks < 1 || rank < 0 || rank >= ranks) {
    throw std::invalid_argument("shard_range: rank " + std::to_string(rank) + " of " + std::to_string(ranks));
  }
  const auto r = static_cast<std::size_t>(rank), k = static_cast<std::size_t>(ranks);
  const std::size_t q = n / k, rem = n % k;
  ShardRange s;
  if (policy == ShardPolicy::drop_remainder) {
    s.begin = r * q;
    s.end = s.begin + q;
  } else {
    s.begin = r * q + (r < rem ? r : rem);
    s.end = s.begin + q + (r < rem ? 1 : 0);
  }
  return s;
}

void epoch_permutation(std::size_t n, std::uint64_t seed, std::uint64_t epoch, std::vector<std::size_t>& out) {
  out.resize(n);
  std::iota(out.begin(), out.end(), std::size_t(0));
  std::mt19937_64 g(detail::mix64(seed, epoch));
  for (std::size_t i = n; i > 1; --i) {
    const std::size_t j = detail::uniform_below(g, i);
    std::swap(out[i - 1], out[j]);
  }
}

EpochSampler::EpochSampler(std::size_t n, int rank, int ranks, std::uint64_t seed, ShardPolicy policy, bool shuffle)
    : n_(n), seed_(seed), shuffle_(shuffle), range_(shard_range(n, rank, ranks, policy)) {
  perm_.reserve(n);
  shard_.reserve(range_.size());
  set_epoch(0);
}

void EpochSampler::set_epoch(std::uint64_t epoch) {
  if (shuffle_) {
    epoch_permutation(n_, seed_, epoch, perm_);
  } else {
    perm_.resize(n_);
    std::iota(perm_.begin(), perm_.end(), std::size_t(0));
  }
  shard_.assign(perm_.begin() + static_cast<std::ptrdiff_t>(range_.begin),
                perm_.begin() + static_cast<std::ptrdiff_t>(range_.end));
}

}  // namespace qsgd::models
