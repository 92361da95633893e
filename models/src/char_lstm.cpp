#include "qsgd/models/char_lstm.hpp"

#include <stdexcept>
#include <string>

namespace qsgd::models {

CharLstm::CharLstm(const CharLstmConfig& config, std::uint64_t seed)
    : config_(config),
      lstm_(store_, "lstm", config.vocab, config.hidden, config.seq_len),
      out_(store_, "out", config.hidden, config.vocab) {
  store_.finalize();
  lstm_.bind();
  out_.bind();
  lstm_.set_input_grad(false);
  init(seed);
}

void CharLstm::forward(const Batch& batch) {
  const std::size_t n = batch.tokens.extent(0), T = config_.seq_len, V = config_.vocab;
  if (batch.tokens.extent(1) != T || batch.labels.extent(0) != n * T) {
    throw std::invalid_argument("CharLstm: batch must hold (n x " + std::to_string(T) + ") tokens and n*" +
                                std::to_string(T) + " labels");
  }
  // Time-major one-hot inputs and targets: row t*n + i is sample i at step t.
  // Tokens outside [0, V) give an all-zero input row; their labels are
  // rejected by the loss.
  auto x = onehot_.mat(T * n, V);
  auto y = targets_.vec(T * n);
  const auto tokens = batch.tokens;
  const auto labels = batch.labels;
  Kokkos::parallel_for(
      QSGD_MODELS_LABEL("char_lstm_onehot"), Kokkos::RangePolicy<ExecSpace>(0, T * n),
      KOKKOS_LAMBDA(std::size_t r) {
        const std::size_t t = r / n, i = r - t * n;
        const int tok = tokens(i, t);
        for (std::size_t v = 0; v < V; ++v) x(r, v) = static_cast<int>(v) == tok ? 1.0f : 0.0f;
        y(r) = labels(i * T + t);
      });
  const auto h = lstm_.forward(x);
  stats_ = loss_.forward(out_.forward(h), y);
}

void CharLstm::backward() { lstm_.backward(out_.backward(loss_.backward())); }

}  // namespace qsgd::models
