#include "qsgd/train/options.hpp"

#include "qsgd/support/option_values.hpp"

#include <nlohmann/json.hpp>

#include <csignal>
#include <limits>
#include <utility>
#include <sstream>
#include <stdexcept>

namespace qsgd::train {
namespace {

using support::parse_bytes;
using support::parse_count;
using support::parse_real;

[[noreturn]] void bad(const std::string& what) { throw support::UsageError(what); }

// An option stored in 32 bits: a larger value is refused, not truncated.
std::uint32_t to_uint32(const std::string& opt, const std::string& v) {
  return static_cast<std::uint32_t>(parse_count(opt, v, 0, std::numeric_limits<std::uint32_t>::max()));
}

// --segment SIZE: bytes with a K, M or G suffix (as qsgd-bench-exchange's),
// kept in KiB: the trace records segment_kb, so a size that is not a whole
// number of KiB is refused rather than rounded.
std::size_t parse_segment(const std::string& opt, const std::string& v) {
  const std::uint64_t bytes = parse_bytes(opt, v, 1u << 10, std::numeric_limits<std::uint64_t>::max());
  if (bytes % 1024 != 0) bad(opt + " needs a whole number of KiB (a multiple of 1K), got '" + v + "'");
  return static_cast<std::size_t>(bytes >> 10);
}

// Why `k`'s averaged output is not the mean of what the ranks sent (their
// decoded first-stage messages, Exchange::start's `sent`), or nullptr where it
// is: ef21's m (m += out / B) stays the ranks' mean of h only then.
//   allgather: every rank decodes and accumulates all K messages (allgather.cpp);
//   shared-scale: the sums of every rank's levels against the agreed scales,
//   dequantized with K s levels, no second draw (scatter_reduce.cpp);
//   allreduce (fp32): the sum itself.
const char* inexact_mean(comm::StrategyKind k) {
  switch (k) {
    case comm::StrategyKind::allreduce:
    case comm::StrategyKind::allgather:
    case comm::StrategyKind::shared_scale: return nullptr;
    case comm::StrategyKind::allreduce16: return "rounds its sums to 16 bits on the way";
    case comm::StrategyKind::param_server: return "requantizes the average on the server";
    case comm::StrategyKind::scatter_reduce: return "requantizes the average";
    case comm::StrategyKind::powersgd: return "sends low-rank factors";
  }
  return "is not known to average exactly";
}

}  // namespace

int parse_signal(const std::string& name) {
  static const std::pair<const char*, int> names[] = {
      {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"TERM", SIGTERM}, {"INT", SIGINT}, {"HUP", SIGHUP}};
  for (const auto& [n, sig] : names)
    if (name == n || name == std::string("SIG") + n) return sig;
  bad("--checkpoint-signal must be USR1, USR2, TERM, INT or HUP, got '" + name + "'");
}

std::string to_string(ModelKind m) {
  switch (m) {
    case ModelKind::mlp: return "mlp";
    case ModelKind::cnn: return "cnn";
    case ModelKind::lstm: return "lstm";
    case ModelKind::replay: return "replay";
  }
  return "model#" + std::to_string(static_cast<int>(m));
}

std::string to_string(DatasetKind d) {
  switch (d) {
    case DatasetKind::fashion_mnist: return "fashion-mnist";
    case DatasetKind::teacher: return "teacher";
    case DatasetKind::corpus: return "corpus";
    case DatasetKind::none: return "none";
  }
  return "dataset#" + std::to_string(static_cast<int>(d));
}

std::string to_string(models::LrDecay d) {
  switch (d) {
    case models::LrDecay::constant: return "constant";
    case models::LrDecay::cosine: return "cosine";
    case models::LrDecay::step: return "step";
  }
  return "lr-decay#" + std::to_string(static_cast<int>(d));
}

ModelKind parse_model(const std::string& name) {
  for (ModelKind m : {ModelKind::mlp, ModelKind::cnn, ModelKind::lstm, ModelKind::replay})
    if (name == to_string(m)) return m;
  bad("--model must be mlp, cnn, lstm or replay, got '" + name + "'");
}

DatasetKind parse_dataset(const std::string& name) {
  for (DatasetKind d : {DatasetKind::fashion_mnist, DatasetKind::teacher, DatasetKind::corpus})
    if (name == to_string(d)) return d;
  bad("--dataset must be fashion-mnist, teacher or corpus, got '" + name + "'");
}

models::LrDecay parse_lr_decay(const std::string& name) {
  for (models::LrDecay d : {models::LrDecay::constant, models::LrDecay::cosine, models::LrDecay::step})
    if (name == to_string(d)) return d;
  bad("--lr-decay must be constant, cosine or step, got '" + name + "'");
}

std::string usage() {
  return R"(usage: qsgd-train [options]
Data-parallel training with QSGD gradient exchange (run under mpirun for K > 1).
Defaults in parentheses. Sizes: bytes, with an optional suffix K, M or G = 2^10, 2^20, 2^30 bytes;
a unit in an option's name (-kb, -mb, -ms, -us) is the unit of its plain number (docs/cli.md).
model and data:
  --model mlp|cnn|lstm|replay (mlp)  --mlp-widths LIST (784,4096,4096,10: input, hidden..., classes)
  --model-file FILE.json  replay: the model description (docs/replay.md); its batch is the run's
  --replay-compute auto|spin|sleep (auto: sleep where the description's times are a GPU's, else spin)
  --record-model FILE.json (none)  write this run's model description from its measured steps
  --dataset fashion-mnist|teacher|corpus (fashion-mnist; corpus with lstm)
  --data-dir DIR ($QSGD_FASHION_MNIST_DIR, else Debian's /usr/share/datasets/fashion-mnist)
  --teacher-samples N (8192)  --lstm-hidden N (128)  --lstm-seq N (64)
optimization:
  --batch N per rank (128)  --epochs N (1)  --max-steps N per epoch (0 = all)
  --lr X (0.05)  --momentum X (0.9)  --weight-decay X (0)  --lr-warmup STEPS (0)
  --warmup STEPS   alias of --lr-warmup (learning-rate warm-up steps, not untimed iterations)
  --clip-norm X (0 = off): scale the averaged gradient to L2 norm <= X before the update
  --lr-decay constant|cosine|step (constant)  --seed N (1)
exchange:
  --strategy allreduce|allreduce16|allgather|param-server|scatter-reduce|shared-scale|powersgd (allreduce)
  --powersgd-rank R (4)  powersgd: rank-R factors of every weight matrix that pays 2x, warm-started
  --codec fp32|fp16|bf16|fixed|elias-dense|elias-sparse|rans (fp32; allreduce ignores it)
  --bits B       paper convention: s = 2^B levels ("4-bit" = s 16)
  --wire-bits B  wire convention: sign + (B-1) level bits, s = 2^(B-1) - 1 ("4-bit" = s 7)
  --s S (16)  --d D (512; 0 = one bucket)  --norm max|l2 (max)
  --fusion-mb MB (8: MiB per fusion bucket)  --layer-filter N (10000: smaller tensors go uncompressed)
  --no-overlap  exchange the buckets after backward (default: while backward runs)
  --error-feedback none|ef|ef-unscaled|ef21 (none): residuals per tensor, C = Q/B (ef, ef21) or Q;
                 ef, ef-unscaled: allgather, param-server, scatter-reduce, shared-scale (codec not fp32);
                 ef21: allgather and shared-scale only (output the exact mean of what the ranks sent);
                 powersgd: ef-unscaled (the residual of the shared approximation)
  --transport ring|library (ring)  --segment SIZE (4M: ring pipeline segment, a multiple of 1K)
  --segment-kb KB  alias of --segment, in KiB (4096)
  --window N (8: ring receives in flight)
  --progress thread|hooks (thread: a thread polls the network during backward)  --poll-us US (100)
  --synthetic-backward-ms X (0; test hook: X ms of extra backward per gradient)
evaluation:
  --eval-every STEPS (0 = at epoch ends)  --target-accuracy A (0 = never; stop once reached)
  --eval-limit N (0 = the whole test set)
output:
  --trace FILE.h5 (none)  --flush-every STEPS (20)  --checkpoint FILE (none)
  --checkpoint-every STEPS (0 = at epoch ends)  --resume  --hash-every STEPS (0 = at the end)
  --quiet  --label TEXT (empty)
  --checkpoint-signal USR1|USR2|TERM|INT|HUP (none)  on this signal, checkpoint after the current step
                    and exit with code 8 (resume with --resume; Slurm: --signal=B:USR1@SECONDS)
profiling:
  --profile-steps A:B (none)  NVTX range train/capture over global steps A..B-1: the capture range of
                    nsys profile --capture-range=nvtx --nvtx-capture=train/capture
faults:
  --peer-timeout S  a wait with no progress for S seconds ends the job with exit code 7: a peer
                    died or hangs (QSGD_PEER_TIMEOUT, else 30; 0 = no limit)
)";
}

Options parse_checked(int argc, char** argv);
void check_together(Options& o, bool bits_given);
void check_replay(Options& o);

Options parse(int argc, char** argv) {
  try {
    return parse_checked(argc, argv);
  } catch (const qsgd::Error& e) {  // codec/strategy names and values rejected by the libraries
    throw std::invalid_argument(e.what());
  }
}

Options parse_checked(int argc, char** argv) {
  Options o;
  bool bits_given = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) bad(a + " needs a value");
      return argv[++i];
    };
    if (a == "--model") o.model = parse_model(val());
    else if (a == "--mlp-widths") {
      const auto w = support::parse_count_list(a, val(), 2, 1, std::numeric_limits<std::uint32_t>::max());
      o.mlp_widths.assign(w.begin(), w.end());
    }
    else if (a == "--dataset") o.dataset = parse_dataset(val());
    else if (a == "--data-dir") o.data_dir = val();
    else if (a == "--teacher-samples") o.teacher_samples = parse_count(a, val());
    else if (a == "--lstm-hidden") o.lstm_hidden = parse_count(a, val());
    else if (a == "--lstm-seq") o.lstm_seq = parse_count(a, val());
    else if (a == "--batch") {
      o.batch = parse_count(a, val());
      o.batch_given = true;
    }
    else if (a == "--model-file") o.model_file = val();
    else if (a == "--replay-compute") {
      o.replay_compute = val();
      if (o.replay_compute != "auto" && o.replay_compute != "spin" && o.replay_compute != "sleep")
        bad("--replay-compute must be auto, spin or sleep, got '" + o.replay_compute + "'");
    }
    else if (a == "--record-model") o.record_model = val();
    else if (a == "--epochs") o.epochs = parse_count(a, val());
    else if (a == "--max-steps") o.max_steps = parse_count(a, val());
    else if (a == "--lr") o.lr = parse_real(a, val());
    else if (a == "--momentum") o.momentum = parse_real(a, val());
    else if (a == "--weight-decay") o.weight_decay = parse_real(a, val());
    else if (a == "--clip-norm") o.clip_norm = parse_real(a, val(), 0.0);
    else if (a == "--lr-warmup" || a == "--warmup") o.warmup = parse_count(a, val());
    else if (a == "--lr-decay") o.lr_decay = parse_lr_decay(val());
    else if (a == "--seed") o.seed = parse_count(a, val());
    else if (a == "--strategy") o.strategy = comm::parse_strategy(val());
    else if (a == "--codec") o.codec = parse_codec(val());
    else if (a == "--bits") {
      const auto b = parse_count(a, val());
      if (b < 1 || b > 24) bad("--bits must be 1..24");
      o.s = 1u << b;
      o.naming = std::to_string(b) + "bit(paper,s=" + std::to_string(o.s) + ")";
      bits_given = true;
    } else if (a == "--wire-bits") {
      const auto b = parse_count(a, val());
      if (b < 2 || b > 25) bad("--wire-bits must be 2..25");
      o.s = (1u << (b - 1)) - 1;
      o.naming = std::to_string(b) + "bit(wire,s=" + std::to_string(o.s) + ")";
      bits_given = true;
    } else if (a == "--s") {
      o.s = to_uint32(a, val());
      o.naming = "s=" + std::to_string(o.s);
      bits_given = true;
    } else if (a == "--d") o.d = to_uint32(a, val());
    else if (a == "--norm") o.norm = parse_norm(val());
    else if (a == "--fusion-mb") o.fusion_mb = parse_count(a, val());
    else if (a == "--layer-filter") o.layer_filter = parse_count(a, val());
    else if (a == "--no-overlap") o.overlap = false;
    else if (a == "--error-feedback") o.feedback = parse_feedback(val());
    else if (a == "--transport") o.transport = comm::parse_transport(val());
    else if (a == "--segment") o.segment_kb = parse_segment(a, val());
    else if (a == "--segment-kb") o.segment_kb = parse_count(a, val());
    else if (a == "--window") o.window = to_uint32(a, val());
    else if (a == "--powersgd-rank") o.powersgd_rank = to_uint32(a, val());
    else if (a == "--progress") {
      const std::string v = val();
      if (v != "thread" && v != "hooks") bad("--progress must be thread or hooks");
      o.progress_thread = v == "thread";
    } else if (a == "--poll-us") {
      const auto v = parse_count(a, val());
      if (v == 0 || v > 1000000) bad("--poll-us must be 1 to 1000000");
      o.poll_us = static_cast<unsigned>(v);
    }
    else if (a == "--synthetic-backward-ms") o.synthetic_backward_ms = parse_real(a, val());
    else if (a == "--eval-every") o.eval_every = parse_count(a, val());
    else if (a == "--target-accuracy") o.target_accuracy = parse_real(a, val());
    else if (a == "--trace") o.trace = val();
    else if (a == "--flush-every") o.flush_every = parse_count(a, val());
    else if (a == "--checkpoint") o.checkpoint = val();
    else if (a == "--checkpoint-every") o.checkpoint_every = parse_count(a, val());
    else if (a == "--resume") o.resume = true;
    else if (a == "--checkpoint-signal") o.checkpoint_signal = parse_signal(val());
    else if (a == "--profile-steps") {
      const std::string v = val();
      const auto colon = v.find(':');
      if (colon == std::string::npos) bad("--profile-steps needs A:B (global steps A to B - 1), got '" + v + "'");
      o.profile_begin = parse_count(a, v.substr(0, colon));
      o.profile_end = parse_count(a, v.substr(colon + 1));
      if (o.profile_end <= o.profile_begin) bad("--profile-steps A:B needs A < B, got '" + v + "'");
    }
    else if (a == "--hash-every") o.hash_every = parse_count(a, val());
    else if (a == "--eval-limit") o.eval_limit = parse_count(a, val());
    else if (a == "--quiet") o.quiet = true;
    else if (a == "--label") o.label = val();
    else if (a == "--peer-timeout") {
      o.peer_timeout = parse_real(a, val());
      if (!(o.peer_timeout >= 0)) bad("--peer-timeout must be >= 0 seconds (0 = no limit)");
    }
    else bad("unknown option '" + a + "' (qsgd-train --help lists them)");
  }
  check_together(o, bits_given);
  return o;
}

