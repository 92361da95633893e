// Statistical properties of the stochastic quantizer and of the code lengths
// (spec sections 1 and 2). Label: stats.
//
// How every test here states its confidence:
// - the input and the random keys are fixed (std::mt19937_64 seeds, RngKey
//   {seed, step = draw index, rank, tensor = configuration id}), so a run is
//   deterministic and a failure reproduces;
// - the sample size K is a named constant;
// - the acceptance bound is computed from K and from the exact distribution of
//   Q_s(v), never tuned. For a coordinate with position x = |v| s / scale,
//   l = floor(x), p = x - l, the quantizer outputs sign * unit * (l + B) with
//   B ~ Bernoulli(p), unit = scale / s, so every mean and variance below is
//   known in closed form. Where the statistic is a sum of independent bounded
//   terms the bound is Bernstein's inequality (test_util.hpp: bernstein), which
//   holds for any K, not only asymptotically; elsewhere it is a number of
//   standard errors estimated from the sample, stated at the test;
// - a union bound spreads a family-wise false-alarm probability over every
//   check of a grid: kFamilyAlpha = 1e-6 per grid;
// - a deterministic allowance covers float rounding in the library (the
//   library computes the level position in float and draws u on a 2^-24 grid,
//   see prob_slack), derived at each use;
// - the power of the checks is demonstrated: QuantizerPower runs the very same
//   check on deliberately biased quantizers (computed inline from the same
//   random draws) and requires it to fail.

#include <iomanip>
#include <iostream>
#include <sstream>

#include "test_util.hpp"

namespace {

using namespace qsgd_test;
using qsgd::CodecKind;
using qsgd::Norm;

constexpr double kFamilyAlpha = 1e-6;
constexpr std::uint64_t kSeed = 0x5eed5eedull;

// ---- sampling ----------------------------------------------------------------

// K draws of Q_s(v) through qsgd::quantize then qsgd::dequantize, keys
// {kSeed, step = k, rank 0, tensor}. f(k, levels, values) sees each draw on the host.
template <class F>
void sample_draws(const qsgd::CodecConfig& cfg, const Values& v, std::uint64_t n, int K, std::uint32_t tensor,
                  Quant& q, F&& f) {
  Values out("test::draw", n);
  for (int k = 0; k < K; ++k) {
    qsgd::quantize(Exec(), cfg, v, n, qsgd::RngKey{kSeed, static_cast<std::uint64_t>(k), 0, tensor}, q);
    qsgd::dequantize(Exec(), q, out);
    auto hl = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), q.levels);
    auto hv = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), out);
    f(k, hl, hv);
  }
}

std::string pname(Input in, Norm norm, std::uint32_t d, std::uint32_t s) {
  std::ostringstream os;
  os << input_name(in) << "_" << qsgd::to_string(norm) << "_d" << (d == 0 ? std::string("all") : std::to_string(d))
     << "_s" << s;
  return os.str();
}

// ---- unbiasedness check --------------------------------------------------------

struct UnbiasedVerdict {
  double worst_ratio = 0;  // max over coordinates of |mean - v| / bound (pass: <= 1)
  std::uint64_t worst_index = 0;
  double worst_dev = 0, worst_bound = 0;
  double agg_ratio = 0;  // |sum_i sign_i (mean_i - v_i)| / bound (pass: <= 1)
  double agg_dev = 0, agg_bound = 0;
  bool pass() const { return worst_ratio <= 1.0 && agg_ratio <= 1.0; }
};

// E[Q(v_i)] = v_i. Per coordinate, the mean of K draws deviates from its
// expectation by more than
//   t_i = bernstein(V = sigma_i^2 / K, M = unit_i / K, delta_coord)
// with probability <= delta_coord, where sigma_i^2 = unit^2 (p(1-p) + slack)
// bounds the variance of the two-valued draw and unit bounds its range. The
// expectation itself sits within a_i = 2^-21 (|v_i| + unit_i) of v_i: the
// expected level is off by at most unit * (2^-23 x + 2^-24) (prob_slack), the
// value unit * level is rounded once (2^-24 relative) from a unit rounded once
// (2^-24 relative), in all <= 2^-22 (|v| + unit); we allow twice that.
// The aggregate statistic sum_i sign(v_i) (mean_i - v_i) is the sum of all nK
// terms; its bound is Bernstein with the summed variance. It detects a small
// bias shared by many coordinates (for example always rounding toward zero)
// that no single coordinate shows at this K.
UnbiasedVerdict check_unbiased(const std::vector<float>& v, const std::vector<Coord>& m,
                               const std::vector<double>& sum, int K, double delta_coord, double delta_agg) {
  UnbiasedVerdict r;
  double V = 0, M = 0, allow = 0, agg = 0;
  for (std::size_t i = 0; i < m.size(); ++i) {
    const Coord& c = m[i];
    const double mean = sum[i] / K;
    const double dev = mean - static_cast<double>(v[i]);
    const double var = c.unit * c.unit * (c.p * (1 - c.p) + prob_slack(c));
    const double a = std::ldexp(std::fabs(static_cast<double>(v[i])) + c.unit, -21);
    const double t = bernstein(var / K, c.unit / K, delta_coord) + a;
    const double ratio = t > 0 ? std::fabs(dev) / t : (dev == 0 ? 0.0 : INFINITY);
    if (ratio > r.worst_ratio) {
      r.worst_ratio = ratio;
      r.worst_index = i;
      r.worst_dev = dev;
      r.worst_bound = t;
    }
    V += var / K;
    M = std::max(M, c.unit / K);
    allow += a;
    agg += (v[i] < 0 ? -dev : dev);
  }
  r.agg_dev = agg;
  r.agg_bound = bernstein(V, M, delta_agg) + allow;
  r.agg_ratio = r.agg_bound > 0 ? std::fabs(agg) / r.agg_bound : (agg == 0 ? 0.0 : INFINITY);
  return r;
}

