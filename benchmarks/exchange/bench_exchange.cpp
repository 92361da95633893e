// qsgd-bench-exchange: the exchange strategies under mpirun, nccl-tests style.
//
// For each size (-b to -e bytes of fp32 gradient, factor -f) and each
// strategy x codec, every rank averages its own deterministic gradient
// (input `--input`, seed + rank) -w times untimed, then -n times timed:
//   barrier; t0; exchange.average(); fence; t = now - t0
// Each iteration's time is the maximum over ranks; the rows report its
// median, min and p99 over the iterations (raw samples in the JSON file).
// Derived columns (docs/exchange.md has the definitions):
//   algbw      = 4 n / median time                     (fp32 bytes averaged per second)
//   busbw      = allreduce rows: bytes of the reduced type (4n, or 2n for
//                allreduce16) / median x 2(K-1)/K (nccl-tests' bus bandwidth:
//                what each rank's link carries), '-' elsewhere
//   wire B     = bytes received per rank per operation, bandwidth-optimal schedule,
//                mean over iterations, maximum over ranks (the bottleneck rank)
//   bits/dim   = 8 x bytes of a rank's first-stage messages / n, mean over ranks and iterations
//   wirebw     = wire B / median time, and its fraction of the ring link ceiling
//                measured in the same run (each rank sends to rank+1 and receives
//                from rank-1 at once, in --segment pieces all posted at once,
//                MPI_Isend + MPI_Irecv in a watched wait)
//   quant, enc, comm, dec = medians over iterations of the per-iteration maximum
//                over ranks of each phase (they need not add up to the time); a
//                '*' marks rows whose fixed-width encoder quantizes on the fly
//                (that quantization is inside enc)
//   x ideal    = median time / (wire B / link ceiling): 1 means the row moves its
//                bytes at the link's rate; the honest-baseline target is <= 1.15
//                for the fp32 and 16-bit allreduce rows
//   wait       = median over iterations of the max over ranks of the time blocked
//                in MPI waits (exposed communication)
//   x allreduce = median time / median time of the fastest fp32 allreduce row
//                (any transport) of the same size, same run
// After the timed loop (outside it) every row checks that all ranks hold the
// same bits and reports ||out - avg||^2 / ||avg||^2 against the exact average.
//
// Usage: mpirun -np K qsgd-bench-exchange [-b 4M] [-e 64M] [-f 4] [-w 3] [-n 10]
//          [--strategies allreduce,allreduce16,allgather,param-server,scatter-reduce,shared-scale]
//          [--codecs fixed,elias-dense] [--s 16] [--d 512] [--norm max]
//          [--half bf16] [--input gaussian] [--seed 1] [-o|--out FILE.json] [--no-check]
//          [--transports ring,library] [--segment 4M] [--window 8]

#include <mpi.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli.hpp"
#include "inputs.hpp"
#include "json.hpp"
#include "mpi_provenance.hpp"
#include "provenance.hpp"
#include "stats.hpp"
#include "qsgd/comm.hpp"
#include "qsgd/kernels.hpp"

