#pragma once
// Command line of qsgd-train. Every option has a default that reproduces the
// suite's reference run; parse() rejects unknown options and bad values with a
// message that names them.

#include <cstdint>
#include <string>
#include <vector>

#include "qsgd/comm/exchange.hpp"
#include "qsgd/kernels/config.hpp"
#include "qsgd/kernels/feedback.hpp"
#include "qsgd/models/sgd.hpp"

namespace qsgd::train {

enum class ModelKind { mlp, cnn, lstm, replay };
enum class DatasetKind { fashion_mnist, teacher, corpus, none };  // none: replay reads no data

// Names as the command line and the trace's configuration write them
// ("mlp", "fashion-mnist", "cosine"); parse_* throw std::invalid_argument
// naming the option and the accepted names.
std::string to_string(ModelKind m);
std::string to_string(DatasetKind d);
std::string to_string(models::LrDecay d);
ModelKind parse_model(const std::string& name);
// --checkpoint-signal's names (USR1, USR2, TERM, INT, HUP, with or without
// "SIG") to the signal number.
int parse_signal(const std::string& name);
DatasetKind parse_dataset(const std::string& name);
models::LrDecay parse_lr_decay(const std::string& name);

struct Options {
  // Model and data.
  ModelKind model = ModelKind::mlp;
  std::vector<std::size_t> mlp_widths{784, 4096, 4096, 10};
  DatasetKind dataset = DatasetKind::fashion_mnist;  // corpus goes with lstm only
  std::string data_dir;               // default: the Debian package's directory
  std::size_t teacher_samples = 8192;
  std::size_t lstm_hidden = 128, lstm_seq = 64;
  // --model replay: the model description to replay (docs/replay.md), and
  // how its compute is emulated: auto (sleep for a GPU's times, spin for a
  // CPU's), spin or sleep.
  std::string model_file;
  std::string replay_compute = "auto";
  // --record-model FILE: write the description of this run's model from its
  // measured steps (rank 0; not with replay).
  std::string record_model;
  bool batch_given = false;  // --batch on the command line (replay takes the description's otherwise)
  // Optimization.
  std::size_t batch = 128;            // per rank
  std::size_t epochs = 1;
  std::size_t max_steps = 0;          // per epoch; 0 = the whole shard
  double lr = 0.05, momentum = 0.9, weight_decay = 0.0;
  // > 0: the averaged gradient is scaled to at most this L2 norm before the
  // update (torch.nn.utils.clip_grad_norm_'s rule, models::clip_coefficient).
  double clip_norm = 0.0;
  std::size_t warmup = 0;
  models::LrDecay lr_decay = models::LrDecay::constant;
  std::uint64_t seed = 1;
  // Exchange.
  comm::StrategyKind strategy = comm::StrategyKind::allreduce;
  CodecKind codec = CodecKind::fp32;
  std::uint32_t s = 16, d = 512;
  Norm norm = Norm::max;
  std::string naming;                 // how s was given: "bits=4(paper)" etc., for the trace
  std::size_t fusion_mb = 8;
  std::uint64_t layer_filter = 10000;
  bool overlap = true;
  Feedback feedback = Feedback::none;  // --error-feedback (kernels/feedback.hpp); lossy compressed strategies only
  std::uint32_t powersgd_rank = 4;    // --powersgd-rank: r of the powersgd strategy
  comm::Transport transport = comm::Transport::ring;
  std::size_t segment_kb = 4096;      // ring pipeline segment
  std::uint32_t window = 8;           // ring receives in flight
  bool progress_thread = true;        // --progress thread|hooks
  unsigned poll_us = 100;             // --poll-us: the progress thread's period
  double synthetic_backward_ms = 0;   // test hook: extra wall time per gradient hook
  // Evaluation.
  std::size_t eval_every = 0;         // steps between test-set evaluations; 0 = epoch ends only
  double target_accuracy = 0;         // stop once test accuracy reaches it; 0 = never
  // Output.
  std::string trace;                  // HDF5 trace path; empty: none
  std::size_t flush_every = 20;       // steps between trace flushes
  std::string checkpoint;             // checkpoint path; empty: none
  std::size_t checkpoint_every = 0;   // steps; 0 = at epoch ends only
  bool resume = false;
  // --checkpoint-signal USR1|USR2|TERM|INT|HUP: on this signal, checkpoint
  // after the current step and stop (exit code 8; Trainer::run). 0: none.
  // Not in to_json(): like the peer timeout it changes no result.
  int checkpoint_signal = 0;
  // --profile-steps A:B: an NVTX range train/capture from the start of global
  // step A to the end of step B - 1 (steps count from 0), the capture range of
  // `nsys profile --capture-range=nvtx --nvtx-capture=train/capture`. B = 0:
  // none. Not in to_json(): it changes no result.
  std::uint64_t profile_begin = 0, profile_end = 0;
  std::size_t hash_every = 0;         // steps between replica hash checks; 0 = end of run only
  std::size_t eval_limit = 0;         // test samples per evaluation; 0 = all
  bool quiet = false;
  std::string label;                  // free text recorded in the trace
  // Faults: seconds a wait may see no progress before the job ends with exit
  // code 7 (a peer died); < 0: QSGD_PEER_TIMEOUT, else 30; 0: no limit. Not
  // in to_json(): it changes no result, and a resumed run may use another.
  double peer_timeout = -1;

  comm::ExchangeConfig exchange_config() const;
  std::string describe() const;       // one line
  std::string to_json() const;        // the full configuration
};

// Parses every option once into the types above. Throws
// std::invalid_argument (qsgd::support::UsageError) with a message naming the
// option.
Options parse(int argc, char** argv);
std::string usage();

}  // namespace qsgd::train