// Replay reads no data, runs no optimizer and measures no accuracy: the
// options that need them are refused.
void check_replay(Options& o) {
  if (o.model != ModelKind::replay) {
    if (!o.model_file.empty()) bad("--model-file goes with --model replay");
    if (!o.record_model.empty() && o.resume) bad("--record-model measures a whole run: not with --resume");
    if (o.replay_compute != "auto") bad("--replay-compute goes with --model replay");
    return;
  }
  if (o.model_file.empty()) bad("--model replay needs --model-file FILE.json (a model description, docs/replay.md)");
  if (o.dataset != DatasetKind::fashion_mnist && o.dataset != DatasetKind::none)
    bad("--model replay reads no data: --dataset does not apply");
  o.dataset = DatasetKind::none;
  if (!o.record_model.empty()) bad("--record-model records a real model, not a replay");
  if (!o.checkpoint.empty() || o.resume) bad("--model replay keeps no optimizer state: --checkpoint and --resume do not apply");
  if (o.eval_every != 0 || o.target_accuracy > 0)
    bad("--model replay measures no accuracy: --eval-every and --target-accuracy do not apply");
  if (o.clip_norm > 0) bad("--model replay runs no optimizer: --clip-norm does not apply");
}

// The rules between options, once every option is read; completes the
// fields that follow from others (the codec a strategy uses, the naming).
void check_together(Options& o, bool bits_given) {
  check_replay(o);
  if (o.model == ModelKind::lstm && o.dataset == DatasetKind::fashion_mnist) o.dataset = DatasetKind::corpus;
  if ((o.model == ModelKind::lstm) != (o.dataset == DatasetKind::corpus))
    bad("the corpus dataset goes with the lstm model only");
  if (o.batch == 0) bad("--batch must be at least 1");
  if (o.epochs == 0) bad("--epochs must be at least 1");
  if (!(o.lr > 0)) bad("--lr must be positive");
  if (o.fusion_mb == 0) bad("--fusion-mb must be at least 1");
  // Both are used in bytes (<< 20, << 10): a value whose byte count does not
  // fit in 64 bits is refused, not wrapped.
  if (o.fusion_mb > (std::numeric_limits<std::uint64_t>::max() >> 20)) bad("--fusion-mb is too large");
  if (o.segment_kb > (std::numeric_limits<std::uint64_t>::max() >> 10)) bad("--segment-kb is too large");
  if (o.flush_every == 0) bad("--flush-every must be at least 1");
  if (o.resume && o.checkpoint.empty()) bad("--resume needs --checkpoint FILE");
  if (o.checkpoint_signal != 0 && o.checkpoint.empty()) bad("--checkpoint-signal needs --checkpoint FILE");
  if (o.segment_kb == 0 || o.window == 0) bad("--segment-kb and --window must be at least 1");
  if (o.synthetic_backward_ms < 0) bad("--synthetic-backward-ms must not be negative");
  if (o.target_accuracy < 0 || o.target_accuracy > 1) bad("--target-accuracy must be in [0, 1]");
  o.codec = comm::effective_codec(o.exchange_config()).codec;  // the strategy's rule (exchange.hpp)
  const bool powersgd = o.strategy == comm::StrategyKind::powersgd;
  if (powersgd && o.powersgd_rank == 0) bad("--powersgd-rank must be at least 1");
  if (powersgd && o.feedback != Feedback::none && o.feedback != Feedback::ef_unscaled)
    bad("powersgd's error feedback is ef-unscaled (the residual of the shared low-rank approximation); " +
        to_string(o.feedback) + " scales by a quantizer's bound or keeps per-rank states it has not");
  if (!powersgd && o.feedback != Feedback::none &&
      (o.strategy == comm::StrategyKind::allreduce16 || o.codec == CodecKind::fp32))
    bad("--error-feedback needs a strategy whose first stage codes each rank's gradient lossily (allgather, "
        "param-server, scatter-reduce or shared-scale with a codec other than fp32, or powersgd): " +
        comm::to_string(o.strategy) + " / " + to_string(o.codec) +
        (o.codec == CodecKind::fp32 ? " is exact" : " rounds its sums on the way"));
  if (o.feedback == Feedback::ef21)
    if (const char* why = inexact_mean(o.strategy))
      bad("--error-feedback ef21 needs an exchange whose output is the exact mean of what the ranks sent; "
          "--strategy " + comm::to_string(o.strategy) + " " + why +
          " (use allgather or shared-scale, or --error-feedback ef)");
  if (is_quantized(o.codec) && !bits_given) o.naming = "4bit(paper,s=16)";
  if (!is_quantized(o.codec)) o.naming = to_string(o.codec);
  CodecConfig c;
  c.codec = o.codec;
  c.s = o.s;
  c.d = o.d;
  c.norm = o.norm;
  validate(c);
}

