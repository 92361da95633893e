#pragma once
// One LSTM layer over a whole sequence, with full backpropagation through
// time (BPTT) over that sequence.
//
// Layout: time-major rows. The input is (T*N x I) with row t*N + n holding
// sample n at step t; the output is (T*N x H), the hidden states h_1..h_T in
// the same order. Every sequence starts from h_0 = c_0 = 0 (no state carried
// between batches). Gate order i, f, g, o as in PyTorch:
//   a = x_t W_ih^T + h_{t-1} W_hh^T + b          W_ih (4H x I), W_hh (4H x H), b (4H)
//   i = sig(a_i), f = sig(a_f), g = tanh(a_g), o = sig(a_o)
//   c_t = f c_{t-1} + i g,   h_t = o tanh(c_t)
// (one bias vector: PyTorch's b_ih + b_hh is the same function with a
// redundant parameter).
//
// forward   A = X W_ih^T for all steps (one GEMM), then per step
//           A_t += h_{t-1} W_hh^T (GEMM) and the pointwise cell kernel.
// backward  per step, last to first: the pointwise kernel forms dA_t from
//           dh_t = dY_t + dA_{t+1} W_hh and the carried dc; then
//           dW_ih += dA^T X, dW_hh += dA^T [h_0..h_{T-1}], db += colsum(dA),
//           dX = dA W_ih, each one GEMM over all steps.
// Cost: forward 2*T*N*4H*(I+H) flops; backward twice that.
// Memory kept for backward: gates (T*N x 4H), h and c ((T+1)*N x H each).
// Initial values ~ U(-1/sqrt(H), 1/sqrt(H)) (PyTorch's default).

#include <cmath>
#include <string>

#include "qsgd/models/detail/gemm.hpp"
#include "qsgd/models/detail/row_ops.hpp"
#include "qsgd/models/detail/workspace.hpp"
#include "qsgd/models/layers/layer.hpp"
#include "qsgd/models/param_store.hpp"

namespace qsgd::models {

namespace detail {

template <class S>
KOKKOS_INLINE_FUNCTION S sigmoid(S x) {
  return S(1) / (S(1) + Kokkos::Experimental::exp(-x));
}

// Purpose: one LSTM cell step, elementwise over (N x H): turns the gate
//   pre-activations a_t (in place) into activations and writes c_t, h_t.
// Algorithm: one thread per (n, j).
// Cost: reads 4 gates + c_{t-1} + 4 biases, writes 4 gates + c_t + h_t.
template <class S>
void lstm_cell_forward(const Mat<S>& gates, const Vec<const S>& b, const Mat<const S>& c_prev, const Mat<S>& c,
                       const Mat<S>& h) {
  const std::size_t H = h.extent(1);
  Kokkos::parallel_for(
      QSGD_MODELS_LABEL("lstm_cell_forward"), Kokkos::RangePolicy<ExecSpace>(0, h.size()),
      KOKKOS_LAMBDA(std::size_t idx) {
        const std::size_t n = idx / H, j = idx - n * H;
        const S i = sigmoid(gates(n, j) + b(j));
        const S f = sigmoid(gates(n, H + j) + b(H + j));
        const S g = Kokkos::Experimental::tanh(gates(n, 2 * H + j) + b(2 * H + j));
        const S o = sigmoid(gates(n, 3 * H + j) + b(3 * H + j));
        gates(n, j) = i;
        gates(n, H + j) = f;
        gates(n, 2 * H + j) = g;
        gates(n, 3 * H + j) = o;
        const S cn = f * c_prev(n, j) + i * g;
        c(n, j) = cn;
        h(n, j) = o * Kokkos::Experimental::tanh(cn);
      });
}

// Purpose: one LSTM cell step backward, elementwise over (N x H).
//   dh = dy_t + dh_rec; dc = dc_carry + dh o (1 - tanh^2 c_t);
//   da_i = dc g i(1-i), da_f = dc c_{t-1} f(1-f), da_g = dc i (1-g^2),
//   da_o = dh tanh(c_t) o(1-o); dc_carry <- dc f (in place).
// Algorithm: one thread per (n, j).
// Cost: reads 4 gates, c_t, c_{t-1}, dy, dh_rec, dc; writes 4 gate grads, dc.
template <class S>
void lstm_cell_backward(const Mat<const S>& gates, const Mat<const S>& c, const Mat<const S>& c_prev,
                        const Mat<const S>& dy, const Mat<const S>& dh_rec, bool has_rec, const Mat<S>& dc_carry,
                        const Mat<S>& da) {
  const std::size_t H = c.extent(1);
  Kokkos::parallel_for(
      QSGD_MODELS_LABEL("lstm_cell_backward"), Kokkos::RangePolicy<ExecSpace>(0, c.size()),
      KOKKOS_LAMBDA(std::size_t idx) {
        const std::size_t n = idx / H, j = idx - n * H;
        const S i = gates(n, j), f = gates(n, H + j), g = gates(n, 2 * H + j), o = gates(n, 3 * H + j);
        const S tc = Kokkos::Experimental::tanh(c(n, j));
        const S dh = dy(n, j) + (has_rec ? dh_rec(n, j) : S(0));
        const S dc = dc_carry(n, j) + dh * o * (S(1) - tc * tc);
        da(n, j) = dc * g * i * (S(1) - i);
        da(n, H + j) = dc * c_prev(n, j) * f * (S(1) - f);
        da(n, 2 * H + j) = dc * i * (S(1) - g * g);
        da(n, 3 * H + j) = dh * tc * o * (S(1) - o);
        dc_carry(n, j) = dc * f;
      });
}

}  // namespace detail

template <class S>
class Lstm final : public Layer<S> {
 public:
  Lstm(BasicParamStore<S>& store, const std::string& name, std::size_t input, std::size_t hidden,
       std::size_t seq_len)
      : store_(store), in_(input), hid_(hidden), t_(seq_len), gates_(name + ".gates"), h_(name + ".h"),
        c_(name + ".c"), da_(name + ".da"), dh_(name + ".dh"), dc_(name + ".dc"), dx_(name + ".dx") {
    if (input == 0 || hidden == 0 || seq_len == 0) throw std::invalid_argument("Lstm " + name + ": zero size");
    const double bound = 1.0 / std::sqrt(static_cast<double>(hidden));
    hwih_ = store.declare(name + ".w_ih", {4 * hidden, input}, bound);
    hwhh_ = store.declare(name + ".w_hh", {4 * hidden, hidden}, bound);
    hb_ = store.declare(name + ".bias", {4 * hidden}, bound);
  }