std::string describe(const UnbiasedVerdict& r, const std::vector<float>& v, const std::vector<Coord>& m) {
  std::ostringstream os;
  os << std::setprecision(6) << "worst coordinate " << r.worst_index << " (v = " << v[r.worst_index]
     << ", x = " << m[r.worst_index].x << "): |mean - v| = " << std::fabs(r.worst_dev) << " vs bound "
     << r.worst_bound << " (ratio " << r.worst_ratio << "); aggregate " << r.agg_dev << " vs bound " << r.agg_bound
     << " (ratio " << r.agg_ratio << ")";
  return os.str();
}

// ---- 1. unbiasedness over the grid -----------------------------------------------

struct QParam {
  Input in;
  Norm norm;
  std::uint32_t d;
  std::uint32_t s;
};

// n = 1000: d = 64 and d = 512 leave a short last bucket (40 and 488), and
// s = 32 is sqrt(n) rounded to an integer.
constexpr std::uint64_t kN = 1000;
constexpr std::uint32_t kSqrtN = 32;
// K = 500 draws: at s = 16 (max norm, Gaussian) the per-coordinate bound is
// about 0.2 unit and the aggregate bound about 0.03 unit per coordinate, so a
// bias of a few percent of unit per coordinate is caught (QuantizerPower).
constexpr int kUnbiasedK = 500;

std::vector<QParam> unbiased_grid() {
  std::vector<QParam> g;
  for (Input in : {Input::gaussian, Input::heavy, Input::sparse, Input::constant, Input::zero, Input::huge})
    for (Norm norm : {Norm::l2, Norm::max})
      for (std::uint32_t d : {64u, 512u, 0u})
        for (std::uint32_t s : {1u, 2u, 4u, 16u, 256u, kSqrtN}) g.push_back({in, norm, d, s});
  return g;
}

class Unbiased : public ::testing::TestWithParam<QParam> {};

TEST_P(Unbiased, MeanOfDrawsMatchesInput) {
  const QParam P = GetParam();
  const auto grid = unbiased_grid();
  // Union bound: every coordinate check of the whole grid shares kFamilyAlpha/2,
  // the aggregate checks the other half.
  const double delta_coord = kFamilyAlpha / 2 / (static_cast<double>(grid.size()) * kN);
  const double delta_agg = kFamilyAlpha / 2 / static_cast<double>(grid.size());
  const std::uint32_t tensor = static_cast<std::uint32_t>(
      std::find_if(grid.begin(), grid.end(), [&](const QParam& g) {
        return g.in == P.in && g.norm == P.norm && g.d == P.d && g.s == P.s;
      }) - grid.begin());

  const auto v = make_input(P.in, kN, 1000 + static_cast<std::uint64_t>(P.in));
  const Values dv = to_device(v);
  const auto cfg = config(CodecKind::fixed, P.s, P.d, P.norm);
  const std::uint64_t d = qsgd::effective_bucket(cfg, kN);
  // The all-zero input has nothing random left: a few draws show it stays zero.
  const int K = P.in == Input::zero ? 4 : kUnbiasedK;
  std::vector<double> sum(kN, 0.0);
  Quant q;
  sample_draws(cfg, dv, kN, K, tensor, q, [&](int, const auto& levels, const auto& values) {
    for (std::uint64_t i = 0; i < kN; ++i) {
      ASSERT_LE(std::abs(levels(i)), static_cast<std::int32_t>(P.s));
      sum[i] += values(i);
    }
  });
  const auto scales = to_host(q.scales, q.buckets());
  // The scales are the bucket norms: max norm exactly; L2 within one float
  // rounding of the double sum (2^-24) plus the summation error (n 2^-53).
  const auto exact = exact_scales(v, kN, d, P.norm);
  for (std::size_t b = 0; b < exact.size(); ++b) {
    if (P.norm == Norm::max) {
      EXPECT_EQ(static_cast<long double>(scales[b]), exact[b]) << "bucket " << b;
    } else {
      EXPECT_LE(std::fabs(static_cast<long double>(scales[b]) - exact[b]), std::ldexp(exact[b], -23)) << "bucket " << b;
    }
  }
  const auto m = coord_model(v, kN, scales, d, P.s);
  const UnbiasedVerdict r = check_unbiased(v, m, sum, K, delta_coord, delta_agg);
  EXPECT_TRUE(r.pass()) << describe(r, v, m);
  if (P.in == Input::zero) {
    for (std::uint64_t i = 0; i < kN; ++i) ASSERT_EQ(sum[i], 0.0) << "zero input must quantize to zeros";
  }
}

