// Statistical properties of the compressed strategies, at 1, 2, 3 and 4 ranks.
//
// Inputs are fixed (every rank's gradient is a pure function of (seed, rank));
// trial t uses step t, so the random-rounding keys of the trials differ and
// the T outputs are i.i.d. draws. Every bound below is computed from the
// sample size, never tuned:
// - Unbiasedness: for fixed directions u, y_t = u . (out_t - avg) has mean 0
//   if the exchange is unbiased. y_t is a sum of thousands of independent
//   coordinate errors, close to Gaussian; the test asks |mean(y)| <= 5
//   sample standard errors. A true mean of 0 fails this with probability
//   about 1e-6 per direction (Student t, T - 1 degrees of freedom). The
//   directions catch the known ways to be wrong: u = avg (wrong weights),
//   sign(avg) (biased second stage), sign(g_r) (biased rounding of rank r, a
//   dropped or doubled rank), all ones.
// - Variance: E||out - avg||^2 must not exceed the spec's bound (section 1,
//   property 2), summed over buckets: one stage gives
//     B1 = (1/K^2) sum_r sum_b c_b ||g_rb||^2,  c_b = min(d_b/s^2, sqrt(d_b)/s);
//   requantization adds E||Q2(a) - a||^2 <= sum_b c_b E||a_b||^2 with
//   E||a_b||^2 = ||avg_b||^2 + E||a_b - avg_b||^2. The sample mean must stay
//   below the bound plus 5 standard errors.
// - Requantization error, measured exactly: param-server and scatter-reduce
//   quantize each rank's gradient with the same key as allgather and sum in
//   the same order, so their first stage a is bitwise the allgather output of
//   the same step, and out - a is the requantization error alone. Given a,
//   its expected square is V = sum_i unit_b^2 p_i (1 - p_i) with variance
//   sum_i unit_b^4 p_i (1 - p_i) (1 - 2 p_i)^2 (p_i = fractional level of
//   a_i). The T-trial sum of ||out - a||^2 must match the sum of V within 5
//   standard deviations (CLT over T n independent terms). It fails if the
//   second stage is biased, uses another bucket partition, reuses the first
//   stage's random draws, or if the first stage differs from allgather.

#include <cstdio>

#include "comm_test_util.hpp"

