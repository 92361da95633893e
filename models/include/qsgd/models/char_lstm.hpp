#pragma once
// Character-level language model: one-hot characters -> LSTM -> dense ->
// softmax cross-entropy on the next character at every step.
// Input tokens (n x T), labels the n*T next characters (model.hpp's Batch).
// Loss = mean over all n*T predictions; accuracy = next-character accuracy.
// The LSTM's input weights act as the embedding (one-hot input), so there is
// no separate embedding layer. Tensors: lstm.w_ih, lstm.w_hh, lstm.bias,
// out.weight, out.bias.

#include <cstdint>

#include "qsgd/models/detail/workspace.hpp"
#include "qsgd/models/layers/dense.hpp"
#include "qsgd/models/layers/lstm.hpp"
#include "qsgd/models/model.hpp"

namespace qsgd::models {

struct CharLstmConfig {
  std::size_t vocab = 0;  // number of distinct tokens (from the corpus)
  std::size_t hidden = 128;
  std::size_t seq_len = 64;
};

class CharLstm final : public Model {
 public:
  explicit CharLstm(const CharLstmConfig& config, std::uint64_t seed = 1);
  std::string name() const override { return "char_lstm"; }
  void forward(const Batch& batch) override;
  void backward() override;
  const CharLstmConfig& config() const { return config_; }

 private:
  CharLstmConfig config_;
  Lstm<float> lstm_;
  Dense<float> out_;
  SoftmaxCrossEntropy<float> loss_{"char_lstm.loss"};
  detail::Workspace<float> onehot_{"char_lstm.onehot"};
  detail::Workspace<int> targets_{"char_lstm.targets"};
};

}  // namespace qsgd::models
