#pragma once
// Multi-layer perceptron: Dense -> ReLU -> ... -> Dense, softmax cross-entropy.
// Default widths 784-4096-4096-10 (20.0 M parameters): large enough that
// exchanging its gradient dominates a data-parallel step, the regime QSGD
// targets. Tensors: fc<k>.weight (out x in), fc<k>.bias.

#include <cstdint>
#include <vector>

#include "qsgd/models/layers/dense.hpp"
#include "qsgd/models/layers/relu.hpp"
#include "qsgd/models/layers/sequential.hpp"
#include "qsgd/models/model.hpp"

namespace qsgd::models {

struct MlpConfig {
  std::vector<std::size_t> widths{784, 4096, 4096, 10};  // input, hidden..., classes
};

class Mlp final : public Model {
 public:
  explicit Mlp(const MlpConfig& config = {}, std::uint64_t seed = 1);
  std::string name() const override;
  void forward(const Batch& batch) override;
  void backward() override;
  const MlpConfig& config() const { return config_; }

 private:
  MlpConfig config_;
  Sequential<float> net_;
  SoftmaxCrossEntropy<float> loss_{"mlp.loss"};
};

}  // namespace qsgd::models
