// qsgd-bench-kernels: throughput of the kernels of qsgd::kernels against the
// memory-copy ceiling measured in the same run (spec section 5).
//
// Benchmarks, each at n = 2^16, 2^18, ..., 2^26:
//   memcpy/kokkos             Kokkos::deep_copy of n floats, default memory space: the ceiling
//   memcpy/std                std::memcpy of n floats in host memory, for reference
//   quantize                  qsgd::quantize into a Quantized (levels stored)
//   checksum/crc32c           message_checksum (the CRC32C tree) over the 4n
//                             bytes of the input
//   encode/<codec>            Codec::encode(v, key, out): fixed is the fused
//                             quantize+pack path; the Elias codes quantize, then encode
//   encode_only/<codec>       Codec::encode(q, out) of a vector quantized beforehand
//   decode/<codec>            Codec::decode(msg, bytes, values)
//   decode_accumulate/<codec> Codec::decode_accumulate(msg, bytes, w, acc)
//   powersgd_<kernel>/r<R>    PowerSGD's kernels (comm/src/detail/powersgd_kernels.hpp)
//                             on the input as one row-major matrix M of n / C rows and
//                             C = --qsgd_matrix_cols columns, rank R = --qsgd_powersgd_rank:
//                             project (P = M Q), orthonormalize (P's columns, modified
//                             Gram-Schmidt twice), back (Q = M^T P), expand (out = P Q^T);
//                             only at the sizes n that C divides
// Every encode and decode includes the message checksum (CRC32C tree) and the
// header checks, as in real use.
//
// Metrics (every benchmark, memcpy included):
//   bytes_per_second = 4 n * iterations / manual time   (bytes of fp32 input;
//                      memcpy actually moves 8n bytes: read + write)
//   bits_per_dim     = message bytes * 8 / n   (encode and decode only; the
//                      message of the warm-up call, step 0)
// PowerSGD's rates are in bytes of M too, orthonormalize's included (its
// work is P's n / C x R elements; the context records C as qsgd_matrix_cols).
// The fraction of the ceiling is not a counter of this program: the report
// tools (benchmarks/common/qsgd_report.py, kernel_medians_by_size) divide a
// kernel's median bytes_per_second by memcpy/kokkos's median at the same n
// of the same run. For both medians to sample the same stretch of time, the
// repetitions of all benchmarks run in a random interleaved order (Google
// Benchmark's --benchmark_enable_random_interleaving, on unless given):
// a machine whose memory rate drifts over minutes (docs/kernels.md,
// "Measuring against a drifting ceiling") then moves the ceiling and the
// kernels alike. Every size's buffers are kept for the whole run
// (12 bytes per coordinate per size: about 1.07 GB for the default sizes
// 2^16..2^26; filter the sizes with --qsgd_n_min/--qsgd_n_max).
// At small n the buffers fit in cache and the ceiling is cache bandwidth;
// the targets are stated at n = 2^24 (64 MiB of input), where it is DRAM.
// Time per iteration is wall time from before the call to after
// Kokkos::fence(), so device work is counted on every backend. The RNG key's
// step changes every iteration. Each benchmark repeats (default 5; set
// --benchmark_repetitions) and reports every repetition plus mean, median,
// stddev, cv, min and max aggregates; read the medians.
//
// Performance targets at n = 2^24, d = 512, s = 16, max norm (run_targets.sh
// runs exactly this and checks them); the fraction is the `bytes_per_second`
// of the `_median` aggregate row over memcpy/kokkos's (qsgd_report.py):
//   encode/fixed/16777216/manual_time_median                 frac_of_memcpy >= 0.60
//   decode_accumulate/fixed/16777216/manual_time_median      frac_of_memcpy >= 0.60
//   checksum/crc32c/16777216/manual_time_median              frac_of_memcpy >= 0.80
//   encode/elias-dense/16777216/manual_time_median           frac_of_memcpy >= 0.15
//   decode_accumulate/elias-dense/16777216/manual_time_median frac_of_memcpy >= 0.10
//   encode/rans/16777216/manual_time_median                  frac_of_memcpy >= 0.10
//   decode_accumulate/rans/16777216/manual_time_median       frac_of_memcpy >= 0.15
//
// Options of this program (before the Google Benchmark and Kokkos ones):
//   --qsgd_s=16 --qsgd_d=512 --qsgd_norm=max|l2 --qsgd_chunk=4096
//   --qsgd_n_min=65536 --qsgd_n_max=67108864   (powers of 4 from n_min)
//   --qsgd_matrix_cols=1024 --qsgd_powersgd_rank=4 (1..256)
// JSON: --benchmark_out=FILE --benchmark_out_format=json.

