// qsgd::comm under MPI, deterministic properties. Registered at 1, 2, 3 and 4
// ranks. Every test is collective: local checks use EXPECT_* and never return
// early before a collective.

#include <chrono>
#include <cstdlib>
#include <thread>

#include "comm_test_util.hpp"
#include "qsgd/kernels/detail/arith.hpp"
#include "qsgd/kernels/detail/float_codec.hpp"

namespace {

using namespace qsgd_comm_test;
using qsgd::comm::Communicator;
using qsgd::comm::ExchangeError;
using qsgd::comm::make_exchange;
using qsgd::comm::Transport;

// sum(i) += add(i): a free function, as nvcc allows no extended device
// lambda in a gtest body (a private member function).
template <class Sum, class Add>
void add_levels(const Sum& sum, const Add& add, std::uint64_t n) {
  Kokkos::parallel_for(
      "test::sum", Kokkos::RangePolicy<Exec>(0, n), KOKKOS_LAMBDA(std::uint64_t i) { sum(i) += add(i); });
}

struct Case {
  StrategyKind strategy;
  CodecConfig codec;
  int server = 0;
  Transport transport = Transport::ring;
};

std::vector<Case> all_cases(int ranks) {
  std::vector<Case> cs = {{StrategyKind::allreduce, codec(CodecKind::fp32)},
                          {StrategyKind::allreduce16, codec(CodecKind::bf16)},
                          {StrategyKind::allreduce16, codec(CodecKind::fp16)}};
  for (StrategyKind k : {StrategyKind::allgather, StrategyKind::param_server, StrategyKind::scatter_reduce})
    for (CodecKind c : {CodecKind::fixed, CodecKind::elias_dense, CodecKind::elias_sparse, CodecKind::fp32})
      cs.push_back({k, codec(c)});
  cs.push_back({StrategyKind::allgather, codec(CodecKind::bf16)});
  cs.push_back({StrategyKind::param_server, codec(CodecKind::fixed, 7), ranks - 1});  // server not rank 0
  cs.push_back({StrategyKind::scatter_reduce, codec(CodecKind::fixed, 16, 0)});       // one bucket: any split
  for (CodecKind c : {CodecKind::fixed, CodecKind::elias_dense, CodecKind::elias_sparse, CodecKind::rans})
    cs.push_back({StrategyKind::shared_scale, codec(c)});
  cs.push_back({StrategyKind::shared_scale, codec(CodecKind::fixed, 16, 0)});  // one bucket
  // The library's collectives: every strategy that has a ring schedule.
  cs.push_back({StrategyKind::allreduce, codec(CodecKind::fp32), 0, Transport::library});
  cs.push_back({StrategyKind::allreduce16, codec(CodecKind::bf16), 0, Transport::library});
  cs.push_back({StrategyKind::allreduce16, codec(CodecKind::fp16), 0, Transport::library});
  for (CodecKind c : {CodecKind::fixed, CodecKind::elias_dense, CodecKind::fp32}) {
    cs.push_back({StrategyKind::allgather, codec(c), 0, Transport::library});
    cs.push_back({StrategyKind::scatter_reduce, codec(c), 0, Transport::library});
  }
  cs.push_back({StrategyKind::shared_scale, codec(CodecKind::elias_dense), 0, Transport::library});
  return cs;
}

std::string label(const Case& c) {
  return name(c.strategy, c.codec) + " s " + std::to_string(c.codec.s) + " d " + std::to_string(c.codec.d) +
         " server " + std::to_string(c.server) + " transport " + qsgd::comm::to_string(c.transport);
}

ExchangePtr make(const Case& c, const Communicator& comm, std::uint64_t seed = 1) {
  auto cfg = config(c.strategy, c.codec, seed);
  cfg.server = c.server;
  cfg.transport = c.transport;
  cfg.segment_bytes = 1000;  // several pipelined segments per block at n = 4099
  return make_exchange(cfg, comm);
}

// Largest |error| the algorithm allows at coordinate i, deterministically.
std::vector<double> tolerance(const Case& c, int K, std::uint64_t seed, std::uint64_t n) {
  std::vector<double> mx(n, 0.0), tol(n, 0.0);
  for (int r = 0; r < K; ++r) {
    const auto g = gradient(seed, r, n);
    for (std::uint64_t i = 0; i < n; ++i) mx[i] = std::max(mx[i], std::fabs(static_cast<double>(g[i])));
  }
  const CodecKind ck = c.codec.codec;
  if (c.strategy == StrategyKind::allreduce || ck == CodecKind::fp32) {
    // K - 1 float additions and a scaling, each within 2^-24 of a partial sum <= max.
    for (std::uint64_t i = 0; i < n; ++i) tol[i] = (K + 1) * 0x1.0p-24 * mx[i] * 2;
    return tol;
  }
  if (c.strategy == StrategyKind::allreduce16 || ck == CodecKind::bf16 || ck == CodecKind::fp16) {
    const bool half = ck == CodecKind::fp16;
    const double rel = half ? 0x1.0p-11 : 0x1.0p-8, abs = half ? 0x1.0p-24 : 0.0;
    for (std::uint64_t i = 0; i < n; ++i) tol[i] = (2 * K + 1) * (rel * mx[i] + abs);
    return tol;
  }
  // Max-norm quantization: each stage moves a coordinate by less than one unit
  // scale / s of its bucket, and every scale is at most the bucket's largest
  // |g_r| over ranks.
  const std::uint64_t d = c.codec.d == 0 ? std::max<std::uint64_t>(n, 1) : c.codec.d;
  for (std::uint64_t b0 = 0; b0 < n; b0 += d) {
    double m = 0;
    for (std::uint64_t i = b0; i < std::min(n, b0 + d); ++i) m = std::max(m, mx[i]);
    for (std::uint64_t i = b0; i < std::min(n, b0 + d); ++i)
      tol[i] = stages(c.strategy) * m / c.codec.s * (1 + 1e-5) + 1e-6 * m;
  }
  return tol;
}

TEST(Exchange, IdenticalBitsOnEveryRankAndWithinTheAlgorithmsBound) {
  const Communicator comm = Communicator::world();
  const int K = comm.size(), me = comm.rank();
  const std::uint64_t seed = 11;
  for (const Case& c : all_cases(K)) {
    auto ex = make(c, comm, seed);
    for (std::uint64_t n : {std::uint64_t(0), std::uint64_t(1), std::uint64_t(K > 1 ? K - 1 : 1), std::uint64_t(1000),
                            std::uint64_t(4099)}) {
      const auto out = run(*ex, gradient(seed, me, n), 3, 7);
      EXPECT_TRUE(identical_on_all_ranks(comm, out)) << label(c) << " n " << n;
      if (c.codec.codec == CodecKind::fp32 && c.strategy != StrategyKind::allreduce) {
        EXPECT_TRUE(same_bits(out, rank_order_average(seed, K, n))) << label(c) << " n " << n;
        continue;
      }
      const auto avg = exact_average(seed, K, n);
      const auto tol = tolerance(c, K, seed, n);
      std::uint64_t bad = 0;
      for (std::uint64_t i = 0; i < n; ++i)
        if (!(std::fabs(out[i] - avg[i]) <= tol[i])) {
          if (bad++ == 0)
            ADD_FAILURE() << label(c) << " n " << n << " i " << i << ": " << out[i] << " vs " << avg[i] << " tol "
                          << tol[i];
        }
      EXPECT_EQ(bad, 0u) << label(c) << " n " << n;
    }
  }
}

// The ring transport's fp32 and 16-bit allreduce, against a host model of
// its schedule: element i of block b (blocks: n/K*b + (n%K)*b/K) is summed
// from rank b around the ring, s = ((g_b + g_{b+1}) + ...) + g_{b-1}, then
// scaled. Exact bits, for every segment size and window (the pipeline must
// not change the order).
TEST(Exchange, RingAllreduceSumsInRingOrderWhateverTheSegments) {
  const Communicator comm = Communicator::world();
  const int K = comm.size(), me = comm.rank();
  const std::uint64_t seed = 17;
  for (std::uint64_t n : {std::uint64_t(0), std::uint64_t(1), std::uint64_t(K + 1), std::uint64_t(4099),
                          std::uint64_t(70001)}) {
    std::vector<std::vector<float>> g;
    for (int r = 0; r < K; ++r) g.push_back(gradient(seed, r, n));
    std::vector<float> ref32(n), ref_bf16(n);
    const float w = 1.0f / static_cast<float>(K);
    for (int b = 0; b < K; ++b) {
      const std::uint64_t lo = n / K * b + n % K * b / K, hi = n / K * (b + 1) + n % K * (b + 1) / K;
      for (std::uint64_t i = lo; i < hi; ++i) {
        float s32 = g[b][i];
        std::uint16_t s16 = qsgd::detail::float_to_bf16(qsgd::detail::mul_rn(g[b][i], w));
        for (int k = 1; k < K; ++k) {
          const int r = (b + k) % K;
          s32 = s32 + g[r][i];
          const std::uint16_t h = qsgd::detail::float_to_bf16(qsgd::detail::mul_rn(g[r][i], w));
          s16 = qsgd::detail::float_to_bf16(qsgd::detail::bf16_to_float(h) + qsgd::detail::bf16_to_float(s16));
        }
        ref32[i] = K > 1 ? qsgd::detail::mul_rn(s32, w) : s32;
        ref_bf16[i] = qsgd::detail::bf16_to_float(s16);
      }
    }
    for (std::uint64_t seg : {std::uint64_t(8), std::uint64_t(1000), std::uint64_t(1) << 20})
      for (std::uint32_t window : {1u, 3u}) {
        for (StrategyKind k : {StrategyKind::allreduce, StrategyKind::allreduce16})
          for (bool checksums : {true, false}) {
            auto cfg = config(k, codec(k == StrategyKind::allreduce ? CodecKind::fp32 : CodecKind::bf16));
            cfg.transport = Transport::ring;
            cfg.segment_bytes = seg;
            cfg.window = window;
            cfg.ring_checksums = checksums;
            auto ex = make_exchange(cfg, comm);
            const auto out = run(*ex, g[static_cast<std::size_t>(me)], 0, 1);
            EXPECT_TRUE(same_bits(out, k == StrategyKind::allreduce ? ref32 : ref_bf16))
                << qsgd::comm::to_string(k) << " n " << n << " segment " << seg << " window " << window
                << " checksums " << checksums;
            if (K > 1 && n > 0) {
              // The values' bytes, and with checksums 4 bytes for each of the
              // 2 (K - 1) steps' segments (as many per block as the segment
              // size cuts the longest block into, within the tag space).
              const std::uint64_t elem = k == StrategyKind::allreduce ? 4 : 2, steps = 2 * (K - 1);
              const std::uint64_t longest = n / K + (n % K ? 1 : 0);
              const std::uint64_t segs =
                  std::min<std::uint64_t>(std::max<std::uint64_t>(1, (longest * elem + seg - 1) / seg),
                                          std::max<std::uint64_t>(1, 32767 / 2 / steps));
              EXPECT_EQ(ex->last_stats().wire_bytes, steps * n * elem / K + (checksums ? steps * segs * 4 : 0))
                  << qsgd::comm::to_string(k) << " n " << n << " segment " << seg << " checksums " << checksums;
            }
          }
      }
  }
}

// The ring transport cuts allgather's messages into pieces of segment_bytes of
// fp32 input (whole buckets) and decodes each slice as soon as its pieces are
// in; element i's sum is formed in rank order whatever the pieces, so the
// bits equal one message per rank through the library's allgatherv, and every
// piece costs its own frame. Many pieces, one piece, pieces of one bucket,
// one bucket over the whole vector (pieces are views of one quantization),
// and more pieces than tags allow (the piece count is capped).
TEST(Exchange, AllgatherPiecesGiveTheLibrarysBitsWhateverTheirSize) {
  const Communicator comm = Communicator::world();
  const int K = comm.size(), me = comm.rank();
  const std::uint64_t seed = 23;
  struct Cut {
    std::uint64_t n, segment;
    std::uint32_t d;
  };
  const std::vector<Cut> cuts = {{5000, 1, 512},    {5000, 2048, 512}, {5000, 6000, 512}, {5000, 4 << 20, 512},
                                 {5000, 1000, 0},   {300, 8, 512},     {0, 8, 512},       {1, 8, 512},
                                 {40000, 4, 0}};
  // The rule of docs/exchange.md: pieces of segment / 4 elements, rounded
  // down to whole buckets (at least one) when the vector has several, at
  // most 32768 / (K - 1) pieces (the tag space), then as even as buckets allow.
  const auto pieces_of = [K](const Cut& c, bool quantized) -> std::uint64_t {
    const std::uint64_t align = quantized && c.d != 0 && c.d < c.n ? c.d : 1;
    const std::uint64_t max_p = 32768 / static_cast<std::uint64_t>(K - 1);
    std::uint64_t per = std::max(align, c.segment / 4 / align * align);
    if ((c.n + per - 1) / per > max_p) per = ((c.n + max_p - 1) / max_p + align - 1) / align * align;
    return std::max<std::uint64_t>(1, (c.n + per - 1) / per);
  };
  for (const Cut& cut : cuts)
    for (CodecKind ck : {CodecKind::fixed, CodecKind::elias_dense, CodecKind::rans, CodecKind::bf16}) {
      if (cut.n == 40000 && ck != CodecKind::fixed) continue;  // tens of thousands of messages: one codec
      const CodecConfig cc = codec(ck, 16, cut.d);
      const auto g = gradient(seed, me, cut.n);
      auto lib_cfg = config(StrategyKind::allgather, cc, seed);
      lib_cfg.transport = Transport::library;
      auto lib = make_exchange(lib_cfg, comm);
      const auto ref = run(*lib, g, 2, 9);
      auto cfg = lib_cfg;
      cfg.transport = Transport::ring;
      cfg.segment_bytes = cut.segment;
      auto ex = make_exchange(cfg, comm);
      const auto out = run(*ex, g, 2, 9);
      const std::string what =
          name(StrategyKind::allgather, cc) + " d " + std::to_string(cut.d) + " n " + std::to_string(cut.n) +
          " segment " + std::to_string(cut.segment);
      EXPECT_TRUE(same_bits(out, ref)) << what;
      if (K == 1) continue;
      // Each piece's message and its 32-byte frame from every other rank.
      const std::uint64_t pieces = pieces_of(cut, ck != CodecKind::bf16);
      if (cut.n == 40000) {
        EXPECT_LT(pieces, cut.n) << "the tag cap is not exercised";
      }
      const auto enc = comm.allgather(ex->last_stats().encoded_bytes);
      std::uint64_t want = 0;
      for (int r = 0; r < K; ++r)
        if (r != me) want += enc[r] + 32 * pieces;
      EXPECT_EQ(ex->last_stats().wire_bytes, want) << what;
    }
}

// One rank communicates nothing: no time may be booked as waiting for the
// network, under any strategy or transport. Each rank runs it on its own
// one-rank MPI communicator (MPI_COMM_SELF), so it holds at every rank count.
TEST(Exchange, OneRankBlocksOnNothing) {
  const Communicator comm(MPI_COMM_SELF);
  for (const Case& c : all_cases(1)) {
    auto ex = make(c, comm);
    run(*ex, gradient(3, 0, 5000), 0, 1);
    EXPECT_EQ(ex->last_stats().blocked_s, 0.0) << label(c);
    EXPECT_EQ(ex->last_stats().intervals, 0) << label(c);
    EXPECT_EQ(ex->last_stats().wire_bytes, 0u) << label(c);
  }
}

// The scales shared-scale agrees on for the test gradients of K ranks: bucket
// by bucket, the largest of the ranks' scales.
Values agreed_scales(std::uint64_t seed, int K, std::uint64_t n, std::uint64_t d, Norm norm) {
  const std::uint64_t nb = (n + d - 1) / d;
  Values mine("mine", nb), agreed("agreed", nb);
  std::vector<float> best(nb, 0.0f);
  for (int r = 0; r < K; ++r) {
    qsgd::compute_scales(Exec(), to_device(gradient(seed, r, n)), n, static_cast<std::uint32_t>(d), norm, mine,
                         "test");
    const auto h = to_host(mine, nb);
    for (std::uint64_t b = 0; b < nb; ++b) best[b] = std::max(best[b], h[b]);
  }
  Kokkos::deep_copy(agreed, Kokkos::View<const float*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(best.data(), nb));
  return agreed;
}

// shared-scale against a model built from the kernels: every rank rebuilds
// every rank's levels against the agreed scales (the largest of any rank's,
// bucket by bucket) with the exchange's keys, sums them as integers, and
// dequantizes the sums with K s levels. The exchange must give these bits: it
// fails if a rank quantizes against its own scale, if the reduce stage
// decodes to floats and requantizes, or if a rank's levels are dropped or
// counted twice.
TEST(Exchange, SharedScaleSumsEveryRanksLevelsAgainstTheAgreedScales) {
  const Communicator comm = Communicator::world();
  const int K = comm.size(), me = comm.rank();
  const std::uint64_t seed = 13, step = 5;
  const std::uint32_t tensor = 2;
  const Exec exec;
  for (const auto& [c, n] : {std::pair{codec(CodecKind::fixed, 16, 512), std::uint64_t(4099)},
                             std::pair{codec(CodecKind::elias_sparse, 7, 256, Norm::l2), std::uint64_t(3000)},
                             std::pair{codec(CodecKind::rans, 16, 0), std::uint64_t(2500)}}) {
    auto ex = make_exchange(config(StrategyKind::shared_scale, c, seed), comm);
    const auto out = run(*ex, gradient(seed, me, n), tensor, step);
    const std::uint64_t d = c.d == 0 ? n : c.d, nb = (n + d - 1) / d;
    std::vector<Values> g;
    for (int r = 0; r < K; ++r) g.push_back(to_device(gradient(seed, r, n)));
    const Values agreed = agreed_scales(seed, K, n, d, c.norm);
    qsgd::Quantized<Mem> q, sum;
    sum.reshape(n, static_cast<std::uint32_t>(d), c.s * static_cast<std::uint32_t>(K), c.norm,
                qsgd::QuantizerKind::stochastic);
    Kokkos::deep_copy(Kokkos::subview(sum.scales, Kokkos::make_pair<std::uint64_t>(0, nb)), agreed);
    Kokkos::deep_copy(sum.levels, 0);
    for (int r = 0; r < K; ++r) {
      qsgd::quantize_with_scales(exec, c, g[r], n, agreed,
                                 qsgd::RngKey{seed, step, static_cast<std::uint32_t>(r), tensor}, q);
      add_levels(sum.levels, q.levels, n);
    }
    Values ref("ref", n);
    qsgd::dequantize(exec, sum, ref);
    EXPECT_TRUE(same_bits(out, to_host(ref, n))) << qsgd::to_string(c.codec) << " s " << c.s << " d " << c.d;
  }
}

// Error feedback's `sent`: what this rank's first stage coded, bit for bit
// the dequantized quantization with the rank's key (slices of one
// quantization: exchange_base.hpp), against the agreed scales for
// shared-scale; the gradient itself for the fp32 allreduce; refused by
// allreduce16, whose sums round on the way.
TEST(Exchange, SentIsThisRanksDecodedContribution) {
  const Communicator comm = Communicator::world();
  const int K = comm.size(), me = comm.rank();
  const std::uint64_t seed = 17, step = 3;
  const std::uint32_t tensor = 4;
  const Exec exec;
  const std::uint64_t n = 5000;
  const auto mine = gradient(seed, me, n);
  auto sent_of = [&](qsgd::comm::Exchange<Exec>& ex, std::vector<float>* out = nullptr) {
    Values g = to_device(mine), o("test::out", n), sent("test::sent", n);
    ex.wait(ex.start(g, o, tensor, step, sent));
    if (out) *out = to_host(o, n);
    return to_host(sent, n);
  };
  for (const StrategyKind k : {StrategyKind::allgather, StrategyKind::scatter_reduce, StrategyKind::param_server}) {
    for (const auto t : {qsgd::comm::Transport::ring, qsgd::comm::Transport::library}) {
      for (const CodecConfig& c : {codec(CodecKind::fixed, 16, 512), codec(CodecKind::elias_dense, 7, 0, Norm::l2),
                                   codec(CodecKind::rans, 16, 256), codec(CodecKind::bf16)}) {
        auto cfg = config(k, c, seed);
        cfg.transport = t;
        cfg.segment_bytes = 4096;  // several ring pieces
        auto ex = make_exchange(cfg, comm);
        const auto sent = sent_of(*ex);
        Values ref("ref", n);
        if (qsgd::is_quantized(c.codec)) {
          qsgd::Quantized<Mem> q;
          qsgd::quantize(exec, c, to_device(mine), n, qsgd::RngKey{seed, step, static_cast<std::uint32_t>(me), tensor},
                         q);
          qsgd::dequantize(exec, q, ref);
        } else {
          qsgd::Codec<Exec> codec16(c, exec);
          typename qsgd::Codec<Exec>::words_view w("w", codec16.max_message_bytes(n) / 8);
          const std::size_t bytes = codec16.encode(to_device(mine), n, qsgd::RngKey{}, w);
          codec16.decode(w, bytes, ref);
        }
        EXPECT_TRUE(same_bits(sent, to_host(ref, n)))
            << name(k, c) << " " << qsgd::comm::to_string(t) << " K " << K << " rank " << me;
      }
    }
  }
  {  // shared-scale: against the agreed scales (the maxima of the ranks' bucket scales)
    const CodecConfig c = codec(CodecKind::fixed, 16, 512);
    auto ex = make_exchange(config(StrategyKind::shared_scale, c, seed), comm);
    const auto sent = sent_of(*ex);
    qsgd::Quantized<Mem> q;
    qsgd::quantize_with_scales(exec, c, to_device(mine), n, agreed_scales(seed, K, n, 512, c.norm),
                               qsgd::RngKey{seed, step, static_cast<std::uint32_t>(me), tensor}, q);
    Values ref("ref", n);
    qsgd::dequantize(exec, q, ref);
    EXPECT_TRUE(same_bits(sent, to_host(ref, n))) << "shared-scale K " << K;
  }
  {  // fp32 allreduce: exact, the gradient itself; the average unchanged by asking
    auto ex = make_exchange(config(StrategyKind::allreduce, codec(CodecKind::fp32)), comm);
    std::vector<float> out;
    EXPECT_TRUE(same_bits(sent_of(*ex, &out), mine));
    EXPECT_TRUE(same_bits(out, run(*ex, mine, tensor, step)));
  }
  {  // allreduce16 has no per-rank contribution: refused, naming the cause
    auto cfg = config(StrategyKind::allreduce16, codec(CodecKind::bf16));
    cfg.on_error = qsgd::comm::ErrorPolicy::throw_error;  // every rank refuses: throwing is safe
    auto ex = make_exchange(cfg, comm);
    try {
      sent_of(*ex);
      ADD_FAILURE() << "allreduce16 accepted a sent View";
    } catch (const qsgd::comm::ExchangeError& e) {
      EXPECT_NE(std::string(e.what()).find("error feedback"), std::string::npos) << e.what();
    }
  }
}

// PowerSGD at K ranks: every rank holds the same bits, and they follow the
// double reference over all ranks' gradients (the same initial Q, from
// state()) for three warm-started steps, on both transports; the elements
// outside the compressed matrix (a vector, a tail, and a 6 x 6 matrix that
// would not pay 2x at r = 2) are the plain average; `sent` is the shared
// approximation in the compressed matrix and the rank's own gradient
// elsewhere (also in place, out = grad), and the bytes follow the two
// allreduces' formula.
TEST(Exchange, PowerSgdGivesEveryRankTheReferenceProjection) {
  const Communicator comm = Communicator::world();
  const int K = comm.size(), me = comm.rank();
  const std::uint64_t seed = 23, R = 30, C = 20, n = 5 + R * C + 36 + 7;
  const std::uint32_t r = 2;
  const std::vector<qsgd::comm::MatrixBlock> layout = {{5, R, C}, {5 + R * C, 6, 6}};
  std::vector<std::vector<float>> all;
  for (int k = 0; k < K; ++k) all.push_back(gradient(seed, k, n));
  const auto exact = exact_average(seed, K, n);
  for (const auto t : {Transport::ring, Transport::library}) {
    auto cfg = config(StrategyKind::powersgd, codec(CodecKind::fp32), seed);
    cfg.powersgd_rank = r;
    cfg.transport = t;
    cfg.segment_bytes = 256;  // several ring segments
    auto ex = make_exchange(cfg, comm);
    ex->set_layout(2, layout);
    const auto s0 = ex->state();
    std::vector<double> q(s0.begin(), s0.end());
    for (std::uint64_t step = 0; step < 3; ++step) {
      // Steps 0 and 2 out of place, step 1 in place (out = grad, as the Bucketer runs it).
      Values g = to_device(all[static_cast<std::size_t>(me)]), o("test::out", n), sent("test::sent", n);
      if (step == 1) o = g;
      ex->wait(ex->start(g, o, 2, step, sent));
      const auto out = to_host(o, n);
      const auto ref = powersgd_reference(all, layout, r, q);
      double scale = 0;
      for (double x : ref) scale = std::max(scale, std::fabs(x));
      const std::string what = "transport " + qsgd::comm::to_string(t) + " K " + std::to_string(K) + " step " +
                               std::to_string(step);
      EXPECT_TRUE(identical_on_all_ranks(comm, out)) << what;
      const auto sent_h = to_host(sent, n);
      const auto& own = all[static_cast<std::size_t>(me)];
      for (std::uint64_t i = 0; i < n; ++i) {
        EXPECT_NEAR(out[i], ref[i], 1e-4 * scale) << what << " i " << i;
        const bool compressed = i >= 5 && i < 5 + R * C;
        EXPECT_EQ(sent_h[i], compressed ? out[i] : own[i]) << what << " sent " << i;
        if (!compressed) {
          EXPECT_NEAR(out[i], exact[i], (K + 1) * 0x1.0p-23 * 4 * std::fabs(exact[i]) + 1e-6) << what;
        }
      }
      const std::uint64_t floats = R * r + (n - R * C) + C * r;
      // The ring's two allreduces (P with the rest, then Q) carry a CRC32C
      // per segment received: one segment per step at these sizes.
      const std::uint64_t checksums = t == Transport::ring ? 2 * 2 * std::uint64_t(K - 1) * 4 : 0;
      EXPECT_EQ(ex->last_stats().wire_bytes, 2 * std::uint64_t(K - 1) * 4 * floats / std::uint64_t(K) + checksums)
          << what;
    }
    EXPECT_TRUE(identical_on_all_ranks(comm, ex->state()));
  }
}

TEST(Exchange, SharedScaleRefusesWhatItCannotCarry) {
  const Communicator comm = Communicator::world();
  const int K = comm.size();
  try {
    make_exchange(config(StrategyKind::shared_scale, codec(CodecKind::fp32)), comm);
    ADD_FAILURE() << "fp32 accepted";
  } catch (const qsgd::Error& e) {
    EXPECT_NE(std::string(e.what()).find("needs a quantized codec"), std::string::npos) << e.what();
  }
  // rans holds at most 16383 levels: K s above that is refused by name.
  const std::uint32_t s = qsgd::rans_max_s / static_cast<std::uint32_t>(K) + 1;
  if (static_cast<std::uint64_t>(s) * K > qsgd::rans_max_s && s <= qsgd::rans_max_s) {
    try {
      make_exchange(config(StrategyKind::shared_scale, codec(CodecKind::rans, s)), comm);
      ADD_FAILURE() << "rans at s " << s << " and K " << K << " accepted";
    } catch (const qsgd::Error& e) {
      EXPECT_NE(std::string(e.what()).find("K s = " + std::to_string(std::uint64_t(s) * K)), std::string::npos)
          << e.what();
    }
  }
}

TEST(Exchange, WireCodeDoesNotChangeTheValues) {
  // The levels depend on the key only; fixed width and both Elias codes are
  // lossless codes of them, so the averages must agree to the bit.
  const Communicator comm = Communicator::world();
  const int me = comm.rank();
  const auto g = gradient(21, me, 4099);
  for (StrategyKind k : {StrategyKind::allgather, StrategyKind::param_server, StrategyKind::scatter_reduce,
                         StrategyKind::shared_scale})
    for (auto [s, d, norm] :
         {std::tuple{16u, 512u, Norm::max}, std::tuple{7u, 256u, Norm::l2}, std::tuple{16u, 0u, Norm::max}}) {
      std::vector<std::vector<float>> outs;
      for (CodecKind c : {CodecKind::fixed, CodecKind::elias_dense, CodecKind::elias_sparse}) {
        auto ex = make_exchange(config(k, codec(c, s, d, norm)), comm);
        outs.push_back(run(*ex, g, 1, 2));
      }
      EXPECT_TRUE(same_bits(outs[0], outs[1])) << qsgd::comm::to_string(k) << " s " << s << " d " << d;
      EXPECT_TRUE(same_bits(outs[0], outs[2])) << qsgd::comm::to_string(k) << " s " << s << " d " << d;
    }
}

TEST(Exchange, ZeroGradientsGiveZero) {
  const Communicator comm = Communicator::world();
  for (const Case& c : all_cases(comm.size())) {
    auto ex = make(c, comm);
    const auto out = run(*ex, std::vector<float>(3000, 0.0f), 0, 1);
    EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](float x) { return x == 0.0f; })) << label(c);
  }
}

