#pragma once
// A chain of layers: forward runs them in order, backward in reverse.

#include <memory>
#include <utility>
#include <vector>

#include "qsgd/models/layers/layer.hpp"

namespace qsgd::models {

template <class S>
class Sequential {
 public:
  template <class L, class... Args>
  L& add(Args&&... args) {
    auto p = std::make_unique<L>(std::forward<Args>(args)...);
    L& ref = *p;
    if (!layers_.empty() && layers_.back()->out_features() != ref.in_features()) {
      throw std::invalid_argument("Sequential: layer widths do not chain");
    }
    layers_.push_back(std::move(p));
    return ref;
  }

  void bind() {
    for (auto& l : layers_) l->bind();
    if (!layers_.empty()) layers_.front()->set_input_grad(false);  // nothing needs d(loss)/d(input)
  }

  Mat<const S> forward(Mat<const S> x) {
    for (auto& l : layers_) x = l->forward(x);
    return x;
  }

  void backward(Mat<const S> dy) {
    for (auto it = layers_.rbegin(); it != layers_.rend(); ++it) dy = (*it)->backward(dy);
  }

  std::size_t size() const { return layers_.size(); }
  Layer<S>& operator[](std::size_t i) { return *layers_[i]; }

 private:
  std::vector<std::unique_ptr<Layer<S>>> layers_;
};

}  // namespace qsgd::models