  const char* kind() const override { return "lstm"; }
  std::size_t in_features() const override { return in_; }
  std::size_t out_features() const override { return hid_; }
  std::size_t seq_len() const { return t_; }

  void bind() override {
    wih_ = store_.param_mat(hwih_, 4 * hid_, in_);
    whh_ = store_.param_mat(hwhh_, 4 * hid_, hid_);
    b_ = store_.param_vec(hb_);
    dwih_ = store_.grad_mat(hwih_, 4 * hid_, in_);
    dwhh_ = store_.grad_mat(hwhh_, 4 * hid_, hid_);
    db_ = store_.grad_vec(hb_);
  }

  Mat<const S> forward(const Mat<const S>& x) override {
    if (x.extent(1) != in_ || x.extent(0) % t_ != 0) {
      throw std::invalid_argument("Lstm: input must be (seq_len*N x input)");
    }
    const std::size_t n = x.extent(0) / t_, H = hid_;
    x_ = x;
    g_m_ = gates_.mat(t_ * n, 4 * H);
    h_m_ = h_.mat((t_ + 1) * n, H);
    c_m_ = c_.mat((t_ + 1) * n, H);
    detail::fill(rows(h_m_, 0, n), S(0));  // h_0 = c_0 = 0
    detail::fill(rows(c_m_, 0, n), S(0));
    detail::gemm('N', 'T', S(1), x, Mat<const S>(wih_), S(0), g_m_);
    for (std::size_t t = 0; t < t_; ++t) {
      auto a = rows(g_m_, t * n, n);
      if (t > 0) {
        detail::gemm('N', 'T', S(1), Mat<const S>(rows(h_m_, t * n, n)), Mat<const S>(whh_), S(1), a);
      }
      detail::lstm_cell_forward<S>(a, b_, rows(c_m_, t * n, n), rows(c_m_, (t + 1) * n, n),
                                   rows(h_m_, (t + 1) * n, n));
    }
    return rows(h_m_, n, t_ * n);
  }

  Mat<const S> backward(const Mat<const S>& dy) override {
    const std::size_t n = g_m_.extent(0) / t_, H = hid_;
    if (dy.extent(0) != t_ * n || dy.extent(1) != H) {
      throw std::invalid_argument("Lstm: gradient shape does not match the last forward");
    }
    auto da = da_.mat(t_ * n, 4 * H);
    auto dh = dh_.mat(n, H);
    auto dc = dc_.mat(n, H);
    detail::fill(dc, S(0));
    for (std::size_t s = t_; s-- > 0;) {
      auto da_t = rows(da, s * n, n);
      detail::lstm_cell_backward<S>(rows(g_m_, s * n, n), rows(c_m_, (s + 1) * n, n), rows(c_m_, s * n, n),
                                    rows(dy, s * n, n), dh, s + 1 < t_, dc, da_t);
      if (s > 0) detail::gemm('N', 'N', S(1), Mat<const S>(da_t), Mat<const S>(whh_), S(0), dh);
    }
    const Mat<const S> dac = da;
    detail::gemm('T', 'N', S(1), dac, x_, S(1), dwih_);
    detail::gemm('T', 'N', S(1), dac, Mat<const S>(rows(h_m_, 0, t_ * n)), S(1), dwhh_);
    detail::add_column_sums<S>(db_, dac);
    store_.grads_ready({hwih_, hwhh_, hb_});
    if (!this->input_grad_) return {};
    auto dx = dx_.mat(t_ * n, in_);
    detail::gemm('N', 'N', S(1), dac, Mat<const S>(wih_), S(0), dx);
    return dx;
  }

 private:
  BasicParamStore<S>& store_;
  std::size_t in_, hid_, t_;
  typename BasicParamStore<S>::Handle hwih_ = 0, hwhh_ = 0, hb_ = 0;
  Mat<S> wih_, whh_, dwih_, dwhh_;
  Vec<S> b_, db_;
  Mat<const S> x_;
  Mat<S> g_m_, h_m_, c_m_;
  detail::Workspace<S> gates_, h_, c_, da_, dh_, dc_, dx_;
};

}  // namespace qsgd::models
