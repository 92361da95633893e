// qsgd::train::Trainer; see qsgd/train/trainer.hpp.
#include "qsgd/train/trainer.hpp"

#include <nlohmann/json.hpp>

#include <mpi.h>
#include <sched.h>
#include <unistd.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "qsgd/comm/bucketer.hpp"
#include "qsgd/comm/exchange.hpp"
#include "qsgd/kernels/profiling.hpp"
#include "qsgd/kernels/quantize.hpp"
#include "qsgd/models/char_lstm.hpp"
#include "qsgd/models/cnn.hpp"
#include "qsgd/models/data/batch_loader.hpp"
#include "qsgd/models/data/fashion_mnist.hpp"
#include "qsgd/models/data/sampler.hpp"
#include "qsgd/models/data/teacher.hpp"
#include "qsgd/models/data/text_corpus.hpp"
#include "qsgd/models/mlp.hpp"
#include "qsgd/models/replay.hpp"
#include "qsgd/models/sgd.hpp"
#include "qsgd/support/option_values.hpp"
#include "qsgd/train/checkpoint.hpp"
#include "qsgd/train/feedback.hpp"
#include "qsgd/train/step_gather.hpp"
#include "qsgd/train/trace.hpp"
#include "model_recorder.hpp"

namespace qsgd::train {
namespace {

namespace qm = qsgd::models;
namespace qc = qsgd::comm;
using Exec = Kokkos::DefaultExecutionSpace;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// One of the trainer's MPI operations, as MPI errors and the watchdog name it:
// "<what> of qsgd-train at step S".
qc::MpiSite at(const char* what, std::uint64_t step) { return {what, "qsgd-train", static_cast<std::int64_t>(step)}; }

// A test hook's RANK:STEP from the environment variable `name`; leaves the
// outputs alone where it is unset or empty.
void parse_rank_step(const char* name, int& rank, std::uint64_t& step) {
  const char* e = std::getenv(name);
  if (!e || !*e) return;
  const std::string v = e;
  const auto colon = v.find(':');
  if (colon == std::string::npos) throw std::invalid_argument(std::string(name) + " must be RANK:STEP, got '" + v + "'");
  rank = static_cast<int>(support::parse_count(name, v.substr(0, colon), 0, 1u << 20));
  step = support::parse_count(name, v.substr(colon + 1));
}

// Set by the checkpoint signal's handler (watch_checkpoint_signal) on
// whichever thread the signal lands; read after every step. A lock-free
// atomic: safe in a handler and across threads.
std::atomic<int> checkpoint_signal_seen{0};
static_assert(std::atomic<int>::is_always_lock_free, "the signal flag must be lock-free");
extern "C" void on_checkpoint_signal(int) { checkpoint_signal_seen.store(1); }

struct Data {
  qm::LabeledDataset train, test;
  qm::TokenDataset train_tok, test_tok;
  bool tokens = false;
  std::shared_ptr<const qm::ModelDescription> replay;  // --model replay: no data, the description's epoch
  std::size_t train_size() const {
    return replay ? replay->train_samples : tokens ? train_tok.size() : train.size();
  }
  std::size_t test_size() const { return replay ? 0 : tokens ? test_tok.size() : test.size(); }
};

Data load_data(const Options& o) {
  Data d;
  if (o.model == ModelKind::replay) {
    d.replay = std::make_shared<const qm::ModelDescription>(qm::load_model_description(o.model_file));
  } else if (o.dataset == DatasetKind::fashion_mnist) {
    const std::string dir = o.data_dir.empty() ? qm::default_fashion_mnist_dir() : o.data_dir;
    d.train = qm::load_fashion_mnist(dir, qm::Split::train);
    d.test = qm::load_fashion_mnist(dir, qm::Split::test);
  } else if (o.dataset == DatasetKind::teacher) {
    qm::TeacherConfig tc;
    tc.samples = o.teacher_samples;
    tc.features = o.model == ModelKind::mlp ? o.mlp_widths.front() : 784;
    tc.classes = o.model == ModelKind::mlp ? o.mlp_widths.back() : 10;
    tc.data_seed = 2;
    d.train = qm::make_teacher_dataset(tc);
    tc.samples = std::max<std::size_t>(tc.samples / 4, 1);
    tc.data_seed = 3;
    d.test = qm::make_teacher_dataset(tc);
  } else {
    const auto corpus = qm::load_text_corpus(qm::default_corpus_paths());
    d.train_tok = qm::make_token_dataset(corpus, o.lstm_seq, 0.0, 0.9);
    d.test_tok = qm::make_token_dataset(corpus, o.lstm_seq, 0.9, 1.0);
    d.tokens = true;
  }
  return d;
}

std::unique_ptr<qm::Model> make_model(const Options& o, const Data& d, int rank) {
  if (o.model == ModelKind::replay) {
    const qm::ReplayCompute c = o.replay_compute == "spin"    ? qm::ReplayCompute::spin
                                : o.replay_compute == "sleep" ? qm::ReplayCompute::sleep
                                                              : qm::default_compute(*d.replay);
    return std::make_unique<qm::ReplayModel>(*d.replay, c, o.seed, static_cast<std::uint64_t>(rank));
  }
  if (o.model == ModelKind::mlp) {
    qm::MlpConfig c;
    c.widths = o.mlp_widths;
    if (!d.tokens && c.widths.front() != d.train.features)
      throw std::invalid_argument("--mlp-widths starts with " + std::to_string(c.widths.front()) + " but the data has " +
                                  std::to_string(d.train.features) + " features");
    return std::make_unique<qm::Mlp>(c, o.seed);
  }
  if (o.model == ModelKind::cnn) return std::make_unique<qm::Cnn>(qm::CnnConfig{}, o.seed);
  qm::CharLstmConfig c;
  c.vocab = d.train_tok.vocab;
  c.hidden = o.lstm_hidden;
  c.seq_len = o.lstm_seq;
  return std::make_unique<qm::CharLstm>(c, o.seed);
}

// A replay runs at its description's batch (per rank): --batch may only repeat it.
Options with_replay_batch(const Options& o) {
  if (o.model != ModelKind::replay) return o;
  Options r = o;
  const std::size_t b = qm::load_model_description(o.model_file).batch;
  if (o.batch_given && o.batch != b)
    throw std::invalid_argument("--batch " + std::to_string(o.batch) + " differs from the batch of " + o.model_file +
                                " (" + std::to_string(b) + "): a replay runs at its description's batch");
  r.batch = b;
  return r;
}

std::uint64_t params_hash(const qm::Model& m) {
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), m.params());
  return qc::float_fingerprint(h.data(), h.extent(0));
}


