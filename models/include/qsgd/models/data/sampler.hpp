#pragma once
// Which samples a rank sees in an epoch: a seeded shuffle shared by all
// ranks, then a contiguous slice of it per rank.
//
// Shuffle: epoch e uses the permutation of 0..n-1 made by a Fisher-Yates
// shuffle driven by std::mt19937_64 seeded with mix(seed, e), with bounded
// integers drawn by rejection (not std::uniform_int_distribution, whose
// algorithm the standard leaves open). Inputs are only (n, seed, e), so every
// rank computes the same permutation with no communication, and the
// permutation differs from epoch to epoch.
//
// Sharding of the n positions of that permutation over K ranks:
//   balanced:       rank r gets n/K or n/K + 1 positions (the first n mod K
//                   ranks get one more); every sample is used each epoch.
//   drop_remainder: every rank gets exactly floor(n/K) positions and the
//                   last n mod K positions of the permutation are unused this
//                   epoch (different samples each epoch). Synchronous
//                   data-parallel training wants this: all ranks take the
//                   same number of steps.
// Either way the shards of one epoch are disjoint.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace qsgd::models {

enum class ShardPolicy { balanced, drop_remainder };

struct ShardRange {
  std::size_t begin = 0, end = 0;  // positions in the epoch's permutation
  std::size_t size() const { return end - begin; }
};

ShardRange shard_range(std::size_t n, int rank, int ranks, ShardPolicy policy);

// The permutation of epoch `epoch` (identity when shuffle is off).
void epoch_permutation(std::size_t n, std::uint64_t seed, std::uint64_t epoch, std::vector<std::size_t>& out);

class EpochSampler {
 public:
  EpochSampler(std::size_t n, int rank, int ranks, std::uint64_t seed, ShardPolicy policy = ShardPolicy::drop_remainder,
               bool shuffle = true);

  // Selects epoch e; indices() then lists this rank's samples in order.
  void set_epoch(std::uint64_t epoch);
  const std::vector<std::size_t>& indices() const { return shard_; }
  std::size_t shard_size() const { return range_.size(); }
  // Full batches of batch_size in the shard (a partial last batch is
  // dropped, so that every rank takes the same number of steps).
  std::size_t batches(std::size_t batch_size) const { return batch_size ? range_.size() / batch_size : 0; }
  // Pointer to the indices of batch b (batch_size of them).
  const std::size_t* batch(std::size_t b, std::size_t batch_size) const { return shard_.data() + b * batch_size; }

 private:
  std::size_t n_;
  std::uint64_t seed_;
  bool shuffle_;
  ShardRange range_;
  std::vector<std::size_t> perm_, shard_;
};

}  // namespace qsgd::models
