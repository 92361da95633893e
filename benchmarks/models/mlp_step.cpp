// qsgd-bench-mlp-step: time of one training step of the MLP on one core.
//
// Step = zero_grad + forward + softmax cross-entropy + backward + SGD
// (momentum 0.9) update, on a fixed random batch (inputs N(0,1), labels
// uniform), defaults 784-4096-4096-10 at batch 128. Warm-up steps are not
// timed; each timed step ends with Kokkos::fence(). Reports the median, min
// and p99 of the step time and of each phase, keeps the raw samples, and
// checks that no workspace was allocated during the timed steps. One JSON
// object on stdout, or in the file given by -o/--out (alias --json).
//
// The PyTorch yardstick is torch_mlp_step.py; compare_mlp_step.sh runs both
// pinned to one core with OPENBLAS_NUM_THREADS=1.


#include <sched.h>

#include <algorithm>
#include <atomic>
#include <new>
#include <cmath>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include <Kokkos_Core.hpp>

#include "qsgd/models/detail/workspace.hpp"
#include "qsgd/models/mlp.hpp"
#include "dates.hpp"
#include "cli.hpp"
#include "json.hpp"
#include "provenance.hpp"
#include "stats.hpp"
#include "qsgd/models/sgd.hpp"
#include "qsgd/models/detail/host_rng.hpp"

namespace m = qsgd::models;

// Every C++ heap allocation of the process is counted, so the benchmark can
// report how many a steady-state step makes (std::string temporaries
// included). Kokkos Views are counted separately by workspace_allocations().
namespace {
std::atomic<std::size_t> g_heap_allocations{0};
}
// nvcc compiles a replacement of the global operator new for the device as
// well (where it is __host__ __device__ implicitly): host pass only.
#if !defined(__CUDA_ARCH__)
void* operator new(std::size_t n) {
  ++g_heap_allocations;
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
// GCC 12 reports -Wmismatched-new-delete here once a caller's inlined
// std::string pairs this operator delete with the operator new above, whose
// malloc it cannot see through: a false positive (both replace the global
// pair, malloc with free).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif  // !__CUDA_ARCH__

namespace {

struct Options {
  std::vector<std::size_t> widths{784, 4096, 4096, 10};
  std::size_t batch = 128;
  int warmup = 3;
  int steps = 20;
  double lr = 0.01, momentum = 0.9, weight_decay = 0.0;
  std::uint64_t seed = 1;
  std::string json = "-";
};

constexpr const char* program = "qsgd-bench-mlp-step";

void print_usage(std::FILE* out) {
  std::fprintf(out,
               "usage: %s [options]\n"
               "  --mlp-widths LIST   MLP widths (default 784,4096,4096,10)\n"
               "  --batch N           batch (default 128)\n"
               "  -w, --warmup N      untimed steps (default 3)\n"
               "  -n, --iters N       timed steps (default 20)\n"
               "  --lr X              learning rate (default 0.01)\n"
               "  --momentum X        (default 0.9)\n"
               "  --weight-decay X    (default 0)\n"
               "  --seed N            weights and batch (default 1)\n"
               "  -o, --out FILE|-    the JSON document's file; - = stdout (default -)\n"
               "  --widths LIST       alias of --mlp-widths\n"
               "  --steps N           alias of --iters\n"
               "  --json FILE|-       alias of --out\n",
               program);
}

// Throws qsgd::bench::UsageError naming the option.
Options parse_options(int argc, char** argv) {
  using qsgd::bench::parse_count;
  using qsgd::bench::parse_real;
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) throw qsgd::bench::UsageError(a + " needs a value");
      return argv[++i];
    };
    if (a == "--mlp-widths" || a == "--widths") {
      const auto w = qsgd::bench::parse_count_list(a, val(), 2, 1, 1u << 24);
      o.widths.assign(w.begin(), w.end());
    } else if (a == "--batch") {
      o.batch = static_cast<std::size_t>(parse_count(a, val(), 1, 1u << 24));
    } else if (a == "-w" || a == "--warmup") {
      o.warmup = static_cast<int>(parse_count(a, val(), 0, 1000000));
    } else if (a == "-n" || a == "--iters" || a == "--steps") {
      o.steps = static_cast<int>(parse_count(a, val(), 1, 1000000));
    } else if (a == "--lr") {
      o.lr = parse_real(a, val(), 0.0, 1e6);
    } else if (a == "--momentum") {
      o.momentum = parse_real(a, val(), 0.0, 1.0);
    } else if (a == "--weight-decay") {
      o.weight_decay = parse_real(a, val(), 0.0, 1e6);
    } else if (a == "--seed") {
      o.seed = parse_count(a, val(), 0, ~std::uint64_t(0));
    } else if (a == "-o" || a == "--out" || a == "--json") {
      o.json = val();
    } else {
      throw qsgd::bench::UsageError("unknown option '" + a + "' (try --help)");
    }
  }
  return o;
}

