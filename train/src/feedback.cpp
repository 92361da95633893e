#include "qsgd/train/feedback.hpp"

#include "qsgd/kernels/detail/arith.hpp"

#include <stdexcept>
#include <utility>

namespace qsgd::train {

FeedbackState::FeedbackState(Feedback kind, std::size_t n, double scale, std::vector<char> compressed,
                             std::vector<std::size_t> offsets, std::vector<std::size_t> sizes)
    : kind_(kind),
      scale_(static_cast<float>(scale)),
      compressed_(std::move(compressed)),
      offsets_(std::move(offsets)),
      sizes_(std::move(sizes)) {
  if (compressed_.size() != offsets_.size() || offsets_.size() != sizes_.size())
    throw std::logic_error("FeedbackState: tensor lists differ in length");
  if (kind_ == Feedback::none) return;
  state_ = View("qsgd::train::feedback_state", n);  // zero: no residual, no estimate yet
  if (kind_ == Feedback::ef21) mean_ = View("qsgd::train::feedback_mean", n);
}

FeedbackState::View FeedbackState::slice(const View& v, std::size_t t) const {
  return Kokkos::subview(v, Kokkos::make_pair(offsets_[t], offsets_[t] + sizes_[t]));
}

FeedbackState::View FeedbackState::before(std::size_t t, const View& grad) {
  const View s = slice(state_, t);
  const std::size_t n = sizes_[t];
  if (kind_ == Feedback::ef21) {
    Kokkos::parallel_for(
        "qsgd::train::ef21_diff", n, KOKKOS_LAMBDA(std::size_t i) { grad(i) -= s(i); });
    return grad;
  }
  Kokkos::parallel_for(
      "qsgd::train::ef_add", n, KOKKOS_LAMBDA(std::size_t i) { s(i) += grad(i); });
  return s;
}

void FeedbackState::after(std::size_t t, const View& grad, const View& sent) {
  const View s = slice(state_, t);
  const std::size_t n = sizes_[t];
  const float c = scale_;
  if (kind_ == Feedback::ef21) {
    const View m = slice(mean_, t);
    Kokkos::parallel_for(
        "qsgd::train::ef21_update", n, KOKKOS_LAMBDA(std::size_t i) {
          // Rounded as written on every backend (no FMA): the next message's bytes depend on it.
          s(i) = qsgd::detail::add_rn(s(i), qsgd::detail::mul_rn(c, sent(i)));
          m(i) = qsgd::detail::add_rn(m(i), qsgd::detail::mul_rn(c, grad(i)));
          grad(i) = m(i);
        });
  } else {
    Kokkos::parallel_for(
        "qsgd::train::ef_update", n, KOKKOS_LAMBDA(std::size_t i) {
          s(i) = qsgd::detail::add_rn(s(i), -qsgd::detail::mul_rn(c, sent(i)));
          grad(i) = qsgd::detail::mul_rn(grad(i), c);
        });
  }
  Kokkos::fence();
}

}  // namespace qsgd::train