TEST(Exchange, SameKeySameBitsOtherStepOtherDraws) {
  const Communicator comm = Communicator::world();
  const auto g = gradient(4, comm.rank(), 2000);
  for (StrategyKind k : {StrategyKind::allgather, StrategyKind::param_server, StrategyKind::scatter_reduce,
                         StrategyKind::shared_scale}) {
    auto ex = make_exchange(config(k, codec(CodecKind::elias_dense)), comm);
    const auto a = run(*ex, g, 5, 1), b = run(*ex, g, 5, 1), c = run(*ex, g, 5, 2), d = run(*ex, g, 6, 1);
    EXPECT_TRUE(same_bits(a, b)) << qsgd::comm::to_string(k);
    EXPECT_FALSE(same_bits(a, c)) << qsgd::comm::to_string(k);
    EXPECT_FALSE(same_bits(a, d)) << qsgd::comm::to_string(k);
  }
}

TEST(Exchange, NonBlockingOperationsOverlapAndMatchBlocking) {
  const Communicator comm = Communicator::world();
  const int me = comm.rank();
  auto sr = make_exchange(config(StrategyKind::scatter_reduce, codec(CodecKind::elias_dense)), comm);
  auto ps = make_exchange(config(StrategyKind::param_server, codec(CodecKind::fixed)), comm);
  const std::vector<std::uint64_t> sizes = {3000, 700, 5000};
  std::vector<Values> in, out;
  for (std::size_t t = 0; t < sizes.size(); ++t) {
    in.push_back(to_device(gradient(30 + t, me, sizes[t])));
    out.push_back(Values("out", sizes[t]));
  }
  Values pin = to_device(gradient(40, me, 2500)), pout("pout", 2500);
  std::vector<qsgd::comm::Handle> h;
  h.push_back(sr->start(in[0], out[0], 0, 4));
  sr->progress();
  auto hp = ps->start(pin, pout, 9, 4);
  h.push_back(sr->start(in[1], out[1], 1, 4));
  ps->progress();
  h.push_back(sr->start(in[2], out[2], 2, 4));
  EXPECT_EQ(sr->in_flight(), 3u);
  for (int i = 0; i < 5; ++i) {
    sr->progress();
    ps->test(hp);
  }
  sr->wait(h[2]);
  ps->wait(hp);
  sr->wait(h[0]);
  sr->wait(h[1]);
  EXPECT_EQ(sr->in_flight(), 0u);
  for (std::size_t t = 0; t < sizes.size(); ++t) {
    Values ref("ref", sizes[t]);
    sr->average(in[t], ref, static_cast<std::uint32_t>(t), 4);
    EXPECT_TRUE(same_bits(to_host(out[t], sizes[t]), to_host(ref, sizes[t]))) << t;
  }
  Values pref("pref", 2500);
  ps->average(pin, pref, 9, 4);
  EXPECT_TRUE(same_bits(to_host(pout, 2500), to_host(pref, 2500)));
}