#include <benchmark/benchmark.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "cli.hpp"
#include "inputs.hpp"
#include "provenance.hpp"
#include "stats.hpp"
#include "detail/powersgd_kernels.hpp"
#include "qsgd/kernels.hpp"

namespace {

using Exec = Kokkos::DefaultExecutionSpace;
using Mem = Exec::memory_space;
using Values = Kokkos::View<float*, Mem>;
using Words = Kokkos::View<std::uint64_t*, Mem>;

constexpr const char* program = "qsgd-bench-kernels";
constexpr std::uint64_t input_seed = 42;
constexpr float accumulate_weight = 0.25f;

struct Settings {
  std::uint32_t s = 16;
  std::uint32_t d = 512;
  qsgd::Norm norm = qsgd::Norm::max;
  std::uint32_t chunk = 4096;
  std::int64_t n_min = std::int64_t(1) << 16;
  std::int64_t n_max = std::int64_t(1) << 26;
  std::uint64_t matrix_cols = 1024;  // PowerSGD: the input as matrices of this many columns
  std::uint32_t powersgd_rank = 4;
  bool interleaved = true;  // Google Benchmark's random interleaving of repetitions

  qsgd::CodecConfig codec(qsgd::CodecKind c) const {
    qsgd::CodecConfig cfg;
    cfg.codec = c;
    cfg.s = s;
    cfg.d = d;
    cfg.norm = norm;
    cfg.chunk = chunk;
    return cfg;
  }
};

const std::vector<qsgd::CodecKind>& all_codecs() {
  static const std::vector<qsgd::CodecKind> all{qsgd::CodecKind::fixed, qsgd::CodecKind::elias_dense,
                                                qsgd::CodecKind::elias_sparse, qsgd::CodecKind::rans,
                                                qsgd::CodecKind::fp16,
                                                qsgd::CodecKind::bf16, qsgd::CodecKind::fp32};
  return all;
}

qsgd::RngKey key_of(std::uint64_t step) { return qsgd::RngKey{1, step, 0, 0}; }


// State shared by all benchmarks of a run. Owns every View, so it must die
// before Kokkos::finalize (it lives inside main's ScopeGuard scope).
class Suite {
 public:
  explicit Suite(const Settings& s) : settings_(s) {}

  const Settings& settings() const { return settings_; }
  bool failed() const { return failed_; }

  // Input, output and accumulator of size n, made on first use and kept:
  // interleaved repetitions switch sizes at every call.
  struct Buffers {
    Values input, out, acc;
  };
  const Buffers& buffers(std::uint64_t n) {
    auto it = buf_.find(n);
    if (it == buf_.end()) {
      Buffers b;
      b.input = qsgd::bench::make_input<Mem>(qsgd::bench::InputKind::gaussian, n, input_seed);
      b.out = Values("qsgd::bench::out", n);
      b.acc = Values("qsgd::bench::acc", n);
      it = buf_.emplace(n, std::move(b)).first;
    }
    return it->second;
  }
  void release() { buf_.clear(); }

  // The one timing harness. `body(step)` does one operation and returns the
  // message size in bytes (0 when there is no message). One untimed warm-up
  // call first (page faults, scratch growth), then each iteration is timed
  // from before the call to after Kokkos::fence().
  template <class Body>
  void run(benchmark::State& state, Body&& body) {
    const auto n = static_cast<std::uint64_t>(state.range(0));
    std::size_t msg_bytes = 0;
    try {
      msg_bytes = body(0);
      Kokkos::fence();
      std::uint64_t step = 1;
      for (auto _ : state) {
        const auto t0 = std::chrono::steady_clock::now();
        body(step++);
        Kokkos::fence();
        const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        state.SetIterationTime(dt);
      }
    } catch (const std::exception& e) {
      failed_ = true;
      state.SkipWithError(e.what());
      return;
    }
    state.SetBytesProcessed(static_cast<std::int64_t>(4 * n) * static_cast<std::int64_t>(state.iterations()));
    if (msg_bytes > 0) state.counters["bits_per_dim"] = 8.0 * static_cast<double>(msg_bytes) / static_cast<double>(n);
  }

