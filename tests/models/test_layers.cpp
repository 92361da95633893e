// Gradient checks of every layer against central finite differences, plus
// known-answer and robustness tests.
//
// How a layer is checked. Loss f(x, theta) = sum_ij R_ij y_ij(x, theta) for a
// fixed random R, so backward(R) must return df/dx and add df/dtheta to the
// gradient store. Each coordinate u is compared with
//   D_u = (f(u + h) - f(u - h)) / ((u + h) - (u - h))      (actual step)
// 1. In double, h = 1e-4. |D_u - g_u| <= h^2 M3 / 6 + eps_f / h, with M3 a
//    bound on the third derivative along u and eps_f the rounding error of f.
//    M3 = 0 for dense, conv, ReLU and max pooling (piecewise linear in each
//    coordinate; inputs are kept at least 1e-2 = 100 h from every kink and
//    tie, so no difference straddles one). For softmax cross-entropy and the
//    LSTM (exp, sigmoid, tanh composed over <= 3 steps with O(1) weights)
//    M3 <= 1e2, so the truncation term is <= 1e-8 * 1e2 / 6 < 2e-7. f sums
//    fewer than 1e3 products of O(1) numbers, each computed with fewer than
//    1e2 roundings of u = 1.1e-16, so eps_f < 1e3 * 1e2 * 1.1e-16 = 1.1e-11
//    and eps_f / h < 1.1e-7. Tolerance: 1e-6 * max(1, max |g|), above the
//    sum (< 3.1e-7) by a factor > 3.
// 2. The float instantiation (what the models run) must give the double
//    gradients to within 1e-4 * max(1, max |g|): float's u = 6e-8 times at
//    most ~1e2 accumulated roundings times operands up to ~10x the result
//    is 6e-5.
// 3. Each check must be able to fail: the same comparison with the analytic
//    gradient scaled by 1.01 must exceed the tolerance. The tests assert
//    max |g| >= 0.05 so that a 1% error (>= 5e-4) is far above both
//    tolerances.

#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "qsgd/models/layers/conv2d.hpp"
#include "qsgd/models/layers/dense.hpp"
#include "qsgd/models/layers/lstm.hpp"
#include "qsgd/models/layers/maxpool2d.hpp"
#include "qsgd/models/layers/relu.hpp"
#include "qsgd/models/layers/softmax_cross_entropy.hpp"
#include "test_util.hpp"

namespace qsgd::models {
namespace {

using test::max_abs;
using test::max_abs_diff;

constexpr double kStep = 1e-4;
constexpr double kTolDouble = 1e-6;
constexpr double kTolFloat = 1e-4;

struct Grads {
  std::vector<double> dx, dp;
};

// One layer instance (of scalar type S) with fixed input, parameters and R.
template <class S>
struct Harness {
  BasicParamStore<S> store;
  std::unique_ptr<Layer<S>> layer;
  View2<S> x, r;
  std::vector<double> r_host;

  template <class Make>
  Harness(Make make, std::size_t rows, const std::vector<double>& x0, const std::vector<double>& p0,
          const std::vector<double>& r0) {
    layer = make(store);
    store.finalize();
    layer->bind();
    const std::size_t in = layer->in_features(), out = layer->out_features();
    EXPECT_EQ(x0.size(), rows * in);
    EXPECT_EQ(r0.size(), rows * out);
    EXPECT_EQ(p0.size(), store.size());
    x = test::to_device<S>(x0, rows, in);
    r = test::to_device<S>(r0, rows, out);
    r_host = r0;
    auto ph = Kokkos::create_mirror_view(store.params());
    for (std::size_t k = 0; k < p0.size(); ++k) ph(k) = static_cast<S>(p0[k]);
    Kokkos::deep_copy(store.params(), ph);
  }

  double f() {
    const auto y = test::to_host(layer->forward(x));
    double s = 0;
    for (std::size_t i = 0; i < y.size(); ++i) s += r_host[i] * y[i];
    return s;
  }