INSTANTIATE_TEST_SUITE_P(Grid, Unbiased, ::testing::ValuesIn(unbiased_grid()),
                         [](const ::testing::TestParamInfo<QParam>& i) {
                           return pname(i.param.in, i.param.norm, i.param.d, i.param.s);
                         });

// ---- power of the unbiasedness check ----------------------------------------------

// The same check, fed with quantizers computed inline on the host from the
// library's own uniform draws (qsgd::uniform01 with the same keys):
// - faithful: round up when u < p; must pass (the check is not over-strict);
// - floor: always round toward zero (the classic biased quantizer); must fail;
// - over-round: round up when u < 1.1 p (10% too often); must fail.
// A biased quantizer shifts sum_i sign(v_i)(mean_i - v_i) by sum_i unit_i *
// bias_i: for floor at s = 16, max norm, Gaussian n = 1000 that is about
// 0.5 unit per coordinate (500 units in all) against a bound of about 5 units.
TEST(QuantizerPower, BiasedVariantsFailTheUnbiasednessCheck) {
  const auto grid = unbiased_grid();
  const double delta_coord = kFamilyAlpha / 2 / (static_cast<double>(grid.size()) * kN);
  const double delta_agg = kFamilyAlpha / 2 / static_cast<double>(grid.size());
  for (const QParam P : {QParam{Input::gaussian, Norm::max, 512, 16}, QParam{Input::gaussian, Norm::l2, 0, 1},
                         QParam{Input::gaussian, Norm::l2, 64, kSqrtN}, QParam{Input::sparse, Norm::l2, 0, 4}}) {
    SCOPED_TRACE(pname(P.in, P.norm, P.d, P.s));
    const auto v = make_input(P.in, kN, 77);
    const auto cfg = config(CodecKind::fixed, P.s, P.d, P.norm);
    const std::uint64_t d = qsgd::effective_bucket(cfg, kN);
    Quant q;
    qsgd::quantize(Exec(), cfg, to_device(v), kN, qsgd::RngKey{kSeed, 0, 0, 0}, q);
    const auto m = coord_model(v, kN, to_host(q.scales, q.buckets()), d, P.s);
    enum Variant { faithful, floor_, over };
    for (Variant var : {faithful, floor_, over}) {
      std::vector<double> sum(kN, 0.0);
      for (int k = 0; k < kUnbiasedK; ++k) {
        const qsgd::StreamKey sk = qsgd::make_stream_key(qsgd::RngKey{kSeed, static_cast<std::uint64_t>(k), 0, 9});
        for (std::uint64_t i = 0; i < kN; ++i) {
          const double u = qsgd::uniform01(sk, i);
          const double pr = var == faithful ? m[i].p : var == floor_ ? 0.0 : std::min(1.0, 1.1 * m[i].p);
          const double level = m[i].l + (u < pr ? 1 : 0);
          sum[i] += (m[i].neg ? -1 : 1) * m[i].unit * level;
        }
      }
      const UnbiasedVerdict r = check_unbiased(v, m, sum, kUnbiasedK, delta_coord, delta_agg);
      if (var == faithful) EXPECT_TRUE(r.pass()) << "faithful replica: " << describe(r, v, m);
      else EXPECT_FALSE(r.pass()) << (var == floor_ ? "floor" : "over-round") << " variant passed: " << describe(r, v, m);
    }
  }
}

// ---- 2. variance ---------------------------------------------------------------------

constexpr int kVarianceK = 300;

std::vector<QParam> variance_grid() {
  std::vector<QParam> g;
  for (Input in : {Input::gaussian, Input::heavy, Input::sparse, Input::constant, Input::huge})
    for (Norm norm : {Norm::l2, Norm::max})
      for (std::uint32_t d : {64u, 512u, 0u})
        for (std::uint32_t s : {1u, 2u, 4u, 16u, 256u, kSqrtN}) g.push_back({in, norm, d, s});
  return g;
}