 private:
  Settings settings_;
  std::map<std::uint64_t, Buffers> buf_;
  bool failed_ = false;
};

// ---- the benchmarks ---------------------------------------------------------

void bm_memcpy_kokkos(benchmark::State& state, Suite* suite) {
  const auto& b = suite->buffers(static_cast<std::uint64_t>(state.range(0)));
  suite->run(state, [&](std::uint64_t) -> std::size_t {
    Kokkos::deep_copy(b.out, b.input);
    return 0;
  });
}

void bm_memcpy_std(benchmark::State& state, Suite* suite) {
  const auto n = static_cast<std::uint64_t>(state.range(0));
  const auto& b = suite->buffers(n);
  auto src = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), b.input);
  std::vector<float> dst(n);
  suite->run(state, [&](std::uint64_t) -> std::size_t {
    std::memcpy(dst.data(), src.data(), n * sizeof(float));
    benchmark::ClobberMemory();
    return 0;
  });
}

void bm_quantize(benchmark::State& state, Suite* suite) {
  const auto n = static_cast<std::uint64_t>(state.range(0));
  const auto& b = suite->buffers(n);
  const qsgd::CodecConfig cfg = suite->settings().codec(qsgd::CodecKind::fixed);
  qsgd::Quantized<Mem> q;
  suite->run(state, [&](std::uint64_t step) -> std::size_t {
    qsgd::quantize(Exec(), cfg, b.input, n, key_of(step), q);
    return 0;
  });
}

void bm_encode(benchmark::State& state, Suite* suite, qsgd::CodecKind c) {
  const auto n = static_cast<std::uint64_t>(state.range(0));
  const auto& b = suite->buffers(n);
  qsgd::Codec<Exec> codec(suite->settings().codec(c));
  Words msg("qsgd::bench::msg", codec.max_message_bytes(n) / 8);
  suite->run(state,
             [&](std::uint64_t step) { return codec.encode(b.input, n, key_of(step), msg); });
}

void bm_encode_only(benchmark::State& state, Suite* suite, qsgd::CodecKind c) {
  const auto n = static_cast<std::uint64_t>(state.range(0));
  const auto& b = suite->buffers(n);
  const qsgd::CodecConfig cfg = suite->settings().codec(c);
  qsgd::Codec<Exec> codec(cfg);
  Words msg("qsgd::bench::msg", codec.max_message_bytes(n) / 8);
  qsgd::Quantized<Mem> q;
  qsgd::quantize(Exec(), cfg, b.input, n, key_of(0), q);
  suite->run(state, [&](std::uint64_t) { return codec.encode(q, msg); });
}

// A message of the input under codec c, for the decode benchmarks.
struct Encoded {
  Words msg;
  std::size_t bytes = 0;
};
Encoded encode_once(qsgd::Codec<Exec>& codec, const Values& input, std::uint64_t n) {
  Encoded e{Words("qsgd::bench::msg", codec.max_message_bytes(n) / 8), 0};
  e.bytes = codec.encode(input, n, key_of(0), e.msg);
  return e;
}

void bm_decode(benchmark::State& state, Suite* suite, qsgd::CodecKind c) {
  const auto n = static_cast<std::uint64_t>(state.range(0));
  const auto& b = suite->buffers(n);
  qsgd::Codec<Exec> codec(suite->settings().codec(c));
  const Encoded e = encode_once(codec, b.input, n);
  qsgd::Expect exact;  // the benchmark knows n, as the exchanges do: no default cap on its sizes
  exact.n = n;
  suite->run(state, [&](std::uint64_t) {
    codec.decode(e.msg, e.bytes, b.out, exact);
    return e.bytes;
  });
}

void bm_decode_accumulate(benchmark::State& state, Suite* suite, qsgd::CodecKind c) {
  const auto n = static_cast<std::uint64_t>(state.range(0));
  const auto& b = suite->buffers(n);
  qsgd::Codec<Exec> codec(suite->settings().codec(c));
  const Encoded e = encode_once(codec, b.input, n);
  Kokkos::deep_copy(b.acc, 0.0f);
  qsgd::Expect exact;
  exact.n = n;
  suite->run(state, [&](std::uint64_t) {
    codec.decode_accumulate(e.msg, e.bytes, accumulate_weight, b.acc, exact);
    return e.bytes;
  });
}