// Test-set loss and accuracy: each rank evaluates its shard, sums are reduced.
std::pair<double, double> evaluate(qm::Model& model, const Data& data, const qc::Communicator& comm,
                                   std::size_t batch, std::size_t limit, std::uint64_t step) {
  qsgd::prof::Scope range("train/evaluate");
  const std::size_t n = limit ? std::min(limit, data.test_size()) : data.test_size();
  const auto shard = qm::shard_range(n, comm.rank(), comm.size(), qm::ShardPolicy::balanced);
  std::unique_ptr<qm::BatchLoader> loader =
      data.tokens ? std::make_unique<qm::BatchLoader>(data.test_tok, batch) : std::make_unique<qm::BatchLoader>(data.test, batch);
  std::vector<std::size_t> idx(batch);
  double sums[3] = {0, 0, 0};  // loss * rows, correct, rows
  for (std::size_t b = shard.begin; b < shard.end; b += batch) {
    const std::size_t cnt = std::min(batch, shard.end - b);
    for (std::size_t k = 0; k < cnt; ++k) idx[k] = b + k;
    model.forward(loader->load(idx.data(), cnt));
    sums[0] += model.stats().loss * static_cast<double>(model.stats().rows);
    sums[1] += static_cast<double>(model.stats().correct);
    sums[2] += static_cast<double>(model.stats().rows);
  }
  comm.allreduce_sum(sums, 3, at("evaluation sums allreduce", step));
  return {sums[2] > 0 ? sums[0] / sums[2] : 0.0, sums[2] > 0 ? sums[1] / sums[2] : 0.0};
}


qm::SgdConfig sgd_config(const Options& o, std::size_t total_steps) {
  qm::SgdConfig sc;
  sc.lr.base_lr = o.lr;
  sc.lr.warmup_steps = o.warmup;
  sc.lr.decay = o.lr_decay;
  sc.lr.total_steps = total_steps;
  sc.lr.step_size = std::max<std::size_t>(total_steps / 3, 1);
  sc.momentum = o.momentum;
  sc.weight_decay = o.weight_decay;
  return sc;
}

qc::ExchangeConfig dense_config() {
  qc::ExchangeConfig dc;
  dc.strategy = qc::StrategyKind::allreduce;
  dc.codec.codec = qsgd::CodecKind::fp32;
  return dc;
}

qc::BucketerConfig bucketer_config(const Options& o) {
  qc::BucketerConfig bc;
  bc.fusion_bytes = o.fusion_mb << 20;
  bc.layer_filter = o.layer_filter;
  bc.progress_thread = o.progress_thread;
  bc.poll_us = o.poll_us;
  bc.report_sent = o.feedback != Feedback::none;
  return bc;
}

// The buckets in bucket order (by their first tensor, in backward order), as JSON for the
// trace: elements (padding included), compressed or dense, tensors.
template <class Buckets>
std::string bucket_plan_json(const Buckets& buckets) {
  std::string s = "[";
  for (const auto& b : buckets) {
    if (s.size() > 1) s += ",";
    s += "{\"elements\":" + std::to_string(b.length) + ",\"compressed\":" + (b.compressed ? "true" : "false") +
         ",\"tensors\":" + std::to_string(b.tensors.size()) + "}";
  }
  return s + "]";
}

// g_i^2 of the averaged gradient, a term of its squared norm: a named
// functor, as fixed_order_sum's kernels capture it on every backend. The
// square of a float is exact in double, so the sum's order alone decides
// the bits (detail::fixed_order_sum fixes it by n).
struct SquareTerm {
  Kokkos::View<const float*, Kokkos::LayoutRight, qm::MemSpace> g;
  KOKKOS_INLINE_FUNCTION double operator()(std::uint64_t i) const {
    const double x = static_cast<double>(g(i));
    return x * x;
  }
};

}  // namespace

