// qsgd-algorithms: the theory-reproduction experiments of spec section 3.
//
//   qsgd-algorithms convex -o|--out FILE [--seeds N] [--workers K] [--quick]
//   qsgd-algorithms qsvrg  --out FILE [--seeds N] [--workers K] [--quick]
//   qsgd-algorithms dqgd   --out FILE [--quick]
//   mpirun -np R qsgd-algorithms async --out FILE [--updates U] [--window W]
//                                      [--taus 0,2,8,-1] [--delay-us D] [--quick]
//
// Each writes one JSON file (schema qsgd.algorithms/1: provenance, parameters,
// problems, runs with their convergence curves) and prints a short table.
// benchmarks/algorithms/run_experiments.sh runs them all and plots them.
#include <mpi.h>

#include <Kokkos_Core.hpp>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <fstream>
#include <qsgd/comm/communicator.hpp>
#include <string>

#include "experiments.hpp"
#include "mpi_provenance.hpp"
#include "cli.hpp"
#include "provenance.hpp"

namespace qp = qsgd::algorithms::program;

namespace {

constexpr const char* schema = "qsgd.algorithms/1";

void print_usage(std::FILE* out) {
  std::fprintf(out,
               "usage: qsgd-algorithms {convex|qsvrg|dqgd|async} -o FILE [options]\n"
               "  -o, --out FILE   the JSON results (required)\n"
               "  --seeds N        convex, qsvrg: runs with seeds 0..N-1, a count (default 5; qsvrg: at most 3)\n"
               "  --workers K      convex, qsvrg: simulated workers in this process (default 4)\n"
               "  --quick          tiny problems and few steps: the ctest smoke run (default off)\n"
               "async (under mpirun, >= 2 ranks: rank 0 the server, the others workers):\n"
               "  --updates U      parameter updates (default 20000; --quick: 300)\n"
               "  --window W       pushes a worker keeps unanswered (default 8)\n"
               "  --taus LIST      staleness bounds, -1 = none (default 0,2,8,-1)\n"
               "  --delay-us D     each worker's extra time per gradient, in microseconds (default 0)\n");
}

[[noreturn]] void usage(const char* msg) {
  std::fprintf(stderr, "qsgd-algorithms: error: %s\n", msg);
  print_usage(stderr);
  std::exit(2);
}

// --taus: staleness bounds, each a count or -1 (none).
std::vector<int> parse_taus(const std::string& opt, const std::string& text) {
  std::vector<int> v;
  for (const std::string& item : qsgd::bench::split_list(text))
    v.push_back(item == "-1" ? -1 : static_cast<int>(qsgd::bench::parse_count(opt + " (or -1)", item, 0, 1 << 20)));
  if (v.empty()) throw qsgd::bench::UsageError(opt + " needs at least one staleness bound");
  return v;
}

qp::Options parse(int argc, char** argv) {
  if (argc < 2) usage("missing command");
  qp::Options o;
  o.command = argv[1];
  if (o.command != "convex" && o.command != "qsvrg" && o.command != "dqgd" && o.command != "async")
    usage(("unknown command '" + o.command + "'").c_str());
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) usage(("missing value for " + a).c_str());
      return argv[++i];
    };
    try {
      if (a == "-o" || a == "--out")
        o.out = next();
      else if (a == "--seeds")
        o.seeds = static_cast<int>(qsgd::bench::parse_count(a, next(), 1, 1000000));
      else if (a == "--workers")
        o.workers = static_cast<int>(qsgd::bench::parse_count(a, next(), 1, 1 << 20));
      else if (a == "--quick")
        o.quick = true;
      else if (a == "--updates")
        o.updates = qsgd::bench::parse_count(a, next(), 1, ~std::uint64_t(0));
      else if (a == "--window")
        o.window = static_cast<int>(qsgd::bench::parse_count(a, next(), 1, 1 << 20));
      else if (a == "--taus")
        o.taus = parse_taus(a, next());
      else if (a == "--delay-us")
        o.delay_us = qsgd::bench::parse_real(a, next(), 0.0, 1e9);
      else if (a.rfind("--kokkos", 0) == 0)
        continue;
      else
        usage(("unknown option '" + a + "'").c_str());
    } catch (const qsgd::bench::UsageError& e) {
      usage(e.what());
    }
  }
  if (o.out.empty()) usage("--out FILE is required");
  if (o.seeds < 1 || o.workers < 1 || o.window < 1) usage("--seeds, --workers and --window must be >= 1");
  return o;
}

using qsgd::bench::utc_now;

using qsgd::bench::mpi_library;

void write_context(qp::Json& j, const qp::Options& o, int ranks, int argc, char** argv) {
  j.key("context").begin_object();
  for (const auto& [k, v] : qsgd::bench::provenance()) j.field(k, v);
  std::string cmd;
  for (int i = 0; i < argc; ++i) cmd += (i ? " " : "") + std::string(argv[i]);
  j.field("mpi_library", mpi_library())
      .field("mpi_ranks", ranks)
      .field("host", qsgd::bench::host_name())
      .field("date", utc_now())
      .field("command", cmd)
      .field("experiment", o.command)
      .field("quick", o.quick);
  j.end_object();
}

}  // namespace

int main(int argc, char** argv) {
  if (const auto code = qsgd::bench::early_options(argc, argv, "qsgd-algorithms", print_usage)) return *code;
  const qp::Options o = parse(argc, argv);
  const bool mpi = o.command == "async";
  if (mpi) qsgd::comm::check_mpi(MPI_Init(&argc, &argv), "MPI_Init", MPI_COMM_WORLD, {"start-up", "qsgd-algorithms"});
  int rc = 0;
  {
    Kokkos::ScopeGuard kokkos(argc, argv);
    const qsgd::comm::Communicator comm = mpi ? qsgd::comm::Communicator::world() : qsgd::comm::Communicator::serial();
    if (mpi && comm.size() < 2) {
      if (comm.rank() == 0) std::fprintf(stderr, "qsgd-algorithms async: run under mpirun with >= 2 ranks\n");
      rc = 2;
    } else {
      try {
        qp::Json j;
        j.begin_object().field("schema", schema);
        write_context(j, o, comm.size(), argc, argv);
        if (o.command == "convex")
          qp::experiment_convex(o, j);
        else if (o.command == "qsvrg")
          qp::experiment_qsvrg(o, j);
        else if (o.command == "dqgd")
          qp::experiment_dqgd(o, j);
        else
          qp::experiment_async(o, j, comm);
        j.end_object();
        if (comm.rank() == 0) {
          std::ofstream f(o.out);
          f << j.str() << "\n";
          if (!f) {
            std::fprintf(stderr, "qsgd-algorithms: cannot write %s\n", o.out.c_str());
            rc = 1;
          } else {
            std::printf("wrote %s\n", o.out.c_str());
          }
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "qsgd-algorithms: %s\n", e.what());
        rc = 1;
      }
    }
  }
  if (mpi) qsgd::comm::check_mpi(MPI_Finalize(), "MPI_Finalize", MPI_COMM_WORLD, {"shutdown", "qsgd-algorithms"});
  return rc;
}
