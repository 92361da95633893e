#pragma once
// Max pooling over non-overlapping k x k windows (stride = k), per channel.
//
// Shapes: input row = C x H x W, output row = C x (H/k) x (W/k) (floor, as
// PyTorch; the last H mod k rows and W mod k columns are dropped and get a
// zero gradient).
//
// Purpose: forward y = window max, remembering which tap won (the first one
//   on ties); backward routes dy to that tap and zero elsewhere.
// Algorithm: one thread per output row (sample, channel, output row);
//   forward scans each window of the row; backward writes every input
//   element of the row's k input rows (winner gets dy, the rest 0), so
//   threads write disjoint elements; the thread of the last output row also
//   zeroes the H mod k uncovered input rows.
// Cost: forward reads n values, writes n/k^2 values and n/k^2 ints;
//   backward reads n/k^2 values and ints, writes n.
// Requirements: k >= 1, k <= H, k <= W.

#include <cstdint>
#include <string>

#include "qsgd/models/detail/workspace.hpp"
#include "qsgd/models/layers/layer.hpp"

namespace qsgd::models {

template <class S>
class MaxPool2d final : public Layer<S> {
 public:
  MaxPool2d(const std::string& name, std::size_t channels, std::size_t height, std::size_t width, std::size_t k)
      : c_(channels), h_(height), w_(width), k_(k), y_(name + ".y"), arg_(name + ".argmax"), dx_(name + ".dx") {
    if (k == 0 || k > height || k > width || channels == 0) {
      throw std::invalid_argument("MaxPool2d " + name + ": invalid shape");
    }
  }

  const char* kind() const override { return "maxpool2d"; }
  std::size_t in_features() const override { return c_ * h_ * w_; }
  std::size_t out_features() const override { return c_ * (h_ / k_) * (w_ / k_); }
  std::size_t out_height() const { return h_ / k_; }
  std::size_t out_width() const { return w_ / k_; }

  Mat<const S> forward(const Mat<const S>& x) override {
    if (x.extent(1) != in_features()) throw std::invalid_argument("MaxPool2d: input width mismatch");
    const std::size_t n = x.extent(0);
    auto y = y_.mat(n, out_features());
    arg_m_ = arg_.mat(n, out_features());
    const auto arg = arg_m_;
    const std::int64_t H = h_, W = w_, K = k_, Ho = h_ / k_, Wo = w_ / k_, C = c_;
    Kokkos::parallel_for(
        QSGD_MODELS_LABEL("maxpool_forward"), Kokkos::RangePolicy<ExecSpace>(0, static_cast<std::int64_t>(n) * C * Ho),
        KOKKOS_LAMBDA(std::int64_t idx) {
          const std::int64_t i = idx / (C * Ho), rem = idx - i * C * Ho, c = rem / Ho, oh = rem - c * Ho;
          for (std::int64_t ow = 0; ow < Wo; ++ow) {
            const std::int64_t base = (c * H + oh * K) * W + ow * K;
            S best = x(i, base);
            int best_tap = 0;
            for (std::int64_t a = 0; a < K; ++a) {
              for (std::int64_t b = 0; b < K; ++b) {
                const S v = x(i, base + a * W + b);
                if (v > best) {
                  best = v;
                  best_tap = static_cast<int>(a * K + b);
                }
              }
            }
            y(i, (c * Ho + oh) * Wo + ow) = best;
            arg(i, (c * Ho + oh) * Wo + ow) = best_tap;
          }
        });
    return y;
  }

  Mat<const S> backward(const Mat<const S>& dy) override {
    if (dy.extent(1) != out_features() || dy.extent(0) != arg_m_.extent(0)) {
      throw std::invalid_argument("MaxPool2d: gradient shape does not match the last forward");
    }
    if (!this->input_grad_) return {};
    auto dx = dx_.mat(dy.extent(0), in_features());
    const Mat<const int> arg = arg_m_;
    const std::int64_t H = h_, W = w_, K = k_, Ho = h_ / k_, Wo = w_ / k_, C = c_;
    Kokkos::parallel_for(
        QSGD_MODELS_LABEL("maxpool_backward"),
        Kokkos::RangePolicy<ExecSpace>(0, static_cast<std::int64_t>(dy.extent(0)) * C * Ho),
        KOKKOS_LAMBDA(std::int64_t idx) {
          const std::int64_t i = idx / (C * Ho), rem = idx - i * C * Ho, c = rem / Ho, oh = rem - c * Ho;
          for (std::int64_t a = 0; a < K; ++a) {
            const std::int64_t row = (c * H + oh * K + a) * W;
            for (std::int64_t ow = 0; ow < Wo; ++ow) {
              const std::int64_t o = (c * Ho + oh) * Wo + ow;
              const int tap0 = static_cast<int>(a * K);
              for (std::int64_t b = 0; b < K; ++b) {
                dx(i, row + ow * K + b) = arg(i, o) == tap0 + static_cast<int>(b) ? dy(i, o) : S(0);
              }
            }
            for (std::int64_t w = Wo * K; w < W; ++w) dx(i, row + w) = S(0);
          }
          if (oh == Ho - 1) {
            for (std::int64_t h = Ho * K; h < H; ++h)
              for (std::int64_t w = 0; w < W; ++w) dx(i, (c * H + h) * W + w) = S(0);
          }
        });
    return dx;
  }

 private:
  std::size_t c_, h_, w_, k_;
  Mat<int> arg_m_;
  detail::Workspace<S> y_;
  detail::Workspace<int> arg_;
  detail::Workspace<S> dx_;
};

}  // namespace qsgd::models