TEST(Exchange, WireBytesFollowTheFormulas) {
  const Communicator comm = Communicator::world();
  const int K = comm.size(), me = comm.rank();
  const std::uint64_t n = 4099;
  const auto g = gradient(8, me, n);
  {
    // The ring (the default transport): a CRC32C of 4 bytes per segment
    // received, one segment per step at this size.
    auto ex = make_exchange(config(StrategyKind::allreduce, codec(CodecKind::fp32)), comm);
    run(*ex, g, 0, 0);
    EXPECT_EQ(ex->last_stats().wire_bytes, 2 * std::uint64_t(K - 1) * n * 4 / K + 2 * std::uint64_t(K - 1) * 4);
  }
  {
    auto ex = make_exchange(config(StrategyKind::allgather, codec(CodecKind::elias_dense)), comm);
    run(*ex, g, 0, 0);
    const auto enc = comm.allgather(ex->last_stats().encoded_bytes);
    std::uint64_t want = 0;
    for (int r = 0; r < K; ++r)
      if (r != me) want += enc[r] + 32;
    EXPECT_EQ(ex->last_stats().wire_bytes, want);
  }
  {
    auto ex = make_exchange(config(StrategyKind::param_server, codec(CodecKind::elias_dense)), comm);
    run(*ex, g, 0, 0);
    const auto enc = comm.allgather(ex->last_stats().encoded_bytes);
    const auto req = comm.allgather(ex->last_stats().requantized_bytes);
    std::uint64_t want = 0;
    if (me == 0) {
      for (int r = 1; r < K; ++r) want += enc[r] + 32;
    } else {
      want = req[0] + 32;
    }
    EXPECT_EQ(ex->last_stats().wire_bytes, want);
  }
  {
    auto ex = make_exchange(config(StrategyKind::scatter_reduce, codec(CodecKind::elias_dense)), comm);
    run(*ex, g, 0, 0);
    const auto wire = comm.allgather(ex->last_stats().wire_bytes);
    const auto enc = comm.allgather(ex->last_stats().encoded_bytes);
    const auto req = comm.allgather(ex->last_stats().requantized_bytes);
    // Summed over ranks: every chunk message but the K kept at home, every
    // reduced chunk K-1 times, and 2 x 32 bytes of metadata per pair of ranks.
    std::uint64_t total_wire = 0, total_enc = 0, total_req = 0;
    for (int r = 0; r < K; ++r) {
      total_wire += wire[r];
      total_enc += enc[r];
      total_req += req[r];
    }
    EXPECT_LT(total_wire, total_enc + (K - 1) * total_req + 64 * std::uint64_t(K) * (K - 1) + (K == 1 ? 1 : 0));
    EXPECT_GE(total_wire, (K - 1) * total_req + 64 * std::uint64_t(K) * (K - 1));
  }
  {
    // shared-scale: every rank's bytes in are exactly what scatter-reduce's
    // formula gives for its messages, plus a ring allreduce's share of the
    // n/d scales.
    auto ex = make_exchange(config(StrategyKind::shared_scale, codec(CodecKind::elias_dense)), comm);
    run(*ex, g, 0, 0);
    const auto enc = comm.allgather(ex->last_stats().encoded_bytes);
    const auto req = comm.allgather(ex->last_stats().requantized_bytes);
    const std::uint64_t nb = (n + 511) / 512;
    std::uint64_t back = 0;
    for (int r = 0; r < K; ++r)
      if (r != me) back += req[r] + 32;
    const std::uint64_t scales = 2 * std::uint64_t(K - 1) * 4 * nb / K;
    const std::uint64_t wire = ex->last_stats().wire_bytes;
    EXPECT_GE(wire, back + scales + 32 * std::uint64_t(K - 1));
    std::uint64_t first = 0;
    for (int r = 0; r < K; ++r)
      if (r != me) first += enc[r] + 32;  // rank r's whole message bounds the chunk it sends here
    EXPECT_LE(wire, back + scales + first);
    if (K == 1) {
      EXPECT_EQ(wire, 0u);
    }
  }
}