struct Summary {
  double median, min, p99;
};

Summary summarize(const std::vector<double>& v) {
  return {qsgd::bench::median_of(v), qsgd::bench::minimum_of(v), qsgd::bench::percentile(v, 0.99)};
}

void write_summary(qsgd::bench::Json& j, const std::string& key, const Summary& s) {
  j.key(key).begin_object().field("median", s.median).field("min", s.min).field("p99", s.p99).end_object();
}

// The fixed batch: inputs N(0, 1), labels uniform, generated on the host
// and copied once.
m::Batch make_batch(const Options& opt) {
  const std::size_t d = opt.widths.front(), classes = opt.widths.back();
  Kokkos::View<float**, Kokkos::LayoutRight, m::MemSpace> x("x", opt.batch, d);
  Kokkos::View<int*, Kokkos::LayoutRight, m::MemSpace> y("y", opt.batch);
  auto xh = Kokkos::create_mirror_view(x);
  auto yh = Kokkos::create_mirror_view(y);
  std::mt19937_64 g(opt.seed);
  for (std::size_t i = 0; i < opt.batch; ++i) {
    for (std::size_t k = 0; k < d; ++k) {
      xh(i, k) = static_cast<float>(m::detail::normal01(g));
    }
    yh(i) = static_cast<int>(g() % classes);
  }
  Kokkos::deep_copy(x, xh);
  Kokkos::deep_copy(y, yh);
  m::Batch batch;
  batch.x = x;
  batch.labels = y;
  return batch;
}

// Seconds of each timed step and of its phases, and what the timed steps
// allocated.
struct StepTimes {
  std::vector<double> step, zero, fwd, bwd, upd;
  std::size_t workspace_allocations = 0;
  double heap_allocations_per_step = 0;
};

StepTimes time_steps(m::Mlp& model, m::Sgd& sgd, const m::Batch& batch, const Options& opt) {
  using clock = std::chrono::steady_clock;
  StepTimes t;
  auto step = [&](bool record) {
    const auto t0 = clock::now();
    model.zero_grad();
    Kokkos::fence();
    const auto t1 = clock::now();
    model.forward(batch);
    Kokkos::fence();
    const auto t2 = clock::now();
    model.backward();
    Kokkos::fence();
    const auto t3 = clock::now();
    sgd.step(model.grads());
    Kokkos::fence();
    const auto t4 = clock::now();
    if (record) {
      auto s = [](clock::time_point a, clock::time_point b) { return std::chrono::duration<double>(b - a).count(); };
      t.step.push_back(s(t0, t4));
      t.zero.push_back(s(t0, t1));
      t.fwd.push_back(s(t1, t2));
      t.bwd.push_back(s(t2, t3));
      t.upd.push_back(s(t3, t4));
    }
  };
  for (int i = 0; i < opt.warmup; ++i) step(false);
  for (auto* v : {&t.step, &t.zero, &t.fwd, &t.bwd, &t.upd}) v->reserve(static_cast<std::size_t>(opt.steps));
  const std::size_t alloc0 = m::workspace_allocations();
  const std::size_t heap0 = g_heap_allocations.load();
  for (int i = 0; i < opt.steps; ++i) step(true);
  t.workspace_allocations = m::workspace_allocations() - alloc0;
  t.heap_allocations_per_step =
      static_cast<double>(g_heap_allocations.load() - heap0) / static_cast<double>(opt.steps);
  return t;
}