struct Trainer::Impl {
  const Options o;
  // The peer timeout of every wait, the exchanges' included (they copy it).
  const qc::Communicator comm;
  const int rank, K;
  const bool interactive;
  Data data;
  std::unique_ptr<qm::Model> model;
  std::size_t P;
  std::unique_ptr<qc::Exchange<Exec>> compressed, dense;
  std::unique_ptr<qc::Bucketer<Exec>> bucketer;
  std::unique_ptr<FeedbackState> feedback;  // --error-feedback (none: kind() == none)
  qm::EpochSampler sampler;
  std::size_t shard_steps = 0, steps_per_epoch = 0, total_steps = 0;
  std::unique_ptr<qm::Sgd> sgd;
  // Run identity for checkpoints: everything that changes the trajectory.
  std::string cfg_json;
  std::uint64_t run_hash = 0;
  std::uint64_t step = 0, start_epoch = 0, start_in_epoch = 0;
  std::unique_ptr<trace::TraceWriter> trace;  // rank 0 writes; every rank sends its records
  std::unique_ptr<qm::BatchLoader> loader;
  trace::StepRecord rec;
  StepGather gather;
  double hook_s = 0;  // exchange work the gradient hooks did inside backward
  std::unique_ptr<ModelRecorder> recorder;  // --record-model
  std::map<std::string, std::string> run_provenance;  // the description's provenance (--record-model)
  Kokkos::View<double*, Exec::memory_space> norm_work;  // fixed_order_sum's partial sums
  // Test hook: QSGD_TEST_CRASH_AFTER_STEP=N kills every rank right after
  // global step N (after any checkpoint due at N), as a job killed there would be.
  std::uint64_t crash_after = 0;
  // Test hook: QSGD_TEST_NAN_LOSS=R:N makes rank R's loss NaN at global step
  // N, a condition of one rank that every rank must agree on before aborting.
  int nan_rank = -1;
  std::uint64_t nan_step = 0;
  // Test hook: QSGD_TEST_NAN_GRAD=R:N puts a NaN into rank R's gradient of
  // its first tensor at global step N, before the exchange: a strategy that
  // averages raw values (fp32, bf16) carries it into every rank's average,
  // which the update's count finds on every rank alike.
  int nan_grad_rank = -1;
  std::uint64_t nan_grad_step = 0;
  // Evaluation: the training time it reports excludes evaluations.
  double train_time = 0;  // this rank's training wall time (steps only)
  std::int64_t last_eval_step = -1;
  bool reached = false;
  bool stopping = false;  // the checkpoint signal came: checkpointed, stop after this step
  std::uint64_t capture_range = 0;  // the open train/capture range (--profile-steps), 0: none
  bool capturing = false;
  // The current epoch: steps only (evaluations inside it are excluded).
  double epoch_time = 0, loss_sum = 0;
  std::size_t loss_n = 0;
  std::pair<double, double> last_eval{0, 0};

  Impl(const Options& opts, const qc::Communicator& world, const std::map<std::string, std::string>& provenance)
      : o(opts),
        comm(opts.peer_timeout >= 0 ? world.with_peer_timeout(opts.peer_timeout) : world),
        rank(comm.rank()),
        K(comm.size()),
        interactive(!opts.quiet && comm.rank() == 0 && isatty(fileno(stderr))),
        data(load_data(opts)),
        model(make_model(opts, data, comm.rank())),
        P(model->num_parameters()),
        compressed(qc::make_exchange(opts.exchange_config(), comm)),
        dense(qc::make_exchange(dense_config(), comm)),
        sampler(data.train_size(), comm.rank(), comm.size(), opts.seed),
        gather(comm) {
    bucketer = std::make_unique<qc::Bucketer<Exec>>(*compressed, *dense, bucketer_config(o));
    // Weights as matrices (rows: the first dimension, as PyTorch's PowerSGD
    // hook views them), for the strategies that compress matrices.
    for (const auto& t : model->tensors()) bucketer->add(t.size, t.shape.size() >= 2 ? t.shape[0] : 0);
    bucketer->plan();
    feedback = make_feedback();

    shard_steps = sampler.batches(o.batch);
    if (shard_steps == 0)
      throw std::invalid_argument("the shard of " + std::to_string(sampler.shard_size()) +
                                  " samples is smaller than one batch of " + std::to_string(o.batch));
    steps_per_epoch = o.max_steps ? std::min(o.max_steps, shard_steps) : shard_steps;
    total_steps = steps_per_epoch * o.epochs;
    if (!replay()) sgd = std::make_unique<qm::Sgd>(model->store().params(), sgd_config(o, total_steps));

    cfg_json = o.to_json();
    run_hash = qc::fnv1a(cfg_json, static_cast<std::uint64_t>(K));
    if (o.resume) resume();
    open_trace(provenance);
    run_provenance = provenance;
    if (!o.record_model.empty()) recorder = std::make_unique<ModelRecorder>(*model, total_steps - 1);
    install_hook();
    if (!replay())
      loader = data.tokens ? std::make_unique<qm::BatchLoader>(data.train_tok, o.batch)
                           : std::make_unique<qm::BatchLoader>(data.train, o.batch);
    const char* crash_env = std::getenv("QSGD_TEST_CRASH_AFTER_STEP");
    crash_after = crash_env && *crash_env ? support::parse_count("QSGD_TEST_CRASH_AFTER_STEP", crash_env) : 0;
    parse_rank_step("QSGD_TEST_NAN_LOSS", nan_rank, nan_step);
    parse_rank_step("QSGD_TEST_NAN_GRAD", nan_grad_rank, nan_grad_step);
    if (rank == 0 && !o.quiet)
      std::fprintf(stderr, "qsgd-train: %s, K=%d, %zu parameters, %zu steps/epoch, %zu epochs, %zu buckets\n",
                   o.describe().c_str(), K, P, steps_per_epoch, o.epochs, bucketer->buckets().size());
  }

  bool replay() const { return data.replay != nullptr; }

