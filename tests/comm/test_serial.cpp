// qsgd::comm on the serial communicator: one process, no MPI_Init, no mpirun.
// Every strategy must run and give exactly what its algorithm gives at K = 1.

#include "comm_test_util.hpp"

#include <random>

#include "detail/framing.hpp"
#include "detail/powersgd_kernels.hpp"

namespace {

using namespace qsgd_comm_test;
using qsgd::comm::Communicator;
using qsgd::comm::ExchangeError;
using qsgd::comm::make_exchange;

const std::vector<StrategyKind> all_strategies = {StrategyKind::allreduce, StrategyKind::allreduce16,
                                                  StrategyKind::allgather, StrategyKind::param_server,
                                                  StrategyKind::scatter_reduce, StrategyKind::shared_scale};

// Q(v) with key (seed, step, rank, tensor), decoded: what one quantization stage gives.
std::vector<float> quantize_stage(const CodecConfig& c, const std::vector<float>& v, std::uint64_t seed,
                                  std::uint64_t step, std::uint32_t rank, std::uint32_t tensor) {
  qsgd::Codec<Exec> codec(c);
  Values in = to_device(v);
  Kokkos::View<std::uint64_t*, Mem> msg("msg", codec.max_message_bytes(v.size()) / 8);
  const std::size_t bytes = codec.encode(in, v.size(), qsgd::RngKey{seed, step, rank, tensor}, msg);
  Values out("out", v.size());
  codec.decode(msg, bytes, out);
  return to_host(out, v.size());
}

TEST(Partition, CoversAlignedAndBalanced) {
  std::vector<std::uint64_t> b;
  for (std::uint64_t n : {0ull, 1ull, 3ull, 511ull, 512ull, 1000ull, 4099ull, 100000ull})
    for (int k : {1, 2, 3, 4, 7})
      for (std::uint64_t a : {1ull, 512ull}) {
        qsgd::comm::partition(n, k, a, b);
        ASSERT_EQ(b.size(), static_cast<std::size_t>(k) + 1);
        EXPECT_EQ(b.front(), 0u);
        EXPECT_EQ(b.back(), n);
        std::uint64_t lo = ~0ull, hi = 0;
        for (int j = 0; j < k; ++j) {
          EXPECT_LE(b[j], b[j + 1]);
          if (b[j] < n) {
            EXPECT_EQ(b[j] % a, 0u) << "n " << n << " k " << k;
          }
          const std::uint64_t units = (b[j + 1] - b[j] + a - 1) / a;
          lo = std::min(lo, units);
          hi = std::max(hi, units);
        }
        EXPECT_LE(hi - lo, 1u) << "n " << n << " k " << k << " align " << a;
      }
  EXPECT_EQ(qsgd::comm::partition_align(true, 512, 4096), 512u);
  EXPECT_EQ(qsgd::comm::partition_align(true, 512, 300), 1u);  // one bucket: any split
  EXPECT_EQ(qsgd::comm::partition_align(false, 512, 4096), 1u);
}

TEST(FaultInjection, Parses) {
  const auto f = qsgd::comm::FaultInjection::parse("rank=1,step=3,tensor=7,stage=2");
  EXPECT_TRUE(f.enabled);
  EXPECT_EQ(f.rank, 1);
  EXPECT_EQ(f.step, 3u);
  EXPECT_EQ(f.tensor, 7u);
  EXPECT_EQ(f.stage, 2);
  EXPECT_EQ(qsgd::comm::FaultInjection::parse("step=0,rank=0").tensor, 0u);
  EXPECT_THROW(qsgd::comm::FaultInjection::parse("rank=1"), qsgd::Error);
  EXPECT_THROW(qsgd::comm::FaultInjection::parse("rank=1,step=x"), qsgd::Error);
  EXPECT_THROW(qsgd::comm::FaultInjection::parse("rank=1,step=2,color=3"), qsgd::Error);
  EXPECT_THROW(qsgd::comm::FaultInjection::parse("rank=1,step=2,stage=3"), qsgd::Error);
  // Numbers are taken whole: no sign (strtoull would wrap "-1"), no blanks.
  for (const char* bad : {"rank=-1,step=2", "rank=1,step= 2", "rank=1,step=", "rank=4294967296,step=1"})
    EXPECT_THROW(qsgd::comm::FaultInjection::parse(bad), qsgd::Error) << bad;
}

TEST(FaultInjection, ParsesThePartWordAndBit) {
  using qsgd::comm::FaultInjection;
  const auto d = FaultInjection::parse("rank=1,step=3");
  EXPECT_EQ(d.part, FaultInjection::Part::message);
  EXPECT_EQ(d.word, -1);
  EXPECT_EQ(d.bit, 0);
  const auto f = FaultInjection::parse("rank=1,step=3,part=meta,word=2,bit=63");
  EXPECT_EQ(f.part, FaultInjection::Part::meta);
  EXPECT_EQ(f.word, 2);
  EXPECT_EQ(f.bit, 63);
  EXPECT_EQ(FaultInjection::parse("rank=1,step=3,part=message,word=0").word, 0);
  for (const char* bad : {"rank=1,step=2,part=header", "rank=1,step=2,bit=64", "rank=1,step=2,part="})
    EXPECT_THROW(FaultInjection::parse(bad), qsgd::Error) << bad;
  // The raw-value rings send no metadata: part, word and bit are refused there.
  const Communicator comm = Communicator::serial();
  for (StrategyKind k : {StrategyKind::allreduce, StrategyKind::allreduce16, StrategyKind::powersgd}) {
    auto cfg = config(k, codec(CodecKind::bf16));
    cfg.fault = FaultInjection::parse("rank=0,step=1,part=meta");
    EXPECT_THROW(make_exchange(cfg, comm), qsgd::Error) << to_string(k);
    cfg.fault = FaultInjection::parse("rank=0,step=1,bit=3");
    EXPECT_THROW(make_exchange(cfg, comm), qsgd::Error) << to_string(k);
  }
}

namespace fr = qsgd::comm::detail;

TEST(Framing, EveryFlippedMetadataBitIsACorruptMessage) {
  const fr::OpId id{5000, 3, 77};
  std::uint64_t m[fr::meta_words];
  fr::set_meta(id, m, 40);
  EXPECT_FALSE(fr::check_meta(id, 1, m, 100));
  for (int w = 0; w < fr::meta_words; ++w)
    for (int b = 0; b < 64; ++b) {
      std::uint64_t x[fr::meta_words];
      std::copy(m, m + fr::meta_words, x);
      x[w] ^= std::uint64_t{1} << b;
      const fr::FrameFault f = fr::check_meta(id, 1, x, 100);
      ASSERT_TRUE(f) << "word " << w << " bit " << b;
      EXPECT_EQ(f.exit_code, qsgd::comm::exit_corrupt_message) << "word " << w << " bit " << b;
      EXPECT_EQ(f.code, qsgd::Errc::corrupt_message);
      EXPECT_NE(f.what.find("corrupt message from rank 1 at step 77, tensor 3: its metadata fails its CRC32C"),
                std::string::npos)
          << f.what;
    }
}

TEST(Framing, IntactMetadataOfAnotherOperationOrSizeIsRefused) {
  const fr::OpId id{5000, 3, 77};
  std::uint64_t m[fr::meta_words];
  fr::set_meta({5000, 3, 78}, m, 40);  // another step, a valid CRC: ranks disagree
  fr::FrameFault f = fr::check_meta(id, 2, m, 100);
  EXPECT_EQ(f.exit_code, qsgd::comm::exit_config_mismatch);
  EXPECT_NE(f.what.find("ranks disagree on the operation: rank 2 started (n 5000, tensor 3, step 78)"),
            std::string::npos)
      << f.what;
  for (std::uint64_t words : {std::uint64_t{0}, std::uint64_t{7}, std::uint64_t{101}, ~std::uint64_t{0}}) {
    fr::set_meta(id, m, words);
    f = fr::check_meta(id, 2, m, 100);
    EXPECT_EQ(f.exit_code, qsgd::comm::exit_corrupt_message) << words;
    EXPECT_NE(f.what.find("words is outside 8..100"), std::string::npos) << f.what;
  }
  fr::set_meta(id, m, 8);
  EXPECT_FALSE(fr::check_meta(id, 2, m, 100));
  // Framed: whole metadata words, and the announced size is what arrived.
  EXPECT_TRUE(fr::check_frame_bytes(id, 2, 31));
  EXPECT_TRUE(fr::check_frame_bytes(id, 2, 33));
  EXPECT_FALSE(fr::check_frame_bytes(id, 2, 32));
  EXPECT_FALSE(fr::check_frame_size(id, 2, m, (8 + fr::meta_words) * 8));
  f = fr::check_frame_size(id, 2, m, (9 + fr::meta_words) * 8);
  EXPECT_NE(f.what.find("announced 8 words, received 9"), std::string::npos) << f.what;
}

TEST(Framing, LayoutOfGatheredMetadataSumsAndBoundsTheCounts) {
  const fr::OpId id{1u << 20, 0, 1};
  const int K = 3;
  std::vector<std::uint64_t> meta(static_cast<std::size_t>(K) * fr::meta_words);
  const std::uint64_t words[K] = {10, 20, 30};
  for (int r = 0; r < K; ++r) fr::set_meta(id, &meta[static_cast<std::size_t>(r) * fr::meta_words], words[r]);
  std::vector<int> counts, displs;
  std::uint64_t wire = 0;
  ASSERT_FALSE(fr::layout_meta(id, meta.data(), K, 1, 1u << 30, "t", counts, displs, wire));
  EXPECT_EQ(counts, (std::vector<int>{10, 20, 30}));
  EXPECT_EQ(displs, (std::vector<int>{0, 10, 30}));
  EXPECT_EQ(wire, (10 + 30 + 2 * fr::meta_words) * 8u);
  // Counts each within max_w but together past INT_MAX: an MPI count limit error.
  const std::uint64_t big = (std::uint64_t{1} << 30) + 1;
  for (int r = 0; r < K; ++r) fr::set_meta(id, &meta[static_cast<std::size_t>(r) * fr::meta_words], big);
  const fr::FrameFault f = fr::layout_meta(id, meta.data(), K, 0, std::uint64_t{1} << 40, "owner", counts, displs, wire);
  EXPECT_EQ(f.exit_code, qsgd::comm::exit_exchange_error);
  EXPECT_NE(f.what.find("owner: "), std::string::npos) << f.what;
  EXPECT_NE(f.what.find("exceed the MPI count limit"), std::string::npos) << f.what;
}

TEST(ConfigHash, EveryFieldCounts) {
  const auto base = config(StrategyKind::allgather, codec(CodecKind::elias_dense));
  const std::uint64_t h = qsgd::comm::config_hash(base, 4);
  auto differs = [&](qsgd::comm::ExchangeConfig c, int ranks = 4) { return qsgd::comm::config_hash(c, ranks) != h; };
  auto c = base;
  c.strategy = StrategyKind::scatter_reduce;
  EXPECT_TRUE(differs(c));
  c = base;
  c.codec.codec = CodecKind::fixed;
  EXPECT_TRUE(differs(c));
  c = base;
  c.codec.s = 7;
  EXPECT_TRUE(differs(c));
  c = base;
  c.codec.d = 256;
  EXPECT_TRUE(differs(c));
  c = base;
  c.codec.norm = Norm::l2;
  EXPECT_TRUE(differs(c));
  c = base;
  c.codec.chunk = 1024;
  EXPECT_TRUE(differs(c));
  c = base;
  c.seed = 2;
  EXPECT_TRUE(differs(c));
  EXPECT_TRUE(differs(base, 3));
  // The ring's segment checksums: a rank without them would leave its peers
  // waiting for CRC messages.
  c = base;
  c.ring_checksums = false;
  EXPECT_TRUE(differs(c));
  EXPECT_NE(qsgd::comm::describe(c).find("ring checksums off"), std::string::npos);
  // Fields a strategy ignores do not count: allreduce has no codec.
  auto a = config(StrategyKind::allreduce, codec(CodecKind::fixed));
  auto b = config(StrategyKind::allreduce, codec(CodecKind::elias_dense, 7, 64));
  EXPECT_EQ(qsgd::comm::config_hash(a, 2), qsgd::comm::config_hash(b, 2));
  EXPECT_NE(qsgd::comm::describe(base).find("elias-dense"), std::string::npos);
}

TEST(Serial, EveryStrategyMatchesItsAlgorithmAtOneRank) {
  const Communicator comm = Communicator::serial();
  EXPECT_TRUE(comm.is_serial());
  EXPECT_EQ(comm.size(), 1);
  for (std::uint64_t n : {0ull, 1ull, 511ull, 3000ull}) {
    const auto g = gradient(5, 0, n);
    for (CodecKind k : {CodecKind::fixed, CodecKind::elias_dense, CodecKind::elias_sparse}) {
      const CodecConfig c = codec(k);
      const auto q1 = quantize_stage(c, g, 1, 9, 0, 4);
      const auto q2 = quantize_stage(c, q1, 1, 9, 0x80000000u, 4);
      auto ag = make_exchange(config(StrategyKind::allgather, c), comm);
      auto ps = make_exchange(config(StrategyKind::param_server, c), comm);
      auto sr = make_exchange(config(StrategyKind::scatter_reduce, c), comm);
      EXPECT_TRUE(same_bits(run(*ag, g, 4, 9), q1)) << name(StrategyKind::allgather, c) << " n " << n;
      EXPECT_TRUE(same_bits(run(*ps, g, 4, 9), q2)) << name(StrategyKind::param_server, c) << " n " << n;
      // One rank, one chunk: scatter-reduce is the parameter server's algorithm.
      EXPECT_TRUE(same_bits(run(*sr, g, 4, 9), q2)) << name(StrategyKind::scatter_reduce, c) << " n " << n;
      // One rank: the agreed scales are the rank's own and the sums its levels,
      // so shared-scale is one quantization, allgather's.
      auto ss = make_exchange(config(StrategyKind::shared_scale, c), comm);
      EXPECT_TRUE(same_bits(run(*ss, g, 4, 9), q1)) << name(StrategyKind::shared_scale, c) << " n " << n;
    }
    auto ar = make_exchange(config(StrategyKind::allreduce, codec(CodecKind::fp32)), comm);
    EXPECT_TRUE(same_bits(run(*ar, g, 0, 0), g));
    auto ar16 = make_exchange(config(StrategyKind::allreduce16, codec(CodecKind::bf16)), comm);
    const auto r16 = run(*ar16, g, 0, 0);
    for (std::uint64_t i = 0; i < n; ++i) {
      std::uint32_t u;
      std::memcpy(&u, &g[i], 4);
      u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;  // bf16 round to nearest even
      float want;
      std::memcpy(&want, &u, 4);
      ASSERT_EQ(r16[i], want) << i;
    }
  }
}

TEST(Serial, OutputMayAliasInputAndZerosStayZero) {
  const Communicator comm = Communicator::serial();
  for (StrategyKind k : all_strategies) {
    auto ex = make_exchange(config(k, codec(CodecKind::elias_dense)), comm);
    Values v = to_device(gradient(3, 0, 2000));
    Values ref("ref", 2000);
    ex->average(v, ref, 1, 1);
    ex->average(v, v, 1, 1);  // in place
    EXPECT_TRUE(same_bits(to_host(v, 2000), to_host(ref, 2000))) << qsgd::comm::to_string(k);
    Values z("zeros", 1500);
    ex->average(z, z, 2, 2);
    for (float x : to_host(z, 1500)) ASSERT_EQ(x, 0.0f) << qsgd::comm::to_string(k);
  }
}

TEST(Serial, StatsCountTheMessages) {
  const Communicator comm = Communicator::serial();
  const auto g = gradient(1, 0, 4096);
  qsgd::Codec<Exec> codec_ref(codec(CodecKind::fixed));
  // fixed width: 64-byte header, 8 scales, 6 bits per coordinate.
  const std::uint64_t fixed_bytes = 64 + 8 * 4 + 4096 * 6 / 8;
  auto ag = make_exchange(config(StrategyKind::allgather, codec(CodecKind::fixed)), comm);
  run(*ag, g, 0, 0);
  EXPECT_EQ(ag->last_stats().encoded_bytes, fixed_bytes);
  EXPECT_EQ(ag->last_stats().wire_bytes, 0u);  // one rank receives nothing
  EXPECT_EQ(ag->last_stats().n, 4096u);
  EXPECT_TRUE(ag->last_stats().fused_quantize);
  EXPECT_GT(ag->last_stats().total_s, 0.0);
  auto ps = make_exchange(config(StrategyKind::param_server, codec(CodecKind::fixed)), comm);
  run(*ps, g, 0, 0);
  EXPECT_EQ(ps->last_stats().requantized_bytes, fixed_bytes);
  auto sr = make_exchange(config(StrategyKind::scatter_reduce, codec(CodecKind::elias_dense)), comm);
  run(*sr, g, 0, 0);
  EXPECT_FALSE(sr->last_stats().fused_quantize);
  EXPECT_GT(sr->last_stats().quantize_s, 0.0);
  auto ar = make_exchange(config(StrategyKind::allreduce, codec(CodecKind::fp32)), comm);
  run(*ar, g, 0, 0);
  EXPECT_EQ(ar->last_stats().encoded_bytes, 4096u * 4);
}

TEST(Serial, HandlesAndProgress) {
  const Communicator comm = Communicator::serial();
  auto ex = make_exchange(config(StrategyKind::scatter_reduce, codec(CodecKind::elias_sparse)), comm);
  Values a = to_device(gradient(1, 0, 1000)), b = to_device(gradient(2, 0, 3000));
  Values oa("oa", 1000), ob("ob", 3000);
  auto ha = ex->start(a, oa, 0, 5);
  auto hb = ex->start(b, ob, 1, 5);
  EXPECT_EQ(ex->in_flight(), 2u);
  ex->progress();
  EXPECT_TRUE(ex->test(hb));
  ex->wait(hb);
  ex->wait(ha);
  EXPECT_EQ(ex->in_flight(), 0u);
  EXPECT_THROW(ex->wait(ha), qsgd::Error);  // already completed
  Values ra("ra", 1000);
  ex->average(a, ra, 0, 5);
  EXPECT_TRUE(same_bits(to_host(oa, 1000), to_host(ra, 1000)));
  Values small("small", 10);
  EXPECT_THROW(ex->start(a, small, 0, 6), ExchangeError);  // output too short
}

TEST(Serial, CorruptMessageNamesRankStepTensor) {
  const Communicator comm = Communicator::serial();
  struct Case {
    StrategyKind k;
    int stage;
  };
  for (Case cs :
       {Case{StrategyKind::allgather, 1}, Case{StrategyKind::param_server, 1}, Case{StrategyKind::param_server, 2},
        Case{StrategyKind::scatter_reduce, 1}, Case{StrategyKind::scatter_reduce, 2}}) {
    for (CodecKind ck : {CodecKind::fixed, CodecKind::elias_dense, CodecKind::fp32}) {
      auto cfg = config(cs.k, codec(ck));
      cfg.fault = qsgd::comm::FaultInjection::parse("rank=0,step=3,tensor=7,stage=" + std::to_string(cs.stage));
      auto ex = make_exchange(cfg, comm);
      const auto g = gradient(1, 0, 3000);
      EXPECT_NO_THROW(run(*ex, g, 7, 2));  // other steps are clean
      EXPECT_NO_THROW(run(*ex, g, 6, 3));  // other tensors too
      try {
        run(*ex, g, 7, 3);
        ADD_FAILURE() << "no error for " << name(cs.k, cfg.codec) << " stage " << cs.stage;
      } catch (const ExchangeError& e) {
        EXPECT_EQ(e.exit_code(), qsgd::comm::exit_corrupt_message);
        EXPECT_EQ(e.code(), qsgd::Errc::corrupt_message);
        EXPECT_NE(std::string(e.what()).find("qsgd: rank 0: corrupt message from rank 0 at step 3, tensor 7: "),
                  std::string::npos)
            << e.what();
      }
      EXPECT_EQ(ex->in_flight(), 0u);
      EXPECT_NO_THROW(run(*ex, g, 7, 4));  // the exchange stays usable when serial
    }
  }
}

TEST(Serial, NonFiniteGradientIsAnErrorNotACrash) {
  const Communicator comm = Communicator::serial();
  for (StrategyKind k :
       {StrategyKind::allreduce16, StrategyKind::allgather, StrategyKind::param_server, StrategyKind::scatter_reduce}) {
    auto ex = make_exchange(config(k, codec(CodecKind::fixed)), comm);
    auto g = gradient(1, 0, 100);
    g[42] = std::nanf("");
    try {
      run(*ex, g, 2, 8);
      ADD_FAILURE() << qsgd::comm::to_string(k);
    } catch (const ExchangeError& e) {
      EXPECT_EQ(e.exit_code(), qsgd::comm::exit_exchange_error);
      EXPECT_NE(std::string(e.what()).find("step 8, tensor 2"), std::string::npos) << e.what();
    }
  }
}

TEST(Serial, InvalidConfigurationThrows) {
  const Communicator comm = Communicator::serial();
  EXPECT_THROW(make_exchange(config(StrategyKind::allgather, codec(CodecKind::fixed, 0)), comm), qsgd::Error);
  auto cfg = config(StrategyKind::param_server, codec(CodecKind::fixed));
  cfg.server = 1;
  EXPECT_THROW(make_exchange(cfg, comm), qsgd::Error);
  EXPECT_THROW(qsgd::comm::parse_strategy("ring"), qsgd::Error);
  for (StrategyKind k : all_strategies) EXPECT_EQ(qsgd::comm::parse_strategy(qsgd::comm::to_string(k)), k);
}

// MPI errors and the watchdog name the operation this way (docs/exchange.md,
// "MPI errors and dead peers"); the end-to-end tests match these strings.
TEST(MpiFaults, SiteNamesOperationStepAndTensor) {
  using qsgd::comm::MpiSite;
  using qsgd::comm::to_string;
  EXPECT_EQ(to_string(MpiSite{"ring allgather", "scatter-reduce", 3, 2}),
            "ring allgather of scatter-reduce at step 3, tensor 2");
  EXPECT_EQ(to_string(MpiSite{"step record gather", "qsgd-train", 12}), "step record gather of qsgd-train at step 12");
  EXPECT_EQ(to_string(MpiSite{"barrier"}), "barrier");
  EXPECT_EQ(to_string(MpiSite{"metadata gather", nullptr, -1, 4}), "metadata gather at tensor 4");
}

TEST(MpiFaults, PeerTimeoutDefaultsAndOverrides) {
  const Communicator comm = Communicator::serial();
  EXPECT_EQ(comm.peer_timeout(), qsgd::comm::default_peer_timeout_s);
  EXPECT_EQ(comm.with_peer_timeout(2.5).peer_timeout(), 2.5);
  EXPECT_EQ(comm.with_peer_timeout(0).peer_timeout(), 0.0);  // no limit
  EXPECT_THROW(comm.with_peer_timeout(-1), qsgd::Error);
}

TEST(Bucketer, PlansBucketsWithFilterFusionAndAlignment) {
  const Communicator comm = Communicator::serial();
  auto cx = make_exchange(config(StrategyKind::allgather, codec(CodecKind::fixed)), comm);
  auto dx = make_exchange(config(StrategyKind::allreduce, codec(CodecKind::fp32)), comm);
  qsgd::comm::BucketerConfig bc;
  bc.fusion_bytes = 100000 * 4;
  qsgd::comm::Bucketer<Exec> bk(*cx, *dx, bc);
  const std::vector<std::uint64_t> sizes = {30000, 10, 20001, 9999, 70000, 150000, 5};
  for (auto n : sizes) bk.add(n);
  bk.plan();
  const auto& bs = bk.buckets();
  // Compressed: {0, 2} (30208 + 20480 = 50688 <= 100000), {4} (70144; 50688 + 70144 > cap), {5} (own).
  // Dense: {1, 3, 6}.
  ASSERT_EQ(bs.size(), 4u);
  EXPECT_TRUE(bs[0].compressed);
  EXPECT_EQ(bs[0].tensors, (std::vector<std::uint32_t>{0, 2}));
  EXPECT_EQ(bs[0].offsets, (std::vector<std::uint64_t>{0, 30208}));
  EXPECT_FALSE(bs[1].compressed);
  EXPECT_EQ(bs[1].tensors, (std::vector<std::uint32_t>{1, 3, 6}));
  EXPECT_EQ(bs[1].offsets, (std::vector<std::uint64_t>{0, 10, 10009}));
  EXPECT_EQ(bs[2].tensors, (std::vector<std::uint32_t>{4}));
  EXPECT_EQ(bs[3].tensors, (std::vector<std::uint32_t>{5}));
  EXPECT_EQ(bs[3].length, 150016u);

  // One step: dense tensors come back exactly; compressed ones within one
  // quantization unit of their own buckets (alignment keeps scales per tensor).
  std::vector<std::vector<float>> g;
  for (std::size_t t = 0; t < sizes.size(); ++t) g.push_back(gradient(10 + t, 0, sizes[t]));
  for (float& x : g[2]) x *= 1e-3f;  // a small-gradient layer next to a large one
  bk.begin_step(1);
  for (std::size_t t = 0; t < sizes.size(); ++t) {
    bk.push(static_cast<std::uint32_t>(t), to_device(g[t]));
    bk.progress();
  }
  for (std::size_t t = 0; t < sizes.size(); ++t) {
    Values out("out", sizes[t]);
    bk.wait(static_cast<std::uint32_t>(t), out);
    const auto h = to_host(out, sizes[t]);
    if (sizes[t] < bc.layer_filter) {
      EXPECT_TRUE(same_bits(h, g[t])) << t;
      continue;
    }
    for (std::size_t b0 = 0; b0 < sizes[t]; b0 += 512) {
      float mx = 0;
      for (std::size_t i = b0; i < std::min<std::size_t>(b0 + 512, sizes[t]); ++i)
        mx = std::max(mx, std::fabs(g[t][i]));
      for (std::size_t i = b0; i < std::min<std::size_t>(b0 + 512, sizes[t]); ++i)
        ASSERT_LE(std::fabs(h[i] - g[t][i]), mx / 16 * 1.0001f) << "tensor " << t << " i " << i;
    }
  }
  // Padding stays zero.
  const auto buf = to_host(bs[0].buffer, bs[0].length);
  for (std::size_t i = 30000; i < 30208; ++i) ASSERT_EQ(buf[i], 0.0f);
  bk.wait_all();
  bk.begin_step(2);
  EXPECT_THROW(bk.push(0, to_device(g[1])), qsgd::Error);  // wrong size
  bk.push(0, to_device(g[0]));
  EXPECT_THROW(bk.push(0, to_device(g[0])), qsgd::Error);  // twice
  Values out("out", sizes[0]);
  EXPECT_THROW(bk.wait(0, out), qsgd::Error);  // bucket not complete
}

// ---- PowerSGD ----------------------------------------------------------------

using qsgd::comm::MatrixBlock;

ExchangePtr powersgd(std::uint32_t r, const Communicator& comm) {
  auto cfg = config(StrategyKind::powersgd, codec(CodecKind::fp32), 5);
  cfg.powersgd_rank = r;
  return make_exchange(cfg, comm);
}

std::vector<double> state_of(const qsgd::comm::Exchange<Exec>& ex) {
  const auto s = ex.state();
  return std::vector<double>(s.begin(), s.end());
}

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, std::fabs(static_cast<double>(x)));
  return m;
}

