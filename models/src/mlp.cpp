#include "qsgd/models/mlp.hpp"

#include <stdexcept>
#include <string>

namespace qsgd::models {

Mlp::Mlp(const MlpConfig& config, std::uint64_t seed) : config_(config) {
  const auto& w = config_.widths;
  if (w.size() < 2) throw std::invalid_argument("Mlp: need at least input and output widths");
  for (std::size_t k = 0; k + 1 < w.size(); ++k) {
    const std::string name = "fc" + std::to_string(k + 1);
    net_.add<Dense<float>>(store_, name, w[k], w[k + 1]);
    if (k + 2 < w.size()) net_.add<ReLU<float>>(name + ".relu", w[k + 1]);
  }
  store_.finalize();
  net_.bind();
  init(seed);
}

std::string Mlp::name() const {
  std::string s = "mlp";
  for (std::size_t i = 0; i < config_.widths.size(); ++i) s += (i ? "-" : ":") + std::to_string(config_.widths[i]);
  return s;
}

void Mlp::forward(const Batch& batch) {
  if (batch.x.extent(1) != config_.widths.front()) {
    throw std::invalid_argument("Mlp: batch has " + std::to_string(batch.x.extent(1)) + " features, model expects " +
                                std::to_string(config_.widths.front()));
  }
  stats_ = loss_.forward(net_.forward(batch.x), batch.labels);
}

void Mlp::backward() { net_.backward(loss_.backward()); }

}  // namespace qsgd::models