class Variance : public ::testing::TestWithParam<QParam> {};

// (a) Exact: E||Q(v) - v||^2 = sum_i unit^2 p_i (1 - p_i) per bucket, and spec
//     property 2 says it is <= min(len/s^2, sqrt(len)/s) ||v_b||^2 for a bucket
//     of len coordinates (stated for L2 scaling; it holds for max scaling too,
//     whose scale ||v||_inf <= ||v||_2 only lowers unit). The exact sum uses
//     the library's float scale, within 2^-23 of the norm, so the bound gets a
//     factor (1 + 2^-20) (the squared scale is off by <= 2^-22; twice that).
// (b) Empirical: the mean over K draws of Y = ||Q(v) - v||^2 against the exact
//     expectation. Y is a sum over coordinates of independent two-valued terms
//     (value unit^2 p^2 w.p. 1-p, unit^2 (1-p)^2 w.p. p), with range <= unit^2
//     and variance unit^4 p(1-p)(1-2p)^2, known exactly. The bound is Bernstein
//     with that variance (widened by unit^4 * prob_slack), rather than a sample
//     variance, which underestimates the spread when rare large jumps dominate
//     (one huge coordinate: unit = 1e30/s, and a round-up of an O(1) coordinate
//     has probability ~1e-30 s but costs 1e60/s^2). Allowance: the expected term
//     moves by <= unit^2 * prob_slack with the rounding probability, and the
//     value rounding (2^-23 relative) moves (Q - v)^2 by <= 2 unit (|v| + unit)
//     2^-23.
// Power: a quantizer that always rounds toward zero has E||Q - v||^2 = sum
// unit^2 p^2 instead of sum unit^2 p (1 - p) (and fails test 1 anyway); one
// that rounds up too often shifts the mean by sum unit^2 * excess * (1 - 2p).
TEST_P(Variance, ExactExpectationWithinBoundAndEmpiricalMatches) {
  const QParam P = GetParam();
  const auto grid = variance_grid();
  const double delta = kFamilyAlpha / static_cast<double>(grid.size());
  const std::uint32_t tensor = 1000 + static_cast<std::uint32_t>(
      std::find_if(grid.begin(), grid.end(), [&](const QParam& g) {
        return g.in == P.in && g.norm == P.norm && g.d == P.d && g.s == P.s;
      }) - grid.begin());
  const auto v = make_input(P.in, kN, 2000 + static_cast<std::uint64_t>(P.in));
  const Values dv = to_device(v);
  const auto cfg = config(CodecKind::fixed, P.s, P.d, P.norm);
  const std::uint64_t d = qsgd::effective_bucket(cfg, kN);
  double sumY = 0;
  Quant q;
  sample_draws(cfg, dv, kN, kVarianceK, tensor, q, [&](int, const auto&, const auto& values) {
    double y = 0;
    for (std::uint64_t i = 0; i < kN; ++i) {
      const double e = static_cast<double>(values(i)) - static_cast<double>(v[i]);
      y += e * e;
    }
    sumY += y;
  });
  const auto scales = to_host(q.scales, q.buckets());
  const auto m = coord_model(v, kN, scales, d, P.s);

  // (a) per bucket
  double E = 0, V = 0, M = 0, allow = 0;
  for (std::uint64_t b0 = 0; b0 < kN; b0 += d) {
    const std::uint64_t b1 = std::min(kN, b0 + d);
    const double len = static_cast<double>(b1 - b0);
    double Eb = 0, norm2 = 0;
    for (std::uint64_t i = b0; i < b1; ++i) {
      const Coord& c = m[i];
      const double u2 = c.unit * c.unit;
      Eb += u2 * c.p * (1 - c.p);
      norm2 += static_cast<double>(v[i]) * static_cast<double>(v[i]);
      V += (u2 * u2 * (c.p * (1 - c.p) * (1 - 2 * c.p) * (1 - 2 * c.p) + prob_slack(c))) / kVarianceK;
      M = std::max(M, u2 / kVarianceK);
      allow += u2 * prob_slack(c) + std::ldexp(c.unit * (std::fabs(static_cast<double>(v[i])) + c.unit), -22);
    }
    const double bound = std::min(len / (double(P.s) * P.s), std::sqrt(len) / P.s) * norm2;
    EXPECT_LE(Eb, bound * (1 + std::ldexp(1.0, -20))) << "bucket " << b0 / d << " exact E||Q-v||^2 exceeds the bound";
    E += Eb;
  }
  // (b)
  const double mean = sumY / kVarianceK;
  const double t = bernstein(V, M, delta) + allow;
  EXPECT_LE(std::fabs(mean - E), t) << "empirical E||Q-v||^2 = " << mean << ", exact " << E << ", bound " << t;
}

