// qsgd-codec-report: what every codec costs on the wire and in accuracy, on a
// fixed set of deterministic inputs (spec sections 2 and 5).
//
// For each input and each scheme (codec, s, d, norm) it encodes `draws`
// times with different RNG keys and reports the means of:
//   bits/dim    = message bytes * 8 / n: everything on the wire (header,
//                 chunk offsets, scales, payload)
//   entropy     = H + 32 * buckets / n, where H = -sum_k p_k log2 p_k over the
//                 histogram of the signed levels k in -s..s of the decoded
//                 message (the floor of any lossless code of those symbols
//                 that sends the fp32 scales as they are)
//   overhead    = bits/dim / entropy - 1
//   var blow-up = ||Q(v) - v||^2 / ||v||^2, Q(v) decoded from the message
//   bound       = min(d/s^2, sqrt(d)/s), d = bucket size in effect
//   ratio       = 32 / bits/dim
// Usage: qsgd-codec-report [--json] [--n N] [--inputs a,b] [--draws K] [-o|--out FILE]


#include <Kokkos_Core.hpp>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <exception>
#include <fstream>
#include <iostream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "cli.hpp"
#include "inputs.hpp"
#include "json.hpp"
#include "provenance.hpp"
#include "qsgd/kernels.hpp"

namespace {

using Exec = Kokkos::DefaultExecutionSpace;
using Mem = Exec::memory_space;
using qsgd::CodecKind;
using qsgd::Norm;

constexpr const char* program = "qsgd-codec-report";
constexpr const char* schema = "qsgd-codec-report/1";
constexpr std::uint64_t input_seed = 20240601;
constexpr double nan = std::numeric_limits<double>::quiet_NaN();

// ---- options ----------------------------------------------------------------

struct Options {
  bool json = false;
  std::uint64_t n = std::uint64_t(1) << 20;
  std::vector<qsgd::bench::InputKind> inputs = qsgd::bench::all_inputs();
  int draws = 8;
  std::string out;  // empty: stdout
};

using qsgd::bench::parse_count;
using qsgd::bench::UsageError;

void print_usage(std::FILE* out) {
  std::fprintf(out,
      "Usage: %s [options] [--kokkos-...]\n"
      "Bits per dimension, entropy floor, Elias overhead and variance blow-up of\n"
      "every codec on deterministic inputs.\n\n"
      "  --json          JSON instead of the table (the format switch; default: the table)\n"
      "  --n N           coordinates per input, a plain count (default 1048576 = 2^20; at least 16)\n"
      "  --inputs LIST   comma-separated subset of:",
      program);
  for (auto k : qsgd::bench::all_inputs()) std::fprintf(out, " %s", qsgd::bench::to_string(k).c_str());
  std::fprintf(out,
      "\n                  (default: all)\n"
      "  --draws K       random draws per row for the means (default 8)\n"
      "  -o, --out FILE  write to FILE instead of stdout (default: stdout)\n"
      "  --help          this text\n");
}

std::vector<qsgd::bench::InputKind> parse_inputs(const std::string& list) {
  std::vector<qsgd::bench::InputKind> out;
  for (const std::string& name : qsgd::bench::split_list(list)) {
    qsgd::bench::InputKind k;
    if (!qsgd::bench::parse_input(name, k)) throw UsageError("unknown input '" + name + "' (see --help)");
    out.push_back(k);
  }
  if (out.empty()) throw UsageError("--inputs needs at least one input name");
  return out;
}

// Kokkos has removed its own options; --help was handled before it started.
void parse_options(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw UsageError(a + " needs a value");
      return argv[++i];
    };
    if (a == "--json") o.json = true;
    else if (a == "--n") o.n = parse_count(a, value(), 16, std::uint64_t(1) << 31);
    else if (a == "--inputs") o.inputs = parse_inputs(value());
    else if (a == "--draws") o.draws = static_cast<int>(parse_count(a, value(), 1, 10000));
    else if (a == "-o" || a == "--out") o.out = value();
    else throw UsageError("unknown option '" + a + "' (try --help)");
  }
}

