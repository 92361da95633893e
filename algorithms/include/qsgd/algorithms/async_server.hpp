#pragma once
// Asynchronous parameter-server QSGD over MPI with bounded staleness tau
// (spec section 3). Collective over a communicator of >= 2 ranks: rank 0 is
// the server, ranks 1..K are the workers (K = size - 1).
//
// Protocol (a private duplicate of the communicator; tags below):
//   worker -> server  GRAD   [version v_w, worker step, message bytes, message...]
//                            the worker's minibatch gradient at the parameters
//                            of version v_w, quantized and encoded (qsgd::Codec,
//                            rounding keyed RngKey{seed, step, rank, 0});
//   server -> worker  PARAMS [version v, x_1..x_n] (double): the answer to
//                            every push, which is how workers pull parameters;
//   server -> worker  STOP   (empty) once `updates` updates have been applied;
//   worker -> server  DONE   [pushes] after STOP, the worker's last message.
// The server loops on MPI_Iprobe(ANY_SOURCE): it receives a push, decodes it
// (as untrusted input), measures its staleness = v - v_w (v = updates applied
// so far) and
//   - applies it, x <- x - eta_v * Q(g), when staleness <= tau, recording the
//     staleness in a histogram and per update;
//   - rejects it when staleness > tau (counted, histogram of rejected
//     staleness), so no applied update is ever staler than tau. Rejection,
//     not blocking, is the enforcement: a blocked worker would idle until the
//     others' updates stop, and rejection keeps every worker busy. Either way
//     it answers with its current parameters.
// Minibatches are keyed by (seed, worker step, worker), so workers never share
// draws. A worker keeps up to `window` pushes unanswered: it computes its next
// gradient on the newest parameters it has (eager pull: it takes every answer
// that has arrived before each gradient; lazy pull: only when the window is
// full it waits for an answer and takes the newest arrived). Staleness thus
// comes from the window and from the other workers' updates. Shutdown: after
// STOP the server drains pushes still in flight (discarded) until it has a
// DONE from every worker, so no message is left unmatched; then the result is
// broadcast to every rank.

#include <cstdint>
#include <qsgd/comm/communicator.hpp>
#include <vector>

#include "qsgd/algorithms/channel.hpp"
#include "qsgd/algorithms/problems.hpp"
#include "qsgd/algorithms/curve.hpp"

namespace qsgd::algorithms {

struct AsyncConfig {
  std::uint64_t updates = 2000;  // the run ends after this many applied updates
  int batch = 8;                 // samples per gradient
  int tau = 4;                   // staleness bound; < 0: none (measured, not enforced)
  int window = 4;                // unanswered pushes a worker may have
  bool lazy_pull = false;
  WireConfig wire;
  StepSchedule step;  // eta_v, v = updates applied before this one
  std::uint64_t seed = 1;
  EvalSpec eval;                 // evaluated on the server every eval.every applied updates
  double worker_delay_us = 0.0;  // worker rank r spends (r - 1) x this extra microseconds per gradient
  // Where a worker draws its minibatches. false (default): from the whole data
  // set (each worker holds a replica), so every push is an unbiased gradient
  // of f, as the analysis assumes. true: from the worker's shard only; then
  // the applied gradients are unbiased for f only if the workers' update
  // shares stay equal, and a worker that runs faster pulls x toward the
  // minimizer of its own shard (docs/algorithms.md shows the effect).
  bool sharded = false;
};

struct AsyncResult {
  Curve curve;                                // iteration = applied updates
  Vec x;                                      // final parameters
  std::vector<std::uint64_t> staleness_hist;  // applied updates by staleness
  std::vector<std::uint64_t> rejected_hist;   // rejected pushes by staleness
  std::vector<std::uint32_t> staleness;       // staleness of each applied update, in order
  std::vector<std::uint64_t> applied_per_worker;
  std::uint64_t applied = 0;
  std::uint64_t rejected = 0;
  std::uint64_t discarded = 0;  // pushes that arrived after STOP
  std::uint64_t max_staleness = 0;
  std::uint64_t grad_bits = 0;  // codec bits of every push received (applied or not)
  std::uint64_t pushes = 0;     // pushes received before STOP (applied + rejected)
  std::uint64_t sent = 0;       // pushes the workers report having sent (DONE): = pushes + discarded
  int workers = 0;
  double seconds = 0.0;
};

// Collective; every rank returns the same result (broadcast from the server).
AsyncResult run_async(const Problem& p, const AsyncConfig& cfg, const qsgd::comm::Communicator& comm);

}  // namespace qsgd::algorithms