INSTANTIATE_TEST_SUITE_P(Grid, Variance, ::testing::ValuesIn(variance_grid()),
                         [](const ::testing::TestParamInfo<QParam>& i) {
                           return pname(i.param.in, i.param.norm, i.param.d, i.param.s);
                         });

// ---- 3. sparsity -------------------------------------------------------------------------

constexpr int kSparsityK = 500;

std::vector<QParam> sparsity_grid() {
  std::vector<QParam> g;
  for (Input in : {Input::gaussian, Input::heavy, Input::sparse, Input::constant, Input::huge})
    for (std::uint32_t s : {1u, 2u, 4u, 16u, 256u, kSqrtN}) g.push_back({in, Norm::l2, 0, s});
  return g;
}

class Sparsity : public ::testing::TestWithParam<QParam> {};

// L2 scaling, one bucket. nnz = sum_i B_i with independent B_i ~
// Bernoulli(q_i), q_i = 1 when l_i >= 1, else p_i. Exact E[nnz] = sum q_i must
// be <= s (s + sqrt(n)) (spec property 3; a 2^-20 relative allowance covers the
// float scale). The empirical mean over K draws must sit within Bernstein's
// bound (variance sum q(1-q)/K widened by prob_slack, range 1/K) plus the
// rounding allowance sum prob_slack (q_i is continuous in x with slope <= 1).
// Power: rounding toward zero would give nnz = #{l_i >= 1} with certainty,
// short of E[nnz] by sum_{l_i = 0} p_i (about 25 at s = 1, Gaussian n = 1000,
// against a bound of about 1.3).
TEST_P(Sparsity, ExpectedNonZerosWithinBoundAndEmpiricalMatches) {
  const QParam P = GetParam();
  const double delta = kFamilyAlpha / static_cast<double>(sparsity_grid().size());
  const auto v = make_input(P.in, kN, 3000 + static_cast<std::uint64_t>(P.in));
  const auto cfg = config(CodecKind::fixed, P.s, 0, Norm::l2);
  double sum_nnz = 0;
  Quant q;
  sample_draws(cfg, to_device(v), kN, kSparsityK, 2000 + P.s, q, [&](int, const auto& levels, const auto&) {
    for (std::uint64_t i = 0; i < kN; ++i) sum_nnz += levels(i) != 0;
  });
  const auto m = coord_model(v, kN, to_host(q.scales, 1), kN, P.s);
  double E = 0, V = 0, allow = 0;
  for (const Coord& c : m) {
    const double qi = c.l >= 1 ? 1.0 : c.p;
    E += qi;
    V += (qi * (1 - qi) + prob_slack(c)) / kSparsityK;
    allow += prob_slack(c);
  }
  const double bound = double(P.s) * (P.s + std::sqrt(double(kN)));
  EXPECT_LE(E, bound * (1 + std::ldexp(1.0, -20))) << "exact E[nnz] exceeds s(s + sqrt(n))";
  const double mean = sum_nnz / kSparsityK;
  const double t = bernstein(V, 1.0 / kSparsityK, delta) + allow;
  EXPECT_LE(std::fabs(mean - E), t) << "empirical E[nnz] = " << mean << ", exact " << E << ", bound " << t;
  RecordProperty("expected_nnz", std::to_string(E));
  RecordProperty("bound_nnz", std::to_string(bound));
}

INSTANTIATE_TEST_SUITE_P(Grid, Sparsity, ::testing::ValuesIn(sparsity_grid()),
                         [](const ::testing::TestParamInfo<QParam>& i) {
                           return pname(i.param.in, i.param.norm, i.param.d, i.param.s);
                         });

// ---- 4. code lengths --------------------------------------------------------------------

// n = 4096 so that s = 64 is exactly sqrt(n).
constexpr std::uint64_t kCodeN = 4096;
constexpr int kCodeK = 200;

struct CParam {
  Input in;
  Norm norm;
  std::uint32_t d;
  std::uint32_t s;
  std::uint32_t chunk;
};

std::string cname(const ::testing::TestParamInfo<CParam>& i) {
  return pname(i.param.in, i.param.norm, i.param.d, i.param.s) + "_chunk" + std::to_string(i.param.chunk);
}

// Mean payload bits of `codec` over K draws of encode(v) (keys step = k).
// header.payload_bits is the exact sum of codeword lengths; the whole message
// is 64 header bytes + 8 per chunk offset + the scale section (4 per bucket,
// padded to 8) + the payload padded to 64 bits, checked here on every draw.
struct LengthSample {
  double mean = 0, sd = 0;  // of payload bits
  double wire_bits_mean = 0;
  Quant first;               // the quantized vector of the first draw (for its scales)
};

