#pragma once
// Softmax + cross-entropy loss, mean over rows, numerically stable.
//
// For logits z (rows x classes) and integer labels y:
//   loss_i = log sum_j exp(z_ij - m_i) - (z_{i,y_i} - m_i),  m_i = max_j z_ij
// (the shift by m_i keeps every exp() in (0, 1], so nothing overflows and the
// sum is >= 1, so the log is finite). Reported loss = mean_i loss_i, summed
// in double. Prediction = first argmax of z_i (ties to the lower class).
// Gradient: d(mean loss)/dz_ij = (softmax(z_i)_j - [j == y_i]) / rows.
//
// Purpose: forward row losses, probabilities and hits; backward the gradient.
// Algorithm: one thread per row (classes is small: 10 or a vocabulary), then
//   three sum reductions over the rows.
// Cost: forward reads rows*classes values, writes as many probabilities;
//   backward reads and writes rows*classes.
// Requirements: labels in [0, classes); out-of-range labels are counted in
//   the kernel and reported by a std::out_of_range thrown on the host.

#include <cstdint>
#include <stdexcept>
#include <string>

#include "qsgd/models/detail/workspace.hpp"
#include "qsgd/models/types.hpp"

namespace qsgd::models {

struct LossStats {
  double loss = 0;          // mean over rows
  std::size_t correct = 0;  // rows whose argmax equals the label
  std::size_t rows = 0;
  double accuracy() const { return rows ? static_cast<double>(correct) / static_cast<double>(rows) : 0.0; }
};

template <class S>
class SoftmaxCrossEntropy {
 public:
  explicit SoftmaxCrossEntropy(const std::string& name)
      : p_(name + ".probs"), dz_(name + ".dz"), row_loss_(name + ".row_loss"), row_hit_(name + ".row_hit") {}

  LossStats forward(const Mat<const S>& z, const Vec<const int>& labels) {
    const std::size_t rows = z.extent(0);
    const int classes = static_cast<int>(z.extent(1));
    if (labels.extent(0) != rows) {
      throw std::invalid_argument("SoftmaxCrossEntropy: " + std::to_string(labels.extent(0)) + " labels for " +
                                  std::to_string(rows) + " rows");
    }
    p_m_ = p_.mat(rows, z.extent(1));
    labels_ = labels;
    const auto p = p_m_;
    const auto rl = row_loss_.vec(rows);
    const auto hit = row_hit_.vec(rows);
    Kokkos::parallel_for(
        QSGD_MODELS_LABEL("softmax_xent_forward"), Kokkos::RangePolicy<ExecSpace>(0, rows),
        KOKKOS_LAMBDA(std::size_t i) {
          const int y = labels(i);
          S m = z(i, 0);
          int arg = 0;
          for (int j = 1; j < classes; ++j) {
            if (z(i, j) > m) {
              m = z(i, j);
              arg = j;
            }
          }
          S sum = 0;
          for (int j = 0; j < classes; ++j) {
            const S e = Kokkos::Experimental::exp(z(i, j) - m);
            p(i, j) = e;
            sum += e;
          }
          const S inv = S(1) / sum;
          for (int j = 0; j < classes; ++j) p(i, j) *= inv;
          if (y < 0 || y >= classes) {
            rl(i) = 0;
            hit(i) = -1;
          } else {
            rl(i) = static_cast<double>(Kokkos::Experimental::log(sum)) - static_cast<double>(z(i, y) - m);
            hit(i) = arg == y ? 1 : 0;
          }
        });
    double loss_sum = 0;
    long hits = 0, bad = 0;
    Kokkos::parallel_reduce(
        QSGD_MODELS_LABEL("softmax_xent_loss"), Kokkos::RangePolicy<ExecSpace>(0, rows),
        KOKKOS_LAMBDA(std::size_t i, double& acc) { acc += rl(i); }, loss_sum);
    Kokkos::parallel_reduce(
        QSGD_MODELS_LABEL("softmax_xent_hits"), Kokkos::RangePolicy<ExecSpace>(0, rows),
        KOKKOS_LAMBDA(std::size_t i, long& acc) { acc += hit(i) > 0 ? 1 : 0; }, hits);
    Kokkos::parallel_reduce(
        QSGD_MODELS_LABEL("softmax_xent_bad"), Kokkos::RangePolicy<ExecSpace>(0, rows),
        KOKKOS_LAMBDA(std::size_t i, long& acc) { acc += hit(i) < 0 ? 1 : 0; }, bad);
    if (bad > 0) {
      throw std::out_of_range("SoftmaxCrossEntropy: " + std::to_string(bad) + " of " + std::to_string(rows) +
                              " labels outside [0, " + std::to_string(classes) + ")");
    }
    LossStats st;
    st.rows = rows;
    st.loss = rows ? loss_sum / static_cast<double>(rows) : 0.0;
    st.correct = static_cast<std::size_t>(hits);
    return st;
  }

  // Gradient of scale * (mean loss of the last forward) w.r.t. the logits.
  Mat<const S> backward(S scale = S(1)) {
    const std::size_t rows = p_m_.extent(0);
    auto dz = dz_.mat(rows, p_m_.extent(1));
    const Mat<const S> p = p_m_;
    const auto labels = labels_;
    const int classes = static_cast<int>(p_m_.extent(1));
    const S f = rows ? scale / static_cast<S>(rows) : S(0);
    Kokkos::parallel_for(
        QSGD_MODELS_LABEL("softmax_xent_backward"),
        Kokkos::RangePolicy<ExecSpace>(0, rows * static_cast<std::size_t>(classes)),
        KOKKOS_LAMBDA(std::size_t idx) {
          const std::size_t i = idx / static_cast<std::size_t>(classes);
          const int j = static_cast<int>(idx - i * static_cast<std::size_t>(classes));
          dz(i, j) = (p(i, j) - (j == labels(i) ? S(1) : S(0))) * f;
        });
    return dz;
  }

  Mat<const S> probabilities() const { return p_m_; }

 private:
  detail::Workspace<S> p_, dz_;
  detail::Workspace<double> row_loss_;
  detail::Workspace<int> row_hit_;
  Mat<S> p_m_;
  Vec<const int> labels_;
};

}  // namespace qsgd::models