namespace {

using namespace qsgd_comm_test;
using qsgd::comm::Communicator;
using qsgd::comm::make_exchange;

struct Moments {
  double sum = 0, sum2 = 0;
  int count = 0;
  void add(double y) {
    sum += y;
    sum2 += y * y;
    ++count;
  }
  double mean() const { return sum / count; }
  double sd() const { return std::sqrt(std::max(0.0, (sum2 - sum * sum / count) / (count - 1))); }
  double se() const { return sd() / std::sqrt(static_cast<double>(count)); }
};

// Spec bound of E||out - avg||^2 for `stages` quantization stages.
double variance_bound(const std::vector<std::vector<float>>& g, const std::vector<double>& avg, std::uint32_t s,
                      std::uint64_t d, int stages_) {
  const std::uint64_t n = avg.size();
  const int K = static_cast<int>(g.size());
  double total = 0;
  for (std::uint64_t b0 = 0; b0 < n; b0 += d) {
    const std::uint64_t b1 = std::min(n, b0 + d);
    const double db = static_cast<double>(b1 - b0);
    const double c = std::min(db / (double(s) * s), std::sqrt(db) / s);
    double first = 0, avg2 = 0;
    for (int r = 0; r < K; ++r)
      for (std::uint64_t i = b0; i < b1; ++i) first += c * double(g[r][i]) * g[r][i];
    first /= double(K) * K;
    for (std::uint64_t i = b0; i < b1; ++i) avg2 += avg[i] * avg[i];
    total += first + (stages_ == 2 ? c * (avg2 + first) : 0.0);
  }
  return total;
}

// Expected squared requantization error of a (max norm) and its variance.
std::pair<double, double> requant_moments(const std::vector<float>& a, std::uint32_t s, std::uint64_t d) {
  double v = 0, var = 0;
  const std::uint64_t n = a.size();
  for (std::uint64_t b0 = 0; b0 < n; b0 += d) {
    const std::uint64_t b1 = std::min(n, b0 + d);
    float scale = 0;
    for (std::uint64_t i = b0; i < b1; ++i) scale = std::max(scale, std::fabs(a[i]));
    if (!(scale > 0)) continue;
    const float factor = static_cast<float>(s) / scale;  // the kernel's arithmetic
    const double unit = double(scale) / s;
    for (std::uint64_t i = b0; i < b1; ++i) {
      float x = std::fabs(a[i]) * factor;
      x = std::min(x, static_cast<float>(s));
      const double p = x - std::floor(x);
      v += unit * unit * p * (1 - p);
      var += unit * unit * unit * unit * p * (1 - p) * (1 - 2 * p) * (1 - 2 * p);
    }
  }
  return {v, var};
}

double dot_err(const std::vector<double>& u, const std::vector<float>& out, const std::vector<double>& avg) {
  double y = 0;
  for (std::size_t i = 0; i < u.size(); ++i) y += u[i] * (out[i] - avg[i]);
  return y;
}

std::vector<std::pair<std::string, std::vector<double>>> directions(const std::vector<std::vector<float>>& g,
                                                                    const std::vector<double>& avg) {
  auto sign = [](double x) { return x < 0 ? -1.0 : 1.0; };
  std::vector<std::pair<std::string, std::vector<double>>> dirs;
  std::vector<double> u(avg.size());
  dirs.emplace_back("avg", avg);
  for (std::size_t i = 0; i < u.size(); ++i) u[i] = sign(avg[i]);
  dirs.emplace_back("sign(avg)", u);
  for (std::size_t r = 0; r < g.size(); ++r) {
    for (std::size_t i = 0; i < u.size(); ++i) u[i] = sign(g[r][i]);
    dirs.emplace_back("sign(g_" + std::to_string(r) + ")", u);
  }
  dirs.emplace_back("ones", std::vector<double>(avg.size(), 1.0));
  return dirs;
}

void check_unbiased(const std::string& what, const std::vector<Moments>& proj,
                    const std::vector<std::pair<std::string, std::vector<double>>>& dirs) {
  for (std::size_t k = 0; k < dirs.size(); ++k) {
    const Moments& m = proj[k];
    EXPECT_LE(std::fabs(m.mean()), 5 * m.se() + 1e-12)
        << what << ": direction " << dirs[k].first << ": mean " << m.mean() << ", standard error " << m.se() << " over "
        << m.count << " trials";
  }
}

struct Setting {
  std::uint32_t s;
  std::uint32_t d;
  Norm norm;
  int trials;
  bool requant;  // the exact requantization test (max norm only)
};

TEST(Stats, UnbiasedWithinTheVarianceBoundAndRequantizationMeasured) {
  const Communicator comm = Communicator::world();
  const int K = comm.size(), me = comm.rank();
  const std::uint64_t n = 3000, seed = 77;
  std::vector<std::vector<float>> g;
  for (int r = 0; r < K; ++r) g.push_back(gradient(seed, r, n));
  const auto avg = exact_average(seed, K, n);
  const auto dirs = directions(g, avg);
  double avg2 = 0;
  for (double x : avg) avg2 += x * x;

  for (const Setting& st : {Setting{16, 512, Norm::max, 200, true}, Setting{4, 256, Norm::l2, 100, false}}) {
    const CodecConfig c = codec(CodecKind::fixed, st.s, st.d, st.norm);
    const StrategyKind kinds[3] = {StrategyKind::allgather, StrategyKind::param_server, StrategyKind::scatter_reduce};
    ExchangePtr ex[3];
    for (int k = 0; k < 3; ++k) ex[k] = make_exchange(config(kinds[k], c, seed), comm);
    std::vector<Moments> proj[3];
    for (auto& p : proj) p.resize(dirs.size());
    Moments mse[3], requant[3];
    double v_sum[3] = {0, 0, 0}, var_sum[3] = {0, 0, 0}, r_sum[3] = {0, 0, 0};
    for (int t = 0; t < st.trials; ++t) {
      std::vector<float> out[3];
      for (int k = 0; k < 3; ++k) out[k] = run(*ex[k], g[me], 0, static_cast<std::uint64_t>(t));
      const auto [v, var] = st.requant ? requant_moments(out[0], st.s, st.d) : std::pair<double, double>{0, 0};
      for (int k = 0; k < 3; ++k) {
        for (std::size_t j = 0; j < dirs.size(); ++j) proj[k][j].add(dot_err(dirs[j].second, out[k], avg));
        double e = 0, r = 0;
        for (std::uint64_t i = 0; i < n; ++i) {
          e += (out[k][i] - avg[i]) * (out[k][i] - avg[i]);
          r += double(out[k][i] - out[0][i]) * (out[k][i] - out[0][i]);
        }
        mse[k].add(e);
        requant[k].add(r);
        r_sum[k] += r;
        v_sum[k] += v;
        var_sum[k] += var;
      }
    }
    for (int k = 0; k < 3; ++k) {
      const std::string what = qsgd::comm::to_string(kinds[k]) + " s " + std::to_string(st.s) + " d " +
                               std::to_string(st.d) + " " + qsgd::to_string(st.norm) + ", K " + std::to_string(K);
      check_unbiased(what, proj[k], dirs);
      const double bound = variance_bound(g, avg, st.s, st.d, stages(kinds[k]));
      EXPECT_LE(mse[k].mean(), bound + 5 * mse[k].se()) << what << ": spec variance bound";
      if (st.requant && k > 0) {
        EXPECT_LE(std::fabs(r_sum[k] - v_sum[k]), 5 * std::sqrt(var_sum[k]) + 1e-5 * v_sum[k])
            << what << ": requantization error " << r_sum[k] << " vs its expectation " << v_sum[k] << " +- "
            << std::sqrt(var_sum[k]);
      }
      if (me == 0)
        std::printf(
            "[stats] %-15s K=%d s=%-2u d=%-3u %-3s  E||out-avg||^2/||avg||^2 = %.3e (bound %.3e)  "
            "requantization ||out-allgather||^2/||avg||^2 = %.3e (expected %.3e)\n",
            qsgd::comm::to_string(kinds[k]).c_str(), K, st.s, st.d, qsgd::to_string(st.norm).c_str(),
            mse[k].mean() / avg2, bound / avg2, requant[k].mean() / avg2,
            k > 0 && st.requant ? v_sum[k] / st.trials / avg2 : 0.0);
    }
  }
}

// shared-scale (spec section 4): rank r quantizes g_r against the agreed
// scale S_b of its bucket (the largest max norm of any rank), and the result
// is the average of the K quantized vectors, so it is unbiased and
//   E||out - avg||^2 = V = (1/K^2) sum_r sum_i (S_b / s)^2 p_ri (1 - p_ri),
// p_ri the fractional part of |g_ri| s / S_b (the kernel's float arithmetic):
// one quantization error, computed exactly rather than bounded. The sample
// mean of ||out - avg||^2 must match V within 5 standard errors (two-sided:
// a second quantization, a rank quantizing against its own smaller scale, or
// summed levels that lose a rank all move it). Printed beside it: the same
// run's scatter-reduce and allgather errors, the comparison the strategy is for.
TEST(Stats, SharedScaleIsUnbiasedWithOneQuantizationError) {
  const Communicator comm = Communicator::world();
  const int K = comm.size(), me = comm.rank();
  const std::uint64_t n = 3000, seed = 78, d = 512;
  const std::uint32_t s = 4;
  const int trials = 200;
  std::vector<std::vector<float>> g;
  for (int r = 0; r < K; ++r) g.push_back(gradient(seed, r, n));
  const auto avg = exact_average(seed, K, n);
  const auto dirs = directions(g, avg);
  double avg2 = 0, v = 0;
  for (double x : avg) avg2 += x * x;
  for (std::uint64_t b0 = 0; b0 < n; b0 += d) {
    const std::uint64_t b1 = std::min(n, b0 + d);
    float scale = 0;
    for (int r = 0; r < K; ++r)
      for (std::uint64_t i = b0; i < b1; ++i) scale = std::max(scale, std::fabs(g[r][i]));
    const float factor = static_cast<float>(s) / scale;
    const double unit = double(scale) / s;
    for (int r = 0; r < K; ++r)
      for (std::uint64_t i = b0; i < b1; ++i) {
        const float x = std::min(std::fabs(g[r][i]) * factor, static_cast<float>(s));
        const double p = x - std::floor(x);
        v += unit * unit * p * (1 - p) / (double(K) * K);
      }
  }
  const CodecConfig c = codec(CodecKind::fixed, s, d, Norm::max);
  const StrategyKind kinds[3] = {StrategyKind::shared_scale, StrategyKind::scatter_reduce, StrategyKind::allgather};
  ExchangePtr ex[3];
  for (int k = 0; k < 3; ++k) ex[k] = make_exchange(config(kinds[k], c, seed), comm);
  std::vector<Moments> proj(dirs.size());
  Moments mse[3];
  for (int t = 0; t < trials; ++t)
    for (int k = 0; k < 3; ++k) {
      const auto out = run(*ex[k], g[me], 0, static_cast<std::uint64_t>(t));
      if (k == 0)
        for (std::size_t j = 0; j < dirs.size(); ++j) proj[j].add(dot_err(dirs[j].second, out, avg));
      double e = 0;
      for (std::uint64_t i = 0; i < n; ++i) e += (out[i] - avg[i]) * (out[i] - avg[i]);
      mse[k].add(e);
    }
  const std::string what = "shared-scale s 4 d 512, K " + std::to_string(K);
  check_unbiased(what, proj, dirs);
  EXPECT_LE(std::fabs(mse[0].mean() - v), 5 * mse[0].se() + 1e-6 * v)
      << what << ": E||out-avg||^2 " << mse[0].mean() << " +- " << mse[0].se() << ", one quantization error " << v;
  if (me == 0)
    std::printf("[stats] shared-scale K=%d s=4 d=512: E||out-avg||^2/||avg||^2 = %.3e (exact %.3e); same run: "
                "scatter-reduce %.3e, allgather %.3e\n",
                K, mse[0].mean() / avg2, v / avg2, mse[1].mean() / avg2, mse[2].mean() / avg2);
}

TEST(Stats, BucketedCompressedExchangeIsUnbiased) {
  const Communicator comm = Communicator::world();
  const int K = comm.size(), me = comm.rank();
  const std::vector<std::uint64_t> sizes = {12000, 300, 25000};
  const int trials = 100;
  auto cx = make_exchange(config(StrategyKind::scatter_reduce, codec(CodecKind::elias_dense), 5), comm);
  auto dx = make_exchange(config(StrategyKind::allreduce, codec(CodecKind::fp32)), comm);
  qsgd::comm::BucketerConfig bc;
  bc.fusion_bytes = 200000;
  qsgd::comm::Bucketer<Exec> bk(*cx, *dx, bc);
  for (auto n : sizes) bk.add(n);
  bk.plan();
  ASSERT_EQ(bk.buckets().size(), 2u);  // {0, 2} fused and compressed, {1} dense
  std::vector<std::vector<std::vector<float>>> g(sizes.size());
  std::vector<std::vector<double>> avg;
  for (std::size_t t = 0; t < sizes.size(); ++t) {
    for (int r = 0; r < K; ++r) g[t].push_back(gradient(90 + t, r, sizes[t]));
    avg.push_back(exact_average(90 + t, K, sizes[t]));
  }
  std::vector<std::vector<Moments>> proj(sizes.size());
  std::vector<std::vector<std::pair<std::string, std::vector<double>>>> dirs;
  for (std::size_t t = 0; t < sizes.size(); ++t) {
    dirs.push_back(directions(g[t], avg[t]));
    proj[t].resize(dirs[t].size());
  }
  std::vector<Values> in;
  for (std::size_t t = 0; t < sizes.size(); ++t) in.push_back(to_device(g[t][me]));
  for (int step = 0; step < trials; ++step) {
    bk.begin_step(static_cast<std::uint64_t>(step));
    for (std::size_t t = 0; t < sizes.size(); ++t) bk.push(static_cast<std::uint32_t>(t), in[t]);
    for (std::size_t t = 0; t < sizes.size(); ++t) {
      Values out("out", sizes[t]);
      bk.wait(static_cast<std::uint32_t>(t), out);
      const auto h = to_host(out, sizes[t]);
      if (sizes[t] < bc.layer_filter) {  // fp32: within the rounding of K - 1 additions and a scaling
        std::size_t bad = 0;
        for (std::size_t i = 0; i < h.size(); ++i) {
          double mx = 0;
          for (int r = 0; r < K; ++r) mx = std::max(mx, std::fabs(double(g[t][r][i])));
          bad += std::fabs(h[i] - avg[t][i]) <= 2 * (K + 1) * 0x1.0p-24 * mx ? 0 : 1;
        }
        EXPECT_EQ(bad, 0u) << "dense tensor " << t << ", step " << step;
        continue;
      }
      for (std::size_t j = 0; j < dirs[t].size(); ++j) proj[t][j].add(dot_err(dirs[t][j].second, h, avg[t]));
    }
  }
  for (std::size_t t = 0; t < sizes.size(); ++t)
    if (sizes[t] >= bc.layer_filter) check_unbiased("bucketed tensor " + std::to_string(t), proj[t], dirs[t]);
}

}  // namespace