LengthSample sample_lengths(CodecKind codec, const CParam& P, const std::vector<float>& v, std::uint32_t tensor) {
  const auto cfg = config(codec, P.s, P.d, P.norm, P.chunk);
  Codec c(cfg);
  const Values dv = to_device(v);
  Words out("test::out", c.max_message_bytes(kCodeN) / 8);
  std::vector<double> bits;
  double wire = 0;
  LengthSample r;
  for (int k = 0; k < kCodeK; ++k) {
    const std::size_t bytes = c.encode(dv, kCodeN, qsgd::RngKey{kSeed, static_cast<std::uint64_t>(k), 0, tensor}, out);
    qsgd::MessageHeader h;
    auto hv = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), Kokkos::subview(out, Kokkos::make_pair(0, 8)));
    std::memcpy(static_cast<void*>(&h), hv.data(), sizeof(h));
    const std::uint64_t nb = (kCodeN + h.d - 1) / h.d;
    const std::uint64_t nchunks = (kCodeN + P.chunk - 1) / P.chunk;
    EXPECT_EQ(bytes, 64 + 8 * nchunks + 8 * ((nb + 1) / 2) + 8 * ((h.payload_bits + 63) / 64));
    bits.push_back(static_cast<double>(h.payload_bits));
    wire += 8.0 * bytes;
    if (k == 0) {
      r.first.reshape(kCodeN, c.last_quantized().d, P.s, P.norm, qsgd::QuantizerKind::stochastic);
      const auto nbp = Kokkos::make_pair<std::uint64_t>(0, r.first.buckets());
      Kokkos::deep_copy(Kokkos::subview(r.first.scales, nbp), Kokkos::subview(c.last_quantized().scales, nbp));
    }
  }
  for (double b : bits) r.mean += b / kCodeK;
  double ss = 0;
  for (double b : bits) ss += (b - r.mean) * (b - r.mean);
  r.sd = std::sqrt(ss / (kCodeK - 1));
  r.wire_bits_mean = wire / kCodeK;
  return r;
}

std::vector<CParam> dense_grid() {
  std::vector<CParam> g;
  for (Input in : {Input::gaussian, Input::heavy, Input::sparse})
    for (Norm norm : {Norm::l2, Norm::max})
      for (std::uint32_t d : {512u, 0u})
        for (std::uint32_t s : {1u, 2u, 4u, 16u, 64u, 256u}) g.push_back({in, norm, d, s, 4096});
  return g;
}

class DenseCodeLength : public ::testing::TestWithParam<CParam> {};

// Dense code: coordinate i costs len(l) = |omega(|l|+1)| + [l != 0] bits, so
// E[payload] = sum_i (1-p_i) len(l_i) + p_i len(l_i + 1) exactly (lengths from
// the spec's omega definition, test_util.hpp), and the payload is a sum of
// independent two-valued terms with variance p(1-p) D_i^2, D_i = len(l+1) -
// len(l). Bound: Bernstein (range max D_i / K) plus the rounding allowance
// sum_i D_i * prob_slack_i.
TEST_P(DenseCodeLength, MeanPayloadMatchesExactExpectation) {
  const CParam P = GetParam();
  const double delta = kFamilyAlpha / static_cast<double>(dense_grid().size());
  const auto v = make_input(P.in, kCodeN, 4000 + static_cast<std::uint64_t>(P.in));
  const LengthSample L = sample_lengths(CodecKind::elias_dense, P, v, 3000);
  const auto m = coord_model(v, kCodeN, to_host(L.first.scales, L.first.buckets()), L.first.d, P.s);
  double E = 0, V = 0, M = 0, allow = 0;
  for (const Coord& c : m) {
    const double len0 = dense_len_ref(c.l);
    const double len1 = c.l < P.s ? dense_len_ref(c.l + 1) : len0;
    const double D = std::fabs(len1 - len0);
    E += (1 - c.p) * len0 + c.p * len1;
    V += (c.p * (1 - c.p) + prob_slack(c)) * D * D / kCodeK;
    M = std::max(M, D / kCodeK);
    allow += D * prob_slack(c);
  }
  const double t = bernstein(V, M, delta) + allow;
  EXPECT_LE(std::fabs(L.mean - E), t) << "mean payload " << L.mean << " bits, exact expectation " << E << ", bound " << t;
  RecordProperty("payload_bits_per_dim", std::to_string(L.mean / kCodeN));
  RecordProperty("wire_bits_per_dim", std::to_string(L.wire_bits_mean / kCodeN));
  if (P.in == Input::gaussian && P.norm == Norm::l2 && P.d == 0 && P.s == 64) {
    // Spec section 2: the paper states E[bits] <= 2.8 n + 32 at s = sqrt(n);
    // with exact omega codewords a Gaussian vector costs about 2.94 bits per
    // dimension. Reported for context, not asserted (see spec).
    const double paper = 2.8 + 32.0 / kCodeN;
    std::cout << std::fixed << std::setprecision(4) << "[elias-dense, s = sqrt(n) = 64, L2, one bucket, Gaussian n = "
              << kCodeN << "] measured payload + scale " << (L.mean + 32) / kCodeN << " bits/dim (exact expectation "
              << (E + 32) / kCodeN << "), all wire bits " << L.wire_bits_mean / kCodeN << " bits/dim; paper's bound "
              << paper << ", spec's exact-codeword estimate ~2.94\n";
    RecordProperty("paper_bits_per_dim", std::to_string(paper));
  }
}