// The message checksum (CRC32C tree of crc32c.hpp) over the 4n bytes of the
// input, as if it were one message: the checksum's own speed.
void bm_checksum(benchmark::State& state, Suite* suite) {
  const auto n = static_cast<std::uint64_t>(state.range(0));
  const auto& b = suite->buffers(n);
  const std::size_t bytes = 4 * n / 8 * 8;
  Kokkos::View<const std::uint64_t*, Mem, Kokkos::MemoryUnmanaged> words(
      reinterpret_cast<const std::uint64_t*>(b.input.data()), bytes / 8);
  Kokkos::View<std::uint32_t*, Mem> scratch("qsgd::bench::crc_blocks", qsgd::checksum_blocks(bytes));
  Kokkos::View<std::uint32_t*, Mem> table("qsgd::bench::crc_table", 256);
  auto host_table = Kokkos::View<const std::uint32_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(
      qsgd::detail::crc32c_table(), 256);
  Kokkos::deep_copy(table, host_table);
  suite->run(state, [&](std::uint64_t) -> std::size_t {
    benchmark::DoNotOptimize(qsgd::message_checksum(Exec(), words, bytes, scratch, table));
    return 0;
  });
}

// PowerSGD's kernels on the input as one matrix M (rows x cols, row-major),
// each alone, in the shape of the execution space (psgd_project and the
// others pick the host walks or the device kernels), with P (rows x r) and
// Q (cols x r) drawn once.
enum class PsgdKernel { project, orthonormalize, back, expand };

const char* to_string(PsgdKernel k) {
  switch (k) {
    case PsgdKernel::project: return "project";
    case PsgdKernel::orthonormalize: return "orthonormalize";
    case PsgdKernel::back: return "back";
    case PsgdKernel::expand: return "expand";
  }
  return "?";
}

void bm_powersgd(benchmark::State& state, Suite* suite, PsgdKernel k) {
  namespace pd = qsgd::comm::detail;
  const auto n = static_cast<std::uint64_t>(state.range(0));
  const auto& b = suite->buffers(n);
  const std::uint64_t cols = suite->settings().matrix_cols, rows = n / cols;
  const std::uint32_t r = suite->settings().powersgd_rank;
  const Values p = qsgd::bench::make_input<Mem>(qsgd::bench::InputKind::gaussian, rows * r, input_seed + 1);
  const Values q = qsgd::bench::make_input<Mem>(qsgd::bench::InputKind::gaussian, cols * r, input_seed + 2);
  if (k == PsgdKernel::back || k == PsgdKernel::expand) pd::psgd_orthonormalize(Exec(), p, 0, rows, r);
  suite->run(state, [&](std::uint64_t) -> std::size_t {
    switch (k) {
      case PsgdKernel::project: pd::psgd_project(Exec(), b.input, 0, rows, cols, q, 0, r, p, 0); break;
      case PsgdKernel::orthonormalize: pd::psgd_orthonormalize(Exec(), p, 0, rows, r); break;
      case PsgdKernel::back: pd::psgd_back(Exec(), b.input, 0, rows, cols, p, 0, r, q, 0); break;
      case PsgdKernel::expand: pd::psgd_expand(Exec(), p, 0, q, 0, rows, cols, r, b.out, 0); break;
    }
    return 0;
  });
}

// ---- registration and context ----------------------------------------------

template <class Fn, class... Args>
void add_benchmark(const std::string& name, std::int64_t n, Fn fn, Args... args) {
  benchmark::RegisterBenchmark(name.c_str(), fn, args...)
      ->Arg(n)
      ->UseManualTime()
      ->Unit(benchmark::kMicrosecond)
      ->ComputeStatistics("min", qsgd::bench::minimum_of)
      ->ComputeStatistics("max", qsgd::bench::maximum_of);
}