namespace {

using Exec = Kokkos::DefaultExecutionSpace;
using Mem = Exec::memory_space;
using qsgd::comm::StrategyKind;

using qsgd::comm::Transport;

constexpr const char* schema = "qsgd.bench.exchange/2";

struct Options {
  std::uint64_t min_bytes = std::uint64_t(4) << 20, max_bytes = std::uint64_t(64) << 20;
  std::uint64_t factor = 4;
  int warmup = 3, iters = 10;
  std::vector<StrategyKind> strategies = {StrategyKind::allreduce, StrategyKind::allreduce16, StrategyKind::allgather,
                                          StrategyKind::param_server, StrategyKind::scatter_reduce,
                                          StrategyKind::shared_scale};
  std::vector<qsgd::CodecKind> codecs = {qsgd::CodecKind::fixed, qsgd::CodecKind::elias_dense};
  std::uint32_t s = 16, d = 512;
  qsgd::Norm norm = qsgd::Norm::max;
  qsgd::CodecKind half = qsgd::CodecKind::bf16;
  qsgd::bench::InputKind input = qsgd::bench::InputKind::gaussian;
  std::uint64_t seed = 1;
  double common = 0.0;  // --common: the share of every rank's gradient variance that all ranks have in common
  std::string json;
  bool check = true;
  std::vector<Transport> transports = {Transport::ring, Transport::library};
  std::uint64_t segment = qsgd::comm::ExchangeConfig{}.segment_bytes;
  std::uint32_t window = qsgd::comm::ExchangeConfig{}.window;
  bool ring_checksums = qsgd::comm::ExchangeConfig{}.ring_checksums;
  // powersgd: its ranks r, and the gradient as row-major matrices of this
  // many columns (floor(n / cols) rows; the remainder averaged exactly).
  std::vector<std::uint32_t> powersgd_ranks = {4};
  std::uint64_t matrix_cols = 1024;
};

void print_usage(std::FILE* out) {
  std::fprintf(out,
               "usage: mpirun -np K qsgd-bench-exchange [options]\n"
               "Sizes (-b, -e, --segment): bytes, with an optional suffix K, M or G = 2^10, 2^20, 2^30 bytes.\n"
               "  -b, --minbytes SIZE  smallest gradient in fp32 bytes (default 4M)\n"
               "  -e, --maxbytes SIZE  largest (default 64M)\n"
               "  -f, --stepfactor F   size multiplier (default 4)\n"
               "  -w, --warmup N       untimed iterations per row (default 3)\n"
               "  -n, --iters N        timed iterations per row (default 10)\n"
               "  --strategies LIST    allreduce,allreduce16,allgather,param-server,scatter-reduce,\n"
               "                       shared-scale (default), powersgd\n"
               "  --powersgd-ranks L   ranks r of the powersgd rows (default 4)\n"
               "  --matrix-cols C      powersgd: the gradient as matrices of C columns (default 1024)\n"
               "  --codecs LIST        codecs of the compressed strategies (default fixed,elias-dense)\n"
               "  --s S                quantization levels s (default 16: the paper's 4-bit)\n"
               "  --d D                bucket size d in coordinates (default 512; 0 = one bucket)\n"
               "  --levels S           alias of --s\n"
               "  --bucket D           alias of --d\n"
               "  --norm max|l2        bucket scaling (default max)\n"
               "  --half bf16|fp16     format of allreduce16 (default bf16)\n"
               "  --input NAME         gaussian, student-t3, sparse90, layered (default gaussian)\n"
               "  --seed N             input seed; rank r uses seed + r (default 1)\n"
               "  --common C           rank r's gradient is sqrt(1-C) x_r + sqrt(C) x_c, x_c drawn from\n"
               "                       seed + K and shared by every rank (0 <= C <= 1; default 0:\n"
               "                       independent ranks)\n"
               "  -o, --out FILE       write the results as JSON to FILE (default: none, the table only)\n"
               "  --json FILE          alias of --out\n"
               "  --no-check           skip the identical-bits and error check (default: checked)\n"
               "  --transports LIST    ring,library (default both: every strategy with a ring\n"
               "                       schedule runs once per transport)\n"
               "  --segment SIZE       ring pipeline segment (default 4M)\n"
               "  --window N           ring receives in flight (default 8)\n"
               "  --ring-checksums on|off  the CRC32C that travels with every ring allreduce segment of\n"
               "                       allreduce, allreduce16 and powersgd (default on; off only to measure\n"
               "                       what the check costs)\n");
}

// The command line after MPI and Kokkos took theirs; throws UsageError or
// qsgd::Error (a codec, strategy or norm name) naming the option.
Options parse_options(int argc, char** argv) {
  using qsgd::bench::parse_bytes;
  using qsgd::bench::parse_count;
  using qsgd::bench::split_list;
  constexpr std::uint64_t max_bytes = std::uint64_t(1) << 40;
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw qsgd::bench::UsageError(a + " needs a value");
      return argv[++i];
    };
    if (a == "-b" || a == "--minbytes")
      o.min_bytes = parse_bytes(a, value(), 4, max_bytes);
    else if (a == "-e" || a == "--maxbytes")
      o.max_bytes = parse_bytes(a, value(), 4, max_bytes);
    else if (a == "-f" || a == "--stepfactor")
      o.factor = parse_count(a, value(), 2, 1u << 20);
    else if (a == "-w" || a == "--warmup")
      o.warmup = static_cast<int>(parse_count(a, value(), 0, 1000000));
    else if (a == "-n" || a == "--iters")
      o.iters = static_cast<int>(parse_count(a, value(), 1, 1000000));
    else if (a == "--strategies") {
      o.strategies.clear();
      for (const auto& s : split_list(value())) o.strategies.push_back(qsgd::comm::parse_strategy(s));
    } else if (a == "--codecs") {
      o.codecs.clear();
      for (const auto& s : split_list(value())) o.codecs.push_back(qsgd::parse_codec(s));
    } else if (a == "--s" || a == "--levels")
      o.s = static_cast<std::uint32_t>(parse_count(a, value(), 1, qsgd::max_levels));
    else if (a == "--d" || a == "--bucket")
      o.d = static_cast<std::uint32_t>(parse_count(a, value(), 0, 0xFFFFFFFFull));
    else if (a == "--norm")
      o.norm = qsgd::parse_norm(value());
    else if (a == "--half")
      o.half = qsgd::parse_codec(value());
    else if (a == "--input") {
      const std::string name = value();
      if (!qsgd::bench::parse_input(name, o.input))
        throw qsgd::bench::UsageError("unknown input '" + name + "' (see --help)");
    } else if (a == "--seed")
      o.seed = parse_count(a, value(), 0, ~std::uint64_t(0));
    else if (a == "--common")
      o.common = qsgd::bench::parse_real(a, value(), 0.0, 1.0);
    else if (a == "-o" || a == "--out" || a == "--json")
      o.json = value();
    else if (a == "--no-check")
      o.check = false;
    else if (a == "--transports") {
      o.transports.clear();
      for (const auto& t : split_list(value())) o.transports.push_back(qsgd::comm::parse_transport(t));
    } else if (a == "--segment")
      o.segment = parse_bytes(a, value(), 1, max_bytes);
    else if (a == "--window")
      o.window = static_cast<std::uint32_t>(parse_count(a, value(), 1, 1u << 16));
    else if (a == "--ring-checksums") {
      const std::string v = value();
      if (v != "on" && v != "off") throw qsgd::bench::UsageError("--ring-checksums takes on or off, got '" + v + "'");
      o.ring_checksums = v == "on";
    }
    else if (a == "--powersgd-ranks") {
      o.powersgd_ranks.clear();
      for (const auto& r : split_list(value()))
        o.powersgd_ranks.push_back(static_cast<std::uint32_t>(parse_count(a, r, 1, 1u << 16)));
    } else if (a == "--matrix-cols")
      o.matrix_cols = parse_count(a, value(), 1, std::uint64_t(1) << 32);
    else
      throw qsgd::bench::UsageError("unknown option '" + a + "' (try --help)");
  }
  if (o.transports.empty()) throw qsgd::bench::UsageError("--transports needs at least one of ring, library");
  if (o.max_bytes < o.min_bytes) throw qsgd::bench::UsageError("--maxbytes is smaller than --minbytes");
  if (o.half != qsgd::CodecKind::bf16 && o.half != qsgd::CodecKind::fp16)
    throw qsgd::bench::UsageError("--half needs bf16 or fp16");
  return o;
}