// A 48 x 40 matrix of rank 3 (U V^T) between a 7-element vector and a
// 5-element tail: at r = 4 one step reconstructs it (P spans its column
// space), and the vector and tail come back as they are (K = 1).
TEST(PowerSgd, ReconstructsAMatrixOfRankAtMostR) {
  const auto comm = Communicator::serial();
  const std::uint64_t R = 48, C = 40, n = 7 + R * C + 5;
  std::vector<float> g(n);
  for (std::uint64_t i = 0; i < n; ++i) g[i] = static_cast<float>(normal(3, 0, i));
  for (std::uint64_t a = 0; a < R; ++a)
    for (std::uint64_t b = 0; b < C; ++b) {
      double v = 0;
      for (int k = 0; k < 3; ++k) v += normal(4, k, a) * normal(5, k, b);
      g[7 + a * C + b] = static_cast<float>(v);
    }
  auto ex = powersgd(4, comm);
  ex->set_layout(0, {MatrixBlock{7, R, C}});
  const auto out = run(*ex, g, 0, 0);
  const double m = max_abs(g);
  for (std::uint64_t i = 0; i < n; ++i) {
    if (i < 7 || i >= 7 + R * C) {
      EXPECT_EQ(out[i], g[i]) << i;  // averaged exactly: one rank
    } else {
      EXPECT_NEAR(out[i], g[i], 1e-5 * m) << i;
    }
  }
}

