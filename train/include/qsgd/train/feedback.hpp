#pragma once
// Error feedback in the trainer (spec section 4; the forms, shared with
// qsgd::algorithms' one-vector version, in qsgd/kernels/feedback.hpp): state kept per tensor, in one flat View laid out like the model's
// gradients (TensorInfo::offset), so bucket plans and --fusion-mb do not
// touch it. Only tensors of compressed buckets carry state; the dense ones go
// through the exact fp32 allreduce and have nothing to feed back.
//
// With C(v) = Q(v) / B (ef, ef21; B = second_moment_bound of the codec, 1 for
// the float codecs) or C(v) = Q(v) (ef-unscaled), where Q(v) is what the
// exchange's first stage coded (Exchange::start's `sent`):
//   ef:   p = g + e; exchange p; g <- avg C(p_i) = out / B; e <- p - C(p)
//   ef21: exchange g - h; h <- h + C(g - h); m <- m + out / B; g <- m
// (e, h, m zero at the start; m, the mean of the ranks' h, is the same on
// every rank). Each rank's e or h differs: checkpoints keep every rank's.

#include <Kokkos_Core.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "qsgd/kernels/feedback.hpp"

namespace qsgd::train {

using qsgd::Feedback;  // its forms, names and scale: qsgd/kernels/feedback.hpp

class FeedbackState {
 public:
  using View = Kokkos::View<float*>;

  // n: parameters; scale: 1/B (ef, ef21) or 1 (ef-unscaled); `compressed`
  // flags the tensors whose buckets are compressed; offsets and sizes as the
  // model's tensors().
  FeedbackState(Feedback kind, std::size_t n, double scale, std::vector<char> compressed,
                std::vector<std::size_t> offsets, std::vector<std::size_t> sizes);

  Feedback kind() const { return kind_; }
  bool active(std::size_t t) const { return kind_ != Feedback::none && compressed_.at(t) != 0; }
  float scale() const { return scale_; }

  // Before the exchange of tensor t (active): returns the vector to exchange.
  // ef: e += g, returns e (exchange a copy: it must survive until after());
  // ef21: g -= h, returns g.
  View before(std::size_t t, const View& grad);
  // After it: out is the exchange's average (in the gradient), sent this
  // rank's decoded contribution; leaves the gradient the step uses in `grad`.
  void after(std::size_t t, const View& grad, const View& sent);

  // Checkpoints: this rank's state (e or h), and the ranks' shared mean m
  // (ef21; empty otherwise).
  const View& state() const { return state_; }
  const View& mean() const { return mean_; }
  bool has_mean() const { return kind_ == Feedback::ef21; }

 private:
  View slice(const View& v, std::size_t t) const;

  Feedback kind_;
  float scale_;
  std::vector<char> compressed_;
  std::vector<std::size_t> offsets_, sizes_;
  View state_, mean_;
};

}  // namespace qsgd::train