// The ratio column needs the fp32 baselines: they always run first, once per
// transport.
struct Variant {
  StrategyKind strategy;
  qsgd::CodecConfig codec;
  Transport transport = Transport::ring;
  std::uint32_t powersgd_rank = 0;  // powersgd rows
};

std::vector<Variant> variants(const Options& o) {
  std::vector<Variant> v;
  qsgd::CodecConfig base;
  base.s = o.s;
  base.d = o.d;
  base.norm = o.norm;
  base.codec = qsgd::CodecKind::fp32;
  for (Transport t : o.transports) v.push_back({StrategyKind::allreduce, base, t});
  for (StrategyKind k : o.strategies) {
    if (k == StrategyKind::allreduce) continue;
    // param-server has no ring schedule: it runs once, on the library's collectives.
    std::vector<Transport> ts = o.transports;
    if (k == StrategyKind::param_server) ts = {Transport::library};
    for (Transport t : ts) {
      if (k == StrategyKind::allreduce16) {
        qsgd::CodecConfig c = base;
        c.codec = o.half;
        v.push_back({k, c, t});
        continue;
      }
      if (k == StrategyKind::powersgd) {  // fp32 factors: one row per rank r
        for (std::uint32_t r : o.powersgd_ranks) v.push_back({k, base, t, r});
        continue;
      }
      for (qsgd::CodecKind ck : o.codecs) {
        qsgd::CodecConfig c = base;
        c.codec = ck;
        v.push_back({k, c, t});
      }
    }
  }
  return v;
}

std::string codec_label(const Variant& v) {
  if (v.strategy == StrategyKind::allreduce) return "fp32";
  if (v.strategy == StrategyKind::powersgd) return "fp32 r=" + std::to_string(v.powersgd_rank);
  return qsgd::to_string(v.codec.codec);
}