// Three steps of a full-rank matrix against the double reference (the same
// initial Q, taken from state()), warm-started: the approximation error does
// not grow from step to step (subspace iteration), and the kept Q follows the
// reference's. A matrix too small to pay 2x (6 x 6 at r = 2: 36 < 48) is
// averaged exactly.
TEST(PowerSgd, MatchesTheDoubleReferenceStepAfterStep) {
  const auto comm = Communicator::serial();
  const std::uint64_t R = 40, C = 30, n = R * C + 36;
  std::vector<float> g(n);
  for (std::uint64_t i = 0; i < n; ++i) g[i] = static_cast<float>(normal(6, 0, i));
  const std::vector<MatrixBlock> layout = {MatrixBlock{0, R, C}, MatrixBlock{R * C, 6, 6}};
  auto ex = powersgd(2, comm);
  ex->set_layout(3, layout);
  std::vector<double> q = state_of(*ex);
  ASSERT_EQ(q.size(), C * 2);
  double last_err = 1e300;
  for (std::uint64_t step = 0; step < 3; ++step) {
    const auto out = run(*ex, g, 3, step);
    const auto ref = qsgd_comm_test::powersgd_reference({g}, layout, 2, q);
    double err = 0, scale = 0;
    for (std::uint64_t i = 0; i < n; ++i) scale = std::max(scale, std::fabs(ref[i]));
    for (std::uint64_t i = 0; i < n; ++i) {
      EXPECT_NEAR(out[i], ref[i], 1e-4 * scale) << "step " << step << " i " << i;
      if (i < R * C) err += (out[i] - g[i]) * (out[i] - g[i]);
      else EXPECT_EQ(out[i], g[i]) << i;
    }
    EXPECT_LE(err, last_err * (1 + 1e-6)) << "step " << step;
    last_err = err;
    const auto st = state_of(*ex);
    double qmax = 0;
    for (double x : q) qmax = std::max(qmax, std::fabs(x));
    for (std::size_t i = 0; i < q.size(); ++i) EXPECT_NEAR(st[i], q[i], 1e-4 * qmax) << "Q " << i;
  }
}