// ---- schemes: the rows of the report ----------------------------------------

// Naming of a row (spec section 1): "paper" b-bit means s = 2^b levels;
// "wire" b-bit means sign + (b-1) level bits, s = 2^(b-1) - 1; "theory" is the
// paper's analysis setting s = sqrt(n), L2 norm, one bucket.
struct Scheme {
  CodecKind codec;
  std::uint32_t s = 0;  // 0: float codec
  std::uint32_t d = 0;  // 0: one bucket
  Norm norm = Norm::none;
  std::string naming;   // float, paper, wire, theory
  std::string name;
};

std::vector<Scheme> schemes(std::uint64_t n) {
  std::vector<Scheme> out;
  for (auto c : {CodecKind::fp32, CodecKind::fp16, CodecKind::bf16})
    out.push_back({c, 0, 0, Norm::none, "float", qsgd::to_string(c)});
  for (auto c : {CodecKind::fixed, CodecKind::elias_dense, CodecKind::elias_sparse, CodecKind::rans}) {
    for (std::uint32_t b : {2u, 4u, 8u}) {
      const std::uint32_t s = 1u << b;
      out.push_back({c, s, 512, Norm::max, "paper", std::to_string(b) + "bit(paper,s=" + std::to_string(s) + ")"});
    }
    out.push_back({c, 7, 512, Norm::max, "wire", "4bit(wire,s=7)"});
  }
  const auto root = static_cast<std::uint32_t>(std::llround(std::sqrt(static_cast<double>(n))));
  for (auto c : {CodecKind::elias_dense, CodecKind::elias_sparse, CodecKind::rans})
    if (c != CodecKind::rans || root <= qsgd::rans_max_s)  // the rans alphabet caps s
      out.push_back({c, root, 0, Norm::l2, "theory", "sqrt(n)(theory,s=" + std::to_string(root) + ")"});
  return out;
}

// The paper's bits/dim bound at s = sqrt(n), L2, one bucket (o(1) terms
// dropped): dense 2.8 n + 32; sparse (3 + 1.5 log2(2(s^2+n)/(s(s+sqrt n))))
// s(s+sqrt n) + 32, which is 9 n + 32 at s = sqrt(n).
double paper_bits(const Scheme& sc, std::uint64_t n) {
  if (sc.naming != "theory" || sc.codec == CodecKind::rans) return nan;
  const double nd = static_cast<double>(n), s = sc.s, r = std::sqrt(nd);
  if (sc.codec == CodecKind::elias_dense) return 2.8 + 32.0 / nd;
  const double m = s * (s + r);
  return ((3.0 + 1.5 * std::log2(2.0 * (s * s + nd) / m)) * m + 32.0) / nd;
}

// ---- measurement ------------------------------------------------------------

struct Row {
  std::string input, codec, naming, name, norm;
  std::uint32_t s = 0;
  std::uint64_t d = 0;  // bucket size in effect (0 for float codecs)
  double bits = 0, entropy_symbols = nan, scale_bits = nan, overhead = nan;
  double variance = 0, bound = nan, ratio = 0, paper = nan;
  int draws = 0;
  double entropy() const { return entropy_symbols + scale_bits; }
};

struct Input {
  qsgd::bench::InputKind kind;
  std::vector<float> host;
  Kokkos::View<float*, Mem> device;
  double norm2 = 0;  // ||v||^2
};

Input make_input(qsgd::bench::InputKind kind, std::uint64_t n) {
  Input in{kind, qsgd::bench::make_input_host(kind, n, input_seed), {}, 0.0};
  in.device = Kokkos::View<float*, Mem>("qsgd::report::input", n);
  Kokkos::deep_copy(in.device, Kokkos::View<const float*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(in.host.data(), n));
  for (float x : in.host) in.norm2 += static_cast<double>(x) * x;
  return in;
}