TEST(Exchange, ConfigurationMismatchNamesTheRanks) {
  const Communicator comm = Communicator::world();
  const int K = comm.size(), me = comm.rank();
  if (K == 1) GTEST_SKIP() << "needs two ranks";
  auto cfg = config(StrategyKind::allgather, codec(CodecKind::elias_dense, me == K - 1 ? 7 : 16));
  cfg.on_error = qsgd::comm::ErrorPolicy::throw_error;  // every rank sees the mismatch: throwing is safe
  try {
    make_exchange(cfg, comm);
    ADD_FAILURE() << "no error";
  } catch (const ExchangeError& e) {
    const std::string w = e.what();
    EXPECT_EQ(e.exit_code(), qsgd::comm::exit_config_mismatch);
    EXPECT_NE(w.find("exchange configuration differs across ranks"), std::string::npos) << w;
    EXPECT_NE(w.find("rank {" + std::to_string(K - 1) + "} has hash"), std::string::npos) << w;
    EXPECT_NE(w.find(K == 2 ? "rank {0} has hash" : "ranks {0, 1"), std::string::npos) << w;
    EXPECT_NE(w.find(me == K - 1 ? "s 7" : "s 16"), std::string::npos) << w;
  }
}

TEST(Exchange, RanksThatDisagreeOnAnOperationStopCleanly) {
  const Communicator comm = Communicator::world();
  const int K = comm.size(), me = comm.rank();
  if (K == 1) GTEST_SKIP() << "needs two ranks";
  // allgather and scatter-reduce exchange everyone's metadata, so every rank
  // detects the disagreement before any payload moves.
  for (StrategyKind k : {StrategyKind::allgather, StrategyKind::scatter_reduce}) {
    auto cfg = config(k, codec(CodecKind::fixed));
    cfg.on_error = qsgd::comm::ErrorPolicy::throw_error;
    auto ex = make_exchange(cfg, comm);
    try {
      run(*ex, gradient(1, me, me == K - 1 ? 1001 : 1000), 0, 3);
      ADD_FAILURE() << "no error";
    } catch (const ExchangeError& e) {
      EXPECT_EQ(e.exit_code(), qsgd::comm::exit_config_mismatch);
      EXPECT_NE(std::string(e.what()).find("ranks disagree on the operation"), std::string::npos) << e.what();
    }
  }
}

