#pragma once
// Copies chosen samples of a host dataset into device Views of a fixed
// capacity: host staging through mirrors, one deep_copy per array. Buffers
// are allocated once in the constructor, so loading allocates nothing.

#include <cstddef>

#include "qsgd/models/data/dataset.hpp"
#include "qsgd/models/model.hpp"

namespace qsgd::models {

class BatchLoader {
 public:
  // For feature datasets.
  BatchLoader(const LabeledDataset& data, std::size_t capacity);
  // For token datasets.
  BatchLoader(const TokenDataset& data, std::size_t capacity);

  // Loads samples idx[0..count) and returns the batch (views of the first
  // `count` rows of the loader's buffers, valid until the next load).
  const Batch& load(const std::size_t* idx, std::size_t count);
  std::size_t capacity() const { return capacity_; }

 private:
  const LabeledDataset* labeled_ = nullptr;
  const TokenDataset* tokens_ = nullptr;
  std::size_t capacity_;
  Kokkos::View<float**, Kokkos::LayoutRight, MemSpace> x_;
  Kokkos::View<int**, Kokkos::LayoutRight, MemSpace> tok_;
  Kokkos::View<int*, Kokkos::LayoutRight, MemSpace> y_;
  decltype(Kokkos::create_mirror_view(x_)) xh_;
  decltype(Kokkos::create_mirror_view(tok_)) tokh_;
  decltype(Kokkos::create_mirror_view(y_)) yh_;
  Batch batch_;
};

}  // namespace qsgd::models