INSTANTIATE_TEST_SUITE_P(Grid, DenseCodeLength, ::testing::ValuesIn(dense_grid()), cname);

// Exact E[payload bits] of the sparse code. Per chunk: omega(count + 1), then
// per non-zero coordinate omega(gap) + 1 sign bit + omega(|l|). With q_i =
// P(level_i != 0) (1 when l_i >= 1, else p_i), independent across i:
// - level and sign bits: sum_i (1-p_i) [l_i >= 1](1 + |omega(l_i)|) + p_i (1 + |omega(l_i + 1)|);
// - count: E|omega(C + 1)| with C Poisson-binomial(q), by dynamic programming
//   over the distribution of C;
// - gaps: sum_i q_i E[|omega(i - prev(i))| | i non-zero], where prev(i) = j <
//   i is the previous non-zero with probability q_j prod_{j<m<i} (1 - q_m) (the
//   chunk start, gap i - i0 + 1, with probability prod_{i0<=m<i} (1 - q_m)).
//   The backward walk stops when the product falls below 1e-30; what it drops
//   is below 1e-30 * |omega(chunk)| <= 1e-28 bits per coordinate.
double sparse_expected_bits(const std::vector<Coord>& m, std::uint32_t s, std::uint32_t chunk) {
  double total = 0;
  const std::uint64_t n = m.size();
  for (std::uint64_t i0 = 0; i0 < n; i0 += chunk) {
    const std::uint64_t i1 = std::min<std::uint64_t>(n, i0 + chunk);
    std::vector<double> q(i1 - i0);
    std::uint64_t sure = 0;
    std::vector<double> dist{1.0};
    for (std::uint64_t i = i0; i < i1; ++i) {
      const Coord& c = m[i];
      const double lvl0 = c.l >= 1 ? 1.0 + omega_len_ref(c.l) : 0.0;
      const double lvl1 = c.l < s ? 1.0 + omega_len_ref(c.l + 1) : lvl0;
      total += (1 - c.p) * lvl0 + c.p * lvl1;
      const double qi = c.l >= 1 ? 1.0 : c.p;
      q[i - i0] = qi;
      if (qi == 1.0) {
        ++sure;
      } else if (qi > 0.0) {
        dist.push_back(0.0);
        for (std::size_t k = dist.size() - 1; k > 0; --k) dist[k] = dist[k] * (1 - qi) + dist[k - 1] * qi;
        dist[0] *= (1 - qi);
      }
    }
    for (std::size_t k = 0; k < dist.size(); ++k) total += dist[k] * omega_len_ref(sure + k + 1);
    for (std::uint64_t i = i0; i < i1; ++i) {
      const double qi = q[i - i0];
      if (qi == 0.0) continue;
      double prod = 1.0, e = 0.0;
      bool reached_start = true;
      for (std::uint64_t j = i; j-- > i0;) {
        const double qj = q[j - i0];
        e += omega_len_ref(i - j) * qj * prod;
        prod *= (1 - qj);
        if (prod < 1e-30) {
          reached_start = false;
          break;
        }
      }
      if (reached_start) e += omega_len_ref(i - i0 + 1) * prod;
      total += qi * e;
    }
  }
  return total;
}

std::vector<CParam> sparse_grid() {
  std::vector<CParam> g;
  for (Input in : {Input::gaussian, Input::sparse})
    for (std::uint32_t s : {1u, 2u, 4u, 16u, 64u})
      for (std::uint32_t chunk : {4096u, 512u}) g.push_back({in, Norm::l2, 0, s, chunk});
  return g;
}

class SparseCodeLength : public ::testing::TestWithParam<CParam> {};

