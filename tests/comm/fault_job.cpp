// A small training-like job for the error-path tests: a few steps of
// exchanges over several tensors, under mpirun or serially. Its failures are
// checked from outside (exit status and message), because a correct failure
// ends the process:
//   QSGD_FAULT_INJECT="rank=1,step=3,tensor=2" -> exit 3, "corrupt message from rank 1 at step 3, tensor 2"
//   --mismatch-rank R (rank R uses another s)   -> exit 4, "exchange configuration differs across ranks"
//   --stall-rank R --fault-step S               -> rank R stops (sleeps) before step S's exchanges; with
//                                                  QSGD_PEER_TIMEOUT=T the others exit 7 after T s:
//                                                  "no progress on the <operation> of <strategy> at step S,
//                                                  tensor 0 for T s (...); a peer may have died"
//   --mpi-error world|duplicate --fault-step S  -> the last rank makes an invalid MPI call (a send to
//                                                  rank K) on the world Communicator, or on a duplicate
//                                                  of it (OwnedComm, what every exchange operation runs
//                                                  on), and hands its result to the suite's check: exit 7,
//                                                  "MPI error in MPI_Isend on the invalid send of
//                                                  qsgd-comm-fault-job at step S: MPI_ERR_RANK: ..."
// Without any of them it completes and exits 0.
#include <mpi.h>

#include <Kokkos_Core.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <qsgd/comm.hpp>
#include <string>
#include <thread>

int main(int argc, char** argv) {
  bool serial = false;
  std::string strategy = "allgather", codec = "elias-dense", transport = "ring", mpi_error;
  int steps = 5, tensors = 3, mismatch_rank = -1, stall_rank = -1, fault_step = 1;
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
    else if (a == "--transport")
      transport = value();
    else if (a == "--stall-rank")
      stall_rank = std::atoi(value().c_str());
    else if (a == "--fault-step")
      fault_step = std::atoi(value().c_str());
    else if (a == "--mpi-error")
      mpi_error = value();
    else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 64;
    }
  }
  if (!mpi_error.empty() && (serial || (mpi_error != "world" && mpi_error != "duplicate"))) {
    std::fprintf(stderr, "--mpi-error is world or duplicate, under MPI\n");
    return 64;
  }
  if (!serial) qsgd::comm::check_mpi(MPI_Init(&argc, &argv), "MPI_Init", MPI_COMM_WORLD, {"startup"});
  {
    Kokkos::ScopeGuard guard(argc, argv);
    const auto comm = serial ? qsgd::comm::Communicator::serial() : qsgd::comm::Communicator::world();
    qsgd::comm::ExchangeConfig cfg;
    cfg.strategy = qsgd::comm::parse_strategy(strategy);
    cfg.codec.codec = qsgd::parse_codec(codec);
    cfg.transport = qsgd::comm::parse_transport(transport);
    if (comm.rank() == mismatch_rank) cfg.codec.s += 1;
    cfg.seed = 3;
    cfg.on_error = qsgd::comm::ErrorPolicy::abort;
    auto ex = qsgd::comm::make_exchange(cfg, comm);
    const qsgd::comm::OwnedComm dup = mpi_error == "duplicate" ? qsgd::comm::OwnedComm(comm) : qsgd::comm::OwnedComm();
    Kokkos::View<float*> g("g", n), out("out", n);
    const int rank = comm.rank();
    Kokkos::parallel_for(
        "fill", n, KOKKOS_LAMBDA(std::uint64_t i) { g(i) = static_cast<float>((i * 37 + rank * 11) % 101) - 50.0f; });
    for (int step = 0; step < steps; ++step) {
      if (step == fault_step && rank == stall_rank) std::this_thread::sleep_for(std::chrono::seconds(300));
      if (step == fault_step && rank == comm.size() - 1 && !mpi_error.empty()) {
        const MPI_Comm c = mpi_error == "world" ? comm.mpi() : dup.get();
        MPI_Request req = MPI_REQUEST_NULL;
        const int rc = MPI_Isend(g.data(), 1, MPI_FLOAT, comm.size(), 0, c, &req);  // rank K does not exist
        qsgd::comm::check_mpi(rc, "MPI_Isend", c, {"invalid send", "qsgd-comm-fault-job", step});
        std::fprintf(stderr, "MPI_Isend to rank %d returned success\n", comm.size());
        return 65;
      }
      for (int t = 0; t < tensors; ++t)
        ex->average(g, out, static_cast<std::uint32_t>(t), static_cast<std::uint64_t>(step));
    }
    if (rank == 0) std::printf("completed %d steps of %d tensors\n", steps, tensors);
  }
  if (!serial) qsgd::comm::check_mpi(MPI_Finalize(), "MPI_Finalize", MPI_COMM_WORLD, {"shutdown"});
  return 0;
}