// -sum p log2 p of the signed levels, in bits per coordinate.
double level_entropy(const qsgd::Quantized<Mem>& q) {
  const auto levels = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), q.levels);
  std::vector<std::uint64_t> hist(2 * std::size_t(q.s) + 1, 0);
  for (std::uint64_t i = 0; i < q.n; ++i) ++hist[static_cast<std::size_t>(levels(i) + static_cast<std::int64_t>(q.s))];
  double h = 0.0;
  for (std::uint64_t c : hist)
    if (c > 0) {
      const double p = static_cast<double>(c) / static_cast<double>(q.n);
      h -= p * std::log2(p);
    }
  return h;
}

double squared_error(const Kokkos::View<float*, Mem>& decoded, const std::vector<float>& v) {
  const auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), decoded);
  double e = 0.0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const double diff = static_cast<double>(h(i)) - v[i];
    e += diff * diff;
  }
  return e;
}

Row measure(const Input& in, const Scheme& sc, int draws) {
  const std::uint64_t n = in.host.size();
  const bool quantized = qsgd::is_quantized(sc.codec);
  qsgd::CodecConfig cfg;
  cfg.codec = sc.codec;
  if (quantized) {
    cfg.s = sc.s;
    cfg.d = sc.d;
    cfg.norm = sc.norm;
  }
  qsgd::Codec<Exec> codec(cfg);
  Kokkos::View<std::uint64_t*, Mem> msg("qsgd::report::msg", codec.max_message_bytes(n) / 8);
  Kokkos::View<float*, Mem> decoded("qsgd::report::decoded", n);
  qsgd::Quantized<Mem> q;

  Row r;
  r.input = qsgd::bench::to_string(in.kind);
  r.codec = qsgd::to_string(sc.codec);
  r.naming = sc.naming;
  r.name = sc.name;
  r.norm = quantized ? qsgd::to_string(sc.norm) : "-";
  r.s = sc.s;
  r.d = quantized ? qsgd::effective_bucket(cfg, n) : 0;
  r.draws = quantized ? draws : 1;  // float codecs are deterministic
  double bits = 0, var = 0, h = 0;
  qsgd::Expect exact;  // the report knows n: no default cap on its sizes
  exact.n = n;
  for (int k = 0; k < r.draws; ++k) {
    const std::size_t bytes = codec.encode(in.device, n, qsgd::RngKey{input_seed, std::uint64_t(k), 0, 0}, msg);
    bits += 8.0 * static_cast<double>(bytes) / static_cast<double>(n);
    codec.decode(msg, bytes, decoded, exact);
    var += in.norm2 > 0 ? squared_error(decoded, in.host) / in.norm2 : 0.0;
    if (quantized) {
      codec.decode(msg, bytes, q, exact);  // the levels actually on the wire
      h += level_entropy(q);
    }
  }
  r.bits = bits / r.draws;
  r.variance = var / r.draws;
  r.ratio = 32.0 / r.bits;
  if (quantized) {
    const double nd = static_cast<double>(n), dd = static_cast<double>(r.d), s = sc.s;
    r.entropy_symbols = h / r.draws;
    r.scale_bits = 32.0 * std::ceil(nd / dd) / nd;
    r.overhead = r.bits / r.entropy() - 1.0;
    r.bound = std::min(dd / (s * s), std::sqrt(dd) / s);
    r.paper = paper_bits(sc, n);
  }
  return r;
}

// ---- output -----------------------------------------------------------------

std::string fmt(double x, const char* f) {
  if (std::isnan(x)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, f, x);
  return buf;
}