// The warm start survives a checkpoint: an exchange given another's state()
// continues with the same bits; a state of the wrong size is refused, as are
// overlapping or unsorted layouts and one that reaches past the vector.
TEST(PowerSgd, StateCarriesTheWarmStartAndBadInputIsRefused) {
  const auto comm = Communicator::serial();
  const std::uint64_t R = 32, C = 24, n = R * C;
  std::vector<float> g(n);
  for (std::uint64_t i = 0; i < n; ++i) g[i] = static_cast<float>(normal(7, 0, i));
  const std::vector<MatrixBlock> layout = {MatrixBlock{0, R, C}};
  auto a = powersgd(3, comm);
  a->set_layout(0, layout);
  run(*a, g, 0, 0);
  run(*a, g, 0, 1);
  auto b = powersgd(3, comm);
  b->set_layout(0, layout);
  b->load_state(a->state());
  EXPECT_TRUE(same_bits(run(*a, g, 0, 2), run(*b, g, 0, 2)));
  auto fresh = powersgd(3, comm);
  fresh->set_layout(0, layout);
  EXPECT_FALSE(same_bits(run(*a, g, 0, 3), run(*fresh, g, 0, 3)));  // the warm start matters
  EXPECT_THROW(b->load_state(std::vector<float>(5)), qsgd::Error);
  EXPECT_THROW(b->set_layout(1, {MatrixBlock{0, 4, 4}, MatrixBlock{8, 4, 4}}), qsgd::Error);  // overlap
  EXPECT_THROW(b->set_layout(1, {MatrixBlock{0, 0, 4}}), qsgd::Error);                      // empty
  b->set_layout(2, {MatrixBlock{0, R, C + 1}});
  EXPECT_THROW(run(*b, g, 2, 0), std::exception);  // past the vector's end
  auto other = make_exchange(config(StrategyKind::allgather, codec(CodecKind::fixed)), comm);
  EXPECT_TRUE(other->state().empty());
  EXPECT_THROW(other->load_state(std::vector<float>(1)), qsgd::Error);
  auto cfg = config(StrategyKind::powersgd, codec(CodecKind::fp32));
  cfg.powersgd_rank = 0;
  EXPECT_THROW(make_exchange(cfg, comm), qsgd::Error);
}