// Registers every benchmark; returns their names (without n) in the order
// tables list them (the run itself interleaves them).
std::string register_all(Suite* suite) {
  const Settings& s = suite->settings();
  std::string order;
  std::set<std::string> listed;
  const auto add = [&](const std::string& name, std::int64_t n, auto fn, auto... args) {
    add_benchmark(name, n, fn, args...);
    if (listed.insert(name).second) order += (order.empty() ? "" : ",") + name;
  };
  for (std::int64_t n = s.n_min; n <= s.n_max; n *= 4) {
    add("memcpy/kokkos", n, bm_memcpy_kokkos, suite);  // the ceiling of this n
    add("memcpy/std", n, bm_memcpy_std, suite);
    add("quantize", n, bm_quantize, suite);
    add("checksum/crc32c", n, bm_checksum, suite);
    for (auto c : all_codecs()) add("encode/" + qsgd::to_string(c), n, bm_encode, suite, c);
    for (auto c : all_codecs())
      if (qsgd::is_quantized(c)) add("encode_only/" + qsgd::to_string(c), n, bm_encode_only, suite, c);
    for (auto c : all_codecs()) add("decode/" + qsgd::to_string(c), n, bm_decode, suite, c);
    for (auto c : all_codecs()) add("decode_accumulate/" + qsgd::to_string(c), n, bm_decode_accumulate, suite, c);
    if (static_cast<std::uint64_t>(n) % s.matrix_cols == 0)  // the input as whole rows of C columns
      for (auto k : {PsgdKernel::project, PsgdKernel::orthonormalize, PsgdKernel::back, PsgdKernel::expand})
        add(std::string("powersgd_") + to_string(k) + "/r" + std::to_string(s.powersgd_rank), n, bm_powersgd, suite,
            k);
  }
  return order;
}

void add_context(const Settings& s) {
  for (const auto& [k, v] : qsgd::bench::provenance()) benchmark::AddCustomContext(k, v);
  benchmark::AddCustomContext("qsgd_n_range", std::to_string(s.n_min) + ".." + std::to_string(s.n_max) + " (x4)");
  benchmark::AddCustomContext("qsgd_s", std::to_string(s.s));
  benchmark::AddCustomContext("qsgd_d", std::to_string(s.d));
  benchmark::AddCustomContext("qsgd_norm", qsgd::to_string(s.norm));
  benchmark::AddCustomContext("qsgd_chunk", std::to_string(s.chunk));
  benchmark::AddCustomContext("qsgd_matrix_cols", std::to_string(s.matrix_cols));
  benchmark::AddCustomContext("qsgd_powersgd_rank", std::to_string(s.powersgd_rank));
  benchmark::AddCustomContext("qsgd_input", "gaussian N(0,1), seed " + std::to_string(input_seed));
  benchmark::AddCustomContext("qsgd_bytes_unit", "bytes_per_second = 4 n / time: bytes of fp32 input, memcpy included");
  benchmark::AddCustomContext("qsgd_interleaved", s.interleaved ? "true" : "false");
  benchmark::AddCustomContext("qsgd_frac_of_memcpy",
                              "computed by the report tools: median bytes_per_second / median bytes_per_second of "
                              "memcpy/kokkos at the same n, this run (repetitions interleaved unless "
                              "--benchmark_enable_random_interleaving=false)");
}

// ---- options ----------------------------------------------------------------

void print_usage(std::FILE* out) {
  std::fprintf(out,
      "%s: throughput of quantize/encode/decode and PowerSGD's kernels against memcpy\n"
      "(Google Benchmark).\n"
      "Options of this program:\n"
      "  --qsgd_s=N          levels s (default 16)\n"
      "  --qsgd_d=N          bucket size, 0 = one bucket (default 512)\n"
      "  --qsgd_norm=max|l2  bucket scaling (default max)\n"
      "  --qsgd_chunk=N      coordinates per chunk of the Elias codes (default 4096)\n"
      "  --qsgd_n_min=N      smallest n (default 65536); sizes go up x4\n"
      "  --qsgd_n_max=N      largest n (default 67108864)\n"
      "  --qsgd_matrix_cols=C\n"
      "                      PowerSGD: the input as one matrix of n / C rows and C\n"
      "                      columns, at the sizes n that C divides (default 1024)\n"
      "  --qsgd_powersgd_rank=R\n"
      "                      PowerSGD's rank r, 1..256 (default 4)\n"
      "Repetitions default to 5 (--benchmark_repetitions=R overrides).\n"
      "Kokkos options (--kokkos-...) are accepted too.\n\n",
      program);
  std::fflush(out);
  benchmark::PrintDefaultHelp();
}

void print_help() { print_usage(stdout); }

using qsgd::bench::parse_count;
using qsgd::bench::UsageError;

// A boolean flag's value as Google Benchmark reads it (any case of false,
// no, off; one character 0, f, F, n, N or not alphanumeric: false; empty:
// true), so that the context records the order that actually ran.
bool benchmark_truthy(const std::string& v) {
  if (v.empty()) return true;
  if (v.size() == 1)
    return std::isalnum(static_cast<unsigned char>(v[0])) && v[0] != '0' && v[0] != 'f' && v[0] != 'F' &&
           v[0] != 'n' && v[0] != 'N';
  std::string lower(v);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return !(lower == "false" || lower == "no" || lower == "off");
}