void print_table(std::ostream& os, const std::vector<Row>& rows, const Options& o) {
  char line[512];
  auto emit = [&](const char* input, const char* codec, const char* name, const char* s, const char* d,
                  const char* norm, const char* bits, const char* ent, const char* over, const char* var,
                  const char* bound, const char* ratio, const char* paper) {
    std::snprintf(line, sizeof line, "%-10s %-12s %-26s %6s %8s %4s %8s %8s %8s %10s %8s %7s %6s\n", input, codec, name,
                  s, d, norm, bits, ent, over, var, bound, ratio, paper);
    os << line;
  };
  os << program << ": n = " << o.n << ", " << o.draws << " draws per quantized row, input seed " << input_seed
     << ", Kokkos " << Exec::name() << ", git " << qsgd::bench::build::git_hash << "\n\n";
  emit("input", "codec", "name", "s", "d", "norm", "bits/dim", "entropy", "overhd", "var.blowup", "bound", "ratio",
       "paper");
  std::string last;
  for (const Row& r : rows) {
    if (!last.empty() && r.input != last) os << "\n";
    last = r.input;
    const bool q = r.s > 0;
    emit(r.input.c_str(), r.codec.c_str(), (r.name + (std::isnan(r.paper) ? "" : " [c]")).c_str(),
         q ? std::to_string(r.s).c_str() : "-", q ? std::to_string(r.d).c_str() : "-", r.norm.c_str(),
         fmt(r.bits, "%.3f").c_str(), fmt(r.entropy(), "%.3f").c_str(), fmt(100.0 * r.overhead, "%+.1f%%").c_str(),
         fmt(r.variance, "%.3e").c_str(), fmt(r.bound, "%.3g").c_str(), fmt(r.ratio, "%.2f").c_str(),
         fmt(r.paper, "%.2f").c_str());
  }
  os << "\n"
        "bits/dim: message bytes * 8 / n, everything on the wire (64-byte header, chunk offsets, scales), mean of\n"
        "  the draws. ratio = 32 / bits/dim.\n"
        "naming: b-bit(paper) means s = 2^b levels (levels 0..s need b+1 bits plus sign in fixed width);\n"
        "  b-bit(wire) means sign + (b-1) level bits, s = 2^(b-1) - 1; sqrt(n)(theory) is the paper's\n"
        "  analysis setting (s = sqrt(n), L2 norm, one bucket: d = n).\n"
        "entropy: -sum p log2 p of the signed levels (sign, level) of the decoded message, plus 32 bits of\n"
        "  scale per bucket (32/d per dimension): the floor for any lossless code of these symbols that\n"
        "  sends the scales as fp32. overhd = bits/dim / entropy - 1.\n"
        "var.blowup: ||Q(v)-v||^2 / ||v||^2 with Q(v) decoded from the message, mean of the draws (for the\n"
        "  float codecs: the rounding error). bound = min(d/s^2, sqrt(d)/s), the spec's bound, stated for L2\n"
        "  scaling. It also holds for max-norm buckets: per coordinate the variance is\n"
        "  (M/s)^2 p(1-p) <= min(M^2/(4 s^2), M |v_i| / s) with M = ||v_b||_inf <= ||v_b||_2, and summing over\n"
        "  a bucket gives <= min(d/(4 s^2), sqrt(d)/s) ||v_b||^2. For max norm it is far from tight.\n"
        "[c] paper: the paper's bound on bits/dim at s = sqrt(n) (o(1) terms dropped): elias-dense\n"
        "  E[bits] <= 2.8 n + 32; elias-sparse (3 + 1.5 log2(2(s^2+n)/(s(s+sqrt n)))) s(s+sqrt n) + 32 = 9 n + 32.\n"
        "  Both treat omega codewords as log2 k + 1 bits, loose for small k; exact codewords of a Gaussian\n"
        "  cost about 2.94 (dense) and 2.75 (sparse) bits/dim (spec section 2).\n";
}

using qsgd::bench::json_number;
using qsgd::bench::json_string;
using qsgd::bench::utc_now;