// GEMM flops of one step: forward, then backward (dW for every layer, dX
// for all but the first).
double gemm_flops_per_step(const Options& opt) {
  double fwd = 0;
  for (std::size_t k = 0; k + 1 < opt.widths.size(); ++k)
    fwd += 2.0 * static_cast<double>(opt.batch * opt.widths[k] * opt.widths[k + 1]);
  const double bwd = 2 * fwd - 2.0 * static_cast<double>(opt.batch * opt.widths[0] * opt.widths[1]);
  return fwd + bwd;
}

// The cores this process may run on.
std::vector<int> affinity_cores() {
  std::vector<int> cores;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cores.push_back(c);
  return cores;
}

std::string report_json(const Options& opt, const m::Mlp& model, const StepTimes& t) {
  const char* obt = std::getenv("OPENBLAS_NUM_THREADS");
  const double flops = gemm_flops_per_step(opt);
  const Summary ss = summarize(t.step);
  qsgd::bench::Json j;
  j.begin_object().field("schema_version", 1).field("benchmark", "mlp_step").field("implementation", "qsgd::models");
  // The suite's provenance block (build, compiler and flags, Kokkos, CPU),
  // then what only this benchmark records.
  j.key("context").begin_object();
  for (const auto& [key, value] : qsgd::bench::provenance()) j.field(key, value);
  j.field("blas", qsgd::bench::blas_library())
      .field("blas_threads", qsgd::bench::blas_threads())
      .field("OPENBLAS_NUM_THREADS", obt ? obt : "")
      .field("host", qsgd::bench::host_name())
      .field("affinity", affinity_cores())
      .field("date", qsgd::bench::utc_now())
      .end_object();
  j.key("config")
      .begin_object()
      .field("widths", std::vector<std::uint64_t>(opt.widths.begin(), opt.widths.end()))
      .field("batch", static_cast<std::uint64_t>(opt.batch))
      .field("parameters", static_cast<std::uint64_t>(model.num_parameters()))
      .field("warmup", opt.warmup)
      .field("steps", opt.steps)
      .field("lr", opt.lr)
      .field("momentum", opt.momentum)
      .field("weight_decay", opt.weight_decay)
      .field("step", "zero_grad + forward + cross-entropy + backward + SGD update")
      .end_object();
  j.field("final_loss", static_cast<double>(model.loss()))
      .field("workspace_allocations_in_timed_steps", static_cast<std::uint64_t>(t.workspace_allocations))
      .field("heap_allocations_per_step", t.heap_allocations_per_step)
      .field("gemm_flops_per_step", flops)
      .field("gemm_gflops_at_median", flops / ss.median * 1e-9);
  write_summary(j, "step_seconds", ss);
  j.key("phase_seconds").begin_object();
  write_summary(j, "zero_grad", summarize(t.zero));
  write_summary(j, "forward", summarize(t.fwd));
  write_summary(j, "backward", summarize(t.bwd));
  write_summary(j, "update", summarize(t.upd));
  j.end_object();
  j.field("samples", t.step).end_object();
  return j.str() + "\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (const auto code = qsgd::bench::early_options(argc, argv, program, print_usage)) return *code;
  Kokkos::ScopeGuard guard(argc, argv);
  Options opt;
  try {
    opt = parse_options(argc, argv);
  } catch (const qsgd::bench::UsageError& e) {
    std::fprintf(stderr, "%s: error: %s\n", program, e.what());
    return 2;
  }
  int rc = 0;
  {
    m::MlpConfig cfg;
    cfg.widths = opt.widths;
    m::Mlp model(cfg, opt.seed);
    m::SgdConfig sc;
    sc.lr.base_lr = opt.lr;
    sc.momentum = opt.momentum;
    sc.weight_decay = opt.weight_decay;
    m::Sgd sgd(model.params(), sc);
    const m::Batch batch = make_batch(opt);
    const StepTimes t = time_steps(model, sgd, batch, opt);
    if (t.workspace_allocations != 0) {
      std::cerr << program << ": " << t.workspace_allocations << " workspace allocations during timed steps\n";
      rc = 1;
    }
    const std::string js = report_json(opt, model, t);
    if (opt.json == "-") {
      std::cout << js;
    } else {
      std::ofstream f(opt.json);
      f << js;
      if (!f) {
        std::cerr << program << ": cannot write " << opt.json << "\n";
        rc = 1;
      }
    }
  }
  return rc;
}