  // Error feedback's state over the tensors of compressed buckets, with
  // C = Q / B (B: the quantizer's second-moment bound at the bucket size, or
  // at the largest compressed bucket when d = 0; 1 for the float codecs).
  std::unique_ptr<FeedbackState> make_feedback() const {
    const auto& ts = model->tensors();
    std::vector<char> comp(ts.size());
    std::vector<std::size_t> offs(ts.size()), sizes(ts.size());
    std::uint64_t longest = 1;
    for (std::size_t t = 0; t < ts.size(); ++t) {
      const auto& b = bucketer->buckets()[bucketer->bucket_of(static_cast<std::uint32_t>(t))];
      comp[t] = b.compressed ? 1 : 0;
      offs[t] = ts[t].offset;
      sizes[t] = ts[t].size;
      if (b.compressed) longest = std::max(longest, b.length);
    }
    double bound = 1;
    if (is_quantized(o.codec)) bound = qsgd::second_moment_bound(o.d > 0 ? o.d : longest, o.s);
    return std::make_unique<FeedbackState>(o.feedback, P, feedback_scale(o.feedback, bound), std::move(comp), std::move(offs), std::move(sizes));
  }

  // Starts tensor t's exchange (push_inplace, or the vector error feedback exchanges).
  void push(std::size_t t) {
    const auto tid = static_cast<std::uint32_t>(t);
    if (rank == nan_grad_rank && step == nan_grad_step && t == 0)  // test hook: QSGD_TEST_NAN_GRAD
      Kokkos::deep_copy(Kokkos::subview(model->store().grad_view(t), 0), std::numeric_limits<float>::quiet_NaN());
    if (feedback->active(t))
      bucketer->push(tid, feedback->before(t, model->store().grad_view(t)));
    else
      bucketer->push_inplace(tid, model->store().grad_view(t));
  }

  // Ends tensor t's exchange: the gradient the step uses, in place.
  void wait(std::size_t t) {
    const auto tid = static_cast<std::uint32_t>(t);
    const auto grad = model->store().grad_view(t);
    if (!feedback->active(t)) {
      bucketer->wait(tid, grad);
      return;
    }
    feedback->after(t, grad, bucketer->wait_sent(tid, grad));
  }

  // The checkpoint of --resume, loaded on every rank; when any rank cannot
  // load it, every rank throws CheckpointUnusable (the ranks agree first, so
  // none is left waiting in a collective).
  CheckpointState load_for_resume() {
    CheckpointState st;
    std::string why;
    try {
      st = load_checkpoint(o.checkpoint, run_hash, P, static_cast<std::uint64_t>(K),
                           static_cast<std::uint32_t>(o.feedback), static_cast<std::uint64_t>(rank),
                           compressed->state().size());
    } catch (const std::exception& e) {
      why = e.what();
    }
    double failed = why.empty() ? 0.0 : 1.0;
    comm.allreduce_max(&failed, 1, at("checkpoint load allreduce", 0));
    if (failed != 0.0)
      throw CheckpointUnusable("cannot resume from " + o.checkpoint + ": " +
                               (why.empty() ? "another rank could not load it" : why));
    return st;
  }

  void resume() {
    const auto st = load_for_resume();
    Kokkos::View<float*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged> hp(const_cast<float*>(st.params.data()), P);
    Kokkos::View<float*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged> hm(const_cast<float*>(st.momentum.data()), P);
    Kokkos::deep_copy(model->store().params(), hp);
    Kokkos::deep_copy(sgd->momentum_buffer(), hm);
    compressed->load_state(st.exchange_state);  // powersgd's warm start
    if (o.feedback != Feedback::none) {
      using Host = Kokkos::View<const float*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;
      Kokkos::deep_copy(feedback->state(), Host(st.feedback_state.data(), P));
      if (feedback->has_mean()) Kokkos::deep_copy(feedback->mean(), Host(st.feedback_mean.data(), P));
    }
    step = st.step;
    start_epoch = st.epoch;
    start_in_epoch = st.step_in_epoch;
    reached = st.target_reached;
    const RankTotals& mine = st.ranks[static_cast<std::size_t>(rank)];
    train_time = mine.train_time;
    epoch_time = mine.epoch_time;
    loss_sum = mine.loss_sum;
    loss_n = mine.loss_n;
    sgd->set_steps(step);
    if (rank == 0 && !o.quiet)
      std::fprintf(stderr, "qsgd-train: resumed from %s at step %llu (epoch %llu)\n", o.checkpoint.c_str(),
                   static_cast<unsigned long long>(step), static_cast<unsigned long long>(start_epoch));
  }