void print_json(std::ostream& os, const std::vector<Row>& rows, const Options& o) {
  os << "{\n  \"schema\": " << json_string(schema) << ",\n  \"context\": {\n";
  for (const auto& [k, v] : qsgd::bench::provenance()) os << "    " << json_string(k) << ": " << json_string(v) << ",\n";
  os << "    \"date\": " << json_string(utc_now()) << ",\n    \"host_name\": " << json_string(qsgd::bench::host_name())
     << ",\n    \"n\": " << o.n << ",\n    \"draws\": " << o.draws << ",\n    \"input_seed\": " << input_seed
     << "\n  },\n  \"definitions\": {\n"
     << "    \"bits_per_dim\": \"message bytes * 8 / n (all of the message), mean over draws\",\n"
     << "    \"entropy_symbols\": \"-sum p log2 p of the signed levels of the decoded message, bits per dim\",\n"
     << "    \"scale_bits\": \"32 * buckets / n\",\n"
     << "    \"overhead\": \"bits_per_dim / (entropy_symbols + scale_bits) - 1\",\n"
     << "    \"variance_blowup\": \"||Q(v)-v||^2 / ||v||^2, mean over draws\",\n"
     << "    \"variance_bound\": \"min(d/s^2, sqrt(d)/s), d = bucket size in effect; spec states it for L2, it "
        "also holds for max norm\",\n"
     << "    \"compression_ratio\": \"32 / bits_per_dim\",\n"
     << "    \"paper_bits_per_dim\": \"paper's bound at s = sqrt(n), L2, one bucket: dense 2.8 + 32/n, sparse "
        "(3 + 1.5 log2(2(s^2+n)/(s(s+sqrt n)))) s(s+sqrt n)/n + 32/n\"\n  },\n  \"inputs\": [";
  for (std::size_t i = 0; i < o.inputs.size(); ++i)
    os << (i ? ",\n" : "\n") << "    {\"name\": " << json_string(qsgd::bench::to_string(o.inputs[i]))
       << ", \"description\": " << json_string(qsgd::bench::describe(o.inputs[i])) << "}";
  os << "\n  ],\n  \"rows\": [";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    os << (i ? ",\n" : "\n") << "    {\"input\": " << json_string(r.input) << ", \"codec\": " << json_string(r.codec)
       << ", \"naming\": " << json_string(r.naming) << ", \"name\": " << json_string(r.name) << ", \"s\": " << r.s
       << ", \"d\": " << r.d << ", \"norm\": " << json_string(r.norm) << ", \"draws\": " << r.draws
       << ", \"bits_per_dim\": " << json_number(r.bits) << ", \"entropy_symbols\": " << json_number(r.entropy_symbols)
       << ", \"scale_bits\": " << json_number(r.scale_bits) << ", \"overhead\": " << json_number(r.overhead)
       << ", \"variance_blowup\": " << json_number(r.variance) << ", \"variance_bound\": " << json_number(r.bound)
       << ", \"compression_ratio\": " << json_number(r.ratio) << ", \"paper_bits_per_dim\": " << json_number(r.paper)
       << "}";
  }
  os << "\n  ]\n}\n";
}

int run_program(int argc, char** argv) {
  Kokkos::ScopeGuard guard(argc, argv);
  Options o;
  try {
    parse_options(argc, argv, o);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "%s: error: %s\n", program, e.what());
    return 2;
  }
  std::vector<Row> rows;
  const auto list = schemes(o.n);
  for (auto kind : o.inputs) {
    const Input in = make_input(kind, o.n);
    for (const Scheme& sc : list) rows.push_back(measure(in, sc, o.draws));
  }
  std::ofstream file;
  if (!o.out.empty()) {
    file.open(o.out);
    if (!file) throw std::runtime_error("cannot write " + o.out);
  }
  std::ostream& os = o.out.empty() ? std::cout : file;
  if (o.json) print_json(os, rows, o);
  else print_table(os, rows, o);
  os.flush();
  if (!os) throw std::runtime_error("write failed" + (o.out.empty() ? std::string() : " on " + o.out));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (const auto code = qsgd::bench::early_options(argc, argv, program, print_usage)) return *code;
    return run_program(argc, argv);
  } catch (const std::exception& e) {  // qsgd::Error included
    std::fprintf(stderr, "%s: error: %s\n", program, e.what());
  }
  return 1;
}