TEST(Bucketer, Fp32BucketsEqualPerTensorExchangesBitwise) {
  const Communicator comm = Communicator::world();
  const int K = comm.size(), me = comm.rank();
  const std::vector<std::uint64_t> sizes = {30000, 5, 20000, 100, 70000, 7, 12000};
  std::vector<std::vector<float>> g;
  for (std::size_t t = 0; t < sizes.size(); ++t) g.push_back(gradient(50 + t, me, sizes[t]));
  struct Pair {
    StrategyKind compressed, dense;
    bool bitwise;
  };
  // Rank-order fp32 averages do not depend on how tensors are fused. The
  // allreduce sums each element in ring order from the rank that owns its
  // block (or, with the library transport, in the order of the algorithm MPI
  // picks for the size), so a bucket and a lone tensor may sum in different
  // orders; with two ranks there is only one order.
  for (Pair p : {Pair{StrategyKind::scatter_reduce, StrategyKind::allgather, true},
                 Pair{StrategyKind::param_server, StrategyKind::scatter_reduce, true},
                 Pair{StrategyKind::allreduce, StrategyKind::allreduce, K <= 2}}) {
    auto cx = make_exchange(config(p.compressed, codec(CodecKind::fp32)), comm);
    auto dx = make_exchange(config(p.dense, codec(CodecKind::fp32)), comm);
    qsgd::comm::BucketerConfig bc;
    bc.fusion_bytes = 200000;
    qsgd::comm::Bucketer<Exec> bk(*cx, *dx, bc);
    for (auto n : sizes) bk.add(n);
    bk.plan();
    EXPECT_GE(bk.buckets().size(), 4u);
    bk.begin_step(3);
    for (std::size_t t = 0; t < sizes.size(); ++t) {
      bk.push(static_cast<std::uint32_t>(t), to_device(g[t]));
      bk.progress();
    }
    for (std::size_t t = sizes.size(); t-- > 0;) {
      Values out("out", sizes[t]);
      bk.wait(static_cast<std::uint32_t>(t), out);
      auto& ex = sizes[t] < bc.layer_filter ? *dx : *cx;
      const auto h = to_host(out, sizes[t]);
      const auto ref = run(ex, g[t], static_cast<std::uint32_t>(t), 3);
      EXPECT_TRUE(identical_on_all_ranks(comm, h)) << t;
      if (p.bitwise) {
        EXPECT_TRUE(same_bits(h, ref)) << qsgd::comm::to_string(p.compressed) << " tensor " << t;
      } else {
        // Two summation orders of K terms each err by at most
        // (K-1) u sum_r |g_r| (u = 2^-24); the final 1/K scaling adds one
        // rounding of each.
        std::vector<double> absum(sizes[t], 0.0);
        for (int r = 0; r < K; ++r) {
          const auto gr = gradient(50 + t, r, sizes[t]);
          for (std::size_t i = 0; i < gr.size(); ++i) absum[i] += std::fabs(gr[i]);
        }
        std::size_t bad = 0;
        for (std::size_t i = 0; i < h.size(); ++i) {
          const double tol = 2.0 * (K - 1) * 0x1.0p-24 * absum[i] / K + 2 * 0x1.0p-24 * std::fabs(ref[i]);
          bad += std::fabs(double(h[i]) - double(ref[i])) > tol ? 1 : 0;
        }
        EXPECT_EQ(bad, 0u) << "tensor " << t;
      }
    }
    bk.wait_all();
  }
}

