#pragma once
// qsgd::train::Trainer: synchronous data-parallel training with QSGD gradient
// exchange (spec section 3), the suite's end-to-end measurement. Each step,
// per rank: forward, backward (buckets of finished gradients, in reverse
// layer order, start their exchange while backward goes on, and a progress
// thread keeps them moving), wait for the averaged gradients, SGD update.
// Every phase is timed on every rank and written, raw, to an HDF5 trace
// (docs/traces.md has every definition: exposed communication is time
// blocked in MPI waits, hidden communication is network time under other
// work).
//
// MPI faults: every MPI call's result is checked, and the trainer's own
// collectives (step record gather, evaluation and epoch reductions, barriers)
// are non-blocking ones completed by a watched wait (Communicator::collective),
// as the exchanges' are: a peer that dies or hangs ends the job with one line
// and exit code 7 within the peer timeout (Options::peer_timeout;
// docs/exchange.md).

#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>

#include "qsgd/comm/communicator.hpp"
#include "qsgd/train/options.hpp"

namespace qsgd::train {

// Exit codes of the trainer's own checks; the exchange's (2, 3, 4) and MPI
// faults' (7) are in qsgd/comm/communicator.hpp.
constexpr int exit_replicas_diverged = 5;
constexpr int exit_loss_not_finite = 6;  // the loss, or the gradient's norm (--clip-norm)
// The checkpoint signal (Options::checkpoint_signal) came: every rank stopped
// after the same step, the checkpoint and the trace (not complete) are
// written, and the run continues with --resume.
constexpr int exit_stopped_at_signal = 8;
// --resume, and the checkpoint cannot be loaded on some rank (missing,
// damaged, from another configuration or build, another rank count): every
// rank stops before the first step (CheckpointUnusable) and nothing is
// written; the checkpoint and the trace are left as they are.
constexpr int exit_checkpoint_unusable = 9;

class CheckpointUnusable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class RunEnd { finished, stopped_at_signal };

// Installs the handler of the checkpoint signal (a signal number, e.g.
// SIGUSR1): it only sets a flag, which the trainer reads after every step.
// qsgd-train calls it first thing in main(): until then the signal has its
// default action (for SIGUSR1, ending the process). Throws
// std::runtime_error if sigaction fails.
void watch_checkpoint_signal(int sig);

class Trainer {
 public:
  // Setup: loads the data, builds the model, the exchanges (the configured
  // one for large tensors, fp32 allreduce under the layer filter), the
  // bucketer and the optimizer; resumes from the checkpoint (--resume); on
  // rank 0 opens the trace, whose attributes start from `provenance` (the
  // driver's: build, machine, date) and add the run's own. Collective.
  Trainer(const Options& o, const comm::Communicator& world, const std::map<std::string, std::string>& provenance);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Epochs from the resumed position until Options::epochs or the target
  // accuracy; then the replicas' parameter hashes are compared and the trace
  // is sealed. With Options::checkpoint_signal set, the ranks agree after
  // every step (a one-number allreduce) whether the signal came to any of
  // them; if so they write the checkpoint after that step (or at the end of
  // its epoch, when it was the epoch's last) and run() returns
  // stopped_at_signal with the trace flushed but not sealed. Collective.
  RunEnd run();

  // One step: forward, backward with the gradient hooks, wait for the
  // averaged gradients, SGD update; its record goes to the trace. Returns
  // the step's training loss. Collective.
  double step(std::uint64_t epoch, std::uint64_t batch_in_epoch);

  // End of an epoch: reduces its time and mean loss, evaluates unless the
  // last step just did, records the epoch and writes the checkpoint.
  // `steps` is the number of steps this epoch ran (before and after a
  // resume). Collective.
  void end_of_epoch(std::uint64_t epoch, std::uint64_t steps);

  // Global steps done (resumed ones included).
  std::uint64_t steps_done() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace qsgd::train