// Which "b-bit" naming a row uses (spec section 1): s = 2^b is the paper's.
std::string naming(const Variant& v) {
  if (!qsgd::is_quantized(v.codec.codec)) return "-";
  const std::uint32_t s = v.codec.s;
  std::string n = "s=" + std::to_string(s);
  if (s >= 2 && (s & (s - 1)) == 0) {
    int b = 0;
    while ((1u << b) < s) ++b;
    n += " (paper " + std::to_string(b) + "-bit)";
  } else if (((s + 1) & s) == 0) {
    int b = 0;
    while ((1u << b) < s + 1) ++b;
    n += " (wire " + std::to_string(b + 1) + "-bit)";
  }
  return n;
}

struct Row {
  Variant v;
  std::uint64_t n = 0;
  std::vector<double> samples;  // per iteration, max over ranks
  double median = 0, min = 0, p99 = 0;
  double quantize = 0, encode = 0, requantize = 0, comm = 0, blocked = 0, decode = 0;
  bool fused = false;
  double wire_bytes = 0, bits_per_dim = 0, requant_bits_per_dim = 0;
  double ratio = 0;
  bool identical = false;
  double rel_err = -1;
};

using qsgd::bench::median_of;
using qsgd::bench::percentile;

// Statistics over the ranks, through the Communicator's watched collectives.
const qsgd::comm::MpiSite stats_site{"statistics allreduce", "qsgd-bench-exchange"};

std::vector<double> max_over_ranks(const qsgd::comm::Communicator& comm, std::vector<double> x) {
  comm.allreduce_max(x.data(), static_cast<int>(x.size()), stats_site);
  return x;
}

double max_over_ranks(const qsgd::comm::Communicator& comm, double x) {
  comm.allreduce_max(&x, 1, stats_site);
  return x;
}

double sum_over_ranks(const qsgd::comm::Communicator& comm, double x) {
  comm.allreduce_sum(&x, 1, stats_site);
  return x;
}

// Per-rank receive bandwidth when every rank sends `bytes` to rank + 1 and
// receives from rank - 1 at once (the pattern of a ring collective), GB/s.
// The bytes go as segments of `segment` bytes (ceiling_segment: the ring
// transport's, 64 KiB at least), all posted at once (the transport keeps a
// window of them in flight): one message of 64 MiB goes through Open MPI's
// rendezvous, whose reply can queue behind the peer's own data on the same
// TCP connection; on emulated 1 Gbit/s links that serialized the two
// directions in about one run of five (K = 2: 0.061 GB/s against 0.119).
double ring_ceiling(const qsgd::comm::Communicator& comm, std::uint64_t bytes, std::uint64_t segment) {
  const int K = comm.size(), r = comm.rank();
  if (K < 2) return 0;
  const std::uint64_t pieces = (bytes + segment - 1) / segment;
  std::vector<char> a(bytes, 1), b(bytes);
  std::vector<double> t;
  std::vector<MPI_Request> reqs(2 * pieces);
  for (int i = 0; i < 6; ++i) {
    comm.barrier({"link ceiling barrier", "qsgd-bench-exchange"});
    const auto t0 = std::chrono::steady_clock::now();
    // Posted requests in one watched wait (a dead peer ends the job within
    // the peer timeout instead of blocking it).
    const qsgd::comm::MpiSite site{"link ceiling", "qsgd-bench-exchange"};
    for (std::uint64_t p = 0; p < pieces; ++p) {
      const std::uint64_t off = p * segment, len = std::min(segment, bytes - off);
      comm.check(MPI_Irecv(b.data() + off, static_cast<int>(len), MPI_BYTE, (r + K - 1) % K, 7, comm.mpi(),
                           &reqs[2 * p]),
                 "MPI_Irecv", site);
      comm.check(MPI_Isend(a.data() + off, static_cast<int>(len), MPI_BYTE, (r + 1) % K, 7, comm.mpi(),
                           &reqs[2 * p + 1]),
                 "MPI_Isend", site);
    }
    qsgd::comm::wait_all(static_cast<int>(reqs.size()), reqs.data(), comm.mpi(), comm.peer_timeout(), site);
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (i > 0) t.push_back(max_over_ranks(comm, dt));
  }
  return static_cast<double>(bytes) / median_of(t) / 1e9;
}

// The link ceiling's segment: the ring's, at least 64 KiB (a bounded number
// of requests) and at most the whole message.
std::uint64_t ceiling_segment(std::uint64_t segment, std::uint64_t bytes) {
  return std::min(bytes, std::max<std::uint64_t>(segment, std::uint64_t(64) << 10));
}

using qsgd::bench::json_number;
using qsgd::bench::json_string;
using qsgd::bench::utc_now;

using qsgd::bench::mpi_library;