TEST(Bucketer, RanksMayWaitForStartedBucketsInAnyOrder) {
  // Ranks push every tensor in the same order, then wait in different
  // orders: rank r waits for the buckets rotated by r. A ring's next step
  // needs its reduction on every rank, so a wait that blocked on its own
  // bucket alone would deadlock here (rank 0 inside bucket 0, rank 1 inside
  // bucket 1, each waiting for the other's reduction); the Bucketer's wait
  // advances every bucket in flight, of both exchanges (tensor 2 is under the
  // layer filter and goes through the dense one). A hang fails the test
  // through its time limit.
  const Communicator comm = Communicator::world();
  const int me = comm.rank();
  const std::vector<std::uint64_t> sizes = {40000, 50000, 5000, 30000, 60000};
  for (StrategyKind k : {StrategyKind::allreduce, StrategyKind::scatter_reduce}) {
    auto cfg = config(k, codec(k == StrategyKind::allreduce ? CodecKind::fp32 : CodecKind::fixed));
    cfg.segment_bytes = 4096;  // many segments, a window smaller than a block
    cfg.window = 2;
    auto cx = make_exchange(cfg, comm);
    auto dcfg = config(StrategyKind::allreduce, codec(CodecKind::fp32));
    dcfg.segment_bytes = 4096;
    dcfg.window = 2;
    auto dx = make_exchange(dcfg, comm);
    qsgd::comm::BucketerConfig bc;
    bc.fusion_bytes = 4 * 40000;  // one tensor per bucket
    qsgd::comm::Bucketer<Exec> bk(*cx, *dx, bc);
    for (auto n : sizes) bk.add(n);
    bk.plan();
    ASSERT_EQ(bk.buckets().size(), sizes.size());
    std::vector<std::vector<float>> g;
    for (std::size_t t = 0; t < sizes.size(); ++t) g.push_back(gradient(80 + t, me, sizes[t]));
    bk.begin_step(5);
    for (std::size_t t = 0; t < sizes.size(); ++t) bk.push(static_cast<std::uint32_t>(t), to_device(g[t]));
    std::vector<std::vector<float>> got(sizes.size());
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      const std::size_t t = (i + static_cast<std::size_t>(me)) % sizes.size();
      Values out("out", sizes[t]);
      bk.wait(static_cast<std::uint32_t>(t), out);
      got[t] = to_host(out, sizes[t]);
    }
    for (std::size_t t = 0; t < sizes.size(); ++t) {
      EXPECT_TRUE(identical_on_all_ranks(comm, got[t])) << qsgd::comm::to_string(k) << " tensor " << t;
      if (k == StrategyKind::allreduce || sizes[t] < bc.layer_filter) {
        // Same bits as the same exchange run alone on the tensor (a bucket
        // of one unpadded tensor has the same ring blocks).
        const auto ref = run(sizes[t] < bc.layer_filter ? *dx : *cx, g[t], static_cast<std::uint32_t>(t), 5);
        EXPECT_TRUE(same_bits(got[t], ref)) << "tensor " << t;
      }
    }
  }
}

