#pragma once
// Fully connected layer: y = x W^T + b, W (out x in), b (out), as in PyTorch.
//
// forward   y  = x W^T           GEMM (rows x in) (in x out), then + b
// backward  dW += dy^T x         GEMM (out x rows) (rows x in)
//           db += column sums of dy
//           dx  = dy W           GEMM (rows x out) (out x in), skipped when
//                                input gradients are off
// Cost per row: 2*in*out flops forward, 4*in*out backward (2*in*out without dx).
// Initial values ~ U(-1/sqrt(in), 1/sqrt(in)) for W and b (PyTorch's default).

#include <cmath>
#include <string>

#include "qsgd/models/detail/gemm.hpp"
#include "qsgd/models/detail/row_ops.hpp"
#include "qsgd/models/detail/workspace.hpp"
#include "qsgd/models/layers/layer.hpp"
#include "qsgd/models/param_store.hpp"

namespace qsgd::models {

template <class S>
class Dense final : public Layer<S> {
 public:
  Dense(BasicParamStore<S>& store, const std::string& name, std::size_t in, std::size_t out)
      : store_(store), in_(in), out_(out), y_(name + ".y"), dx_(name + ".dx") {
    if (in == 0 || out == 0) throw std::invalid_argument("Dense " + name + ": zero width");
    const double bound = 1.0 / std::sqrt(static_cast<double>(in));
    hw_ = store.declare(name + ".weight", {out, in}, bound);
    hb_ = store.declare(name + ".bias", {out}, bound);
  }

  const char* kind() const override { return "dense"; }
  std::size_t in_features() const override { return in_; }
  std::size_t out_features() const override { return out_; }
  typename BasicParamStore<S>::Handle weight() const { return hw_; }
  typename BasicParamStore<S>::Handle bias() const { return hb_; }

  void bind() override {
    w_ = store_.param_mat(hw_, out_, in_);
    b_ = store_.param_vec(hb_);
    dw_ = store_.grad_mat(hw_, out_, in_);
    db_ = store_.grad_vec(hb_);
  }

  Mat<const S> forward(const Mat<const S>& x) override {
    check_cols(x, in_, "forward input");
    x_ = x;
    auto y = y_.mat(x.extent(0), out_);
    detail::gemm('N', 'T', S(1), x, Mat<const S>(w_), S(0), y);
    detail::add_row_vector<S>(y, b_);
    return y;
  }

  Mat<const S> backward(const Mat<const S>& dy) override {
    check_cols(dy, out_, "backward input");
    detail::gemm('T', 'N', S(1), dy, x_, S(1), dw_);
    detail::add_column_sums<S>(db_, dy);
    store_.grads_ready({hw_, hb_});
    if (!this->input_grad_) return {};
    auto dx = dx_.mat(dy.extent(0), in_);
    detail::gemm('N', 'N', S(1), dy, Mat<const S>(w_), S(0), dx);
    return dx;
  }

 private:
  static void check_cols(const Mat<const S>& m, std::size_t cols, const char* what) {
    if (m.extent(1) != cols) {
      throw std::invalid_argument(std::string("Dense: ") + what + " has " + std::to_string(m.extent(1)) +
                                  " columns, expected " + std::to_string(cols));
    }
  }

  BasicParamStore<S>& store_;
  std::size_t in_, out_;
  typename BasicParamStore<S>::Handle hw_ = 0, hb_ = 0;
  Mat<S> w_, dw_;
  Vec<S> b_, db_;
  Mat<const S> x_;
  detail::Workspace<S> y_, dx_;
};

}  // namespace qsgd::models