  // Per host, the CPUs its ranks may run on together: the union of their
  // affinity masks (collective). More ranks on a host than these CPUs means
  // ranks share cores (qsgd-summary's ranks_per_core).
  nlohmann::json host_cpus(const std::vector<std::string>& hosts) const {
    cpu_set_t set;
    CPU_ZERO(&set);
    std::vector<unsigned char> mine(CPU_SETSIZE / 8, 0), all;
    if (::sched_getaffinity(0, sizeof set, &set) == 0)
      for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &set)) mine[static_cast<std::size_t>(c / 8)] |= static_cast<unsigned char>(1u << (c % 8));
    all.resize(mine.size() * static_cast<std::size_t>(K));
    comm.allgather_bytes(mine.data(), static_cast<int>(mine.size()), all.data(), at("cpu mask allgather", 0));
    nlohmann::json out = nlohmann::json::object();
    for (const auto& h : hosts) {
      if (out.contains(h)) continue;
      std::vector<unsigned char> u(mine.size(), 0);
      for (int r = 0; r < K; ++r)
        if (hosts[static_cast<std::size_t>(r)] == h)
          for (std::size_t i = 0; i < u.size(); ++i) u[i] |= all[static_cast<std::size_t>(r) * u.size() + i];
      int n = 0;
      for (unsigned char b : u) n += __builtin_popcount(b);
      out[h] = n;
    }
    return out;
  }

  // The trace's replay attribute: what was replayed and how; accuracy is not measured.
  std::string replay_json() const {
    const auto& m = static_cast<const qm::ReplayModel&>(*model);
    const qm::ModelDescription& d = m.description();
    nlohmann::json j = {{"model_file", o.model_file},
                        {"model", d.model},
                        {"batch", d.batch},
                        {"times_source", d.times_source},
                        {"device", d.device},
                        {"device_name", d.device_name},
                        {"gradients_source", d.gradients_source},
                        {"compute", qm::to_string(m.compute())},
                        {"forward_s", d.forward_s},
                        {"backward_s", d.backward_s},
                        {"optimizer_s", d.optimizer_s},
                        {"accuracy", "not measured: replay emulates compute and trains nothing"}};
    return j.dump();
  }

  void open_trace(const std::map<std::string, std::string>& provenance) {
    // Collective: every rank takes part.
    const auto host_list = comm.host_names({"host name allgather", "qsgd-train"});
    const std::string hosts = nlohmann::json(host_list).dump();
    const nlohmann::json cpus = host_cpus(host_list);
    if (o.trace.empty() || rank != 0) return;
    trace::Attributes a;
    for (const auto& [k, v] : provenance) a[k] = v;
    a["config"] = cfg_json;
    a["describe"] = o.describe();
    a["mpi_version"] = qc::Communicator::mpi_library_version();
    a["mpi_gpu_aware"] = comm.gpu_aware() ? "true" : "false";
    a["message_path"] = qc::message_path<Exec::memory_space>(comm);
    a["hdf5_version"] = trace::hdf5_version();
    a["hosts"] = hosts;
    a["host_cpus"] = cpus.dump();
    a["model_parameters"] = std::to_string(P);
    a["steps_per_epoch"] = std::to_string(steps_per_epoch);
    a["steps_per_full_epoch"] = std::to_string(shard_steps);
    a["buckets"] = std::to_string(bucketer->buckets().size());
    a["bucket_plan"] = bucket_plan_json(bucketer->buckets());
    a["link_rate"] = std::getenv("QSGD_NETLAB_RATE") ? std::getenv("QSGD_NETLAB_RATE") : "local";
    a["label"] = o.label;
    if (replay()) a["replay"] = replay_json();
    trace = std::make_unique<trace::TraceWriter>(o.trace, K, a, o.resume);
    trace->truncate(static_cast<std::int64_t>(step), static_cast<std::int32_t>(start_epoch));
  }

  // Gradient hook: a bucket starts its exchange as soon as backward has
  // produced all its tensors (tensors come in backward order, so buckets fill
  // in reverse layer order), and every hook advances the buckets in flight.
  void install_hook() {
    const auto synthetic = std::chrono::microseconds(static_cast<long long>(o.synthetic_backward_ms * 1e3));
    model->set_grad_ready_hook([this, synthetic](std::size_t t) {
      if (recorder) recorder->on_ready(*model, t, hook_s);
      if (o.overlap) {
        const auto t0 = Clock::now();
        push(t);
        bucketer->progress();
        hook_s += seconds_since(t0);
      }
      if (synthetic.count() > 0) std::this_thread::sleep_for(synthetic);  // test hook: a slower backward
    });
  }

  void checkpoint(std::uint64_t epoch, std::uint64_t in_epoch) {
    // First the trace, synced, then the checkpoint (resume truncates the trace).
    if (trace) trace->flush(trace::TraceWriter::Sync::durable);
    if (o.checkpoint.empty()) return;
    // Every rank's totals, so that a resumed run reports the times and
    // losses an uninterrupted one would.
    const RankTotals mine{train_time, epoch_time, loss_sum, static_cast<std::uint64_t>(loss_n)};
    std::vector<RankTotals> all(rank == 0 ? static_cast<std::size_t>(K) : 0);
    comm.gather_bytes(&mine, sizeof mine, all.data(), 0, at("checkpoint totals gather", step));
    std::vector<float> states = gather_feedback();
    if (rank == 0) {
      CheckpointState st;
      st.config_hash = run_hash;
      st.step = step;
      st.epoch = epoch;
      st.step_in_epoch = in_epoch;
      st.target_reached = reached;
      st.ranks = std::move(all);
      auto hp = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), model->store().params());
      auto hm = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), sgd->momentum_buffer());
      st.params.assign(hp.data(), hp.data() + P);
      st.momentum.assign(hm.data(), hm.data() + P);
      st.feedback = static_cast<std::uint32_t>(o.feedback);
      st.feedback_state = std::move(states);
      if (feedback->has_mean()) {
        auto m = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), feedback->mean());
        st.feedback_mean.assign(m.data(), m.data() + P);
      }
      st.exchange_state = compressed->state();  // the same on every rank
      save_checkpoint(o.checkpoint, st);
    }
    comm.barrier(at("checkpoint barrier", step));
  }

  // Every rank's error feedback state, in rank order, on rank 0 (empty
  // elsewhere, and without error feedback); gathered in pieces of at most
  // 256 MiB per rank (MPI counts are ints).
  std::vector<float> gather_feedback() {
    std::vector<float> all;
    if (o.feedback == Feedback::none) return all;
    auto mine = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), feedback->state());
    if (rank == 0) all.resize(P * static_cast<std::size_t>(K));
    constexpr std::size_t piece = std::size_t(64) << 20;  // floats
    std::vector<float> got(rank == 0 ? std::min(piece, P) * static_cast<std::size_t>(K) : 0);
    for (std::size_t lo = 0; lo < P; lo += piece) {
      const std::size_t len = std::min(piece, P - lo);
      comm.gather_bytes(mine.data() + lo, static_cast<int>(4 * len), got.data(), 0,
                        at("checkpoint error feedback gather", step));
      if (rank == 0)
        for (int r = 0; r < K; ++r)
          std::copy_n(got.data() + static_cast<std::size_t>(r) * len, len,
                      all.data() + static_cast<std::size_t>(r) * P + lo);
    }
    return all;
  }

  void check_replicas() {
    const std::uint64_t h = params_hash(*model);
    const std::string bad = comm.mismatch(h, "model parameters", "parameter hash after step " + std::to_string(step));
    if (!bad.empty()) comm.abort(exit_replicas_diverged, "replicas diverged: " + bad, true);
  }

  // The step's record from the bucketer's totals and timestamps.
  void record_exchange(Clock::time_point t_step) {
    const qc::StepTotals& st = bucketer->step_totals();
    rec.quantize = st.quantize_s;
    rec.encode = st.encode_s;
    rec.requantize = st.requantize_s;
    rec.decode = st.decode_s;
    rec.comm_exposed = st.blocked_s;
    rec.comm_hidden = std::max(0.0, st.network_s - st.blocked_s);
    rec.wire_bytes = st.wire_bytes;
    rec.bits_per_dim = P ? 8.0 * static_cast<double>(st.encoded_bytes) / static_cast<double>(P) : 0;
    const double step0 = std::chrono::duration<double>(t_step.time_since_epoch()).count();
    const auto& bks = bucketer->buckets();
    rec.buckets = static_cast<std::int32_t>(bks.size());
    for (std::size_t i = 0; i < bks.size() && i < static_cast<std::size_t>(trace::max_buckets); ++i) {
      rec.bucket_start[i] = bks[i].t_start - step0;
      rec.bucket_posted[i] = bks[i].t_posted - step0;
      rec.bucket_done[i] = bks[i].t_done - step0;
    }
  }

  // The optimizer's step on the averaged gradient, clipped to --clip-norm.
  // The norm is one more pass over the gradient (4 bytes per coordinate
  // read, a double sum), so it is taken only when clipping is on and the
  // update phase of other runs times what it always did; the trace's
  // grad_norm is then NaN ("not measured"). Every rank holds the same
  // gradient and sums it in the same order, so every rank takes the same
  // decision; a NaN or Inf in it ends the run here, naming the step.
  // Returns the gradient's coordinates that are NaN or infinite (counted by
  // the update's own kernel, Sgd::step).
  std::size_t update() {
    if (replay()) {  // the described optimizer time; replay runs no optimizer
      rec.grad_norm = std::numeric_limits<double>::quiet_NaN();
      static_cast<qm::ReplayModel&>(*model).optimizer_step();
      return 0;
    }
    const auto& g = model->store().grads();
    if (!(o.clip_norm > 0)) {
      rec.grad_norm = std::numeric_limits<double>::quiet_NaN();
      const std::size_t bad = sgd->step(g);
      Kokkos::fence();
      return bad;
    }
    const double norm =
        std::sqrt(qsgd::detail::fixed_order_sum(Exec(), g.extent(0), SquareTerm{g}, norm_work));
    rec.grad_norm = norm;
    if (!std::isfinite(norm))
      comm.abort(exit_loss_not_finite,
                 "the averaged gradient's norm is not finite at step " + std::to_string(step) + " (NaN or Inf in it)",
                 true);
    const std::size_t bad = sgd->step(g, qm::clip_coefficient(norm, o.clip_norm));
    Kokkos::fence();
    return bad;
  }

  // A non-finite loss is one rank's condition, and a non-finite averaged
  // gradient (counted by the update) should be every rank's alike: the ranks
  // agree on both with one allreduce (a max over ranks of K - the lowest
  // failing rank for each, two doubles per step, in the step's time but in
  // none of its phases) before all of them abort with the same code and
  // message, instead of one rank entering the abort's barrier while the
  // others post the step record's gather. The update has then already taken
  // the values in: the run ends before a checkpoint could keep them.
  void check_step(std::size_t grad_non_finite) {
    double bad[2] = {std::isfinite(rec.loss) || replay() ? 0.0 : static_cast<double>(K - rank),
                     grad_non_finite == 0 ? 0.0 : static_cast<double>(K - rank)};
    comm.allreduce_max(bad, 2, at("loss and gradient check allreduce", step));
    if (bad[0] > 0)
      comm.abort(exit_loss_not_finite,
                 "loss is not finite at step " + std::to_string(step) + " on rank " +
                     std::to_string(K - static_cast<int>(bad[0])),
                 true);
    if (bad[1] > 0)
      comm.abort(exit_loss_not_finite,
                 "the averaged gradient is not finite at step " + std::to_string(step) + " on rank " +
                     std::to_string(K - static_cast<int>(bad[1])) +
                     (grad_non_finite > 0 ? " (" + std::to_string(grad_non_finite) + " non-finite coordinates on this rank)" : ""),
                 true);
  }

  // One step: forward, backward with the hooks, wait, update; fills rec and
  // gathers it to the trace.
  void run_step(std::uint64_t epoch, std::uint64_t b) {
    qsgd::prof::Scope step_range("train/step", step);  // payload: the global step, /steps/step of the trace
    const auto t_step = Clock::now();
    const auto& tensors = model->tensors();
    rec = {};
    rec.step = static_cast<std::int64_t>(step);
    rec.epoch = static_cast<std::int32_t>(epoch);
    static const qm::Batch no_data;  // replay reads none
    const qm::Batch* batch = &no_data;
    const auto t_load = Clock::now();
    {
      qsgd::prof::Scope r("data/load");
      if (replay())
        static_cast<qm::ReplayModel&>(*model).load();
      else
        batch = &loader->load(sampler.batch(b, o.batch), o.batch);
    }
    const double load_s = seconds_since(t_load);
    model->zero_grad();
    auto t0 = Clock::now();
    {
      qsgd::prof::Scope r("model/forward");
      model->forward(*batch);
      Kokkos::fence();
    }
    rec.forward = seconds_since(t0);
    rec.loss = replay() ? std::numeric_limits<double>::quiet_NaN() : model->loss();  // NaN: not measured
    if (rank == nan_rank && step == nan_step) rec.loss = std::numeric_limits<double>::quiet_NaN();
    bucketer->begin_step(step);
    hook_s = 0;
    if (recorder) recorder->begin_backward(step);
    t0 = Clock::now();
    {
      qsgd::prof::Scope r("model/backward");
      model->backward();
      Kokkos::fence();
    }
    // Backward compute excludes the exchange work the hooks did inside it.
    rec.backward = std::max(0.0, seconds_since(t0) - hook_s);
    {
      qsgd::prof::Scope r("comm/wait");
      if (!o.overlap)
        for (std::size_t t = 0; t < tensors.size(); ++t) push(t);
      for (std::size_t t = 0; t < tensors.size(); ++t) wait(t);
    }
    record_exchange(t_step);
    std::size_t grad_non_finite = 0;
    t0 = Clock::now();
    {
      qsgd::prof::Scope r("optim/update");
      grad_non_finite = update();
    }
    rec.update = seconds_since(t0);
    if (recorder) recorder->end_step(load_s, rec.forward, rec.backward, rec.update);
    check_step(grad_non_finite);
    rec.step_time = seconds_since(t_step);
    gather.add_step(rec, step, trace.get());
  }

  // Test-set evaluation, recorded with the training time so far.
  std::pair<double, double> eval_now(std::uint64_t epoch) {
    if (replay()) {  // no accuracy to measure: no evaluation record
      last_eval_step = static_cast<std::int64_t>(step);
      return {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::quiet_NaN()};
    }
    double tt = train_time;
    comm.allreduce_max(&tt, 1, at("training time allreduce", step));
    const auto [test_loss, test_acc] = evaluate(*model, data, comm, o.batch, o.eval_limit, step);
    if (trace)
      trace->add_eval({static_cast<std::int64_t>(step), static_cast<std::int32_t>(epoch), tt, test_loss, test_acc});
    last_eval_step = static_cast<std::int64_t>(step);
    if (o.target_accuracy > 0 && test_acc >= o.target_accuracy) reached = true;  // same on every rank (reduced)
    return std::make_pair(test_loss, test_acc);
  }

  // A step and what follows it: timing, progress line, replica check,
  // evaluation, checkpoint or trace flush, the crash test hook.
  double train_step(std::uint64_t epoch, std::uint64_t b) {
    if (o.profile_end > 0 && step == o.profile_begin) {  // --profile-steps: a start/end range, which
      capture_range = qsgd::prof::start("train/capture");  // may span the epoch's push/pop range
      capturing = true;
    }
    const auto t_train = Clock::now();
    run_step(epoch, b);
    const double dt = seconds_since(t_train);
    train_time += dt;
    epoch_time += dt;
    loss_sum += rec.loss;
    ++loss_n;
    ++step;
    if (capturing && step == o.profile_end) end_capture();
    if (interactive) {
      std::fprintf(stderr, "\repoch %llu step %llu/%zu loss %.4f %.1f samples/s   ",
                   static_cast<unsigned long long>(epoch), static_cast<unsigned long long>(b + 1), steps_per_epoch,
                   rec.loss, static_cast<double>(o.batch * K) / rec.step_time);
    }
    if (o.hash_every && step % o.hash_every == 0) check_replicas();
    if (o.eval_every && step % o.eval_every == 0) last_eval = eval_now(epoch);
    if (o.checkpoint_signal != 0) {  // the ranks agree to stop after the same step
      double seen = checkpoint_signal_seen.load() ? 1 : 0;
      comm.allreduce_max(&seen, 1, at("checkpoint signal allreduce", step));
      stopping = seen > 0;
    }
    // A stop at an epoch's last step checkpoints at the epoch's end; so does
    // a run that just reached its target (it ends this epoch now: a
    // checkpoint here would resume past an epoch record never written).
    if ((stopping || (o.checkpoint_every && step % o.checkpoint_every == 0)) && b + 1 < steps_per_epoch && !reached)
      checkpoint(epoch, b + 1);
    else if (trace && step % o.flush_every == 0)
      trace->flush();
    if (crash_after && step == crash_after) {  // test hook: die like a killed job
      comm.barrier(at("barrier before the test crash", step));
      std::raise(SIGKILL);
    }
    return rec.loss;
  }

  void end_of_epoch(std::uint64_t epoch, std::uint64_t steps) {
    comm.allreduce_max(&epoch_time, 1, at("epoch time allreduce", step));
    double mean_loss[2] = {loss_sum, static_cast<double>(loss_n)};
    comm.allreduce_sum(mean_loss, 2, at("epoch loss allreduce", step));
    if (last_eval_step != static_cast<std::int64_t>(step)) last_eval = eval_now(epoch);
    const auto [test_loss, test_acc] = last_eval;
    if (trace) {
      trace::EpochRecord e;
      e.epoch = static_cast<std::int32_t>(epoch);
      e.epoch_time = epoch_time;
      e.train_loss = mean_loss[1] > 0 ? mean_loss[0] / mean_loss[1] : 0;
      e.test_loss = test_loss;
      e.test_accuracy = test_acc;
      e.steps = static_cast<std::int64_t>(steps);
      trace->add_epoch(e);
    }
    if (rank == 0 && !o.quiet) {
      if (replay())
        std::fprintf(stderr, "%sepoch %llu: %.2f s (replay: no loss or accuracy)\n", interactive ? "\n" : "",
                     static_cast<unsigned long long>(epoch), epoch_time);
      else
      std::fprintf(stderr, "%sepoch %llu: %.2f s, train loss %.4f, test loss %.4f, test accuracy %.4f%s\n",
                   interactive ? "\n" : "", static_cast<unsigned long long>(epoch), epoch_time,
                   mean_loss[1] > 0 ? mean_loss[0] / mean_loss[1] : 0, test_loss, test_acc,
                   reached ? " (target reached)" : "");
    }
    checkpoint(epoch + 1, 0);
  }

  // The epoch's totals start at zero, or at the checkpoint's when the run
  // resumed inside this epoch.
  void begin_epoch(std::uint64_t epoch, bool resumed_inside) {
    sampler.set_epoch(epoch);
    comm.barrier(at("epoch start barrier", step));
    if (!resumed_inside) {
      epoch_time = 0;
      loss_sum = 0;
      loss_n = 0;
    }
    last_eval = {0, 0};
  }

  RunEnd stopped() {
    if (capturing) end_capture();
    if (trace) trace->close();  // one file, as at the end of a run
    return RunEnd::stopped_at_signal;
  }

  void end_capture() {
    qsgd::prof::end(capture_range);
    capturing = false;
  }

  // --record-model: every rank's phase times to rank 0 (collective), which
  // writes the description with the spreads the ranks share and their own.
  void save_description() {
    std::uint64_t n = recorder->measured_steps();
    std::vector<std::uint64_t> ns(static_cast<std::size_t>(K));
    comm.allgather_bytes(&n, sizeof n, ns.data(), at("record-model step count allgather", step));
    std::vector<std::vector<double>> ranks;
    if (K > 1 && std::all_of(ns.begin(), ns.end(), [&](std::uint64_t x) { return x == n; }) && n > 0) {
      const std::vector<double> mine = recorder->series();
      std::vector<double> all(rank == 0 ? mine.size() * static_cast<std::size_t>(K) : 0);
      comm.gather_bytes(mine.data(), static_cast<int>(mine.size() * sizeof(double)), all.data(), 0,
                        at("record-model phase times gather", step));
      for (int r = 0; rank == 0 && r < K; ++r)
        ranks.emplace_back(all.begin() + static_cast<std::ptrdiff_t>(r * mine.size()),
                           all.begin() + static_cast<std::ptrdiff_t>((r + 1) * mine.size()));
    }
    if (rank == 0)
      qm::save_model_description(
          recorder->describe(model->name(), o.batch, data.train_size(), run_provenance, ranks), o.record_model);
  }

  void finish() {
    if (capturing) end_capture();  // the run ended inside the window
    check_replicas();
    if (recorder) save_description();
    if (!trace) return;
    if (replay()) {  // what writing the gradients cost inside the emulated backward
      const auto& m = static_cast<const qm::ReplayModel&>(*model);
      trace->set_attribute("replay_fill_ms_per_step",
                           std::to_string(m.steps() ? 1e3 * m.fill_seconds() / static_cast<double>(m.steps()) : 0.0));
    }
    trace->set_attribute("target_reached", reached ? "true" : "false");
    char hex[32];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(params_hash(*model)));
    trace->set_attribute("final_params_fnv1a", hex);
    trace->set_attribute("complete", "true");
    trace->close();  // one file: the journal folded in
  }

  RunEnd run() {
    for (std::uint64_t epoch = start_epoch; epoch < o.epochs && !reached; ++epoch) {
      qsgd::prof::Scope epoch_range("train/epoch");
      const std::uint64_t first = epoch == start_epoch ? start_in_epoch : 0;
      begin_epoch(epoch, first > 0);
      std::uint64_t b = first;
      for (; b < steps_per_epoch && !reached && !stopping; ++b) train_step(epoch, b);
      if (b < steps_per_epoch && !reached) return stopped();  // checkpointed by train_step
      end_of_epoch(epoch, b);
      if (stopping && epoch + 1 < o.epochs && !reached) return stopped();
    }
    finish();
    return RunEnd::finished;
  }
};

Trainer::Trainer(const Options& o, const comm::Communicator& world,
                 const std::map<std::string, std::string>& provenance)
    : impl_(std::make_unique<Impl>(with_replay_batch(o), world, provenance)) {}

Trainer::~Trainer() = default;

RunEnd Trainer::run() { return impl_->run(); }

void watch_checkpoint_signal(int sig) {
  struct sigaction sa {};
  sa.sa_handler = on_checkpoint_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  if (::sigaction(sig, &sa, nullptr) != 0)
    throw std::runtime_error("cannot install the handler of signal " + std::to_string(sig));
}

double Trainer::step(std::uint64_t epoch, std::uint64_t batch_in_epoch) {
  return impl_->train_step(epoch, batch_in_epoch);
}

void Trainer::end_of_epoch(std::uint64_t epoch, std::uint64_t steps) { impl_->end_of_epoch(epoch, steps); }

std::uint64_t Trainer::steps_done() const { return impl_->step; }

}  // namespace qsgd::train
