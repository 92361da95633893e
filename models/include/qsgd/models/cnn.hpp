#pragma once
// Small convolutional network for 28x28 single-channel images:
//   conv 5x5 x16 (pad 2) -> ReLU -> maxpool 2 -> conv 5x5 x32 (pad 2) -> ReLU
//   -> maxpool 2 -> dense (32*7*7 -> 10), softmax cross-entropy.
// 28,938 parameters with the defaults. Inputs are rows of C x H x W floats.

#include <cstdint>

#include "qsgd/models/layers/conv2d.hpp"
#include "qsgd/models/layers/dense.hpp"
#include "qsgd/models/layers/maxpool2d.hpp"
#include "qsgd/models/layers/relu.hpp"
#include "qsgd/models/layers/sequential.hpp"
#include "qsgd/models/model.hpp"

namespace qsgd::models {

struct CnnConfig {
  std::size_t channels = 1, height = 28, width = 28, classes = 10;
  std::size_t conv1 = 16, conv2 = 32, kernel = 5, pool = 2;
};

class Cnn final : public Model {
 public:
  explicit Cnn(const CnnConfig& config = {}, std::uint64_t seed = 1);
  std::string name() const override { return "cnn"; }
  void forward(const Batch& batch) override;
  void backward() override;
  const CnnConfig& config() const { return config_; }

 private:
  CnnConfig config_;
  Sequential<float> net_;
  SoftmaxCrossEntropy<float> loss_{"cnn.loss"};
};

}  // namespace qsgd::models