// The distinct host names of the ranks, in rank order of first appearance.
std::vector<std::string> distinct_hosts(const qsgd::comm::Communicator& comm) {
  std::vector<std::string> out;
  for (const std::string& h : comm.host_names({"host name allgather", "qsgd-bench-exchange"}))  // collective
    if (std::find(out.begin(), out.end(), h) == out.end()) out.push_back(h);
  return out;
}

// Rank me's gradient of n values: x_me (seed + me), or with --common C,
// sqrt(1 - C) x_me + sqrt(C) x_c with x_c (seed + K) the same on every rank.
Kokkos::View<float*, Mem> rank_input(const Options& o, std::uint64_t n, int me, int K) {
  auto own = qsgd::bench::make_input<Mem>(o.input, n, o.seed + static_cast<std::uint64_t>(me));
  if (o.common == 0.0) return own;
  const auto shared = qsgd::bench::make_input<Mem>(o.input, n, o.seed + static_cast<std::uint64_t>(K));
  const float a = static_cast<float>(std::sqrt(1.0 - o.common)), b = static_cast<float>(std::sqrt(o.common));
  Kokkos::parallel_for(
      "qsgd::bench::common_input", Kokkos::RangePolicy<Exec>(0, n),
      KOKKOS_LAMBDA(std::uint64_t i) { own(i) = a * own(i) + b * shared(i); });
  Kokkos::fence();
  return own;
}

Row measure(const Options& o, const qsgd::comm::Communicator& comm, const Variant& v,
            const Kokkos::View<float*, Mem>& in, const std::vector<double>& avg) {
  qsgd::comm::ExchangeConfig cfg;
  cfg.strategy = v.strategy;
  cfg.codec = v.codec;
  cfg.seed = o.seed;
  cfg.transport = v.transport;
  cfg.segment_bytes = o.segment;
  cfg.window = o.window;
  cfg.ring_checksums = o.ring_checksums;
  cfg.powersgd_rank = std::max<std::uint32_t>(v.powersgd_rank, 1);
  auto ex = qsgd::comm::make_exchange(cfg, comm);
  const std::uint64_t n = in.extent(0);
  if (v.strategy == StrategyKind::powersgd && n / o.matrix_cols > 0)
    ex->set_layout(0, {qsgd::comm::MatrixBlock{0, n / o.matrix_cols, o.matrix_cols}});
  Kokkos::View<float*, Mem> out(Kokkos::view_alloc(Kokkos::WithoutInitializing, "out"), n);
  for (int i = 0; i < o.warmup; ++i) ex->average(in, out, 0, static_cast<std::uint64_t>(i));
  const int T = o.iters;
  std::vector<double> t(T), q(T), e(T), rq(T), c(T), b(T), d(T);
  double wire = 0, enc_bytes = 0, req_bytes = 0;
  bool fused = false;
  for (int i = 0; i < T; ++i) {
    comm.barrier({"iteration barrier", "qsgd-bench-exchange"});
    const auto t0 = std::chrono::steady_clock::now();
    ex->average(in, out, 0, static_cast<std::uint64_t>(o.warmup + i));
    Kokkos::fence();
    t[i] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const auto& st = ex->last_stats();
    q[i] = st.quantize_s;
    e[i] = st.encode_s;
    rq[i] = st.requantize_s;
    c[i] = st.comm_s;
    b[i] = st.blocked_s;
    d[i] = st.decode_s;
    wire += static_cast<double>(st.wire_bytes);
    enc_bytes += static_cast<double>(st.encoded_bytes);
    req_bytes += static_cast<double>(st.requantized_bytes);
    fused = st.fused_quantize;
  }
  Row row;
  row.v = v;
  row.n = n;
  row.samples = max_over_ranks(comm, t);
  row.median = median_of(row.samples);
  row.min = qsgd::bench::minimum_of(row.samples);
  row.p99 = percentile(row.samples, 0.99);
  row.quantize = median_of(max_over_ranks(comm, q));
  row.encode = median_of(max_over_ranks(comm, e));
  row.requantize = median_of(max_over_ranks(comm, rq));
  row.comm = median_of(max_over_ranks(comm, c));
  row.blocked = median_of(max_over_ranks(comm, b));
  row.decode = median_of(max_over_ranks(comm, d));
  row.fused = fused;
  row.wire_bytes = max_over_ranks(comm, wire / T);
  const double K = comm.size();
  row.bits_per_dim = n ? 8.0 * sum_over_ranks(comm, enc_bytes / T) / K / static_cast<double>(n) : 0;
  // Second-stage messages: one per rank for scatter-reduce (requantized) and
  // shared-scale (level sums), the server's for param-server.
  const double req = sum_over_ranks(comm, req_bytes / T);
  row.requant_bits_per_dim = n ? 8.0 * req / static_cast<double>(n) : 0;
  if (o.check) {
    auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), out);
    const auto hashes = comm.allgather(qsgd::comm::float_fingerprint(h.data(), n));
    row.identical = std::all_of(hashes.begin(), hashes.end(), [&](std::uint64_t x) { return x == hashes[0]; });
    double err = 0, ref = 0;
    for (std::uint64_t i = 0; i < n; ++i) {
      err += (h(i) - avg[i]) * (h(i) - avg[i]);
      ref += avg[i] * avg[i];
    }
    row.rel_err = ref > 0 ? err / ref : 0;
  }
  return row;
}