  Grads analytic() {
    store.zero_grad();
    layer->forward(x);
    const auto dx = layer->backward(r);
    Grads g;
    g.dx = test::to_host(dx);
    g.dp = test::to_host(store.grads());
    return g;
  }

  // Central difference of f along element k of the flat view v.
  template <class V>
  double diff(const V& v, std::size_t k) {
    auto h = Kokkos::create_mirror_view(v);
    Kokkos::deep_copy(h, v);
    const S u = h.data()[k];
    const S up = static_cast<S>(u + kStep), um = static_cast<S>(u - kStep);
    h.data()[k] = up;
    Kokkos::deep_copy(v, h);
    const double fp = f();
    h.data()[k] = um;
    Kokkos::deep_copy(v, h);
    const double fm = f();
    h.data()[k] = u;
    Kokkos::deep_copy(v, h);
    return (fp - fm) / (static_cast<double>(up) - static_cast<double>(um));
  }

  Grads numeric() {
    Grads g;
    for (std::size_t k = 0; k < x.size(); ++k) g.dx.push_back(diff(x, k));
    for (std::size_t k = 0; k < store.size(); ++k) g.dp.push_back(diff(store.params(), k));
    return g;
  }
};

// Runs checks 1-3 of the file comment on one layer configuration.
template <class Make>
void check_layer(Make make, std::size_t rows, const std::vector<double>& x0, std::uint64_t seed) {
  // Parameter count and output width from a throw-away instance.
  BasicParamStore<double> probe;
  auto probe_layer = make(probe);
  probe.finalize();
  const std::size_t np = probe.size(), out = probe_layer->out_features();
  const auto p0 = test::uniform(np, -0.8, 0.8, seed + 1);
  const auto r0 = test::uniform(rows * out, -1.0, 1.0, seed + 2);

  Harness<double> hd(make, rows, x0, p0, r0);
  const Grads a = hd.analytic();
  const Grads n = hd.numeric();

  const double gx = max_abs(a.dx), gp = max_abs(a.dp);
  const double tol_x = kTolDouble * std::max(1.0, gx), tol_p = kTolDouble * std::max(1.0, gp);
  SCOPED_TRACE(probe_layer->kind());
  ASSERT_EQ(a.dx.size(), n.dx.size());
  ASSERT_EQ(a.dp.size(), n.dp.size());
  EXPECT_GE(gx, 0.05) << "input gradient too small for the check to mean anything";
  EXPECT_LE(max_abs_diff(a.dx, n.dx), tol_x) << "d/dx disagrees with finite differences";
  EXPECT_GT(max_abs_diff(a.dx, n.dx, 1.01), tol_x) << "a 1% wrong d/dx would pass";
  if (np > 0) {
    EXPECT_GE(gp, 0.05);
    EXPECT_LE(max_abs_diff(a.dp, n.dp), tol_p) << "d/dtheta disagrees with finite differences";
    EXPECT_GT(max_abs_diff(a.dp, n.dp, 1.01), tol_p) << "a 1% wrong d/dtheta would pass";
  }

  // Float instantiation against the double one.
  Harness<float> hf(make, rows, x0, p0, r0);
  const Grads af = hf.analytic();
  EXPECT_LE(max_abs_diff(af.dx, a.dx), kTolFloat * std::max(1.0, gx));
  EXPECT_GT(max_abs_diff(af.dx, a.dx, 1.01), kTolFloat * std::max(1.0, gx));
  if (np > 0) {
    EXPECT_LE(max_abs_diff(af.dp, a.dp), kTolFloat * std::max(1.0, gp));
    EXPECT_GT(max_abs_diff(af.dp, a.dp, 1.01), kTolFloat * std::max(1.0, gp));
  }
}

// A factory usable for both scalar types.
#define QSGD_LAYER_FACTORY(EXPR)                                      \
  [&](auto& st) {                                                     \
    using S_ = typename std::decay_t<decltype(st.params())>::value_type; \
    using LayerPtr = std::unique_ptr<Layer<S_>>;                      \
    auto& store = st;                                                 \
    (void)store;                                                      \
    return LayerPtr(EXPR);                                            \
  }

TEST(GradCheck, Dense) {
  const std::size_t rows = 4;
  check_layer(QSGD_LAYER_FACTORY((new Dense<S_>(store, "fc", 5, 3))), rows, test::uniform(rows * 5, -1, 1, 10), 10);
}

TEST(GradCheck, ReLU) {
  const std::size_t rows = 3;
  check_layer(QSGD_LAYER_FACTORY((new ReLU<S_>("relu", 7))), rows,
              test::uniform_away_from_zero(rows * 7, 1e-2, 1.0, 20), 20);
}

TEST(GradCheck, Conv2dSamePadding) {
  Conv2dShape s;
  s.in_channels = 2;
  s.height = 5;
  s.width = 4;
  s.out_channels = 3;
  s.kernel = 3;
  s.pad = 1;
  const std::size_t rows = 2;
  check_layer(QSGD_LAYER_FACTORY((new Conv2d<S_>(store, "conv", s))), rows, test::uniform(rows * 2 * 5 * 4, -1, 1, 30),
              30);
}

TEST(GradCheck, Conv2dStride2NoPadding) {
  // 6x7 input, 3x3 kernel, stride 2: outputs 2x3; the last row and column of
  // the input are never read and must get a zero gradient.
  Conv2dShape s;
  s.in_channels = 2;
  s.height = 6;
  s.width = 7;
  s.out_channels = 2;
  s.kernel = 3;
  s.stride = 2;
  const std::size_t rows = 2;
  check_layer(QSGD_LAYER_FACTORY((new Conv2d<S_>(store, "conv", s))), rows, test::uniform(rows * 2 * 6 * 7, -1, 1, 40),
              40);
}

TEST(GradCheck, MaxPool2d) {
  // 2 channels of 5x5 (the 5th row and column are dropped by floor and get a
  // zero gradient), k = 2. Inputs are a shuffled grid of distinct values
  // 2/100 = 0.02 = 200 h apart, so no window has a tie within 2h.
  const std::size_t rows = 2, n = rows * 2 * 5 * 5;
  std::vector<double> x(n);
  for (std::size_t i = 0; i < n; ++i) x[i] = -1.0 + 2.0 * static_cast<double>((i * 37) % n) / static_cast<double>(n);
  check_layer(QSGD_LAYER_FACTORY((new MaxPool2d<S_>("pool", 2, 5, 5, 2))), rows, x, 50);
}

TEST(GradCheck, Lstm) {
  // T = 3 steps, N = 2 sequences, 3 inputs, 4 hidden units.
  const std::size_t T = 3, N = 2;
  check_layer(QSGD_LAYER_FACTORY((new Lstm<S_>(store, "lstm", 3, 4, T))), T * N, test::uniform(T * N * 3, -1, 1, 60),
              60);
}

TEST(GradCheck, LstmSingleStep) {
  check_layer(QSGD_LAYER_FACTORY((new Lstm<S_>(store, "lstm", 2, 3, 1))), 3, test::uniform(3 * 2, -1, 1, 61), 61);
}

// Softmax cross-entropy takes labels, so it has its own harness: f = mean
// loss, analytic gradient = backward(1).
template <class S>
std::vector<double> xent_grad(const std::vector<double>& z0, std::size_t rows, std::size_t classes,
                              const View1<int>& labels, double* loss) {
  SoftmaxCrossEntropy<S> sx("xent");
  auto z = test::to_device<S>(z0, rows, classes);
  *loss = sx.forward(z, labels).loss;
  return test::to_host(sx.backward());
}

TEST(GradCheck, SoftmaxCrossEntropy) {
  const std::size_t rows = 5, classes = 4;
  View1<int> labels("labels", rows);
  auto lh = Kokkos::create_mirror_view(labels);
  for (std::size_t i = 0; i < rows; ++i) lh(i) = static_cast<int>((3 * i + 1) % classes);
  Kokkos::deep_copy(labels, lh);
  const auto z0 = test::uniform(rows * classes, -3, 3, 70);

  double loss = 0;
  const auto a = xent_grad<double>(z0, rows, classes, labels, &loss);
  std::vector<double> n(z0.size());
  for (std::size_t k = 0; k < z0.size(); ++k) {
    auto zp = z0, zm = z0;
    zp[k] += kStep;
    zm[k] -= kStep;
    double fp = 0, fm = 0;
    xent_grad<double>(zp, rows, classes, labels, &fp);
    xent_grad<double>(zm, rows, classes, labels, &fm);
    n[k] = (fp - fm) / (zp[k] - zm[k]);
  }
  const double g = max_abs(a);
  EXPECT_GE(g, 0.05);
  EXPECT_LE(max_abs_diff(a, n), kTolDouble * std::max(1.0, g));
  EXPECT_GT(max_abs_diff(a, n, 1.01), kTolDouble * std::max(1.0, g));

  double loss_f = 0;
  const auto af = xent_grad<float>(z0, rows, classes, labels, &loss_f);
  EXPECT_LE(max_abs_diff(af, a), kTolFloat * std::max(1.0, g));
  EXPECT_GT(max_abs_diff(af, a, 1.01), kTolFloat * std::max(1.0, g));
  EXPECT_NEAR(loss_f, loss, 1e-5 * std::max(1.0, loss));
}

TEST(SoftmaxCrossEntropy, KnownValuesAndAccuracy) {
  // Row 0: z = (0, 0): loss log 2, tie -> class 0 predicted (label 0, hit).
  // Row 1: z = (log 3, 0): p = (3/4, 1/4), label 1: loss log 4, miss.
  View2<double> z("z", 2, 2);
  View1<int> y("y", 2);
  auto zh = Kokkos::create_mirror_view(z);
  auto yh = Kokkos::create_mirror_view(y);
  zh(0, 0) = 0;
  zh(0, 1) = 0;
  zh(1, 0) = std::log(3.0);
  zh(1, 1) = 0;
  yh(0) = 0;
  yh(1) = 1;
  Kokkos::deep_copy(z, zh);
  Kokkos::deep_copy(y, yh);
  SoftmaxCrossEntropy<double> sx("xent");
  const LossStats st = sx.forward(z, y);
  EXPECT_NEAR(st.loss, 0.5 * (std::log(2.0) + std::log(4.0)), 1e-15);
  EXPECT_EQ(st.correct, 1u);
  EXPECT_EQ(st.rows, 2u);
  const auto dz = test::to_host(sx.backward());
  EXPECT_NEAR(dz[0], (0.5 - 1) / 2, 1e-15);
  EXPECT_NEAR(dz[1], 0.5 / 2, 1e-15);
  EXPECT_NEAR(dz[2], 0.75 / 2, 1e-15);
  EXPECT_NEAR(dz[3], (0.25 - 1) / 2, 1e-15);
}

TEST(SoftmaxCrossEntropy, StableForHugeLogits) {
  // exp(1e4) overflows float and double; the shifted form must not.
  View2<float> z("z", 1, 3);
  View1<int> y("y", 1);
  auto zh = Kokkos::create_mirror_view(z);
  zh(0, 0) = 1e4f;
  zh(0, 1) = -1e4f;
  zh(0, 2) = 1e4f - 2.0f;
  Kokkos::deep_copy(z, zh);
  Kokkos::deep_copy(y, 2);
  SoftmaxCrossEntropy<float> sx("xent");
  const LossStats st = sx.forward(z, y);
  // loss = log(1 + e^-2) + 2 (the third logit is 2 below the max).
  EXPECT_NEAR(st.loss, std::log1p(std::exp(-2.0)) + 2.0, 1e-5);
  const auto dz = test::to_host(sx.backward());
  for (double v : dz) EXPECT_TRUE(std::isfinite(v));
}

TEST(SoftmaxCrossEntropy, RejectsOutOfRangeLabels) {
  View2<float> z("z", 3, 4);
  View1<int> y("y", 3);
  auto yh = Kokkos::create_mirror_view(y);
  yh(0) = 0;
  yh(1) = 4;
  yh(2) = -1;
  Kokkos::deep_copy(y, yh);
  SoftmaxCrossEntropy<float> sx("xent");
  try {
    sx.forward(z, y);
    FAIL() << "no exception";
  } catch (const std::out_of_range& e) {
    EXPECT_NE(std::string(e.what()).find("2 of 3 labels"), std::string::npos) << e.what();
  }
}

TEST(Dense, KnownValues) {
  BasicParamStore<float> st;
  Dense<float> d(st, "fc", 2, 2);
  st.finalize();
  d.bind();
  // W = [[1, 2], [3, 4]], b = [10, 20]; layout: bias first (backward order).
  auto ph = Kokkos::create_mirror_view(st.params());
  const float vals[] = {10, 20, 1, 2, 3, 4};
  for (int i = 0; i < 6; ++i) ph(i) = vals[i];
  Kokkos::deep_copy(st.params(), ph);
  auto x = test::to_device<float>({1, 1, 2, -1}, 2, 2);
  const auto y = test::to_host(d.forward(x));
  EXPECT_EQ(y, (std::vector<double>{13, 27, 10, 22}));
}

TEST(MaxPool2d, FirstMaximumWinsTies) {
  MaxPool2d<float> p("pool", 1, 2, 2, 2);
  auto x = test::to_device<float>({5, 5, 5, 1}, 1, 4);
  EXPECT_EQ(test::to_host(p.forward(x)), std::vector<double>{5});
  auto dy = test::to_device<float>({1}, 1, 1);
  EXPECT_EQ(test::to_host(p.backward(dy)), (std::vector<double>{1, 0, 0, 0}));
}

TEST(Conv2d, KnownValues) {
  // One 3x3 input, one 2x2 filter of ones, no padding: window sums.
  BasicParamStore<float> st;
  Conv2dShape s;
  s.in_channels = 1;
  s.height = 3;
  s.width = 3;
  s.out_channels = 1;
  s.kernel = 2;
  Conv2d<float> c(st, "conv", s);
  st.finalize();
  c.bind();
  Kokkos::deep_copy(st.params(), 1.0f);  // bias 1 as well
  auto x = test::to_device<float>({1, 2, 3, 4, 5, 6, 7, 8, 9}, 1, 9);
  EXPECT_EQ(test::to_host(c.forward(x)), (std::vector<double>{13, 17, 25, 29}));
}

TEST(Layers, ShapeMismatchesThrow) {
  BasicParamStore<float> st;
  Dense<float> d(st, "fc", 3, 2);
  st.finalize();
  d.bind();
  auto x = test::to_device<float>(std::vector<double>(8, 0.0), 2, 4);
  EXPECT_THROW(d.forward(x), std::invalid_argument);
  EXPECT_THROW(Dense<float>(st, "late", 1, 1), std::logic_error);  // declare after finalize
}

// Bias gradients sum a column in the documented order (row_ops.hpp:
// lane l adds rows l, l + 32, ... in increasing order, then the lanes in
// lane order), in both shapes (the host's walk and the device's team per
// column, here with one thread running the lanes): bit for bit against that
// order computed here, for columns
// shorter than, equal to and far longer than the 32 lanes; and the order
// matters (a plain top-to-bottom sum of the same column differs in at
// least one of them, so the comparison can fail).
TEST(RowOps, ColumnSumsFollowTheDocumentedOrder) {
  bool order_visible = false;
  for (std::size_t rows : {1u, 5u, 32u, 33u, 1000u, 100352u}) {
    SCOPED_TRACE("rows=" + std::to_string(rows));
    const std::size_t cols = 3;
    const std::vector<double> v = test::uniform(rows * cols, -1.0, 1.0, rows);
    const auto dy = test::to_device<float>(v, rows, cols);
    View1<float> db("db", cols), db_lanes("db_lanes", cols);
    Kokkos::deep_copy(db, 0.25f);
    Kokkos::deep_copy(db_lanes, 0.25f);
    const Mat<const float> m(dy.data(), rows, cols);
    detail::add_column_sums<float>(Vec<float>(db.data(), cols), m);
    // The device shape (a team per column, a lane per partial), run here.
    detail::add_column_sums_lanes(ExecSpace(), Vec<float>(db_lanes.data(), cols), m);
    const auto got = test::to_host(db);
    const auto got_lanes = test::to_host(db_lanes);
    for (std::size_t j = 0; j < cols; ++j) {
      float part[detail::column_lanes] = {};
      float plain = 0;
      for (std::size_t i = 0; i < rows; ++i) {
        part[i % detail::column_lanes] += static_cast<float>(v[i * cols + j]);
        plain += static_cast<float>(v[i * cols + j]);
      }
      float want = 0;
      for (float p : part) want += p;
      EXPECT_EQ(static_cast<float>(got[j]), 0.25f + want) << "column " << j;
      EXPECT_EQ(static_cast<float>(got_lanes[j]), 0.25f + want) << "column " << j << ", device shape";
      order_visible = order_visible || want != plain;
    }
  }
  EXPECT_TRUE(order_visible) << "no shape tells the documented order from a plain sum";
}

// A bias added to every row: both shapes (the host's thread per row, the
// device's thread per element, here run on the host) give y(i, j) + b(j) for
// every element, for rows shorter than, equal to and longer than a team and
// one or many columns; a skipped element or a wrong column of b fails.
TEST(RowOps, RowVectorShapesAddTheBiasToEveryElement) {
  for (std::size_t rows : {1u, 3u, 32u, 1000u}) {
    for (std::size_t cols : {1u, 16u, 33u}) {
      SCOPED_TRACE("rows=" + std::to_string(rows) + " cols=" + std::to_string(cols));
      const std::vector<double> v = test::uniform(rows * cols, -1.0, 1.0, rows + cols);
      const std::vector<double> bias = test::uniform(cols, -1.0, 1.0, 7 * cols);
      const auto b = test::to_device<float>(bias, cols, 1);
      const Vec<const float> bv(b.data(), cols);
      auto y_rows = test::to_device<float>(v, rows, cols);
      auto y_elems = test::to_device<float>(v, rows, cols);
      detail::add_row_vector_rows(ExecSpace(), Mat<float>(y_rows.data(), rows, cols), bv);
      detail::add_row_vector_elements(ExecSpace(), Mat<float>(y_elems.data(), rows, cols), bv);
      const auto got_rows = test::to_host(y_rows);
      const auto got_elems = test::to_host(y_elems);
      for (std::size_t i = 0; i < rows; ++i)
        for (std::size_t j = 0; j < cols; ++j) {
          const float want = static_cast<float>(v[i * cols + j]) + static_cast<float>(bias[j]);
          ASSERT_EQ(static_cast<float>(got_rows[i * cols + j]), want) << "host shape, " << i << "," << j;
          ASSERT_EQ(static_cast<float>(got_elems[i * cols + j]), want) << "device shape, " << i << "," << j;
        }
    }
  }
}

}  // namespace
}  // namespace qsgd::models