// Takes this program's --qsgd_* flags out of args; leaves the rest for
// Google Benchmark. Adds --benchmark_repetitions=5 unless given, and
// --benchmark_enable_random_interleaving=true unless given on the command
// line or in Google Benchmark's environment variable.
Settings parse_settings(std::vector<char*>& args) {
  Settings s;
  std::vector<char*> rest;
  bool reps_given = false, interleave_given = false;
  for (char* a : args) {
    const std::string arg = a;
    const auto eq = arg.find('=');
    const std::string key = arg.substr(0, eq), val = eq == std::string::npos ? "" : arg.substr(eq + 1);
    if (key.rfind("--benchmark_repetitions", 0) == 0) reps_given = true;
    if (key == "--benchmark_enable_random_interleaving") {
      interleave_given = true;
      s.interleaved = benchmark_truthy(val);
    }
    if (key.rfind("--qsgd_", 0) != 0) {
      rest.push_back(a);
      continue;
    }
    if (key == "--qsgd_s") s.s = static_cast<std::uint32_t>(parse_count(key, val, 1, qsgd::max_levels));
    else if (key == "--qsgd_d") s.d = static_cast<std::uint32_t>(parse_count(key, val, 0, 0xFFFFFFFFull));
    else if (key == "--qsgd_chunk") s.chunk = static_cast<std::uint32_t>(parse_count(key, val, 1, 0xFFFFFFFFull));
    else if (key == "--qsgd_n_min") s.n_min = static_cast<std::int64_t>(parse_count(key, val, 1, std::uint64_t(1) << 34));
    else if (key == "--qsgd_n_max") s.n_max = static_cast<std::int64_t>(parse_count(key, val, 1, std::uint64_t(1) << 34));
    else if (key == "--qsgd_matrix_cols") s.matrix_cols = parse_count(key, val, 1, std::uint64_t(1) << 34);
    else if (key == "--qsgd_powersgd_rank") s.powersgd_rank = static_cast<std::uint32_t>(parse_count(key, val, 1, 256));
    else if (key == "--qsgd_norm") {
      try {
        s.norm = qsgd::parse_norm(val);
      } catch (const qsgd::Error& e) {
        throw UsageError(e.what());
      }
    } else {
      throw UsageError("unknown option " + arg + " (try --help)");
    }
  }
  if (s.n_min > s.n_max) throw UsageError("--qsgd_n_min is larger than --qsgd_n_max");
  static char default_reps[] = "--benchmark_repetitions=5";
  if (!reps_given) rest.push_back(default_reps);
  static char default_interleave[] = "--benchmark_enable_random_interleaving=true";
  if (const char* env = std::getenv("BENCHMARK_ENABLE_RANDOM_INTERLEAVING"); !interleave_given && env != nullptr)
    s.interleaved = benchmark_truthy(env);
  else if (!interleave_given)
    rest.push_back(default_interleave);
  args = rest;
  return s;
}

int run_program(int argc, char** argv) {
  Kokkos::ScopeGuard guard(argc, argv);
  std::vector<char*> args(argv, argv + argc);
  Settings settings;
  try {
    settings = parse_settings(args);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "%s: error: %s\n", program, e.what());
    return 2;
  }
  for (const auto q : {qsgd::CodecKind::fixed, qsgd::CodecKind::elias_dense}) qsgd::validate(settings.codec(q));
  int bargc = static_cast<int>(args.size());
  args.push_back(nullptr);
  benchmark::Initialize(&bargc, args.data(), print_help);
  if (benchmark::ReportUnrecognizedArguments(bargc, args.data())) return 2;
  add_context(settings);
  Suite suite(settings);
  benchmark::AddCustomContext("qsgd_order", register_all(&suite));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  suite.release();
  if (suite.failed()) {
    std::fprintf(stderr, "%s: error: at least one benchmark failed (see error_message above)\n", program);
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (const auto code = qsgd::bench::early_options(argc, argv, program, print_usage)) return *code;
  try {
    return run_program(argc, argv);
  } catch (const std::exception& e) {  // qsgd::Error included
    std::fprintf(stderr, "%s: error: %s\n", program, e.what());
  }
  return 1;
}
