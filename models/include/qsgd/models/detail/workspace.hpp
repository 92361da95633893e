#pragma once
// Growable scratch memory for a layer's outputs, saved activations and
// gradients. A workspace only ever grows: once it has seen the largest batch
// it serves every later call from the same allocation, so a training step in
// steady state allocates nothing. Every growth is counted in
// workspace_allocations(), which the step benchmark and a test read to prove
// that.

#include <atomic>
#include <cstddef>
#include <string>
#include <utility>

#include "qsgd/models/types.hpp"

namespace qsgd::models {

namespace detail {
inline std::atomic<std::size_t> g_workspace_allocations{0};
}

// Number of workspace (re)allocations since the start of the process.
inline std::size_t workspace_allocations() { return detail::g_workspace_allocations.load(); }

namespace detail {

template <class T>
class Workspace {
 public:
  explicit Workspace(std::string label) : label_(std::move(label)) {}

  // Makes room for n elements; the contents are not preserved on growth.
  void reserve(std::size_t n) {
    if (n > data_.extent(0)) {
      data_ = View1<T>();  // free first: peak memory is the new size, not the sum
      data_ = View1<T>(Kokkos::view_alloc(Kokkos::WithoutInitializing, label_), n);
      ++g_workspace_allocations;
    }
  }
  Mat<T> mat(std::size_t rows, std::size_t cols) {
    reserve(rows * cols);
    return Mat<T>(data_.data(), rows, cols);
  }
  Vec<T> vec(std::size_t n) {
    reserve(n);
    return Vec<T>(data_.data(), n);
  }
  std::size_t capacity() const { return data_.extent(0); }

 private:
  std::string label_;
  View1<T> data_;
};

}  // namespace detail
}  // namespace qsgd::models
