// A small training-like job for the error-path tests: a few steps of
// exchanges over several tensors, under mpirun or serially. Its failures are
// checked from outside (exit status and message), because a correct failure
// ends the process:
//   QSGD_FAULT_INJECT="rank=1,step=3,tensor=2" -> exit 3, "corrupt message from rank 1 at step 3, tensor 2"
//   --mismatch-rank R (rank R uses another s)   -> exit 4, "exchange configuration differs across ranks"
// Without either it completes and exits 0.
#include <mpi.h>

#include <Kokkos_Core.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <qsgd/comm.hpp>
#include <string>

int main(int argc, char** argv) {
  bool serial = false;
  std::string strategy = "allgather", codec = "elias-dense";
  int steps = 5, tensors = 3, mismatch_rank = -1;
  std::uint64_t n = 3000;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "missing value after %s\n", a.c_str());
        std::exit(64);
      }
      return argv[++i];
    };
    if (a == "--serial")
      serial = true;
    else if (a == "--strategy")
      strategy = value();
    else if (a == "--codec")
      codec = value();
    else if (a == "--steps")
      steps = std::atoi(value().c_str());
    else if (a == "--tensors")
      tensors = std::atoi(value().c_str());
    else if (a == "--n")
      n = std::strtoull(value().c_str(), nullptr, 10);
    else if (a == "--mismatch-rank")
      mismatch_rank = std::atoi(value().c_str());
    else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 64;
    }
  }
  if (!serial) MPI_Init(&argc, &argv);
  {
    Kokkos::ScopeGuard guard(argc, argv);
    const auto comm = serial ? qsgd::comm::Communicator::serial() : qsgd::comm::Communicator::world();
    qsgd::comm::ExchangeConfig cfg;
    cfg.strategy = qsgd::comm::parse_strategy(strategy);
    cfg.codec.codec = qsgd::parse_codec(codec);
    if (comm.rank() == mismatch_rank) cfg.codec.s += 1;
    cfg.seed = 3;
    cfg.on_error = qsgd::comm::ErrorPolicy::abort;
    auto ex = qsgd::comm::make_exchange(cfg, comm);
    Kokkos::View<float*> g("g", n), out("out", n);
    const int rank = comm.rank();
    Kokkos::parallel_for(
        "fill", n, KOKKOS_LAMBDA(std::uint64_t i) { g(i) = static_cast<float>((i * 37 + rank * 11) % 101) - 50.0f; });
    for (int step = 0; step < steps; ++step)
      for (int t = 0; t < tensors; ++t)
        ex->average(g, out, static_cast<std::uint32_t>(t), static_cast<std::uint64_t>(step));
    if (rank == 0) std::printf("completed %d steps of %d tensors\n", steps, tensors);
  }
  if (!serial) MPI_Finalize();
  return 0;
}