bool is_allreduce(StrategyKind k) { return k == StrategyKind::allreduce || k == StrategyKind::allreduce16; }

// nccl-tests' bus bandwidth of an allreduce: (bytes of the reduced data type
// per second) x 2(K-1)/K; 2 bytes per element for the 16-bit allreduce.
double busbw(const Row& r, int ranks) {
  if (!is_allreduce(r.v.strategy)) return NAN;
  const double elem = r.v.strategy == StrategyKind::allreduce16 ? 2.0 : 4.0;
  return elem * r.n / r.median / 1e9 * 2.0 * (ranks - 1) / ranks;
}

// Median time over the time the row's wire bytes take at the link ceiling.
double x_ideal(const Row& r, int ranks, double ceiling) {
  return ranks > 1 && ceiling > 0 && r.wire_bytes > 0 ? r.median / (r.wire_bytes / (ceiling * 1e9)) : NAN;
}

void print_header(int ranks) {
  std::printf(
      "# ranks %d; time: per-iteration max over ranks; algbw = 4n/median; busbw = algbw x 2(K-1)/K (allreduce "
      "rows); x ideal = median / (wire B / link ceiling); wait = blocked in MPI waits\n",
      ranks);
  std::printf("#%12s %10s  %-15s %-7s %-12s %-20s %8s %12s %10s %10s %10s %8s %8s %7s %8s %8s %8s %8s %8s %9s %5s %9s\n",
              "size(B)", "count", "strategy", "transp", "codec", "levels", "bits/dim", "wire B", "med(ms)", "min(ms)",
              "p99(ms)", "algbw", "busbw", "x ideal", "quant", "enc", "requant", "wait", "dec", "x allred", "same",
              "rel.err");
}

void print_row(const Row& r, int ranks, double ceiling) {
  auto ms = [](double s) { return s * 1e3; };
  // '*': (some of) the quantization runs fused into the fixed-width encoder and is timed as enc.
  char quant[16], bus[16], ideal[16];
  std::snprintf(quant, sizeof quant, r.fused ? "%7.2f*" : "%8.2f", ms(r.quantize));
  const double bb = busbw(r, ranks), xi = x_ideal(r, ranks, ceiling);
  if (std::isfinite(bb))
    std::snprintf(bus, sizeof bus, "%8.3f", bb);
  else
    std::snprintf(bus, sizeof bus, "%8s", "-");
  if (std::isfinite(xi))
    std::snprintf(ideal, sizeof ideal, "%7.2f", xi);
  else
    std::snprintf(ideal, sizeof ideal, "%7s", "-");
  std::printf(
      " %12llu %10llu  %-15s %-7s %-12s %-20s %8.3f %12.0f %10.2f %10.2f %10.2f %8.3f %s %s %s %8.2f %8.2f %8.2f "
      "%8.2f %9.3f %5s %9.2e\n",
      static_cast<unsigned long long>(r.n * 4), static_cast<unsigned long long>(r.n),
      qsgd::comm::to_string(r.v.strategy).c_str(), qsgd::comm::to_string(r.v.transport).c_str(),
      codec_label(r.v).c_str(), naming(r.v).c_str(), r.bits_per_dim, r.wire_bytes, ms(r.median), ms(r.min), ms(r.p99),
      4.0 * r.n / r.median / 1e9, bus, ideal, quant, ms(r.encode), ms(r.requantize), ms(r.blocked), ms(r.decode),
      r.ratio, r.rel_err < 0 ? "-" : (r.identical ? "yes" : "NO"), r.rel_err < 0 ? 0.0 : r.rel_err);
  std::fflush(stdout);
}

