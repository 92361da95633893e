#pragma once
// The interface every layer implements (a host-side interface: the virtual
// calls choose which kernels to launch; no kernel makes a virtual call).
//
// Data flow: forward() takes a (rows x in_features) matrix and returns a
// (rows x out_features) matrix that lives in the layer's own workspace; the
// input must stay valid and unchanged until backward(), which takes the
// gradient of the loss with respect to that output and returns the gradient
// with respect to the input (or an empty matrix when input gradients are
// switched off, as for a model's first layer). backward() ADDS the parameter
// gradients to the store's gradient view (PyTorch semantics; zero them with
// zero_grad() before a step) and reports them through the store's
// GradReadyHook.

#include <cstddef>

#include "qsgd/models/types.hpp"

namespace qsgd::models {

template <class S>
class Layer {
 public:
  virtual ~Layer() = default;
  virtual const char* kind() const = 0;
  virtual std::size_t in_features() const = 0;
  virtual std::size_t out_features() const = 0;
  // Called once after the parameter store is finalized.
  virtual void bind() {}
  virtual Mat<const S> forward(const Mat<const S>& x) = 0;
  virtual Mat<const S> backward(const Mat<const S>& dy) = 0;

  void set_input_grad(bool on) { input_grad_ = on; }
  bool input_grad() const { return input_grad_; }

 protected:
  Layer() = default;
  bool input_grad_ = true;
};

}  // namespace qsgd::models