TEST(Bucketer, PushInplaceEqualsPushBitwise) {
  // The same step through push (copies into fusion buffers) and push_inplace
  // (a tensor that is a bucket by itself is exchanged in its own memory):
  // the same bits, and the lone, unpadded tensors really were in place.
  const Communicator comm = Communicator::world();
  const int me = comm.rank();
  const std::vector<std::uint64_t> sizes = {30720, 5, 12000, 100, 70144, 7};  // 30720, 70144: multiples of d = 512
  for (StrategyKind k : {StrategyKind::allreduce, StrategyKind::scatter_reduce}) {
    auto cfg = config(k, codec(k == StrategyKind::allreduce ? CodecKind::fp32 : CodecKind::fixed));
    auto cx = make_exchange(cfg, comm);
    auto dx = make_exchange(config(StrategyKind::allreduce, codec(CodecKind::fp32)), comm);
    qsgd::comm::BucketerConfig bc;
    bc.fusion_bytes = 4 * 50000;  // 30720 and 12000 fuse (with padding for scatter-reduce); 70144 alone
    qsgd::comm::Bucketer<Exec> bk(*cx, *dx, bc);
    for (auto n : sizes) bk.add(n);
    bk.plan();
    std::vector<std::vector<float>> by_copy, in_place;
    for (int mode = 0; mode < 2; ++mode) {
      bk.begin_step(9);
      std::vector<Values> grads;
      for (std::size_t t = 0; t < sizes.size(); ++t) grads.push_back(to_device(gradient(90 + t, me, sizes[t])));
      for (std::size_t t = 0; t < sizes.size(); ++t) {
        if (mode == 0) bk.push(static_cast<std::uint32_t>(t), grads[t]);
        else bk.push_inplace(static_cast<std::uint32_t>(t), grads[t]);
      }
      if (mode == 1) {
        const auto& b = bk.buckets();
        for (std::size_t i = 0; i < b.size(); ++i) {
          const bool alone = b[i].tensors.size() == 1 && b[i].length == sizes[b[i].tensors[0]];
          EXPECT_EQ(b[i].data.data() == grads[b[i].tensors[0]].data(), alone) << "bucket " << i;
        }
      }
      auto& out = mode == 0 ? by_copy : in_place;
      for (std::size_t t = 0; t < sizes.size(); ++t) {
        bk.wait(static_cast<std::uint32_t>(t), grads[t]);
        out.push_back(to_host(grads[t], sizes[t]));
      }
    }
    for (std::size_t t = 0; t < sizes.size(); ++t)
      EXPECT_TRUE(same_bits(by_copy[t], in_place[t])) << qsgd::comm::to_string(k) << " tensor " << t;
  }
}

// MPI faults come back to the suite (docs/exchange.md, "MPI errors and dead
// peers"): the wrapped communicator and every duplicate (what exchange
// operations run on) return errors instead of ending the job with MPI's own
// message, and an invalid call returns an error code. What the suite then
// prints and its exit code are checked by comm.mpi_error.* (fault_job.cpp).
TEST(MpiFaults, SuiteCommunicatorsReturnErrors) {
  const Communicator comm = Communicator::world();
  const qsgd::comm::OwnedComm dup(comm);
  for (MPI_Comm c : {comm.mpi(), dup.get()}) {
    MPI_Errhandler h = MPI_ERRHANDLER_NULL;
    ASSERT_EQ(MPI_Comm_get_errhandler(c, &h), MPI_SUCCESS);
    EXPECT_EQ(h, MPI_ERRORS_RETURN);
    MPI_Errhandler_free(&h);
    float x = 0;
    MPI_Request req = MPI_REQUEST_NULL;
    const int rc = MPI_Isend(&x, 1, MPI_FLOAT, comm.size(), 0, c, &req);  // rank K does not exist
    int cls = MPI_SUCCESS;
    MPI_Error_class(rc, &cls);
    EXPECT_EQ(cls, MPI_ERR_RANK) << "MPI_Isend to rank " << comm.size() << " returned " << rc;
  }
}

// QSGD_PEER_TIMEOUT is read when a Communicator is made; a bad value is an
// error naming the variable, not a silent default.
TEST(MpiFaults, PeerTimeoutFromTheEnvironment) {
  const char* old = std::getenv("QSGD_PEER_TIMEOUT");
  const std::string saved = old ? old : "";
  setenv("QSGD_PEER_TIMEOUT", "2.5", 1);
  EXPECT_EQ(Communicator::world().peer_timeout(), 2.5);
  setenv("QSGD_PEER_TIMEOUT", "0", 1);
  EXPECT_EQ(Communicator::world().peer_timeout(), 0.0);
  for (const char* bad : {"-1", "30s", "nan"}) {
    setenv("QSGD_PEER_TIMEOUT", bad, 1);
    try {
      (void)Communicator::world();
      ADD_FAILURE() << "QSGD_PEER_TIMEOUT=" << bad << " accepted";
    } catch (const qsgd::Error& e) {
      EXPECT_NE(std::string(e.what()).find("QSGD_PEER_TIMEOUT"), std::string::npos) << e.what();
    }
  }
  unsetenv("QSGD_PEER_TIMEOUT");
  EXPECT_EQ(Communicator::world().peer_timeout(), qsgd::comm::default_peer_timeout_s);
  if (old) setenv("QSGD_PEER_TIMEOUT", saved.c_str(), 1);
}