void write_json(const Options& o, const std::vector<Row>& rows, int ranks, const std::vector<std::string>& hosts,
                double ceiling, std::uint64_t ceiling_bytes, std::uint64_t ceiling_seg) {
  std::ofstream os(o.json);
  os << "{\n  \"schema\": " << json_string(schema) << ",\n  \"context\": {\n";
  for (const auto& [k, v] : qsgd::bench::provenance())
    os << "    " << json_string(k) << ": " << json_string(v) << ",\n";
  os << "    \"mpi_library\": " << json_string(mpi_library()) << ",\n    \"mpi_ranks\": " << ranks
     << ",\n    \"hosts\": [";
  for (std::size_t i = 0; i < hosts.size(); ++i) os << (i ? ", " : "") << json_string(hosts[i]);
  os << "],\n    \"date\": " << json_string(utc_now()) << "\n  },\n";
  os << "  \"parameters\": {\"warmup\": " << o.warmup << ", \"iters\": " << o.iters
     << ", \"segment_bytes\": " << o.segment << ", \"window\": " << o.window
     << ", \"ring_checksums\": " << (o.ring_checksums ? "true" : "false") << ", \"s\": " << o.s
     << ", \"d\": " << o.d << ", \"norm\": " << json_string(qsgd::to_string(o.norm))
     << ", \"input\": " << json_string(qsgd::bench::to_string(o.input))
     << ", \"input_description\": " << json_string(qsgd::bench::describe(o.input)) << ", \"seed\": " << o.seed
     << ", \"rank_seed\": \"seed + rank\", \"common_fraction\": " << json_number(o.common)
     << ", \"common_seed\": \"seed + K\"},\n";
  os << "  \"ceiling\": {\"kind\": \"ring MPI_Isend/MPI_Irecv in segments posted at once, received bytes per rank "
        "per second\", \"bytes\": "
     << ceiling_bytes << ", \"segment_bytes\": " << ceiling_seg
     << ", \"GBps\": " << json_number(ranks > 1 ? ceiling : NAN) << "},\n";
  os << "  \"rows\": [";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    const double algbw = 4.0 * r.n / r.median / 1e9, wirebw = r.wire_bytes / r.median / 1e9;
    os << (i ? ",\n" : "\n") << "    {\"strategy\": " << json_string(qsgd::comm::to_string(r.v.strategy))
       << ", \"transport\": " << json_string(qsgd::comm::to_string(r.v.transport))
       << ", \"codec\": " << json_string(codec_label(r.v)) << ", \"levels\": " << json_string(naming(r.v))
       << ", \"s\": " << (qsgd::is_quantized(r.v.codec.codec) ? r.v.codec.s : 0)
       << ", \"d\": " << (qsgd::is_quantized(r.v.codec.codec) ? r.v.codec.d : 0)
       << ", \"norm\": " << json_string(qsgd::is_quantized(r.v.codec.codec) ? qsgd::to_string(r.v.codec.norm) : "none")
       << ", \"powersgd_rank\": " << r.v.powersgd_rank
       << ", \"matrix_cols\": " << (r.v.strategy == StrategyKind::powersgd ? o.matrix_cols : 0)
       << ", \"ranks\": " << ranks << ", \"count\": " << r.n << ", \"bytes\": " << r.n * 4
       << ", \"time_median_s\": " << json_number(r.median) << ", \"time_min_s\": " << json_number(r.min)
       << ", \"time_p99_s\": " << json_number(r.p99) << ", \"algbw_GBps\": " << json_number(algbw)
       << ", \"busbw_GBps\": " << json_number(busbw(r, ranks))
       << ", \"time_over_ideal\": " << json_number(x_ideal(r, ranks, ceiling))
       << ", \"wire_bytes_per_rank\": " << json_number(r.wire_bytes) << ", \"wire_GBps\": " << json_number(wirebw)
       << ", \"wire_fraction_of_ceiling\": " << json_number(ranks > 1 && ceiling > 0 ? wirebw / ceiling : NAN)
       << ", \"bits_per_dim\": " << json_number(r.bits_per_dim)
       << ", \"requantized_bits_per_dim\": " << json_number(r.requant_bits_per_dim)
       << ", \"quantize_s\": " << json_number(r.quantize)
       << ", \"quantize_fused_into_encode\": " << (r.fused ? "true" : "false")
       << ", \"encode_s\": " << json_number(r.encode) << ", \"requantize_s\": " << json_number(r.requantize)
       << ", \"comm_s\": " << json_number(r.comm) << ", \"blocked_s\": " << json_number(r.blocked)
       << ", \"decode_s\": " << json_number(r.decode) << ", \"ratio_to_allreduce\": " << json_number(r.ratio)
       << ", \"identical_on_all_ranks\": " << (r.rel_err < 0 ? "null" : (r.identical ? "true" : "false"))
       << ", \"rel_error\": " << json_number(r.rel_err < 0 ? NAN : r.rel_err) << ", \"samples_s\": [";
    for (std::size_t k = 0; k < r.samples.size(); ++k) os << (k ? ", " : "") << json_number(r.samples[k]);
    os << "]}";
  }
  os << "\n  ]\n}\n";
}

