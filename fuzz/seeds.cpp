// qsgd-fuzz-seeds OUTDIR: writes the harnesses' seed corpora into
// OUTDIR/seeds/<harness>/ and the regression inputs of past findings into
// OUTDIR/regressions/<harness>/ (regressions/regressions.cpp). Every seed
// comes from the library's own encoders and writers (Codec::encode,
// save_checkpoint, TraceWriter::flush) or follows a format's definition
// (IDX, command lines from the documentation); nothing is a stored blob. The
// build runs it; its output is the same on every run but for the object
// modification times HDF5 records in the trace files.

#include <hdf5.h>
#include <sys/stat.h>
#include <zlib.h>

#include <Kokkos_Core.hpp>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <qsgd/kernels.hpp>

#include "qsgd/train/checkpoint.hpp"
#include "async_push_layout.hpp"
#include "common.hpp"
#include "detail/framing.hpp"
#include "exchange_meta_layout.hpp"
#include "qsgd/algorithms/channel.hpp"
#include "message_recipe.hpp"
#include "regressions/regressions.hpp"
#include "seed_constants.hpp"
#include "qsgd/train/trace.hpp"
#include "trace_builder.hpp"

namespace {

using namespace qsgd_fuzz;
using Exec = Kokkos::DefaultExecutionSpace;
using Mem = Exec::memory_space;

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "qsgd-fuzz-seeds: %s\n", what.c_str());
  std::exit(1);
}

void make_dirs(const std::string& path) {
  for (std::size_t at = 1; at <= path.size(); ++at) {
    if (at != path.size() && path[at] != '/') continue;
    const std::string dir = path.substr(0, at);
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) die("cannot create " + dir);
  }
}

std::vector<std::uint8_t> read_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) die("cannot read " + path);
  std::vector<std::uint8_t> out;
  std::uint8_t buf[65536];
  std::size_t got;
  while ((got = std::fread(buf, 1, sizeof buf, f)) > 0) out.insert(out.end(), buf, buf + got);
  std::fclose(f);
  return out;
}