// PowerSGD's device shapes (a thread per element of P and of Q, a team for
// the orthonormalization; detail/powersgd_kernels.hpp) against the host's
// walks, run here on the host: the same bits, for ranks below, at and above
// the eight lanes of the row walk, tiles of 8 columns with a partial one,
// and a P with a dependent column (zeroed by both).
TEST(PowerSgdKernels, DeviceShapesMatchTheHostWalksBitForBit) {
  using namespace qsgd::comm::detail;
  using HE = Kokkos::DefaultHostExecutionSpace;
  using HV = Kokkos::View<float*, Kokkos::HostSpace>;
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  // Shapes that leave partial row blocks (psgd_row_block) and column tiles
  // (psgd_tile), and r below, at and above one group of psgd_lanes.
  for (std::uint32_t r : {1u, 3u, 4u, 8u, 9u, 17u})
    for (auto [rows, cols] : {std::pair<std::uint64_t, std::uint64_t>{5, 3}, {37, 21}, {200, 64}, {19, 1100}}) {
      SCOPED_TRACE("r=" + std::to_string(r) + " rows=" + std::to_string(rows) + " cols=" + std::to_string(cols));
      const std::uint64_t off = 7;  // every view at an offset, as in the exchange
      HV m("m", off + rows * cols), q("q", off + cols * r), p1("p1", off + rows * r), p2("p2", off + rows * r);
      for (std::size_t i = 0; i < m.extent(0); ++i) m(i) = u(rng);
      for (std::size_t i = 0; i < q.extent(0); ++i) q(i) = u(rng);
      psgd_project_rows(HE(), m, off, rows, cols, q, off, r, p1, off);
      psgd_project_elements(HE(), m, off, rows, cols, q, off, r, p2, off);
      for (std::size_t i = 0; i < p1.extent(0); ++i) ASSERT_EQ(p1(i), p2(i)) << "project, element " << i;
      if (r > 1)  // column 1 a copy of column 0: dependent
        for (std::uint64_t a = 0; a < rows; ++a) p1(off + a * r + 1) = p2(off + a * r + 1) = p1(off + a * r);
      psgd_orthonormalize_serial(HE(), p1, off, rows, r);
      psgd_orthonormalize_team(HE(), p2, off, rows, r);
      for (std::size_t i = 0; i < p1.extent(0); ++i) ASSERT_EQ(p1(i), p2(i)) << "orthonormalize, element " << i;
      if (r > 1 && rows > 1) {
        float col1 = 0;
        for (std::uint64_t a = 0; a < rows; ++a) col1 += std::abs(p1(off + a * r + 1));
        EXPECT_EQ(col1, 0.0f) << "the dependent column is not zero";
      }
      HV q1("q1", off + cols * r), q2("q2", off + cols * r);
      psgd_back_tiles(HE(), m, off, rows, cols, p1, off, r, q1, off);
      psgd_back_elements(HE(), m, off, rows, cols, p1, off, r, q2, off);
      for (std::size_t i = 0; i < q1.extent(0); ++i) ASSERT_EQ(q1(i), q2(i)) << "back, element " << i;
      HV o1("o1", off + rows * cols), o2("o2", off + rows * cols);
      psgd_expand_rows(HE(), p1, off, q1, off, rows, cols, r, o1, off);
      psgd_expand_elements(HE(), p1, off, q1, off, rows, cols, r, o2, off);
      for (std::size_t i = 0; i < o1.extent(0); ++i) ASSERT_EQ(o1(i), o2(i)) << "expand, element " << i;
      float any = 0;
      for (std::size_t i = off; i < o1.extent(0); ++i) any += std::abs(o1(i));
      EXPECT_GT(any, 0.0f) << "the expansion is all zeros: nothing was compared";
    }
}

TEST(PowerSgdKernels, BackTilesGiveEveryHostThreadWork) {
  using qsgd::comm::detail::psgd_back_tile;
  using qsgd::comm::detail::psgd_tile;
  EXPECT_EQ(psgd_back_tile(4096, 1), psgd_tile);  // one thread: the widest tile
  EXPECT_EQ(psgd_back_tile(100, 1), 112u);        // one tile: the columns rounded up to a line
  EXPECT_EQ(psgd_back_tile(1024, 16), 16u);       // 64 tiles: four for each of 16 threads
  EXPECT_EQ(psgd_back_tile(4096, 4), 256u);       // 16 tiles
  EXPECT_EQ(psgd_back_tile(1000, 2), 128u);       // 125 a tile, rounded up to a line of 16
  EXPECT_EQ(psgd_back_tile(3, 64), 16u);          // never below one line
  EXPECT_EQ(psgd_back_tile(1 << 20, 8), psgd_tile);  // never above psgd_tile
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  Kokkos::ScopeGuard guard(argc, argv);
  return RUN_ALL_TESTS();
}
