#pragma once
// 2-D convolution (cross-correlation, as in PyTorch) by im2col + GEMM.
//
// Shapes: input row = Cin x H x W, output row = Cout x Ho x Wo with
// Ho = (H + 2 pad - K) / stride + 1 (likewise Wo); W (Cout x Cin*K*K),
// b (Cout). Zero padding.
//
// forward   col (rows*Ho*Wo x Cin*K*K) = im2col(x)       kept for backward
//           Yt  (rows*Ho*Wo x Cout)     = col W^T + b     one GEMM for the batch
//           y   = Yt transposed back to Cout x Ho x Wo per row
// backward  dYt = dy transposed to (rows*Ho*Wo x Cout)
//           dW += dYt^T col, db += column sums of dYt
//           dcol = dYt W, dx = col2im(dcol)   (skipped without input grads)
// Cost: 2 rows Ho Wo Cout Cin K^2 flops per GEMM (one forward, two backward);
//   the col matrix is K^2/stride^2 times the input.
// Initial values ~ U(-1/sqrt(Cin K^2), +) (PyTorch's default).

#include <cmath>
#include <cstdint>
#include <string>

#include "qsgd/models/detail/gemm.hpp"
#include "qsgd/models/detail/row_ops.hpp"
#include "qsgd/models/detail/workspace.hpp"
#include "qsgd/models/layers/layer.hpp"
#include "qsgd/models/param_store.hpp"

namespace qsgd::models {

struct Conv2dShape {
  std::size_t in_channels = 1, height = 28, width = 28;
  std::size_t out_channels = 1, kernel = 3, stride = 1, pad = 0;
  std::size_t out_height() const { return (height + 2 * pad - kernel) / stride + 1; }
  std::size_t out_width() const { return (width + 2 * pad - kernel) / stride + 1; }
};

namespace detail {

// Purpose: im2col: col(r, q) = x(n, c, h, w) for output pixel r = (n, oh, ow)
//   and filter tap q = (c, kh, kw), with h = oh*stride - pad + kh (same for
//   w); zero outside the image.
// Algorithm: one thread per (output pixel, input channel), writing that
//   channel's K*K taps: contiguous writes, and the index arithmetic (the
//   divisions) is paid once per K*K elements, not per element.
// Cost: writes rows*Ho*Wo*Cin*K^2 values, reads as many (cached) inputs.
template <class S>
void im2col(const Conv2dShape& s, const Mat<const S>& x, const Mat<S>& col) {
  const std::int64_t C = s.in_channels, H = s.height, W = s.width, K = s.kernel, st = s.stride, pad = s.pad;
  const std::int64_t Ho = s.out_height(), Wo = s.out_width();
  const std::int64_t pairs = static_cast<std::int64_t>(col.extent(0)) * C;
  Kokkos::parallel_for(
      QSGD_MODELS_LABEL("im2col"), Kokkos::RangePolicy<ExecSpace>(0, pairs), KOKKOS_LAMBDA(std::int64_t idx) {
        const std::int64_t r = idx / C, c = idx - r * C;
        const std::int64_t n = r / (Ho * Wo), p = r - n * Ho * Wo;
        const std::int64_t oh = p / Wo, ow = p - oh * Wo;
        const std::int64_t h0 = oh * st - pad, w0 = ow * st - pad;
        const std::int64_t xbase = c * H * W, qbase = c * K * K;
        for (std::int64_t kh = 0; kh < K; ++kh) {
          const std::int64_t h = h0 + kh;
          const bool hin = h >= 0 && h < H;
          for (std::int64_t kw = 0; kw < K; ++kw) {
            const std::int64_t w = w0 + kw;
            col(r, qbase + kh * K + kw) = (hin && w >= 0 && w < W) ? x(n, xbase + h * W + w) : S(0);
          }
        }
      });
}

// Purpose: col2im as a gather (no atomics, deterministic):
//   dx(n, c, h, w) = sum over output pixels (oh, ow) whose window covers
//   (h, w) of dcol((n, oh, ow), (c, kh, kw)) with kh = h + pad - oh*stride,
//   kw = w + pad - ow*stride.
// Algorithm: one thread per input row (n, c, h): the range of oh is fixed
//   for the row; for each w the range of ow follows from two divisions, and
//   the sum runs in a fixed order.
// Cost: writes rows*Cin*H*W values, reads at most (K/stride)^2 per value.
template <class S>
void col2im(const Conv2dShape& s, const Mat<const S>& dcol, const Mat<S>& dx) {
  const std::int64_t C = s.in_channels, H = s.height, W = s.width, K = s.kernel, st = s.stride;
  const std::int64_t pad = s.pad, Ho = s.out_height(), Wo = s.out_width();
  const std::int64_t rows_total = static_cast<std::int64_t>(dx.extent(0)) * C * H;
  Kokkos::parallel_for(
      QSGD_MODELS_LABEL("col2im"), Kokkos::RangePolicy<ExecSpace>(0, rows_total), KOKKOS_LAMBDA(std::int64_t idx) {
        const std::int64_t n = idx / (C * H), rem = idx - n * C * H, c = rem / H, h = rem - c * H;
        // Output rows oh with 0 <= h + pad - oh*st < K.
        const std::int64_t hp = h + pad;
        const std::int64_t oh_lo = hp - K + 1 <= 0 ? 0 : (hp - K + st) / st;  // ceil((hp-K+1)/st)
        const std::int64_t oh_hi = (hp / st < Ho - 1) ? hp / st : Ho - 1;
        for (std::int64_t w = 0; w < W; ++w) {
          const std::int64_t wp = w + pad;
          const std::int64_t ow_lo = wp - K + 1 <= 0 ? 0 : (wp - K + st) / st;
          const std::int64_t ow_hi = (wp / st < Wo - 1) ? wp / st : Wo - 1;
          S sum = 0;
          for (std::int64_t oh = oh_lo; oh <= oh_hi; ++oh) {
            const std::int64_t kh = hp - oh * st;
            for (std::int64_t ow = ow_lo; ow <= ow_hi; ++ow) {
              sum += dcol((n * Ho + oh) * Wo + ow, (c * K + kh) * K + (wp - ow * st));
            }
          }
          dx(n, (c * H + h) * W + w) = sum;
        }
      });
}

// Purpose: between (rows*P x C) pixel-major and (rows x C*P) channel-major:
//   to_channel_major: out(n, c*P + p) = in(n*P + p, c); otherwise the inverse.
// Algorithm: one thread per (n, c), looping over the P pixels.
// Cost: reads and writes rows*P*C values.
template <class S>
void transpose_pixels(bool to_channel_major, std::int64_t P, std::int64_t C, const Mat<const S>& in,
                      const Mat<S>& out) {
  const std::int64_t planes = static_cast<std::int64_t>(in.size()) / P;
  Kokkos::parallel_for(
      QSGD_MODELS_LABEL("transpose_pixels"), Kokkos::RangePolicy<ExecSpace>(0, planes), KOKKOS_LAMBDA(std::int64_t idx) {
        const std::int64_t n = idx / C, c = idx - n * C;
        if (to_channel_major) {
          for (std::int64_t p = 0; p < P; ++p) out(n, c * P + p) = in(n * P + p, c);
        } else {
          for (std::int64_t p = 0; p < P; ++p) out(n * P + p, c) = in(n, c * P + p);
        }
      });
}

}  // namespace detail

template <class S>
class Conv2d final : public Layer<S> {
 public:
  Conv2d(BasicParamStore<S>& store, const std::string& name, const Conv2dShape& shape)
      : store_(store), s_(shape), col_(name + ".col"), yt_(name + ".yt"), y_(name + ".y"),
        dyt_(name + ".dyt"), dcol_(name + ".dcol"), dx_(name + ".dx") {
    if (s_.kernel == 0 || s_.stride == 0 || s_.in_channels == 0 || s_.out_channels == 0 ||
        s_.height + 2 * s_.pad < s_.kernel || s_.width + 2 * s_.pad < s_.kernel) {
      throw std::invalid_argument("Conv2d " + name + ": invalid shape");
    }
    const std::size_t q = s_.in_channels * s_.kernel * s_.kernel;
    const double bound = 1.0 / std::sqrt(static_cast<double>(q));
    hw_ = store.declare(name + ".weight", {s_.out_channels, s_.in_channels, s_.kernel, s_.kernel}, bound);
    hb_ = store.declare(name + ".bias", {s_.out_channels}, bound);
  }