TEST(Bucketer, ProgressThreadSleepsOnceTheTransferIsDone) {
  // A bucket whose transfer is over but whose wait() has not come yet (the
  // caller still computing) must cost the caller nothing: the progress
  // thread polled every poll_us until the caller's wait, taking a third of
  // a core from backward on 2 cores. Here it polls while the transfer runs,
  // then sleeps until the caller's next call, and that call wakes it. The
  // fp32 ring finishes inside the polls; the ring allgather leaves its
  // decoding to the caller (no request in flight, not finished).
  // A single rank posts nothing: the Bucketer starts no thread, which never polls.
  const Communicator comm = Communicator::world();
  const bool alone = comm.size() == 1;
  const int me = comm.rank();
  const std::uint64_t n = 30720;  // a multiple of d = 512: one unpadded bucket, exchanged in place
  for (StrategyKind k : {StrategyKind::allreduce, StrategyKind::allgather}) {
    auto cx = make_exchange(config(k, codec(k == StrategyKind::allreduce ? CodecKind::fp32 : CodecKind::fixed)), comm);
    auto dx = make_exchange(config(StrategyKind::allreduce, codec(CodecKind::fp32)), comm);
    qsgd::comm::BucketerConfig bc;
    bc.progress_thread = true;
    qsgd::comm::Bucketer<Exec> bk(*cx, *dx, bc);
    bk.add(n);
    bk.plan();
    const auto g = gradient(70, me, n);
    Values grad = to_device(g);
    bk.begin_step(3);
    bk.push_inplace(0, grad);
    ASSERT_EQ(MPI_Barrier(MPI_COMM_WORLD), MPI_SUCCESS);  // every rank has started the bucket
    if (alone) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      bk.progress();
      EXPECT_EQ(bk.polls(), 0u) << qsgd::comm::to_string(k) << ": one rank, yet a progress thread polled";
      bk.wait(0, grad);
      EXPECT_TRUE(same_bits(to_host(grad, n), run(*cx, g, 0, 3))) << qsgd::comm::to_string(k);
      continue;
    }
    // Until the count stands still for 100 ms (the transfer is over and the
    // thread idle), within 10 s: a loaded or sanitized machine may be slow.
    std::uint64_t last = bk.polls();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (;;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      const std::uint64_t now = bk.polls();
      if (now == last || std::chrono::steady_clock::now() > deadline) break;
      last = now;
    }
    const std::uint64_t before = bk.polls();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // "backward": no call into the bucketer
    const std::uint64_t during = bk.polls() - before;
    EXPECT_GE(before, 1u) << qsgd::comm::to_string(k) << ": the thread never polled the transfer";
    EXPECT_LE(during, 1u) << qsgd::comm::to_string(k) << ": the progress thread kept polling a finished transfer "
                          << "for 200 ms (" << during << " rounds; poll_us " << bc.poll_us << ")";
    // A call into the bucketer (a layer hook) wakes it for at least one round.
    bk.progress();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_GT(bk.polls(), before + during) << qsgd::comm::to_string(k) << ": a call did not wake the thread";
    bk.wait(0, grad);
    const auto got = to_host(grad, n);
    EXPECT_TRUE(identical_on_all_ranks(comm, got)) << qsgd::comm::to_string(k);
    EXPECT_TRUE(same_bits(got, run(*cx, g, 0, 3))) << qsgd::comm::to_string(k);
  }
}

TEST(Bucketer, PlanMismatchNamesTheRanks) {
  const Communicator comm = Communicator::world();
  const int K = comm.size(), me = comm.rank();
  if (K == 1) GTEST_SKIP() << "needs two ranks";
  auto cfg = config(StrategyKind::allgather, codec(CodecKind::fixed));
  cfg.on_error = qsgd::comm::ErrorPolicy::throw_error;
  auto cx = make_exchange(cfg, comm);
  auto dx = make_exchange(cfg, comm);
  qsgd::comm::Bucketer<Exec> bk(*cx, *dx);
  bk.add(20000);
  bk.add(me == 0 ? 300 : 301);
  try {
    bk.plan();
    ADD_FAILURE() << "no error";
  } catch (const ExchangeError& e) {
    EXPECT_EQ(e.exit_code(), qsgd::comm::exit_config_mismatch);
    EXPECT_NE(std::string(e.what()).find("bucketer plan"), std::string::npos) << e.what();
  }
}

}  // namespace

// The Communicator's small collectives (what qsgd-train reduces and gathers):
// sums and maxima in place, byte blocks in rank order; at one rank (and for
// the serial stand-in) the values come back unchanged.
TEST(Communicator, ReductionsAndGathersCombineEveryRankInRankOrder) {
  const Communicator comm = Communicator::world();
  const int K = comm.size(), me = comm.rank();
  double v[3] = {1.0 + me, -2.0 * me, 0.5};
  comm.allreduce_sum(v, 3, {"test sum"});
  EXPECT_EQ(v[0], K + K * (K - 1) / 2.0);
  EXPECT_EQ(v[1], -1.0 * K * (K - 1));
  EXPECT_EQ(v[2], 0.5 * K);
  double m[2] = {static_cast<double>(me), -static_cast<double>(me)};
  comm.allreduce_max(m, 2, {"test max"});
  EXPECT_EQ(m[0], K - 1.0);
  EXPECT_EQ(m[1], 0.0);
  const std::uint32_t mine[2] = {0xabc00000u + static_cast<std::uint32_t>(me), static_cast<std::uint32_t>(7 * me)};
  std::vector<std::uint32_t> all(2 * static_cast<std::size_t>(K), 0xffffffffu);
  comm.allgather_bytes(mine, sizeof mine, all.data(), {"test allgather"});
  for (int r = 0; r < K; ++r) {
    EXPECT_EQ(all[2 * r], 0xabc00000u + static_cast<std::uint32_t>(r));
    EXPECT_EQ(all[2 * r + 1], static_cast<std::uint32_t>(7 * r));
  }
  const int root = K - 1;
  std::vector<std::uint32_t> gathered(2 * static_cast<std::size_t>(K), 0xffffffffu);
  comm.gather_bytes(mine, sizeof mine, gathered.data(), root, {"test gather"});
  for (int r = 0; r < K; ++r) {
    EXPECT_EQ(gathered[2 * r], me == root ? 0xabc00000u + static_cast<std::uint32_t>(r) : 0xffffffffu);
    EXPECT_EQ(gathered[2 * r + 1], me == root ? static_cast<std::uint32_t>(7 * r) : 0xffffffffu);
  }
}

TEST(Communicator, SerialReductionsAndGathersAreTheRanksOwnValues) {
  const Communicator comm = Communicator::serial();
  double v[2] = {3.0, -1.0};
  comm.allreduce_sum(v, 2, {"serial sum"});
  comm.allreduce_max(v, 2, {"serial max"});
  EXPECT_EQ(v[0], 3.0);
  EXPECT_EQ(v[1], -1.0);
  const char mine[4] = {'q', 's', 'g', 'd'};
  char all[4] = {}, gathered[4] = {};
  comm.allgather_bytes(mine, 4, all, {"serial allgather"});
  comm.gather_bytes(mine, 4, gathered, 0, {"serial gather"});
  EXPECT_EQ(std::string(all, 4), "qsgd");
  EXPECT_EQ(std::string(gathered, 4), "qsgd");
}