// The sparse code's length is not a sum of independent terms (gaps couple
// neighbours), so this bound uses the sample: |mean - E| <= 6 sd / sqrt(K) +
// allowance, sd the sample standard deviation of the K payload lengths. The
// length is a sum of thousands of weakly dependent bounded terms, so the mean
// is close to normal, and 6 standard errors leave a two-sided tail of 2e-9 per
// configuration (< 1e-7 over this grid). Allowance: flipping one coordinate
// between zero and non-zero changes the length by at most 2 |omega(chunk)| +
// |omega(chunk + 1)| + 1 + |omega(s + 1)| bits (its own gap, sign and level,
// the next gap, the count), times sum_i prob_slack_i.
// The paper's bound (spec section 2, o(1) taken as 0) is printed beside the
// measurement: it treats omega as log2 k + 1 bits and is not asserted.
TEST_P(SparseCodeLength, MeanPayloadMatchesExactExpectation) {
  const CParam P = GetParam();
  const auto v = make_input(P.in, kCodeN, 5000 + static_cast<std::uint64_t>(P.in));
  const LengthSample L = sample_lengths(CodecKind::elias_sparse, P, v, 4000);
  const auto m = coord_model(v, kCodeN, to_host(L.first.scales, 1), kCodeN, P.s);
  const double E = sparse_expected_bits(m, P.s, P.chunk);
  double slack = 0;
  for (const Coord& c : m) slack += prob_slack(c);
  const double lip = 2.0 * omega_len_ref(P.chunk) + omega_len_ref(P.chunk + 1ull) + 1 + omega_len_ref(P.s + 1ull);
  const double t = 6.0 * L.sd / std::sqrt(double(kCodeK)) + lip * slack;
  EXPECT_LE(std::fabs(L.mean - E), t) << "mean payload " << L.mean << " bits, exact expectation " << E << ", bound "
                                      << t << " (sample sd " << L.sd << ")";
  const double s = P.s, n = kCodeN, ss = s * (s + std::sqrt(n));
  const double paper = (3 + 1.5 * std::log2(2 * (s * s + n) / ss)) * ss + 32;
  std::cout << std::fixed << std::setprecision(4) << "[elias-sparse, s = " << P.s << ", chunk " << P.chunk << ", "
            << input_name(P.in) << "] measured payload + scale " << (L.mean + 32) / n << " bits/dim (exact "
            << (E + 32) / n << "), wire " << L.wire_bits_mean / n << " bits/dim; paper's bound " << paper / n
            << " bits/dim\n";
  RecordProperty("payload_bits_per_dim", std::to_string(L.mean / n));
  RecordProperty("paper_bound_bits_per_dim", std::to_string(paper / n));
}

INSTANTIATE_TEST_SUITE_P(Grid, SparseCodeLength, ::testing::ValuesIn(sparse_grid()), cname);

// ---- 7. different keys give independent draws ---------------------------------------------

// Two quantizations of the same v whose keys differ in one field (seed, step,
// rank or tensor) must be independent draws: coordinate i then differs with
// probability r_i = 2 p_i (1 - p_i), so the count D of differing coordinates
// has E[D] = sum r_i and Var = sum r_i (1 - r_i), a sum of independent
// Bernoulli terms: Bernstein with range 1, plus the allowance 2 sum prob_slack
// (r is continuous in p with slope <= 2). A generator that ignored the field
// would give D = 0; one whose streams were correlated would give D far below
// E[D] (about n/3 here).
TEST(KeyIndependence, EveryKeyFieldGivesAnIndependentDraw) {
  const std::uint64_t n = 4096;
  const auto v = make_input(Input::gaussian, n, 6000);
  const auto cfg = config(CodecKind::fixed, 16, 512, Norm::max);
  const Values dv = to_device(v);
  const qsgd::RngKey base{11, 22, 3, 4};
  Quant q0;
  qsgd::quantize(Exec(), cfg, dv, n, base, q0);
  const auto l0 = to_host(q0.levels, n);
  const auto m = coord_model(v, n, to_host(q0.scales, q0.buckets()), 512, 16);
  double E = 0, V = 0, allow = 0;
  for (const Coord& c : m) {
    const double r = 2 * c.p * (1 - c.p);
    E += r;
    V += r * (1 - r) + 2 * prob_slack(c);
    allow += 2 * prob_slack(c);
  }
  const double t = bernstein(V, 1.0, kFamilyAlpha / 4) + allow;
  for (int field = 0; field < 4; ++field) {
    qsgd::RngKey k = base;
    if (field == 0) k.seed += 1;
    if (field == 1) k.step += 1;
    if (field == 2) k.rank += 1;
    if (field == 3) k.tensor += 1;
    Quant q1;
    qsgd::quantize(Exec(), cfg, dv, n, k, q1);
    const auto l1 = to_host(q1.levels, n);
    double D = 0;
    for (std::uint64_t i = 0; i < n; ++i) D += l0[i] != l1[i];
    EXPECT_LE(std::fabs(D - E), t) << "key field " << field << ": " << D << " coordinates differ, expected " << E
                                   << " +- " << t;
  }
}

}  // namespace
