#include "qsgd/models/cnn.hpp"

#include <stdexcept>
#include <string>

namespace qsgd::models {

Cnn::Cnn(const CnnConfig& config, std::uint64_t seed) : config_(config) {
  const auto& c = config_;
  Conv2dShape s1;
  s1.in_channels = c.channels;
  s1.height = c.height;
  s1.width = c.width;
  s1.out_channels = c.conv1;
  s1.kernel = c.kernel;
  s1.pad = c.kernel / 2;
  net_.add<Conv2d<float>>(store_, "conv1", s1);
  net_.add<ReLU<float>>("conv1.relu", c.conv1 * s1.out_height() * s1.out_width());
  auto& p1 = net_.add<MaxPool2d<float>>("pool1", c.conv1, s1.out_height(), s1.out_width(), c.pool);

  Conv2dShape s2 = s1;
  s2.in_channels = c.conv1;
  s2.height = p1.out_height();
  s2.width = p1.out_width();
  s2.out_channels = c.conv2;
  net_.add<Conv2d<float>>(store_, "conv2", s2);
  net_.add<ReLU<float>>("conv2.relu", c.conv2 * s2.out_height() * s2.out_width());
  auto& p2 = net_.add<MaxPool2d<float>>("pool2", c.conv2, s2.out_height(), s2.out_width(), c.pool);

  net_.add<Dense<float>>(store_, "fc", p2.out_features(), c.classes);
  store_.finalize();
  net_.bind();
  init(seed);
}

void Cnn::forward(const Batch& batch) {
  const std::size_t want = config_.channels * config_.height * config_.width;
  if (batch.x.extent(1) != want) {
    throw std::invalid_argument("Cnn: batch has " + std::to_string(batch.x.extent(1)) + " features, model expects " +
                                std::to_string(want));
  }
  stats_ = loss_.forward(net_.forward(batch.x), batch.labels);
}

void Cnn::backward() { net_.backward(loss_.backward()); }

}  // namespace qsgd::models