  const char* kind() const override { return "conv2d"; }
  const Conv2dShape& shape() const { return s_; }
  std::size_t in_features() const override { return s_.in_channels * s_.height * s_.width; }
  std::size_t out_features() const override { return s_.out_channels * pixels(); }

  void bind() override {
    w_ = store_.param_mat(hw_, s_.out_channels, taps());
    b_ = store_.param_vec(hb_);
    dw_ = store_.grad_mat(hw_, s_.out_channels, taps());
    db_ = store_.grad_vec(hb_);
  }

  Mat<const S> forward(const Mat<const S>& x) override {
    if (x.extent(1) != in_features()) throw std::invalid_argument("Conv2d: input width mismatch");
    const std::size_t n = x.extent(0);
    col_m_ = col_.mat(n * pixels(), taps());
    detail::im2col<S>(s_, x, col_m_);
    auto yt = yt_.mat(n * pixels(), s_.out_channels);
    detail::gemm('N', 'T', S(1), Mat<const S>(col_m_), Mat<const S>(w_), S(0), yt);
    detail::add_row_vector<S>(yt, b_);
    auto y = y_.mat(n, out_features());
    detail::transpose_pixels<S>(true, pixels(), s_.out_channels, yt, y);
    return y;
  }

  Mat<const S> backward(const Mat<const S>& dy) override {
    if (dy.extent(1) != out_features() || dy.extent(0) * pixels() != col_m_.extent(0)) {
      throw std::invalid_argument("Conv2d: gradient shape does not match the last forward");
    }
    const std::size_t n = dy.extent(0);
    auto dyt = dyt_.mat(n * pixels(), s_.out_channels);
    detail::transpose_pixels<S>(false, pixels(), s_.out_channels, dy, dyt);
    detail::gemm('T', 'N', S(1), Mat<const S>(dyt), Mat<const S>(col_m_), S(1), dw_);
    detail::add_column_sums<S>(db_, dyt);
    store_.grads_ready({hw_, hb_});
    if (!this->input_grad_) return {};
    auto dcol = dcol_.mat(n * pixels(), taps());
    detail::gemm('N', 'N', S(1), Mat<const S>(dyt), Mat<const S>(w_), S(0), dcol);
    auto dx = dx_.mat(n, in_features());
    detail::col2im<S>(s_, dcol, dx);
    return dx;
  }

 private:
  std::size_t pixels() const { return s_.out_height() * s_.out_width(); }
  std::size_t taps() const { return s_.in_channels * s_.kernel * s_.kernel; }

  BasicParamStore<S>& store_;
  Conv2dShape s_;
  typename BasicParamStore<S>::Handle hw_ = 0, hb_ = 0;
  Mat<S> w_, dw_;
  Vec<S> b_, db_;
  Mat<S> col_m_;
  detail::Workspace<S> col_, yt_, y_, dyt_, dcol_, dx_;
};

}  // namespace qsgd::models
