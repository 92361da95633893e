#pragma once
// Helpers shared by the qsgd::comm tests.
//
// Gradients are pure functions of (seed, rank, index), so every rank can build
// every other rank's gradient locally and compute the exact average (in
// double) and the rank-order float average without communicating. Reference
// computations run on the host; Views move through mirrors, so the same tests
// compile for device backends.

#include <gtest/gtest.h>
#include <mpi.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <qsgd/comm.hpp>
#include <qsgd/kernels.hpp>
#include <string>
#include <vector>

namespace qsgd_comm_test {

using Exec = Kokkos::DefaultExecutionSpace;
using Mem = Exec::memory_space;
using Values = Kokkos::View<float*, Mem>;
using ExchangePtr = std::unique_ptr<qsgd::comm::Exchange<Exec>>;
using qsgd::CodecConfig;
using qsgd::CodecKind;
using qsgd::Norm;
using qsgd::comm::StrategyKind;

using qsgd::mix64;

// Standard normal from (seed, rank, i), Box-Muller on two 53-bit uniforms.
inline double normal(std::uint64_t seed, int rank, std::uint64_t i) {
  const std::uint64_t h1 = mix64(mix64(seed * 0x9E3779B97F4A7C15ull + static_cast<std::uint64_t>(rank)) ^ (2 * i));
  const std::uint64_t h2 = mix64(h1 ^ (2 * i + 1));
  return qsgd::box_muller(qsgd::unit_open(h1), qsgd::unit_open(h2));
}

// Rank r's gradient: N(0,1) times a magnitude that changes every 700
// coordinates (so quantization buckets of very different scales meet).
inline std::vector<float> gradient(std::uint64_t seed, int rank, std::uint64_t n) {
  static const double mags[] = {1.0, 0.05, 3.0, 0.4};
  std::vector<float> g(n);
  for (std::uint64_t i = 0; i < n; ++i) g[i] = static_cast<float>(normal(seed, rank, i) * mags[(i / 700) % 4]);
  return g;
}

inline Values to_device(const std::vector<float>& h) {
  Values v(Kokkos::view_alloc(Kokkos::WithoutInitializing, "test::values"), h.size());
  auto m = Kokkos::create_mirror_view(v);
  for (std::size_t i = 0; i < h.size(); ++i) m(i) = h[i];
  Kokkos::deep_copy(v, m);
  return v;
}

inline std::vector<float> to_host(const Values& v, std::size_t n) {
  auto m = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
  return std::vector<float>(m.data(), m.data() + n);
}

// Exact average of all ranks' gradients, in double.
inline std::vector<double> exact_average(std::uint64_t seed, int ranks, std::uint64_t n) {
  std::vector<double> a(n, 0.0);
  for (int r = 0; r < ranks; ++r) {
    const auto g = gradient(seed, r, n);
    for (std::uint64_t i = 0; i < n; ++i) a[i] += g[i];
  }
  for (auto& x : a) x /= ranks;
  return a;
}

// What the fp32 codec strategies compute: acc = 0; acc = acc + (1/K) g_r in
// rank order, every operation rounded to float.
inline std::vector<float> rank_order_average(std::uint64_t seed, int ranks, std::uint64_t n) {
  std::vector<float> a(n, 0.0f);
  const float w = 1.0f / static_cast<float>(ranks);
  for (int r = 0; r < ranks; ++r) {
    const auto g = gradient(seed, r, n);
    for (std::uint64_t i = 0; i < n; ++i) {
      const float t = w * g[i];
      a[i] = a[i] + t;
    }
  }
  return a;
}

inline std::uint64_t bits_hash(const std::vector<float>& v) {
  return qsgd::comm::float_fingerprint(v.data(), v.size());
}

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

// Collective: true on every rank when every rank holds the same bits.
inline bool identical_on_all_ranks(const qsgd::comm::Communicator& comm, const std::vector<float>& v) {
  const auto all = comm.allgather(bits_hash(v));
  return std::all_of(all.begin(), all.end(), [&](std::uint64_t h) { return h == all[0]; });
}

// Collective: true on every rank when `ok` is true on every rank.
inline bool all_ranks(const qsgd::comm::Communicator& comm, bool ok) {
  const auto all = comm.allgather(ok ? 1 : 0);
  return std::all_of(all.begin(), all.end(), [](std::uint64_t x) { return x == 1; });
}

inline CodecConfig codec(CodecKind k, std::uint32_t s = 16, std::uint32_t d = 512, Norm norm = Norm::max) {
  CodecConfig c;
  c.codec = k;
  c.s = s;
  c.d = d;
  c.norm = norm;
  return c;
}

inline qsgd::comm::ExchangeConfig config(StrategyKind k, const CodecConfig& c, std::uint64_t seed = 1) {
  qsgd::comm::ExchangeConfig cfg;
  cfg.strategy = k;
  cfg.codec = c;
  cfg.seed = seed;
  return cfg;
}

inline std::string name(StrategyKind k, const CodecConfig& c) {
  return qsgd::comm::to_string(k) + "/" + qsgd::to_string(c.codec);
}

// Runs one blocking exchange of `grad` and returns the host result.
inline std::vector<float> run(qsgd::comm::Exchange<Exec>& ex, const std::vector<float>& grad, std::uint32_t tensor,
                              std::uint64_t step) {
  Values g = to_device(grad);
  Values out("test::out", grad.size());
  ex.average(g, out, tensor, step);
  return to_host(out, grad.size());
}

// PowerSGD in double (comm/src/powersgd.cpp, the paper's algorithm), the
// reference of its tests: one step over every rank's gradient (grads[r]),
// with the compressed blocks of `layout` (those paying 2x at rank r) and
// their Qs in `q` (layout order, updated: the warm start). Elements outside
// the compressed blocks are the plain average.
inline std::vector<double> powersgd_reference(const std::vector<std::vector<float>>& grads,
                                              const std::vector<qsgd::comm::MatrixBlock>& layout, std::uint32_t r,
                                              std::vector<double>& q) {
  const std::size_t K = grads.size(), n = grads[0].size();
  std::vector<double> out(n, 0.0);
  for (const auto& g : grads)
    for (std::size_t i = 0; i < n; ++i) out[i] += g[i] / static_cast<double>(K);
  std::size_t q_off = 0;
  for (const auto& b : layout) {
    if (b.rows * b.cols < 2 * std::uint64_t(r) * (b.rows + b.cols)) continue;
    const std::size_t R = b.rows, C = b.cols;
    auto m = [&](std::size_t k, std::size_t a, std::size_t c) { return double(grads[k][b.offset + a * C + c]); };
    std::vector<double> p(R * r, 0.0), qn(C * r, 0.0);
    for (std::size_t k = 0; k < K; ++k)
      for (std::size_t a = 0; a < R; ++a)
        for (std::size_t c = 0; c < r; ++c)
          for (std::size_t j = 0; j < C; ++j) p[a * r + c] += m(k, a, j) * q[q_off + j * r + c] / K;
    for (std::size_t c = 0; c < r; ++c) {  // modified Gram-Schmidt, twice; dependent columns become 0
      double before = 0;
      for (std::size_t a = 0; a < R; ++a) before += p[a * r + c] * p[a * r + c];
      for (int pass = 0; pass < 2; ++pass)
        for (std::size_t j = 0; j < c; ++j) {
          double dot = 0;
          for (std::size_t a = 0; a < R; ++a) dot += p[a * r + j] * p[a * r + c];
          for (std::size_t a = 0; a < R; ++a) p[a * r + c] -= dot * p[a * r + j];
        }
      double nn = 0;
      for (std::size_t a = 0; a < R; ++a) nn += p[a * r + c] * p[a * r + c];
      const bool keep = nn > 0 && nn > 1e-10 * before;
      for (std::size_t a = 0; a < R; ++a) p[a * r + c] = keep ? p[a * r + c] / std::sqrt(nn) : 0.0;
    }
    for (std::size_t k = 0; k < K; ++k)
      for (std::size_t j = 0; j < C; ++j)
        for (std::size_t c = 0; c < r; ++c)
          for (std::size_t a = 0; a < R; ++a) qn[j * r + c] += m(k, a, j) * p[a * r + c] / K;
    for (std::size_t a = 0; a < R; ++a)
      for (std::size_t j = 0; j < C; ++j) {
        double v = 0;
        for (std::size_t c = 0; c < r; ++c) v += p[a * r + c] * qn[j * r + c];
        out[b.offset + a * C + j] = v;
      }
    std::copy(qn.begin(), qn.end(), q.begin() + static_cast<std::ptrdiff_t>(q_off));
    q_off += C * r;
  }
  return out;
}

// Number of quantization stages (1, or 2 with requantization) of a strategy.
inline int stages(StrategyKind k) {
  return k == StrategyKind::param_server || k == StrategyKind::scatter_reduce ? 2 : 1;
}

}  // namespace qsgd_comm_test
