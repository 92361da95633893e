#pragma once
// Rectified linear unit, y = max(x, 0), elementwise.
//
// Purpose: forward y = max(x, 0); backward dx = dy where y > 0, else 0
//   (the subgradient at 0 is taken as 0, as in PyTorch).
// Algorithm: flat elementwise kernels over rows*features.
// Cost: forward reads and writes n values; backward reads 2n, writes n.
// Requirements: none; no parameters.

#include <string>

#include "qsgd/models/detail/workspace.hpp"
#include "qsgd/models/layers/layer.hpp"

namespace qsgd::models {

template <class S>
class ReLU final : public Layer<S> {
 public:
  ReLU(const std::string& name, std::size_t features) : n_(features), y_(name + ".y"), dx_(name + ".dx") {}

  const char* kind() const override { return "relu"; }
  std::size_t in_features() const override { return n_; }
  std::size_t out_features() const override { return n_; }

  Mat<const S> forward(const Mat<const S>& x) override {
    if (x.extent(1) != n_) throw std::invalid_argument("ReLU: input width mismatch");
    auto y = y_.mat(x.extent(0), n_);
    const Vec<const S> in(x.data(), x.size());
    const Vec<S> out(y.data(), y.size());
    Kokkos::parallel_for(
        QSGD_MODELS_LABEL("relu_forward"), Kokkos::RangePolicy<ExecSpace>(0, in.extent(0)),
        KOKKOS_LAMBDA(std::size_t i) { out(i) = in(i) > S(0) ? in(i) : S(0); });
    y_out_ = y;
    return y;
  }

  Mat<const S> backward(const Mat<const S>& dy) override {
    if (dy.extent(0) != y_out_.extent(0) || dy.extent(1) != n_) {
      throw std::invalid_argument("ReLU: gradient shape does not match the last forward");
    }
    if (!this->input_grad_) return {};
    auto dx = dx_.mat(dy.extent(0), n_);
    const Vec<const S> g(dy.data(), dy.size());
    const Vec<const S> y(y_out_.data(), y_out_.size());
    const Vec<S> out(dx.data(), dx.size());
    Kokkos::parallel_for(
        QSGD_MODELS_LABEL("relu_backward"), Kokkos::RangePolicy<ExecSpace>(0, g.extent(0)),
        KOKKOS_LAMBDA(std::size_t i) { out(i) = y(i) > S(0) ? g(i) : S(0); });
    return dx;
  }

 private:
  std::size_t n_;
  Mat<const S> y_out_;
  detail::Workspace<S> y_, dx_;
};

}  // namespace qsgd::models
