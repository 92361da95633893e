#include "qsgd/models/data/batch_loader.hpp"

#include <cstring>
#include <stdexcept>
#include <string>

namespace qsgd::models {

BatchLoader::BatchLoader(const LabeledDataset& data, std::size_t capacity)
    : labeled_(&data), capacity_(capacity),
      x_(Kokkos::view_alloc(Kokkos::WithoutInitializing, "qsgd::models::batch_x"), capacity, data.features),
      y_(Kokkos::view_alloc(Kokkos::WithoutInitializing, "qsgd::models::batch_y"), capacity) {
  if (capacity == 0) throw std::invalid_argument("BatchLoader: capacity must be > 0");
  xh_ = Kokkos::create_mirror_view(x_);
  yh_ = Kokkos::create_mirror_view(y_);
}

BatchLoader::BatchLoader(const TokenDataset& data, std::size_t capacity)
    : tokens_(&data), capacity_(capacity),
      tok_(Kokkos::view_alloc(Kokkos::WithoutInitializing, "qsgd::models::batch_tokens"), capacity, data.seq_len),
      y_(Kokkos::view_alloc(Kokkos::WithoutInitializing, "qsgd::models::batch_y"), capacity * data.seq_len) {
  if (capacity == 0) throw std::invalid_argument("BatchLoader: capacity must be > 0");
  tokh_ = Kokkos::create_mirror_view(tok_);
  yh_ = Kokkos::create_mirror_view(y_);
}

const Batch& BatchLoader::load(const std::size_t* idx, std::size_t count) {
  if (count > capacity_) {
    throw std::invalid_argument("BatchLoader: " + std::to_string(count) + " samples exceed capacity " +
                                std::to_string(capacity_));
  }
  const auto first = std::make_pair(std::size_t(0), count);
  if (labeled_) {
    const auto& d = *labeled_;
    const std::size_t f = d.features;
    for (std::size_t k = 0; k < count; ++k) {
      if (idx[k] >= d.size()) throw std::out_of_range("BatchLoader: sample index " + std::to_string(idx[k]));
      std::memcpy(&xh_(k, 0), &d.x[idx[k] * f], f * sizeof(float));
      yh_(k) = d.y[idx[k]];
    }
    const auto xd = Kokkos::subview(x_, first, Kokkos::ALL);
    const auto yd = Kokkos::subview(y_, first);
    Kokkos::deep_copy(xd, Kokkos::subview(xh_, first, Kokkos::ALL));
    Kokkos::deep_copy(yd, Kokkos::subview(yh_, first));
    batch_.x = xd;
    batch_.labels = yd;
  } else {
    const auto& d = *tokens_;
    const std::size_t T = d.seq_len;
    for (std::size_t k = 0; k < count; ++k) {
      if (idx[k] >= d.size()) throw std::out_of_range("BatchLoader: sample index " + std::to_string(idx[k]));
      const int* src = &d.tokens[idx[k] * T];
      for (std::size_t t = 0; t < T; ++t) {
        tokh_(k, t) = src[t];
        yh_(k * T + t) = src[t + 1];
      }
    }
    const auto td = Kokkos::subview(tok_, first, Kokkos::ALL);
    const auto yd = Kokkos::subview(y_, std::make_pair(std::size_t(0), count * T));
    Kokkos::deep_copy(td, Kokkos::subview(tokh_, first, Kokkos::ALL));
    Kokkos::deep_copy(yd, Kokkos::subview(yh_, std::make_pair(std::size_t(0), count * T)));
    batch_.tokens = td;
    batch_.labels = yd;
  }
  return batch_;
}

}  // namespace qsgd::models
