// Unit tests of qsgd::train's pieces that need no MPI job: the command line
// (every refusal names the option and the value), the checkpoint file
// (round trip of every field, each mismatch named, the size checked before
// anything is read), the trace reader on older traces and the trace's
// journal (appends, torn and damaged records, merge). The end-to-end
// checks of qsgd-train are the shell tests next to this file.
#include <dirent.h>
#include <gtest/gtest.h>
#include <hdf5.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "qsgd/kernels/crc32c.hpp"
#include "qsgd/support/durable_file.hpp"
#include "qsgd/train/checkpoint.hpp"
#include "qsgd/train/options.hpp"
#include "qsgd/train/trace.hpp"

namespace qt = qsgd::train;

namespace {

qt::Options parse(std::vector<std::string> args) {
  args.insert(args.begin(), "qsgd-train");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  return qt::parse(static_cast<int>(args.size()), argv.data());
}

// The message parse() throws for `args`, or "" when it accepts them.
std::string refusal(std::vector<std::string> args) {
  try {
    parse(std::move(args));
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Options, RefusalsNameTheOptionAndTheValue) {
  const std::pair<std::vector<std::string>, std::string> cases[] = {
      {{"--bogus"}, "unknown option '--bogus'"},
      {{"--bits", "40"}, "--bits must be 1..24"},
      {{"--strategy", "carrier-pigeon"}, "unknown strategy 'carrier-pigeon'"},
      {{"--model", "resnet"}, "--model must be mlp, cnn, lstm or replay, got 'resnet'"},
      {{"--model", "replay"}, "--model replay needs --model-file FILE.json"},
      {{"--model", "replay", "--model-file", "m.json", "--replay-compute", "fast"},
       "--replay-compute must be auto, spin or sleep, got 'fast'"},
      {{"--model", "replay", "--model-file", "m.json", "--clip-norm", "1"}, "runs no optimizer: --clip-norm"},
      {{"--model", "replay", "--model-file", "m.json", "--dataset", "teacher"}, "reads no data: --dataset"},
      {{"--model", "replay", "--model-file", "m.json", "--record-model", "r.json"}, "records a real model"},
      {{"--record-model", "r.json", "--checkpoint", "c", "--resume"}, "--record-model measures a whole run"},
      {{"--replay-compute", "spin"}, "--replay-compute goes with --model replay"},
      {{"--mlp-widths", "784,,10"}, "--mlp-widths needs an integer in 1..4294967295, got ''"},
      // Numbers are taken as written or refused: no sign after blanks
      // (std::stoull would negate it), no truncation to a 32-bit field, no
      // infinity, no byte count past 64 bits.
      {{"--batch", " -1"}, "--batch needs a non-negative integer, got ' -1'"},
      {{"--s", "4294967312"}, "--s needs an integer in 0..4294967295, got '4294967312'"},
      {{"--d", "4294967296"}, "--d needs an integer in 0..4294967295"},
      {{"--lr", "inf"}, "--lr needs a finite number, got 'inf'"},
      {{"--clip-norm", "-1"}, "--clip-norm"},
      {{"--clip-norm", "nan"}, "--clip-norm"},
      {{"--fusion-mb", "17592186044417"}, "--fusion-mb is too large"},
      {{"--checkpoint-signal", "KILL", "--checkpoint", "c"}, "--checkpoint-signal must be USR1, USR2, TERM, INT or HUP, got 'KILL'"},
      {{"--checkpoint-signal", "USR1"}, "--checkpoint-signal needs --checkpoint FILE"},
      {{"--resume"}, "--resume needs --checkpoint FILE"},
      {{"--profile-steps", "3"}, "--profile-steps needs A:B (global steps A to B - 1), got '3'"},
      {{"--profile-steps", "4:2"}, "--profile-steps A:B needs A < B, got '4:2'"},
      {{"--profile-steps", "1:x"}, "--profile-steps needs a non-negative integer, got 'x'"},
      {{"--error-feedback", "yes"}, "unknown error feedback 'yes' (none, ef, ef-unscaled, ef21)"},
      {{"--error-feedback", "ef"}, "allreduce / fp32 is exact"},
      {{"--error-feedback", "ef21", "--strategy", "allgather"}, "allgather / fp32 is exact"},
      {{"--error-feedback", "ef", "--strategy", "allreduce16"}, "allreduce16 / bf16 rounds its sums on the way"},
      {{"--strategy", "powersgd", "--powersgd-rank", "0"}, "--powersgd-rank must be at least 1"},
      {{"--strategy", "powersgd", "--error-feedback", "ef21"}, "powersgd's error feedback is ef-unscaled"},
  };
  for (const auto& [args, want] : cases) {
    const std::string got = refusal(args);
    EXPECT_NE(got.find(want), std::string::npos) << args.front() << ": got '" << got << "', expected '" << want << "'";
  }
}

TEST(Options, ErrorFeedbackIsPartOfTheRunIdentity) {
  const auto plain = parse({"--strategy", "allgather", "--codec", "fixed"});
  const auto ef = parse({"--strategy", "allgather", "--codec", "fixed", "--error-feedback", "ef"});
  EXPECT_EQ(ef.feedback, qsgd::Feedback::ef);
  EXPECT_NE(plain.to_json(), ef.to_json());
  EXPECT_NE(ef.describe().find("+ef"), std::string::npos) << ef.describe();
}

// ef21 keeps m += out / B as the ranks' mean of h, which holds only where the
// exchange's output is the exact mean of what the ranks sent (Exchange::start's
// `sent`). scatter-reduce and param-server requantize the average: ef21 is
// refused there, with every lossy codec, in one line naming the option, the
// strategy and the reason; ef stays accepted with them.
namespace {
void expect_ef21_refused(const std::string& strategy) {
  for (const char* codec : {"fixed", "elias-dense", "bf16"}) {
    const std::string got = refusal({"--strategy", strategy, "--codec", codec, "--error-feedback", "ef21"});
    const std::string want = "--error-feedback ef21 needs an exchange whose output is the exact mean of what the "
                             "ranks sent; --strategy " + strategy + " requantizes the average";
    EXPECT_NE(got.find(want), std::string::npos) << strategy << " / " << codec << ": got '" << got << "'";
    EXPECT_EQ(got.find('\n'), std::string::npos) << got;
    EXPECT_EQ(refusal({"--strategy", strategy, "--codec", codec, "--error-feedback", "ef"}), "") << strategy;
  }
}
}  // namespace

TEST(Options, Ef21IsRefusedWithScatterReduce) { expect_ef21_refused("scatter-reduce"); }

TEST(Options, Ef21IsRefusedWithParamServer) { expect_ef21_refused("param-server"); }

// allgather averages the K decoded messages; shared-scale sums every rank's
// levels against the agreed scales with no second draw: both exact.
TEST(Options, Ef21IsAcceptedWhereTheAverageIsExact) {
  for (const char* strategy : {"allgather", "shared-scale"}) {
    const std::vector<std::string> args = {"--strategy", strategy, "--codec", "fixed", "--error-feedback", "ef21"};
    EXPECT_EQ(refusal(args), "") << strategy;
    EXPECT_EQ(parse(args).feedback, qsgd::Feedback::ef21) << strategy;
  }
}

TEST(Options, PowerSgdRankIsPartOfItsRunIdentityOnly) {
  const auto r2 = parse({"--strategy", "powersgd", "--powersgd-rank", "2", "--error-feedback", "ef-unscaled"});
  const auto r4 = parse({"--strategy", "powersgd", "--error-feedback", "ef-unscaled"});
  EXPECT_EQ(r4.powersgd_rank, 4u);
  EXPECT_EQ(r2.exchange_config().powersgd_rank, 2u);
  EXPECT_NE(r2.to_json(), r4.to_json());
  EXPECT_NE(r2.describe().find("powersgd rank 2 +ef-unscaled"), std::string::npos) << r2.describe();
  // Another strategy's configuration does not carry the rank.
  EXPECT_EQ(parse({"--powersgd-rank", "2"}).to_json(), parse({}).to_json());
}

TEST(Options, ClipNormIsPartOfTheRunIdentityWhenOn) {
  const auto clip = parse({"--clip-norm", "0.25"});
  EXPECT_EQ(clip.clip_norm, 0.25);
  EXPECT_NE(clip.to_json().find("\"clip_norm\":0.25"), std::string::npos) << clip.to_json();
  EXPECT_NE(clip.to_json(), parse({"--clip-norm", "0.5"}).to_json());
  // Off (0, the default) leaves the configuration as it was before the
  // option existed, so earlier runs keep their hash and checkpoints.
  EXPECT_EQ(parse({"--clip-norm", "0"}).to_json(), parse({}).to_json());
  EXPECT_EQ(parse({}).to_json().find("clip_norm"), std::string::npos);
}

TEST(Options, CheckpointSignalIsTakenByNameAndLeftOutOfTheRunIdentity) {
  const qt::Options plain = parse({"--checkpoint", "c"});
  EXPECT_EQ(plain.checkpoint_signal, 0);
  EXPECT_EQ(parse({"--checkpoint", "c", "--checkpoint-signal", "USR1"}).checkpoint_signal, SIGUSR1);
  EXPECT_EQ(parse({"--checkpoint", "c", "--checkpoint-signal", "SIGTERM"}).checkpoint_signal, SIGTERM);
  // A run resumed with or without the signal is the same run (same
  // configuration, so the checkpoint's hash matches).
  EXPECT_EQ(parse({"--checkpoint", "c", "--checkpoint-signal", "USR2"}).to_json(), plain.to_json());
}

TEST(Options, ProfileStepsAreAWindowOutsideTheRunIdentity) {
  const qt::Options o = parse({"--profile-steps", "10:20"});
  EXPECT_EQ(o.profile_begin, 10u);
  EXPECT_EQ(o.profile_end, 20u);
  EXPECT_EQ(o.to_json(), parse({}).to_json());
}

namespace {

struct TempPath {
  std::string path = ::testing::TempDir() + "qsgd-ckpt-" +
                     ::testing::UnitTest::GetInstance()->current_test_info()->name();
  ~TempPath() { std::remove(path.c_str()); }
};

qt::CheckpointState sample_state(std::size_t n, std::size_t ranks) {
  qt::CheckpointState st;
  st.config_hash = 0x1234567890abcdefull;
  st.step = 70;
  st.epoch = 1;
  st.step_in_epoch = 6;
  st.target_reached = true;
  for (std::size_t r = 0; r < ranks; ++r)
    st.ranks.push_back({10.5 + static_cast<double>(r), 0.75 * static_cast<double>(r), 3.25, 6 + r});
  for (std::size_t i = 0; i < n; ++i) {
    st.params.push_back(0.5f * static_cast<float>(i) - 1.0f);
    st.momentum.push_back(-0.125f * static_cast<float>(i));
  }
  return st;
}

std::vector<char> bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string load_error(const std::string& path, std::uint64_t hash, std::uint64_t n, std::uint64_t ranks) {
  try {
    qt::load_checkpoint(path, hash, n, ranks);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

// Durable replacement (qsgd/support/durable_file.hpp): every writer gets
// its own temporary name, a save leaves nothing but the checkpoint in its
// directory, and a checkpoint whose directory is gone fails naming the path
// without leaving a temporary file behind.
TEST(Checkpoint, SavesThroughAUniqueTemporaryAndLeavesNothingElse) {
  const std::string dir = ::testing::TempDir() + "qsgd-durable-" + std::to_string(::getpid());
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  const std::string path = dir + "/run.ckpt";
  const std::string a = qsgd::support::temporary_name(path), b = qsgd::support::temporary_name(path);
  EXPECT_NE(a, b);
  EXPECT_EQ(a.rfind(path + ".tmp.", 0), 0u) << a;
  EXPECT_EQ(qsgd::support::directory_of(path), dir);
  EXPECT_EQ(qsgd::support::directory_of("run.ckpt"), ".");
  EXPECT_EQ(qsgd::support::directory_of("/run.ckpt"), "/");
  const qt::CheckpointState st = sample_state(9, 3);
  qt::save_checkpoint(path, st);
  qt::save_checkpoint(path, st);  // replaces the first
  std::vector<std::string> names;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (const dirent* e = ::readdir(d))
      if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") names.push_back(e->d_name);
    ::closedir(d);
  }
  EXPECT_EQ(names, std::vector<std::string>{"run.ckpt"});
  EXPECT_EQ(qt::load_checkpoint(path, st.config_hash, 9, 3).step, st.step);
  std::remove(path.c_str());
  ASSERT_EQ(::rmdir(dir.c_str()), 0);
  try {
    qt::save_checkpoint(path, st);
    ADD_FAILURE() << "saved into a directory that does not exist";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot create " + path + ".tmp."), std::string::npos) << e.what();
  }
  // A rename that fails (the target is a non-empty directory) removes the temporary file.
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(::mkdir(path.c_str(), 0700), 0);
  const std::string keep = path + "/x";
  std::FILE* f = std::fopen(keep.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::fclose(f);
  try {
    qt::save_checkpoint(path, st);
    ADD_FAILURE() << "renamed over a non-empty directory";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("checkpoint: cannot rename " + path + ".tmp."), std::string::npos)
        << e.what();
  }
  names.clear();
  if (DIR* d = ::opendir(dir.c_str())) {
    while (const dirent* e = ::readdir(d))
      if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") names.push_back(e->d_name);
    ::closedir(d);
  }
  EXPECT_EQ(names, std::vector<std::string>{"run.ckpt"});  // the directory in the way, no temporary file
  std::remove(keep.c_str());
  ::rmdir(path.c_str());
  ::rmdir(dir.c_str());
}

TEST(Checkpoint, RoundTripsEveryFieldAndEveryRanksTotals) {
  const TempPath f;
  const auto st = sample_state(9, 3);
  qt::save_checkpoint(f.path, st);
  EXPECT_EQ(bytes_of(f.path).size(), 72u + 3 * 32 + 9 * 8 + 4);  // the layout of checkpoint.hpp
  const auto back = qt::load_checkpoint(f.path, st.config_hash, 9, 3);
  EXPECT_EQ(back.step, st.step);
  EXPECT_EQ(back.epoch, st.epoch);
  EXPECT_EQ(back.step_in_epoch, st.step_in_epoch);
  EXPECT_TRUE(back.target_reached);
  ASSERT_EQ(back.ranks.size(), 3u);
  for (std::size_t r = 0; r < 3; ++r) {
    EXPECT_EQ(back.ranks[r].train_time, st.ranks[r].train_time);
    EXPECT_EQ(back.ranks[r].epoch_time, st.ranks[r].epoch_time);
    EXPECT_EQ(back.ranks[r].loss_sum, st.ranks[r].loss_sum);
    EXPECT_EQ(back.ranks[r].loss_n, st.ranks[r].loss_n);
  }
  EXPECT_EQ(back.params, st.params);
  EXPECT_EQ(back.momentum, st.momentum);
}

TEST(Checkpoint, TargetNotReachedRoundTrips) {
  const TempPath f;
  auto st = sample_state(2, 1);
  st.target_reached = false;
  qt::save_checkpoint(f.path, st);
  EXPECT_FALSE(qt::load_checkpoint(f.path, st.config_hash, 2, 1).target_reached);
}

TEST(Checkpoint, AWrongSizeIsRefusedBeforeTheBodyIsRead) {
  const TempPath f;
  const auto st = sample_state(5, 2);
  qt::save_checkpoint(f.path, st);
  std::ofstream(f.path, std::ios::binary | std::ios::app).put('x');  // one byte appended
  EXPECT_NE(load_error(f.path, st.config_hash, 5, 2).find("has the wrong size"), std::string::npos);
}

TEST(Checkpoint, EachMismatchIsNamed) {
  const TempPath f;
  const auto st = sample_state(5, 2);
  qt::save_checkpoint(f.path, st);
  EXPECT_NE(load_error(f.path, st.config_hash + 1, 5, 2).find("another configuration"), std::string::npos);
  EXPECT_NE(load_error(f.path, st.config_hash, 6, 2).find("holds 5 parameters, the model has 6"), std::string::npos);
  EXPECT_NE(load_error(f.path, st.config_hash, 5, 4).find("written by 2 ranks, this run has 4"), std::string::npos);
  EXPECT_NE(load_error(f.path + ".missing", st.config_hash, 5, 2).find("cannot open"), std::string::npos);
}

TEST(Checkpoint, AnOlderFormatVersionIsRefusedByName) {
  const TempPath f;
  qt::save_checkpoint(f.path, sample_state(5, 2));
  auto b = bytes_of(f.path);
  b[8] = 1;  // the version word: a version-1 file (no per-rank totals)
  std::ofstream(f.path, std::ios::binary).write(b.data(), static_cast<std::streamsize>(b.size()));
  EXPECT_NE(load_error(f.path, 0x1234567890abcdefull, 5, 2).find("has format version 1 (this build reads version 4)"),
            std::string::npos);
}

// Error feedback: every rank's state goes in, each rank reads its own back,
// ef21's shared mean with it; a run with other error feedback is refused.
TEST(Checkpoint, ErrorFeedbackStatesRoundTripPerRank) {
  const TempPath f;
  auto st = sample_state(4, 3);
  st.feedback = static_cast<std::uint32_t>(qsgd::Feedback::ef21);
  for (std::size_t i = 0; i < 3 * 4; ++i) st.feedback_state.push_back(0.25f * static_cast<float>(i) - 2.0f);
  st.feedback_mean = {1.5f, -0.5f, 0.0f, 8.0f};
  qt::save_checkpoint(f.path, st);
  EXPECT_EQ(bytes_of(f.path).size(), 72u + 3 * 32 + 4 * 8 + 3 * 4 * 4 + 4 * 4 + 4);
  for (std::uint64_t r = 0; r < 3; ++r) {
    const auto back = qt::load_checkpoint(f.path, st.config_hash, 4, 3, st.feedback, r);
    EXPECT_EQ(back.feedback, st.feedback);
    EXPECT_EQ(back.feedback_state, std::vector<float>(st.feedback_state.begin() + static_cast<long>(4 * r),
                                                      st.feedback_state.begin() + static_cast<long>(4 * r + 4)));
    EXPECT_EQ(back.feedback_mean, st.feedback_mean);
    EXPECT_EQ(back.params, st.params);
  }
  std::string why;
  try {
    qt::load_checkpoint(f.path, st.config_hash, 4, 3, static_cast<std::uint32_t>(qsgd::Feedback::ef), 0);
  } catch (const std::runtime_error& e) {
    why = e.what();
  }
  EXPECT_NE(why.find("written with error feedback 3, this run uses 1"), std::string::npos) << why;
  EXPECT_NE(load_error(f.path, st.config_hash, 4, 3).find("written with error feedback 3, this run uses 0"),
            std::string::npos);
}

// The compressed exchange's state (powersgd's Qs) goes in after the error
// feedback section and comes back whole on every rank; a run expecting
// another size is refused, naming it.
TEST(Checkpoint, ExchangeStateRoundTrips) {
  const TempPath f;
  auto st = sample_state(4, 2);
  st.feedback = static_cast<std::uint32_t>(qsgd::Feedback::ef_unscaled);
  for (std::size_t i = 0; i < 2 * 4; ++i) st.feedback_state.push_back(static_cast<float>(i));
  st.exchange_state = {0.5f, -1.25f, 3.0f};
  qt::save_checkpoint(f.path, st);
  EXPECT_EQ(bytes_of(f.path).size(), 72u + 2 * 32 + 4 * 8 + 2 * 4 * 4 + 3 * 4 + 4);
  const auto back = qt::load_checkpoint(f.path, st.config_hash, 4, 2, st.feedback, 1, 3);
  EXPECT_EQ(back.exchange_state, st.exchange_state);
  EXPECT_EQ(back.feedback_state, std::vector<float>({4, 5, 6, 7}));
  std::string why;
  try {
    qt::load_checkpoint(f.path, st.config_hash, 4, 2, st.feedback, 0, 5);
  } catch (const std::runtime_error& e) {
    why = e.what();
  }
  EXPECT_NE(why.find("holds 3 values of exchange state (powersgd's Qs), this run has 5"), std::string::npos) << why;
}

TEST(Checkpoint, AFlippedBitFailsTheChecksum) {
  const TempPath f;
  const auto st = sample_state(5, 2);
  qt::save_checkpoint(f.path, st);
  auto b = bytes_of(f.path);
  b[72 + 8] ^= 0x10;  // rank 0's epoch time
  std::ofstream(f.path, std::ios::binary).write(b.data(), static_cast<std::streamsize>(b.size()));
  EXPECT_NE(load_error(f.path, st.config_hash, 5, 2).find("fails its checksum"), std::string::npos);
}

// Traces of schema 2 written before grad_norm existed (the committed
// reference runs, the DDP yardstick's) still load, to resume or rewrite:
// their steps read as "not measured" (NaN), and a rewrite stores that.
TEST(Trace, AStepFieldAddedLaterIsNaNWhereATraceLacksIt) {
  TempPath f;
  qsgd::trace::StepRecord r;
  r.step = 0;
  r.loss = 2.5;
  r.grad_norm = 1.25;
  {
    qsgd::trace::TraceWriter w(f.path, 1, {{"schema", "2"}}, false);
    w.add_step({r});
    r.step = 1;
    w.add_step({r});
    w.flush();
  }
  const auto read_norms = [&] {
    std::vector<double> v(2, -1.0);
    const hid_t file = H5Fopen(f.path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    const hid_t d = H5Dopen2(file, "steps/grad_norm", H5P_DEFAULT);
    EXPECT_GE(d, 0) << "no steps/grad_norm in " << f.path;
    if (d >= 0) {
      H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data());
      H5Dclose(d);
    }
    H5Fclose(file);
    return v;
  };
  EXPECT_EQ(read_norms(), (std::vector<double>{1.25, 1.25}));
  {  // as an older trace: the dataset absent (which also breaks the seal)
    const hid_t file = H5Fopen(f.path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(H5Ldelete(file, "steps/grad_norm", H5P_DEFAULT), 0);
    H5Fclose(file);
  }
  qsgd::trace::TraceWriter w(f.path, 1, {{"schema", "2"}}, true, qsgd::trace::Check::structure_only);
  EXPECT_EQ(w.steps(), 2);
  w.flush();
  const auto v = read_norms();
  EXPECT_TRUE(std::isnan(v[0]) && std::isnan(v[1])) << v[0] << ", " << v[1];
}

// ---- the trace's journal (train/include/qsgd/train/trace.hpp) ----
namespace {

namespace qtr = qsgd::trace;

// A trace at `path` of 2 ranks: steps [0, first) in the file (the first
// flush writes the file), then one journal record per entry of `later`
// (that many steps each).
struct JournalTrace {
  TempPath f;
  std::string journal;
  explicit JournalTrace(const std::string& tag = "") {
    f.path += tag;
    journal = qtr::journal_path(f.path);
    std::remove(f.path.c_str());  // what a killed run of this test left
    std::remove(journal.c_str());
  }
  ~JournalTrace() { std::remove(journal.c_str()); }
  static std::vector<qtr::StepRecord> row(std::int64_t step) {
    std::vector<qtr::StepRecord> r(2);
    for (int k = 0; k < 2; ++k) {
      r[k].step = step;
      r[k].loss = 1.0 + static_cast<double>(step) + 0.5 * k;
      r[k].buckets = 2;
      r[k].bucket_posted[1] = 0.25 * static_cast<double>(step);
      r[k].wire_bytes = 1000 + static_cast<std::uint64_t>(step);
    }
    return r;
  }
  void write(int first, const std::vector<int>& later) {
    qtr::TraceWriter w(f.path, 2, {{"label", "journal"}}, false);
    std::int64_t s = 0;
    for (; s < first; ++s) w.add_step(row(s));
    w.flush();
    for (int n : later) {
      for (int i = 0; i < n; ++i, ++s) w.add_step(row(s));
      w.flush();
    }
  }
  std::vector<qtr::StepRecord> load_steps() {  // as a resume reads them: the steps' first rank
    qtr::TraceWriter w(f.path, 2, {{"label", "resume"}}, true);
    loaded_journal_steps = w.journal_steps();
    return std::vector<qtr::StepRecord>(static_cast<std::size_t>(w.steps()));
  }
  std::int64_t loaded_journal_steps = -1;
  std::string load_error() {
    try {
      qtr::TraceWriter w(f.path, 2, {{"label", "resume"}}, true);
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "";
  }
};

void write_bytes(const std::string& path, const std::vector<char>& b) {
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(b.data(), static_cast<std::streamsize>(b.size()));
}

}  // namespace

// A flush after the first appends to the journal and leaves the file alone;
// a resume folds the journal in; merge writes one file holding every step.
TEST(TraceJournal, FlushesAppendAndResumeAndMergeFoldThemIn) {
  JournalTrace t;
  t.write(3, {2, 4});
  const auto file_before = bytes_of(t.f.path);
  const auto c = qtr::inspect(t.f.path);
  EXPECT_EQ(c.file_steps, 3);
  EXPECT_EQ(c.journal_steps, 6);
  t.load_steps();
  EXPECT_EQ(t.loaded_journal_steps, 6);
  {
    qtr::TraceWriter w(t.f.path, 2, {{"label", "resume"}}, true);
    EXPECT_EQ(w.steps(), 9);
  }
  EXPECT_EQ(bytes_of(t.f.path), file_before) << "loading changed the file";
  EXPECT_EQ(qtr::merge_journal(t.f.path), 6);
  EXPECT_FALSE(std::ifstream(t.journal).good()) << "merge left " << t.journal;
  const auto m = qtr::inspect(t.f.path);
  EXPECT_EQ(m.file_steps, 9);
  EXPECT_EQ(m.journal_steps, 0);
  // Every step's fields came through the journal: wire bytes of step 8.
  const hid_t file = H5Fopen(t.f.path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  std::vector<std::uint64_t> wire(18);
  std::vector<double> posted(18 * 2);
  const hid_t d = H5Dopen2(file, "steps/wire_bytes", H5P_DEFAULT);
  const hid_t p = H5Dopen2(file, "buckets/posted", H5P_DEFAULT);
  ASSERT_GE(d, 0);
  ASSERT_GE(p, 0);
  H5Dread(d, H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, wire.data());
  H5Dread(p, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, posted.data());
  H5Dclose(d);
  H5Dclose(p);
  H5Fclose(file);
  EXPECT_EQ(wire[16], 1008u);
  EXPECT_EQ(posted[(8 * 2 + 1) * 2 + 1], 2.0);  // step 8, rank 1, bucket 1
}

// Attributes set after the file was last written (a run's final ones) come
// back through the journal when it is merged.
TEST(TraceJournal, MergeKeepsAttributesSetAfterTheLastRewrite) {
  JournalTrace t;
  {
    qtr::TraceWriter w(t.f.path, 2, {{"label", "journal"}}, false);
    w.add_step(JournalTrace::row(0));
    w.flush();
    w.add_step(JournalTrace::row(1));
    w.set_attribute("note", "set later");
    w.flush();
  }
  EXPECT_EQ(qtr::merge_journal(t.f.path), 1);
  const hid_t file = H5Fopen(t.f.path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  EXPECT_GT(H5Aexists(file, "note"), 0) << "the attribute set after the last rewrite is lost";
  EXPECT_GT(H5Aexists(file, "label"), 0);
  H5Fclose(file);
}

// A crash inside an append leaves a record cut short at the end: ignored,
// with the records before it.
TEST(TraceJournal, ARecordCutShortAtTheEndIsIgnored) {
  JournalTrace t;
  t.write(1, {2, 3});
  auto j = bytes_of(t.journal);
  j.resize(j.size() - 5);
  write_bytes(t.journal, j);
  t.load_steps();
  EXPECT_EQ(t.loaded_journal_steps, 2);
}

// Damage followed by more records is not a crash's: refused, naming it,
// whether in a record's payload, its length or its frame's own CRC (only
// that CRC tells a frame damaged in place from one a crash cut short).
TEST(TraceJournal, ADamagedRecordBeforeOthersIsRefused) {
  for (const std::size_t byte : {std::size_t{64 + 12 + 20}, std::size_t{64 + 7}, std::size_t{64 + 8}}) {
    JournalTrace t;
    t.write(1, {2, 3});
    auto j = bytes_of(t.journal);
    j[byte] ^= byte == 64 + 7 ? 0x40 : 0x04;  // record 0's payload, its length's top byte, its frame CRC
    write_bytes(t.journal, j);
    const std::string why = t.load_error();
    EXPECT_NE(why.find("record 0 (byte 64) is damaged (valid records follow it)"), std::string::npos)
        << "byte " << byte << ": " << why;
  }
}

// What a power loss can leave after the last synced record (zeros, here):
// no valid record follows, so it is ignored with nothing else lost.
TEST(TraceJournal, BytesAfterTheLastRecordWithNoRecordAfterThemAreIgnored) {
  JournalTrace t;
  t.write(1, {2, 3});
  auto j = bytes_of(t.journal);
  j.resize(j.size() + 100, 0);
  write_bytes(t.journal, j);
  t.load_steps();
  EXPECT_EQ(t.loaded_journal_steps, 5);
}

// The file is rewritten when the journal reaches 4x it: after enough
// flushes the file holds more than the first flush's steps, and the
// journal only what came after the last rewrite.
TEST(TraceJournal, TheFileIsRewrittenWhenTheJournalOutgrowsIt) {
  JournalTrace t;
  t.write(1, std::vector<int>(400, 20));
  const auto c = qtr::inspect(t.f.path);
  EXPECT_GT(c.file_steps, 1) << "8,000 steps in 400 flushes never rewrote the file";
  EXPECT_EQ(c.file_steps + c.journal_steps, 1 + 400 * 20);
  struct stat file {}, journal {};
  ASSERT_EQ(::stat(t.f.path.c_str(), &file), 0);
  if (::stat(t.journal.c_str(), &journal) == 0) {
    EXPECT_LE(journal.st_size, 4 * file.st_size + 1024 * 1024) << "the journal outgrew 4x the file by more than a flush";
  }
}

TEST(TraceJournal, ADamagedHeaderIsRefused) {
  JournalTrace t;
  t.write(1, {2});
  auto j = bytes_of(t.journal);
  j[20] ^= 0x01;  // the bound file's size
  write_bytes(t.journal, j);
  const std::string why = t.load_error();
  EXPECT_NE(why.find("its header fails its checksum"), std::string::npos) << why;
}

// A journal bound to another file (a crash between a rewrite and the
// journal's restart leaves the old one) holds nothing the file lacks.
TEST(TraceJournal, AJournalOfAnotherFileIsIgnored) {
  JournalTrace a("-a"), b("-b");
  a.write(2, {3});
  b.write(4, {1});
  write_bytes(b.journal, bytes_of(a.journal));
  b.load_steps();
  EXPECT_EQ(b.loaded_journal_steps, 0);
  EXPECT_EQ(qtr::merge_journal(b.f.path), 0);
  EXPECT_FALSE(std::ifstream(b.journal).good()) << "merge kept a journal bound to another file";
  EXPECT_EQ(qtr::inspect(b.f.path).file_steps, 4);
}

// A record claiming more steps than its bytes hold is refused before
// anything is sized from the claim.
TEST(TraceJournal, AClaimBeyondTheRecordIsRefused) {
  JournalTrace t;
  t.write(1, {2});
  auto j = bytes_of(t.journal);
  // The step count (the payload's first u32) set to 2^31, the record's CRC
  // recomputed (a bad CRC on the last record reads as a torn append).
  const std::uint32_t huge = 1u << 31;
  std::memcpy(&j[64 + 12], &huge, 4);
  std::uint32_t payload = 0;
  std::memcpy(&payload, &j[64 + 4], 4);
  const std::uint32_t crc =
      qsgd::detail::crc32c_bytes_host(reinterpret_cast<const unsigned char*>(&j[64 + 12]), payload);
  std::memcpy(&j[64 + 12 + payload], &crc, 4);
  write_bytes(t.journal, j);
  const std::string why = t.load_error();
  EXPECT_NE(why.find("claims 2147483648 steps, more than its"), std::string::npos) << why;
}
