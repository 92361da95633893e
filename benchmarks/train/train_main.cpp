// qsgd-train: synchronous data-parallel training with QSGD gradient exchange,
// the suite's end-to-end measurement (qsgd::train::Trainer does the work;
// options: qsgd-train --help). This file is the program around it: MPI and
// Kokkos, the options, the provenance the trace records, and what errors
// become (exit 1 or 2; the trainer's own codes are in qsgd/train/trainer.hpp).
#include <mpi.h>

#include <Kokkos_Core.hpp>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <stdexcept>
#include <string>

#include "cli.hpp"
#include "provenance.hpp"
#include "qsgd/comm/communicator.hpp"
#include "qsgd/models/blas.hpp"
#include "qsgd/train/options.hpp"
#include "qsgd/train/trainer.hpp"

namespace qc = qsgd::comm;

namespace {

// The build and machine attributes of the trace: the suite's provenance block.
std::map<std::string, std::string> provenance() {
  std::map<std::string, std::string> a;
  for (const auto& [k, v] : qsgd::bench::provenance()) a[k] = v;
  a["cuda_version"] = qsgd::bench::cuda_version();
  // A CUDA build's products call the cuBLAS it loads at run time (its version
  // and file); a host build's the BLAS it links.
  const std::string device_blas = qsgd::models::device_blas();
  a["blas"] = device_blas.empty() ? qsgd::bench::blas_library() : device_blas;
  a["blas_threads"] = qsgd::bench::blas_threads();
  a["date"] = qsgd::bench::utc_now();
  // Under Slurm: which job (and array task, and restart of a requeued one)
  // ran this attempt, and on which nodes.
  const auto env = [](const char* name) -> std::string {
    const char* v = std::getenv(name);
    return v ? v : "";
  };
  if (!env("SLURM_JOB_ID").empty()) {
    a["slurm_job_id"] = env("SLURM_JOB_ID");
    if (!env("SLURM_ARRAY_JOB_ID").empty())
      a["slurm_array_task"] = env("SLURM_ARRAY_JOB_ID") + "_" + env("SLURM_ARRAY_TASK_ID");
    a["slurm_restart_count"] = env("SLURM_RESTART_COUNT").empty() ? "0" : env("SLURM_RESTART_COUNT");
    a["slurm_nodelist"] = env("SLURM_JOB_NODELIST");
  }
  return a;
}

// Kokkos, options, the run, and what their errors become (exit 1 or 2).
int guarded_run(int argc, char** argv, const qc::Communicator& comm) {
  Kokkos::ScopeGuard guard(argc, argv);
  try {
    const auto opts = qsgd::train::parse(argc, argv);
    if (qsgd::train::Trainer(opts, comm, provenance()).run() == qsgd::train::RunEnd::stopped_at_signal) {
      if (comm.rank() == 0)
        std::cerr << "qsgd-train: stopped at signal " << opts.checkpoint_signal << " (" << strsignal(opts.checkpoint_signal)
                  << ") after a checkpoint in "
                  << opts.checkpoint << "; the same command with --resume continues the run\n";
      return qsgd::train::exit_stopped_at_signal;
    }
    return 0;
  } catch (const qsgd::train::CheckpointUnusable& e) {  // every rank throws it (Trainer)
    if (comm.rank() == 0)
      std::cerr << "qsgd-train: error: " << e.what()
                << "; nothing was written: move the checkpoint and the trace aside (or drop --resume) to start over\n";
    return qsgd::train::exit_checkpoint_unusable;
  } catch (const std::invalid_argument& e) {  // a wrong command line (--help is early_options')
    if (comm.rank() == 0) std::cerr << "qsgd-train: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "qsgd-train: rank " << comm.rank() << ": error: " << e.what() << "\n";
    if (comm.size() > 1) MPI_Abort(comm.mpi(), 1);
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (const auto code = qsgd::bench::early_options(argc, argv, "qsgd-train",
                                                   [](std::FILE* f) { std::fputs(qsgd::train::usage().c_str(), f); }))
    return *code;
  // The checkpoint signal is caught from the first moment: a batch system
  // may send it while MPI and Kokkos start, before the options are read, and
  // its default action would end the process without a checkpoint. (A bad
  // name is reported by parse() below.)
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--checkpoint-signal") != 0) continue;
    try {
      qsgd::train::watch_checkpoint_signal(qsgd::train::parse_signal(argv[i + 1]));
    } catch (const std::exception&) {
    }
  }
  int provided = 0;
  // MPI_THREAD_MULTIPLE: the bucketer's progress thread polls the network
  // while this thread computes (--progress thread). Until a Communicator sets
  // MPI_ERRORS_RETURN, MPI's default handler ends the job on a failure.
  qc::check_mpi(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread", MPI_COMM_WORLD,
                {"startup", "qsgd-train"});
  int rc = 0;
  try {
    rc = guarded_run(argc, argv, qc::Communicator::world());
  } catch (const qsgd::Error& e) {  // Communicator::world(): a bad QSGD_PEER_TIMEOUT, the same on every rank
    std::cerr << "qsgd-train: error: " << e.what() << "\n";
    rc = 2;
  }
  qc::check_mpi(MPI_Finalize(), "MPI_Finalize", MPI_COMM_WORLD, {"shutdown", "qsgd-train"});
  return rc;
}