class Out {
 public:
  Out(std::string root, const std::string& harness) : dir_(std::move(root) + "/" + harness) { make_dirs(dir_); }
  void write(const std::string& name, const std::vector<std::uint8_t>& bytes) const {
    const std::string path = dir_ + "/" + name;
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (!f || (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) || std::fclose(f) != 0)
      die("cannot write " + path);
  }
  // The same bytes behind a one-byte mode prefix (the file harnesses' layout).
  void write(const std::string& name, std::uint8_t mode, const std::vector<std::uint8_t>& bytes) const {
    std::vector<std::uint8_t> b = {mode};
    b.insert(b.end(), bytes.begin(), bytes.end());
    write(name, b);
  }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

// ---- messages --------------------------------------------------------------

const qsgd::CodecKind all_codecs[] = {
    qsgd::CodecKind::fp32,         qsgd::CodecKind::fp16,        qsgd::CodecKind::bf16, qsgd::CodecKind::fixed,
    qsgd::CodecKind::elias_sparse, qsgd::CodecKind::elias_dense, qsgd::CodecKind::rans};

// A gradient-like vector: normal values, every third one zero (sparse codes).
std::vector<float> gradient(std::uint64_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (std::uint64_t i = 0; i < n; ++i) v[i] = i % 3 == 0 ? 0.0f : normal(rng);
  return v;
}

std::vector<std::uint8_t> encode(const qsgd::CodecConfig& cfg, const std::vector<float>& v, bool deterministic) {
  qsgd::Codec<Exec> codec(cfg);
  const std::uint64_t n = v.size();
  Kokkos::View<float*, Mem> in("seeds::in", n == 0 ? 1 : n);
  std::copy(v.begin(), v.end(), in.data());
  Kokkos::View<std::uint64_t*, Mem> out("seeds::out", codec.max_message_bytes(n) / 8);
  std::size_t bytes;
  if (deterministic) {
    qsgd::Quantized<Mem> q;
    qsgd::quantize_deterministic(Exec(), in, n, q);
    bytes = codec.encode(q, out);
  } else {
    bytes = codec.encode(in, n, qsgd::RngKey{7, 3, 1, 0}, out);
  }
  const auto* p = reinterpret_cast<const std::uint8_t*>(out.data());
  return std::vector<std::uint8_t>(p, p + bytes);
}

void message_raw_seeds(const std::string& root) {
  const Out out(root, "message-raw");
  int k = 0;
  for (qsgd::CodecKind c : all_codecs) {
    for (std::uint64_t n : {0, 1, 37, 300}) {
      for (std::uint32_t s : {1u, 16u, 255u}) {
        if (!qsgd::is_quantized(c) && s != 16) continue;
        qsgd::CodecConfig cfg;
        cfg.codec = c;
        cfg.s = s;
        cfg.d = n == 300 ? 64 : 0;  // an odd bucket count: a padded scale section
        cfg.chunk = 64;
        cfg.norm = s == 255 ? qsgd::Norm::l2 : qsgd::Norm::max;
        out.write(qsgd::to_string(c) + "-n" + std::to_string(n) + "-s" + std::to_string(s),
                  encode(cfg, gradient(n, ++k), false));
      }
    }
    if (qsgd::is_quantized(c)) {
      qsgd::CodecConfig cfg;
      cfg.codec = c;
      out.write(qsgd::to_string(c) + "-deterministic", encode(cfg, gradient(100, ++k), true));
    }
  }
}

void message_struct_seeds(const std::string& root) {
  const Out out(root, "message-struct");
  std::mt19937_64 rng(42);
  for (std::uint8_t c = 0; c < 7; ++c) {
    const struct {
      std::uint16_t n;
      std::uint8_t flags, s_class;
      std::uint32_t s, d, chunk;
      std::int8_t exponent;
    } shapes[] = {
        {0, 0, 0, 15, 0, 63, 0},
        {1, MessageRecipe::norm_l2, 0, 0, 0, 0, -3},
        {100, 0, 1, 15, 32, 31, 0},                                           // s = 16, d = 32, chunk = 32
        {300, 16 /* sparse */ | MessageRecipe::expect_n, 1, 6, 64, 63, -10},  // s = 7
        {257, 48 /* int16 */, 2, 1000, 0, 4095, 4},
        {64, MessageRecipe::deterministic, 0, 0, 0, 7, 0},
    };
    int k = 0;
    for (const auto& sh : shapes) {
      MessageRecipe r;
      r.codec = c;
      r.flags = sh.flags;
      r.n = sh.n;
      r.s_class = sh.s_class;
      r.s = sh.s;
      r.d = sh.d;
      r.chunk = sh.chunk;
      r.seed = rng();
      r.step = static_cast<std::uint32_t>(k);
      r.exponent = sh.exponent;
      r.value_bytes.resize(r.size() * MessageRecipe::bytes_per_value(r.flags));
      for (auto& b : r.value_bytes) b = static_cast<std::uint8_t>(rng());
      ByteWriter w;
      r.write(w);
      out.write(qsgd::to_string(static_cast<qsgd::CodecKind>(c)) + "-" + std::to_string(k++), w.data());
    }
    // One recipe per mutation kind, so that the corpus starts with examples
    // of the mutation section.
    for (std::uint8_t op = 0; op < 10; ++op) {
      MessageRecipe r;
      r.codec = c;
      r.n = 200;
      r.s_class = 1;
      r.s = 15;
      r.d = 50;
      r.chunk = 49;
      r.value_bytes.resize(r.size());
      for (auto& b : r.value_bytes) b = static_cast<std::uint8_t>(rng());
      r.mutations.push_back(Mutation{op, static_cast<std::uint32_t>(rng()), rng()});
      ByteWriter w;
      r.write(w);
      out.write(qsgd::to_string(static_cast<qsgd::CodecKind>(c)) + "-mutation" + std::to_string(op), w.data());
    }
  }
}

// ---- checkpoints -----------------------------------------------------------

void checkpoint_seeds(const std::string& root, const std::string& scratch) {
  const Out out(root, "checkpoint");
  std::mt19937_64 rng(5);
  for (std::uint64_t n : {checkpoint_seed::n, std::uint64_t(0), std::uint64_t(1), std::uint64_t(17)}) {
    qsgd::train::CheckpointState st;
    const bool fixed = n == checkpoint_seed::n;  // the run the harness's mode bit 1 expects
    st.config_hash = fixed ? checkpoint_seed::hash : rng();
    st.step = 12;
    st.epoch = 1;
    st.step_in_epoch = 4;
    st.target_reached = n == 1;
    const std::uint64_t ranks = fixed ? checkpoint_seed::ranks : 1 + n % 4;
    for (std::uint64_t r = 0; r < ranks; ++r)
      st.ranks.push_back({1.5 * static_cast<double>(r + 1), 0.25 * static_cast<double>(r), 2.0 + static_cast<double>(r), 4 + r});
    for (std::uint64_t i = 0; i < n; ++i) {
      st.params.push_back(static_cast<float>(i) * 0.5f - 1.0f);
      st.momentum.push_back(static_cast<float>(i) * -0.25f);
    }
    qsgd::train::save_checkpoint(scratch, st);
    const std::vector<std::uint8_t> b = read_file(scratch);
    for (std::uint8_t mode : {0, 1, 2, 3}) {
      if (!fixed && (mode & 2)) continue;
      out.write("n" + std::to_string(n) + "-mode" + std::to_string(mode), mode, b);
    }
    if (n != 17) continue;
    // The same run with error feedback: ef (every rank's residual) and ef21
    // (and the ranks' mean), read as rank 1 (mode bits 4-7) with mode bit 2.
    for (std::uint32_t fb : {1u, 3u}) {
      st.feedback = fb;
      st.feedback_state.clear();
      for (std::uint64_t i = 0; i < ranks * n; ++i) st.feedback_state.push_back(0.125f * static_cast<float>(i) - 3.0f);
      st.feedback_mean.assign(fb == 3 ? n : 0, 0.75f);
      qsgd::train::save_checkpoint(scratch, st);
      out.write("n17-feedback" + std::to_string(fb), std::uint8_t(4 | 1 << 4), read_file(scratch));
    }
    // With an exchange state (powersgd's Qs) after ef-unscaled's residuals,
    // read with mode bits 2 and 3.
    st.feedback = 2;
    st.feedback_mean.clear();
    st.exchange_state = {0.5f, -1.0f, 2.25f, 0.0f, -0.125f};
    qsgd::train::save_checkpoint(scratch, st);
    out.write("n17-exchange-state", std::uint8_t(4 | 8), read_file(scratch));
  }
  std::remove(scratch.c_str());
}

// ---- IDX -------------------------------------------------------------------

// idx.hpp: magic 00 00 08 <ndims>, big-endian u32 dimensions, then the bytes.
std::vector<std::uint8_t> idx(const std::vector<std::uint32_t>& dims) {
  std::vector<std::uint8_t> b = {0, 0, 0x08, static_cast<std::uint8_t>(dims.size())};
  std::size_t count = 1;
  for (std::uint32_t d : dims) {
    for (int k = 3; k >= 0; --k) b.push_back(static_cast<std::uint8_t>(d >> (8 * k)));
    count *= d;
  }
  for (std::size_t i = 0; i < count; ++i) b.push_back(static_cast<std::uint8_t>(i * 37 + 11));
  return b;
}

std::vector<std::uint8_t> gzip(const std::vector<std::uint8_t>& plain, const std::string& scratch) {
  gzFile f = gzopen(scratch.c_str(), "wb9");
  if (!f || gzwrite(f, plain.data(), static_cast<unsigned>(plain.size())) != static_cast<int>(plain.size()) ||
      gzclose(f) != Z_OK)
    die("cannot write " + scratch);
  std::vector<std::uint8_t> b = read_file(scratch);
  std::remove(scratch.c_str());
  return b;
}

void idx_seeds(const std::string& root, const std::string& scratch) {
  const Out out(root, "idx");
  const std::vector<std::vector<std::uint32_t>> shapes = {{10}, {3, 4, 4}, {2, 28, 28}, {1, 1, 1, 1, 3}};
  for (std::size_t k = 0; k < shapes.size(); ++k) {
    const std::vector<std::uint8_t> plain = idx(shapes[k]);
    const std::string name = "shape" + std::to_string(k);
    out.write(name + "-plain", 0, plain);
    out.write(name + "-gzip", 0, gzip(plain, scratch));
    out.write(name + "-gzipped-by-harness", 1 | (6 << 1), plain);
    out.write(name + "-small-limit", 16, plain);
  }
}

// ---- traces ----------------------------------------------------------------

qsgd::trace::StepRecord step_record(std::int64_t step, int rank, int buckets) {
  qsgd::trace::StepRecord r;
  r.step = step;
  r.epoch = static_cast<std::int32_t>(step / 4);
  r.buckets = buckets;
  r.forward = 0.01 * (rank + 1);
  r.backward = 0.02;
  r.quantize = 0.001;
  r.encode = 0.002;
  r.decode = 0.003;
  r.update = 0.004;
  r.comm_exposed = 0.005;
  r.comm_hidden = 0.006;
  r.step_time = 0.05;
  r.wire_bytes = 1000 + static_cast<std::uint64_t>(step);
  r.bits_per_dim = 4.5;
  r.loss = 2.3 - 0.1 * static_cast<double>(step);
  r.grad_norm = 1.5 + 0.01 * static_cast<double>(step);
  for (int b = 0; b < buckets && b < qsgd::trace::max_buckets; ++b) {
    r.bucket_start[b] = 0.001 * b;
    r.bucket_posted[b] = 0.001 * b + 0.0005;
    r.bucket_done[b] = 0.001 * b + 0.002;
  }
  return r;
}

void trace_seeds(const std::string& root, const std::string& scratch) {
  // Files the writer wrote, for the raw harness (mode: the run's ranks - 1,
  // and in bits 2-3 the steps a resume drops).
  const Out raw(root, "trace-raw");
  for (int ranks : {1, 2}) {
    for (int steps : {0, 3}) {
      std::remove(scratch.c_str());
      {
        qsgd::trace::TraceWriter w(scratch, ranks, {{"config", "{\"model\":\"mlp\"}"}, {"label", "seed"}}, false);
        for (int s = 0; s < steps; ++s) {
          std::vector<qsgd::trace::StepRecord> per_rank;
          for (int r = 0; r < ranks; ++r) per_rank.push_back(step_record(s, r, 2 + s));
          w.add_step(per_rank);
        }
        if (steps > 0) {
          w.add_eval(qsgd::trace::EvalRecord{2, 0, 1.5, 0.7, 0.75});
          w.add_epoch(qsgd::trace::EpochRecord{0, 3.0, 0.9, 0.7, 0.75, steps});
        }
        w.flush();
      }
      const auto mode = static_cast<std::uint8_t>(ranks - 1);
      const std::string name = "written-ranks" + std::to_string(ranks) + "-steps" + std::to_string(steps);
      raw.write(name, mode, read_file(scratch));
      raw.write(name + "-resume-drops-1", static_cast<std::uint8_t>(mode | (1 << 2)), read_file(scratch));
    }
  }
  std::remove(scratch.c_str());
  // Recipes for the structure-aware harness, as the writer lays a file out.
  const Out out(root, "trace");
  std::mt19937_64 rng(9);
  const TraceShape shapes[] = {{3, 2, 1, 1, 0}, {0, 0, 0, 0, 0}, {5, 32, 2, 2, 0}, {1, 1, 0, 0, 0}};
  int k = 0;
  for (const TraceShape& sh : shapes) {
    for (int ranks : {1, 2, 4}) {
      ByteWriter w;
      sh.write(w);
      for (int a = 0; a < 2; ++a) w.u8(attr_int), w.u8(0);
      for (std::size_t d = 0; d < trace_datasets().size(); ++d) {
        w.u8(as_written);
        w.u8(std::strcmp(trace_datasets()[d].name, "count") == 0 ? 0 : static_cast<std::uint8_t>(rng()));
      }
      // Every other recipe resumes one step back.
      out.write("recipe" + std::to_string(k) + "-ranks" + std::to_string(ranks),
                static_cast<std::uint8_t>((ranks - 1) | ((k % 2) << 2)), w.data());
      ++k;
    }
  }
  // /attempts: three attempts as written, and each deviation in the second.
  for (int dev = 0; dev < attempt_deviation_count; ++dev) {
    ByteWriter w;
    TraceShape{3, 2, 1, 1, 0}.write(w);
    for (int a = 0; a < 2; ++a) w.u8(attr_int), w.u8(0);
    for (std::size_t d = 0; d < trace_datasets().size(); ++d) w.u8(as_written), w.u8(0);
    w.u8(3);
    for (int i = 0; i < 3; ++i) {
      w.u8(static_cast<std::uint8_t>(i == 1 ? dev : attempt_as_written));
      w.u8(static_cast<std::uint8_t>(1 + i));  // string attributes
      w.u8(static_cast<std::uint8_t>(7 * (i + 1)));  // salt: first_step and value lengths
    }
    out.write("attempts-deviation" + std::to_string(dev), 1, w.data());
  }
}

// Journals the writer appended after a 3-step file (fuzz_trace_journal.cpp):
// their records after the harness's own header (mode bit 1), with their CRCs
// as written and recomputed (bit 2), and a whole journal bound to another
// file (ignored).
void journal_seeds(const std::string& root, const std::string& scratch) {
  const Out out(root, "trace-journal");
  const std::string journal = qsgd::trace::journal_path(scratch);
  for (int ranks : {1, 2}) {
    std::remove(scratch.c_str());
    std::remove(journal.c_str());
    {
      qsgd::trace::TraceWriter w(scratch, ranks, {{"label", "seed"}}, false);
      std::int64_t s = 0;
      const auto add = [&](int n) {
        for (int i = 0; i < n; ++i, ++s) {
          std::vector<qsgd::trace::StepRecord> per_rank;
          for (int r = 0; r < ranks; ++r) per_rank.push_back(step_record(s, r, 1 + static_cast<int>(s % 3)));
          w.add_step(per_rank);
        }
      };
      add(3);
      w.flush();  // the file: 3 steps
      add(2);
      w.flush();  // a record of 2 steps
      add(3);
      w.add_eval(qsgd::trace::EvalRecord{7, 0, 1.5, 0.7, 0.75});
      w.add_epoch(qsgd::trace::EpochRecord{0, 3.0, 0.9, 0.7, 0.75, 8});
      w.set_attribute("complete", "false");
      w.flush();  // a record of 3 steps, an evaluation, an epoch and an attribute
    }
    const std::vector<std::uint8_t> j = read_file(journal);
    if (j.size() <= 64) die("the journal seed has no records");
    const std::vector<std::uint8_t> records(j.begin() + 64, j.end());
    const auto k = static_cast<std::uint8_t>(ranks - 1);
    const std::string name = "ranks" + std::to_string(ranks);
    out.write(name + "-records", static_cast<std::uint8_t>(k | 2), records);
    out.write(name + "-records-resealed", static_cast<std::uint8_t>(k | 2 | 4), records);
    out.write(name + "-other-file", k, j);
    out.write(name + "-empty", static_cast<std::uint8_t>(k | 2), {});
  }
  std::remove(scratch.c_str());
  std::remove(journal.c_str());
}

// ---- qsgd-train command lines ----------------------------------------------

void train_options_seeds(const std::string& root) {
  const Out out(root, "train-options");
  // Command lines of the README, scripts/run-train.sh, slurm/ and tests/train.
  const std::vector<std::vector<std::string>> lines = {
      {},
      {"--help"},
      {"--model", "mlp", "--strategy", "allgather", "--codec", "fixed", "--bits", "4", "--epochs", "1"},
      {"--model",      "cnn",
       "--dataset",    "fashion-mnist",
       "--strategy",   "allgather",
       "--codec",      "fixed",
       "--bits",       "8",
       "--epochs",     "2",
       "--batch",      "128",
       "--d",          "512",
       "--norm",       "max",
       "--eval-limit", "10000",
       "--trace",      "/scratch/qsgd/traces/cnn.h5",
       "--label",      "default/cnn_allgather_fixed-8bit/K16"},
      {"--model", "lstm", "--dataset", "corpus", "--strategy", "allreduce16", "--codec", "bf16", "--lstm-hidden", "64",
       "--lstm-seq", "32"},
      {"--model", "mlp", "--mlp-widths", "784,2048,2048,10", "--strategy", "scatter-reduce", "--codec", "rans",
       "--wire-bits", "4", "--transport", "library", "--segment-kb", "1024", "--window", "4"},
      {"--dataset",
       "teacher",
       "--teacher-samples",
       "1024",
       "--strategy",
       "param-server",
       "--codec",
       "elias-sparse",
       "--s",
       "7",
       "--d",
       "0",
       "--norm",
       "l2",
       "--lr",
       "0.1",
       "--momentum",
       "0.5",
       "--weight-decay",
       "1e-4",
       "--warmup",
       "10",
       "--lr-decay",
       "cosine",
       "--seed",
       "3"},
      {"--strategy", "allgather", "--codec", "elias-dense", "--checkpoint", "run.ckpt", "--checkpoint-every", "5",
       "--resume", "--hash-every", "2", "--flush-every", "1", "--no-overlap", "--progress", "hooks", "--poll-us", "50",
       "--quiet"},
      {"--max-steps", "16", "--eval-every", "8", "--target-accuracy", "0.85", "--fusion-mb", "4", "--layer-filter", "0",
       "--synthetic-backward-ms", "1.5", "--data-dir", "/usr/share/datasets/fashion-mnist"},
  };
  for (std::size_t k = 0; k < lines.size(); ++k) out.write("line" + std::to_string(k), join_args(lines[k]));
}

// ---- exchange metadata and pushes -------------------------------------------

// The exchange-meta harness's prefix: mode, codec, shape, n, tensor, step.
void meta_prefix(ByteWriter& w, std::uint8_t mode, std::uint8_t codec, std::uint8_t shape, const qsgd::comm::detail::OpId& id) {
  w.u8(mode);
  w.u8(codec);
  w.u8(shape);
  w.u16(static_cast<std::uint16_t>(id.n));
  w.u16(static_cast<std::uint16_t>(id.tensor));
  w.u16(static_cast<std::uint16_t>(id.step));
}

void exchange_meta_seeds(const std::string& root) {
  namespace fr = qsgd::comm::detail;
  namespace em = qsgd_fuzz::exchange_meta;
  const Out out(root, "exchange-meta");
  int k = 0;
  for (std::uint8_t c = 0; c < 7; ++c) {
    for (std::uint64_t n : {1, 300, 4096}) {
      const std::uint8_t shape = n == 300 ? 2 | (1 << 2) : 1;  // s = 16, d = 64; else s = 4, d = n
      const fr::OpId id{n, static_cast<std::uint32_t>(c), 3 + n % 5};
      const std::string tag = qsgd::to_string(static_cast<qsgd::CodecKind>(c)) + "-n" + std::to_string(n);
      // Built by the harness from the library's encoder: untouched, and with
      // an edit in the metadata's size word and in the message.
      for (int variant = 0; variant < 3; ++variant) {
        ByteWriter w;
        meta_prefix(w, em::built | (variant == 1 ? em::reseal : 0), c, shape, id);
        w.u8(static_cast<std::uint8_t>(++k));
        if (variant == 1) w.u16(0), w.u8(1);    // size word, resealed: the announced size is off by one
        if (variant == 2) w.u16(40), w.u8(0x10);  // a message byte: the message's own checks
        out.write(tag + "-built" + std::to_string(variant), w.data());
      }
      // The same frame as raw bytes.
      qsgd::CodecConfig cfg;
      cfg.codec = static_cast<qsgd::CodecKind>(c);
      cfg.s = qsgd::is_quantized(cfg.codec) ? em::levels[shape & 3] : 16;
      cfg.d = em::buckets[(shape >> 2) % 3];
      cfg.chunk = 64;
      const std::vector<std::uint8_t> msg = encode(cfg, gradient(n, ++k), false);
      const std::uint64_t words = (msg.size() + 7) / 8;
      std::uint64_t m[fr::meta_words];
      fr::set_meta(id, m, words);
      ByteWriter w;
      meta_prefix(w, 0, c, shape, id);
      for (std::uint64_t x : m) w.u64(x);
      w.bytes(msg.data(), msg.size());
      for (std::size_t pad = msg.size(); pad < words * 8; ++pad) w.u8(0);
      out.write(tag + "-raw", w.data());
    }
  }
  // Gathered: K ranks' metadata, each valid; one of another step.
  for (int variant = 0; variant < 2; ++variant) {
    const fr::OpId id{300, 1, 9};
    ByteWriter w;
    meta_prefix(w, em::gathered, 5, 1, id);
    const int K = 3;
    w.u8(K - 1);
    w.u8(1);
    for (int r = 0; r < K; ++r) {
      std::uint64_t m[fr::meta_words];
      fr::set_meta(variant == 1 && r == 2 ? fr::OpId{300, 1, 10} : id, m, 20 + 3 * r);
      for (std::uint64_t x : m) w.u64(x);
    }
    out.write("gathered" + std::to_string(variant), w.data());
  }
}

void async_push_seeds(const std::string& root) {
  namespace ap = qsgd_fuzz::async_push;
  const Out out(root, "async-push");
  int k = 0;
  for (std::uint8_t c = 0; c < 7; ++c) {
    for (std::uint16_t n : {0, 99, 2047}) {  // n = 1 + the field
      const std::uint8_t shape = n == 99 ? 3 | 4 : 0;  // s = 16, d = 64; else s = sqrt(n), d = n
      const std::string tag = qsgd::to_string(static_cast<qsgd::CodecKind>(c)) + "-n" + std::to_string(n + 1);
      for (int variant = 0; variant < 2; ++variant) {
        ByteWriter w;
        w.u8(ap::built);
        w.u8(c);
        w.u8(shape);
        w.u16(n);
        w.u8(4);                               // server version
        w.u8(static_cast<std::uint8_t>(++k));  // seed
        w.u8(variant == 0 ? 2 : 5);            // worker version: stale, or from the future
        out.write(tag + "-built" + std::to_string(variant), w.data());
      }
      // A worker's push as raw words.
      qsgd::algorithms::WireConfig wc;
      wc.codec = static_cast<qsgd::CodecKind>(c);
      wc.s = ap::levels[shape & 3];
      wc.d = ap::buckets[(shape >> 2) & 1];
      if (!qsgd::is_quantized(wc.codec)) wc.norm = qsgd::Norm::none;
      qsgd::algorithms::Channel ch(wc, n + 1u);
      std::vector<float> g = gradient(n + 1u, ++k);
      const std::size_t bytes = ch.encode(qsgd::algorithms::Vec(g.begin(), g.end()), qsgd::RngKey{1, 2, 3, 0});
      ByteWriter w;
      w.u8(0);
      w.u8(c);
      w.u8(shape);
      w.u16(n);
      w.u8(4);
      w.u64(3);
      w.u64(17);
      w.u64(bytes);
      for (std::size_t i = 0; i < (bytes + 7) / 8; ++i) w.u64(ch.buffer()[i]);
      out.write(tag + "-raw", w.data());
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: qsgd-fuzz-seeds OUTDIR\n");
    return 2;
  }
  const std::string root = argv[1];
  Kokkos::ScopeGuard kokkos;
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  make_dirs(root + "/seeds");
  const std::string scratch = root + "/scratch-file";
  std::remove(scratch.c_str());
  message_raw_seeds(root + "/seeds");
  message_struct_seeds(root + "/seeds");
  checkpoint_seeds(root + "/seeds", scratch);
  idx_seeds(root + "/seeds", scratch);
  trace_seeds(root + "/seeds", scratch);
  journal_seeds(root + "/seeds", scratch);
  train_options_seeds(root + "/seeds");
  exchange_meta_seeds(root + "/seeds");
  async_push_seeds(root + "/seeds");
  for (const Regression& r : regressions()) {
    const std::vector<std::uint8_t> input = r.make();
    if (input.empty()) die(std::string("the regression input ") + r.name + " could not be built");
    Out(root + "/regressions", r.harness).write(r.name, input);
  }
  return 0;
}