int run(const Options& o) {
  int status = 0;
  const auto comm = qsgd::comm::Communicator::world();
  // Every MPI call of this program is checked (a failure ends the job with
  // one line naming it, exit code 7), and every wait is watched with the
  // peer timeout (a dead peer ends the job instead of blocking it):
  // reductions, gathers and the barrier before each timed iteration through
  // the Communicator's watched collectives, the link ceiling's exchange as
  // two requests in a watched wait. On 1 Gbit/s links it measured 0.119
  // GB/s per rank, as the blocking MPI_Sendrecv had in the previous
  // reference run (another machine), and the strategies it is compared with
  // wait the same way.
  const int K = comm.size(), me = comm.rank();
  const std::uint64_t ceiling_bytes = std::min<std::uint64_t>(o.max_bytes, std::uint64_t(64) << 20);
  const std::uint64_t ceiling_seg = ceiling_segment(o.segment, ceiling_bytes);
  const double ceiling = ring_ceiling(comm, ceiling_bytes, ceiling_seg);
  if (me == 0) {
    std::printf("# qsgd-bench-exchange: %d ranks, input %s (seed %llu + rank; common share %.2f), warmup %d, iters %d, %s\n",
                K, qsgd::bench::to_string(o.input).c_str(), static_cast<unsigned long long>(o.seed), o.common,
                o.warmup, o.iters, mpi_library().c_str());
    if (K > 1)
      std::printf("# link ceiling: ring MPI_Isend/MPI_Irecv of %llu bytes in %llu-byte segments: %.3f GB/s "
                  "received per rank\n",
                  static_cast<unsigned long long>(ceiling_bytes),
                  static_cast<unsigned long long>(ceiling_seg), ceiling);
    print_header(K);
  }
  std::vector<Row> rows;
  for (std::uint64_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= o.factor) {
    const std::uint64_t n = bytes / 4;
    const auto in = rank_input(o, n, me, K);
    std::vector<double> avg;
    if (o.check) {  // exact average in double, outside every timed region
      auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), in);
      avg.assign(h.data(), h.data() + n);
      comm.allreduce_sum(avg.data(), static_cast<int>(n), {"reference average allreduce", "qsgd-bench-exchange"});
      for (double& x : avg) x /= K;
    }
    double base = 0;  // the fastest fp32 allreduce of this size
    for (const Variant& v : variants(o)) {
      Row r = measure(o, comm, v, in, avg);
      if (v.strategy == StrategyKind::allreduce) base = base > 0 ? std::min(base, r.median) : r.median;
      r.ratio = r.median / base;
      if (me == 0) print_row(r, K, ceiling);
      if (o.check && !r.identical) status = 1;
      rows.push_back(r);
    }
  }
  const auto hosts = distinct_hosts(comm);  // collective
  if (me == 0 && !o.json.empty()) write_json(o, rows, K, hosts, ceiling, ceiling_bytes, ceiling_seg);
  if (me == 0 && status) std::fprintf(stderr, "qsgd-bench-exchange: some rows differ across ranks\n");
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  if (const auto code = qsgd::bench::early_options(argc, argv, "qsgd-bench-exchange", print_usage)) return *code;
  qsgd::comm::check_mpi(MPI_Init(&argc, &argv), "MPI_Init", MPI_COMM_WORLD, {"start-up", "qsgd-bench-exchange"});
  int status = 0;
  {
    Kokkos::ScopeGuard guard(argc, argv);
    Options o;
    try {
      o = parse_options(argc, argv);
    } catch (const std::exception& e) {  // UsageError, or qsgd::Error for a name
      int rank = 0;
      qsgd::comm::check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank", MPI_COMM_WORLD,
                            {"start-up", "qsgd-bench-exchange"});
      if (rank == 0) std::fprintf(stderr, "qsgd-bench-exchange: error: %s\n", e.what());
      status = 2;
    }
    if (status == 0) status = run(o);
  }
  qsgd::comm::check_mpi(MPI_Finalize(), "MPI_Finalize", MPI_COMM_WORLD, {"shutdown", "qsgd-bench-exchange"});
  return status;
}