comm::ExchangeConfig Options::exchange_config() const {
  comm::ExchangeConfig cfg;
  cfg.strategy = strategy;
  cfg.codec.codec = codec;
  cfg.codec.s = s;
  cfg.codec.d = d;
  cfg.codec.norm = norm;
  cfg.seed = seed;
  cfg.transport = transport;
  cfg.segment_bytes = static_cast<std::uint64_t>(segment_kb) << 10;
  cfg.window = window;
  cfg.powersgd_rank = powersgd_rank;
  return cfg;
}

std::string Options::describe() const {
  std::ostringstream os;
  if (model == ModelKind::replay)
    os << "replay of " << model_file << ", " << comm::to_string(strategy);
  else
    os << to_string(model) << " on " << to_string(dataset) << ", " << comm::to_string(strategy);
  if (strategy == comm::StrategyKind::powersgd) os << " rank " << powersgd_rank;
  else os << " / " << to_string(codec);
  if (is_quantized(codec)) os << " " << naming << " d=" << d << " " << to_string(norm);
  if (feedback != Feedback::none) os << " +" << to_string(feedback);
  os << ", batch " << batch << "/rank";
  return os.str();
}

// nlohmann::json writes strings escaped per RFC 8259 and numbers as the
// shortest decimal that reads back as the same double: the run's
// configuration hash is taken over this JSON, so --lr 0.1 and --lr 0.1000001
// must not print alike. Keys stay in this order (ordered_json).
std::string Options::to_json() const {
  nlohmann::ordered_json j;
  j["model"] = to_string(model);
  j["mlp_widths"] = mlp_widths;
  j["dataset"] = to_string(dataset);
  j["data_dir"] = data_dir;
  j["teacher_samples"] = teacher_samples;
  j["lstm_hidden"] = lstm_hidden;
  j["lstm_seq"] = lstm_seq;
  if (model == ModelKind::replay) {  // absent otherwise: earlier runs keep their hash
    j["model_file"] = model_file;
    j["replay_compute"] = replay_compute;
  }
  j["batch_per_rank"] = batch;
  j["epochs"] = epochs;
  j["max_steps"] = max_steps;
  j["lr"] = lr;
  j["momentum"] = momentum;
  j["weight_decay"] = weight_decay;
  if (clip_norm > 0) j["clip_norm"] = clip_norm;  // absent when off: earlier runs keep their hash
  j["warmup"] = warmup;
  j["lr_decay"] = to_string(lr_decay);
  j["seed"] = seed;
  j["strategy"] = comm::to_string(strategy);
  if (strategy == comm::StrategyKind::powersgd) j["powersgd_rank"] = powersgd_rank;
  j["codec"] = to_string(codec);
  j["s"] = s;
  j["d"] = d;
  j["norm"] = to_string(norm);
  j["naming"] = naming;
  j["fusion_mb"] = fusion_mb;
  j["layer_filter"] = layer_filter;
  j["overlap"] = overlap;
  j["error_feedback"] = to_string(feedback);
  j["transport"] = comm::to_string(transport);
  j["segment_kb"] = segment_kb;
  j["window"] = window;
  j["progress"] = progress_thread ? "thread" : "hooks";
  j["poll_us"] = poll_us;
  j["synthetic_backward_ms"] = synthetic_backward_ms;
  j["eval_every"] = eval_every;
  j["target_accuracy"] = target_accuracy;
  j["label"] = label;
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace qsgd::train
