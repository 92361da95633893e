// qsgd-bench-mlp-step: time of one training step of the MLP on one core.
//
// Step = zero_grad + forward + softmax cross-entropy + backward + SGD
// (momentum 0.9) update, on a fixed random batch (inputs N(0,1), labels
// uniform), defaults 784-4096-4096-10 at batch 128. Warm-up steps are not
// timed; each timed step ends with Kokkos::fence(). Reports the median, min
// and p99 of the step time and of each phase, keeps the raw samples, and
// checks that no workspace was allocated during the timed steps. One JSON
// object on stdout, or in the file given by --json.
//
// The PyTorch yardstick is torch_mlp_step.py; compare_mlp_step.sh runs both
// pinned to one core with OPENBLAS_NUM_THREADS=1.

#include <unistd.h>

#include <sched.h>

#include "qsgd_git_hash.hpp"

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
#include <sstream>
#include <string>
#include <vector>

#include <Kokkos_Core.hpp>

#include "qsgd/models/detail/workspace.hpp"
#include "qsgd/models/mlp.hpp"
#include "dates.hpp"
#include "cli.hpp"
#include "json.hpp"
#include "stats.hpp"
#include "qsgd/models/sgd.hpp"
#include "qsgd/kernels/counter_rng.hpp"

namespace m = qsgd::models;

// Every C++ heap allocation of the process is counted, so the benchmark can
// report how many a steady-state step makes (std::string temporaries
// included). Kokkos Views are counted separately by workspace_allocations().
namespace {
std::atomic<std::size_t> g_heap_allocations{0};
}
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
               "usage: %s [--widths 784,4096,4096,10] [--batch 128] [--warmup 3] [--steps 20]\n"
               "       [--lr 0.01] [--momentum 0.9] [--weight-decay 0] [--seed 1] [--json FILE|-]\n",
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
    if (a == "--widths") {
      o.widths.clear();
      for (const std::string& t : qsgd::bench::split_list(val()))
        o.widths.push_back(static_cast<std::size_t>(parse_count(a, t, 1, 1u << 24)));
      if (o.widths.size() < 2) throw qsgd::bench::UsageError("--widths needs at least two layer widths");
    } else if (a == "--batch") {
      o.batch = static_cast<std::size_t>(parse_count(a, val(), 1, 1u << 24));
    } else if (a == "--warmup") {
      o.warmup = static_cast<int>(parse_count(a, val(), 0, 1000000));
    } else if (a == "--steps") {
      o.steps = static_cast<int>(parse_count(a, val(), 1, 1000000));
    } else if (a == "--lr") {
      o.lr = parse_real(a, val(), 0.0, 1e6);
    } else if (a == "--momentum") {
      o.momentum = parse_real(a, val(), 0.0, 1.0);
    } else if (a == "--weight-decay") {
      o.weight_decay = parse_real(a, val(), 0.0, 1e6);
    } else if (a == "--seed") {
      o.seed = parse_count(a, val(), 0, ~std::uint64_t(0));
    } else if (a == "--json") {
      o.json = val();
    } else {
      throw qsgd::bench::UsageError("unknown option '" + a + "' (try --help)");
    }
  }
  return o;
}

std::string blas_library() {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    const auto pos = line.find('/');
    if (pos == std::string::npos) continue;
    const std::string path = line.substr(pos);
    if (path.find("libblas.so") != std::string::npos || path.find("libopenblas") != std::string::npos) {
      char buf[4096];
      if (realpath(path.c_str(), buf)) return buf;
      return path;
    }
  }
  return "unknown";
}

struct Summary {
  double median, min, p99;
};

Summary summarize(const std::vector<double>& v) {
  return {qsgd::bench::median_of(v), qsgd::bench::minimum_of(v), qsgd::bench::percentile(v, 0.99)};
}

