#pragma once
// The parameter/gradient layout that the trainer exchanges.
//
// Every parameter tensor of a model lives in ONE flat View (params()), and its
// gradient at the same offset of a second flat View (grads()). Tensors are
// packed back to back with no padding, so the flat views hold exactly
// num_parameters() elements, and each tensor is a contiguous 1-D subview.
//
// Order: backward order, i.e. the reverse of declaration order. Layers
// declare their tensors in forward order (weight, then bias), so the last
// layer's bias is tensor 0 at offset 0 and the first layer's weight is the
// last tensor. Backward produces gradients in exactly this order, so
// gradient buckets formed from consecutive tensors become ready one after
// another while backward runs (spec section 4, "Overlap"); a GradReadyHook
// is told about each tensor as soon as its gradient is final.
//
// Life cycle: declare() every tensor, finalize() once (allocates both views,
// zero-filled), then layers bind() their views and the model initializes the
// values. Declaring after finalize() is an error.

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "qsgd/models/detail/host_rng.hpp"
#include "qsgd/models/detail/row_ops.hpp"
#include "qsgd/models/types.hpp"

namespace qsgd::models {

struct TensorInfo {
  std::string name;                // "fc1.weight", "lstm.w_hh", ...
  std::vector<std::size_t> shape;  // row-major, as the layer uses it
  std::size_t offset = 0;          // first element in params()/grads()
  std::size_t size = 0;            // product of shape
  double init_bound = 0;           // initial values ~ U(-init_bound, init_bound)
};

// Called with a tensor's index in tensors() once its gradient is final.
// Calls during one backward() come in increasing index order.
using GradReadyHook = std::function<void(std::size_t tensor_index)>;

template <class S>
class BasicParamStore {
 public:
  using Flat = Kokkos::View<S*, Kokkos::LayoutRight, MemSpace>;
  using TensorView = Kokkos::Subview<Flat, std::pair<std::size_t, std::size_t>>;
  using Handle = std::size_t;  // declaration index

  BasicParamStore() = default;
  BasicParamStore(const BasicParamStore&) = delete;
  BasicParamStore& operator=(const BasicParamStore&) = delete;

  Handle declare(std::string name, std::vector<std::size_t> shape, double init_bound) {
    if (finalized_) throw std::logic_error("ParamStore::declare after finalize: " + name);
    TensorInfo t;
    t.name = std::move(name);
    t.size = 1;
    for (std::size_t d : shape) t.size *= d;
    t.shape = std::move(shape);
    t.init_bound = init_bound;
    declared_.push_back(std::move(t));
    return declared_.size() - 1;
  }

  void finalize() {
    if (finalized_) throw std::logic_error("ParamStore::finalize called twice");
    tensors_.assign(declared_.rbegin(), declared_.rend());
    std::size_t offset = 0;
    for (auto& t : tensors_) {
      t.offset = offset;
      offset += t.size;
    }
    total_ = offset;
    params_ = Flat("qsgd::models::params", total_);
    grads_ = Flat("qsgd::models::grads", total_);
    finalized_ = true;
  }

  bool finalized() const { return finalized_; }
  std::size_t size() const { return total_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  std::size_t index_of(Handle h) const { return declared_.size() - 1 - h; }
  const TensorInfo& info(Handle h) const { return tensors_.at(index_of(h)); }

  const Flat& params() const { return params_; }
  const Flat& grads() const { return grads_; }
  TensorView param_view(std::size_t index) const { return sub(params_, index); }
  TensorView grad_view(std::size_t index) const { return sub(grads_, index); }

  // Unmanaged views for the layers (no reference counting in the hot path).
  Vec<S> param_vec(Handle h) const { return Vec<S>(params_.data() + info(h).offset, info(h).size); }
  Vec<S> grad_vec(Handle h) const { return Vec<S>(grads_.data() + info(h).offset, info(h).size); }
  Mat<S> param_mat(Handle h, std::size_t r, std::size_t c) const { return as_mat(params_, h, r, c); }
  Mat<S> grad_mat(Handle h, std::size_t r, std::size_t c) const { return as_mat(grads_, h, r, c); }

  void zero_grad() { detail::fill(Vec<S>(grads_.data(), grads_.extent(0)), S(0)); }

  // Fills every tensor with U(-b, b), b its init_bound, from a host generator
  // seeded by (seed, tensor index): the values do not depend on the backend.
  void init_uniform(std::uint64_t seed) {
    auto h = Kokkos::create_mirror_view(params_);
    for (std::size_t i = 0; i < tensors_.size(); ++i) {
      const auto& t = tensors_[i];
      std::mt19937_64 gen(seed * 0x9E3779B97F4A7C15ull + i);
      for (std::size_t k = 0; k < t.size; ++k) {
        const double u = detail::uniform01(gen);  // std distributions are not portable
        h(t.offset + k) = static_cast<S>((2 * u - 1) * t.init_bound);
      }
    }
    Kokkos::deep_copy(params_, h);
  }

  void set_grad_ready_hook(GradReadyHook hook) { hook_ = std::move(hook); }
  // Layers call this after computing the gradients of the given tensors.
  void grads_ready(std::initializer_list<Handle> handles) const {
    if (!hook_) return;
    Kokkos::fence();
    // Declaration order is forward order; report in layout (backward) order.
    for (auto it = std::rbegin(handles); it != std::rend(handles); ++it) hook_(index_of(*it));
  }

 private:
  TensorView sub(const Flat& f, std::size_t index) const {
    const auto& t = tensors_.at(index);
    return Kokkos::subview(f, std::make_pair(t.offset, t.offset + t.size));
  }
  Mat<S> as_mat(const Flat& f, Handle h, std::size_t r, std::size_t c) const {
    const auto& t = info(h);
    if (r * c != t.size) throw std::invalid_argument("ParamStore: bad matrix shape for " + t.name);
    return Mat<S>(f.data() + t.offset, r, c);
  }

  std::vector<TensorInfo> declared_;
  std::vector<TensorInfo> tensors_;
  std::size_t total_ = 0;
  bool finalized_ = false;
  Flat params_;
  Flat grads_;
  GradReadyHook hook_;
};

using ParamStore = BasicParamStore<float>;

}  // namespace qsgd::models