std::string summary_json(const Summary& s) {
  using qsgd::bench::json_number;
  return "{\"median\": " + json_number(s.median) + ", \"min\": " + json_number(s.min) + ", \"p99\": " +
         json_number(s.p99) + "}";
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
    using clock = std::chrono::steady_clock;
    m::MlpConfig cfg;
    cfg.widths = opt.widths;
    m::Mlp model(cfg, opt.seed);
    m::SgdConfig sc;
    sc.lr.base_lr = opt.lr;
    sc.momentum = opt.momentum;
    sc.weight_decay = opt.weight_decay;
    m::Sgd sgd(model.params(), sc);

    // Fixed batch, generated on the host and copied once.
    const std::size_t d = opt.widths.front(), classes = opt.widths.back();
    Kokkos::View<float**, Kokkos::LayoutRight, m::MemSpace> x("x", opt.batch, d);
    Kokkos::View<int*, Kokkos::LayoutRight, m::MemSpace> y("y", opt.batch);
    {
      auto xh = Kokkos::create_mirror_view(x);
      auto yh = Kokkos::create_mirror_view(y);
      std::mt19937_64 g(opt.seed);
      for (std::size_t i = 0; i < opt.batch; ++i) {
        for (std::size_t k = 0; k < d; ++k) {
          const double u1 = 1.0 - static_cast<double>(g() >> 11) * 0x1.0p-53;
          const double u2 = static_cast<double>(g() >> 11) * 0x1.0p-53;
          xh(i, k) = static_cast<float>(qsgd::box_muller(u1, u2));
        }
        yh(i) = static_cast<int>(g() % classes);
      }
      Kokkos::deep_copy(x, xh);
      Kokkos::deep_copy(y, yh);
    }
    m::Batch batch;
    batch.x = x;
    batch.labels = y;

    std::vector<double> t_step, t_zero, t_fwd, t_bwd, t_upd;
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
        t_step.push_back(s(t0, t4));
        t_zero.push_back(s(t0, t1));
        t_fwd.push_back(s(t1, t2));
        t_bwd.push_back(s(t2, t3));
        t_upd.push_back(s(t3, t4));
      }
    };
    for (int i = 0; i < opt.warmup; ++i) step(false);
    t_step.reserve(static_cast<std::size_t>(opt.steps));
    t_zero.reserve(t_step.capacity());
    t_fwd.reserve(t_step.capacity());
    t_bwd.reserve(t_step.capacity());
    t_upd.reserve(t_step.capacity());
    const std::size_t alloc0 = m::workspace_allocations();
    const std::size_t heap0 = g_heap_allocations.load();
    for (int i = 0; i < opt.steps; ++i) step(true);
    const std::size_t allocs = m::workspace_allocations() - alloc0;
    const double heap_per_step =
        static_cast<double>(g_heap_allocations.load() - heap0) / static_cast<double>(opt.steps);
    if (allocs != 0) {
      std::cerr << "qsgd-bench-mlp-step: " << allocs << " workspace allocations during timed steps\n";
      rc = 1;
    }

    const double flops_fwd = [&] {
      double f = 0;
      for (std::size_t k = 0; k + 1 < opt.widths.size(); ++k)
        f += 2.0 * static_cast<double>(opt.batch * opt.widths[k] * opt.widths[k + 1]);
      return f;
    }();
    // Backward: dW for every layer, dX for all but the first.
    const double flops_bwd =
        2 * flops_fwd - 2.0 * static_cast<double>(opt.batch * opt.widths[0] * opt.widths[1]);
    const Summary ss = summarize(t_step);

    char host[256] = "unknown";
    gethostname(host, sizeof host - 1);
    const std::string date = qsgd::bench::utc_now();
    const char* obt = std::getenv("OPENBLAS_NUM_THREADS");
    std::string affinity;
    {
      cpu_set_t set;
      CPU_ZERO(&set);
      if (sched_getaffinity(0, sizeof set, &set) == 0) {
        for (int c = 0; c < CPU_SETSIZE; ++c) {
          if (CPU_ISSET(c, &set)) affinity += (affinity.empty() ? "" : ", ") + std::to_string(c);
        }
      }
    }

    std::ostringstream js;
    js.precision(9);
    js << "{\n  \"schema_version\": 1,\n  \"benchmark\": \"mlp_step\",\n  \"implementation\": \"qsgd::models\",\n";
    js << "  \"context\": {\"git_hash\": \"" << qsgd::bench::build::git_hash << "\", \"build_type\": \"" << QSGD_BUILD_TYPE
       << "\", \"kokkos_version\": " << KOKKOS_VERSION << ", \"kokkos_backend\": \""
       << m::ExecSpace::name() << "\", \"blas\": " << qsgd::bench::json_string(blas_library())
       << ", \"OPENBLAS_NUM_THREADS\": " << qsgd::bench::json_string(obt ? obt : "")
       << ", \"host\": " << qsgd::bench::json_string(host) << ", \"affinity\": [" << affinity << "], \"date\": \"" << date << "\"},\n";
    js << "  \"config\": {\"widths\": [";
    for (std::size_t i = 0; i < opt.widths.size(); ++i) js << (i ? ", " : "") << opt.widths[i];
    js << "], \"batch\": " << opt.batch << ", \"parameters\": " << model.num_parameters()
       << ", \"warmup\": " << opt.warmup << ", \"steps\": " << opt.steps << ", \"lr\": " << opt.lr
       << ", \"momentum\": " << opt.momentum << ", \"weight_decay\": " << opt.weight_decay
       << ", \"step\": \"zero_grad + forward + cross-entropy + backward + SGD update\"},\n";
    js << "  \"final_loss\": " << model.loss() << ",\n";
    js << "  \"workspace_allocations_in_timed_steps\": " << allocs << ",\n";
    js << "  \"heap_allocations_per_step\": " << heap_per_step << ",\n";
    js << "  \"gemm_flops_per_step\": " << flops_fwd + flops_bwd << ",\n";
    js << "  \"gemm_gflops_at_median\": " << (flops_fwd + flops_bwd) / ss.median * 1e-9 << ",\n";
    js << "  \"step_seconds\": " << summary_json(ss) << ",\n";
    js << "  \"phase_seconds\": {\"zero_grad\": " << summary_json(summarize(t_zero))
       << ", \"forward\": " << summary_json(summarize(t_fwd)) << ", \"backward\": " << summary_json(summarize(t_bwd))
       << ", \"update\": " << summary_json(summarize(t_upd)) << "},\n";
    js << "  \"samples\": [";
    for (std::size_t i = 0; i < t_step.size(); ++i) js << (i ? ", " : "") << t_step[i];
    js << "]\n}\n";
    if (opt.json == "-") {
      std::cout << js.str();
    } else {
      std::ofstream f(opt.json);
      f << js.str();
      if (!f) {
        std::cerr << "qsgd-bench-mlp-step: cannot write " << opt.json << "\n";
        rc = 1;
      }
    }
  }
  return rc;
}
