#pragma once
// Per-step, per-rank traces of a training run, in HDF5 (schema in
// docs/traces.md). Rank 0 owns the file; other ranks send their records to it.
//
// Cost and crash safety: the file is never open while the run goes on. A
// flush appends what is new since the last one (steps, epochs, evaluations,
// changed attributes) as one checksummed record to <path>.journal, so that a
// flush costs what it adds. When the journal has grown to
// compaction_factor x the trace's size (and at the first flush of every
// writer, and at close()), the whole trace is written to a temporary file
// beside <path> (a name no other writer uses), synced, renamed over <path>
// and the directory synced (qsgd/support/durable_file.hpp), and the journal
// starts again, bound to that file: the trace's sizes grow geometrically, so
// the bytes written stay a small multiple of the final size. A run killed at
// any moment, or a node that loses power, leaves a complete <path>, readable
// by h5dump, and a journal holding every later step up to its last flush
// (up to its last synced flush after a power loss): a resume, or
// `qsgd-trace merge <path>`, folds the journal into the file. A journal
// bound to another file (a crash between the rename and the journal's
// restart) holds nothing the file lacks and is ignored.

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace qsgd::trace {

constexpr int schema_version = 2;
constexpr int max_buckets = 32;  // buckets whose times a step record keeps
// Limits of the reader (resume), checked against a file's dataspaces before
// anything is sized from them: rows of /steps, /evals, /epochs, and step
// records (steps x ranks, about 900 bytes each in memory).
constexpr unsigned long long max_trace_rows = 1ull << 24;
constexpr unsigned long long max_trace_records = 1ull << 22;

// One rank's timings for one step (seconds) and what it sent. Plain data:
// ranks send it to the writer as bytes. docs/traces.md has every definition.
struct StepRecord {
  std::int64_t step = 0;
  std::int32_t epoch = 0;
  std::int32_t buckets = 0;        // buckets exchanged (times kept for the first max_buckets)
  double forward = 0, backward = 0, quantize = 0, encode = 0, requantize = 0, decode = 0, update = 0;
  double comm_exposed = 0;         // blocked in MPI waits
  double comm_hidden = 0;          // in flight outside waits (network intervals - comm_exposed)
  double step_time = 0;
  std::uint64_t wire_bytes = 0;    // bytes this rank received in the step
  double bits_per_dim = 0;         // 8 * compressed bytes / gradient elements
  double loss = 0;
  double grad_norm = 0;            // L2 norm of the averaged gradient before clipping; NaN without --clip-norm
  // Per bucket, seconds since the step began: start() called, first byte
  // posted, completion observed (NaN when nothing was sent).
  double bucket_start[max_buckets] = {}, bucket_posted[max_buckets] = {}, bucket_done[max_buckets] = {};
};

// One evaluation of the test set during training.
struct EvalRecord {
  std::int64_t step = 0;      // global steps done
  std::int32_t epoch = 0;
  double train_time = 0;      // training wall time so far (evaluations excluded), max over ranks
  double test_loss = 0;
  double test_accuracy = 0;
};

struct EpochRecord {
  std::int32_t epoch = 0;
  double epoch_time = 0;     // seconds, max over ranks
  double train_loss = 0;     // mean over the epoch's steps and ranks
  double test_loss = 0;
  double test_accuracy = 0;  // fraction in [0, 1]
  std::int64_t steps = 0;
};

// Text attributes of the root group: provenance and configuration.
using Attributes = std::map<std::string, std::string>;

// One start of a run: the first, or a resume (--resume, a requeued Slurm
// task). The root attributes describe the latest attempt; /attempts/<i>
// keeps attempt i's as they were when it started (host, date, job, build),
// with the global step it started from, so that steps run on other nodes or
// by another job can be told apart.
struct Attempt {
  std::int64_t first_step = 0;
  Attributes attrs;
};
// Limits of the reader for /attempts: attempts, attributes per attempt, and
// bytes per attribute value.
constexpr unsigned long long max_attempts = 1ull << 12;
constexpr unsigned long long max_attempt_attrs = 256;
constexpr unsigned long long max_attr_bytes = 1ull << 20;

// Every trace file starts with a user block of checksum_block_bytes that
// HDF5 skips: a magic string, the file's size and the CRC32C of everything
// after the block (docs/traces.md). The writer seals each file it writes;
// a resume verifies the seal before HDF5 parses a byte of the file, so a
// truncated, damaged or foreign file is refused with a message naming it
// instead of reaching HDF5's parser (which crashes on some corrupt files).
constexpr std::size_t checksum_block_bytes = 512;
// Writes the checksum block of a file HDF5 created with a user block of
// checksum_block_bytes (H5Pset_userblock), and syncs it to disk.
// Returns what it wrote: the file's size and CRC.
struct Seal {
  std::uint64_t size = 0;
  std::uint32_t crc = 0;
};
Seal seal(const std::string& path);
// Checks a file's checksum block against its content, reading it in pieces
// of bounded size; throws std::runtime_error ("trace: ...") naming the file.
Seal verify_seal(const std::string& path);

// What a resume checks before loading: the seal, then the structure; or the
// structure alone (tests and fuzzing of the reader behind the seal, which is
// what a file forged with a valid seal reaches).
enum class Check { seal_and_structure, structure_only };

// The journal grows to this many times the trace file before a flush
// rewrites the file (TraceWriter, below): the file's successive sizes grow
// about (1 + factor)-fold, so the rewrites before the last write about
// 1 / factor of the final size together, the last about once (twice where
// the run ends just after a rewrite), and the journal about once more.
constexpr std::uint64_t compaction_factor = 4;
// The journal of a trace file: <path>.journal.
std::string journal_path(const std::string& path);
// Folds a trace's journal into the file and removes the journal (`qsgd-trace
// merge`); returns the steps the journal added. Nothing to do (0) without a
// journal or with one bound to another file (then removed). Throws
// std::runtime_error naming the file on a damaged file or journal.
std::int64_t merge_journal(const std::string& path);
// What a trace holds: the steps of its file and of its journal (0 without
// one, or with one bound to another file). Reads, changes nothing.
struct Contents {
  std::int64_t file_steps = 0, journal_steps = 0;
};
Contents inspect(const std::string& path);

class TraceWriter {
 public:
  // Creates nothing on disk until the first flush. Refuses (qsgd-style
  // std::runtime_error naming the path) to overwrite an existing file unless
  // `resume` is set, in which case the records already in it are loaded,
  // its journal's included.
  TraceWriter(std::string path, int ranks, Attributes attrs, bool resume,
              Check check = Check::seal_and_structure);

  void add_step(const std::vector<StepRecord>& per_rank);  // one record per rank
  void add_epoch(const EpochRecord& e);
  void add_eval(const EvalRecord& e);
  void set_attribute(const std::string& key, const std::string& value) { attrs_[key] = value; }
  // Puts what was added since the last flush on disk (above): the journal,
  // or a new compacted file. Sync::durable also syncs the journal to the
  // device (before a checkpoint); Sync::process leaves it in the page cache,
  // where it survives the process but not the node.
  enum class Sync { process, durable };
  void flush(Sync sync = Sync::process);
  // Writes the whole trace into <path> and removes the journal: one file,
  // as a finished or stopped run leaves it.
  void close();
  // Keeps only what a resumed run does not redo: steps below `steps_done`
  // (and the evaluations after them) and epochs below `epochs_done`; this
  // attempt starts at `steps_done`.
  void truncate(std::int64_t steps_done, std::int32_t epochs_done);
  // Every attempt, this one last (earlier ones as loaded from the file; a
  // file written before /attempts existed contributes none).
  const std::vector<Attempt>& attempts() const { return attempts_; }

  std::int64_t steps() const { return static_cast<std::int64_t>(steps_.size()); }
  // Steps the journal added when this writer loaded the trace (resume).
  std::int64_t journal_steps() const { return journal_steps_; }
  std::int64_t last_step() const { return steps_.empty() ? -1 : steps_.back().front().step; }
  const std::string& path() const { return path_; }

 private:
  friend std::int64_t merge_journal(const std::string& path);
  friend Contents inspect(const std::string& path);
  struct Merging {};
  // The trace as it is, to fold its journal in: ranks and root attributes
  // from the file, no new attempt.
  TraceWriter(std::string path, Merging);
  void write_file(const std::string& tmp) const;  // the whole trace into tmp (compact: then sealed and renamed)
  void compact();                                // the whole trace into <path>; the journal starts again
  void append_journal(Sync sync);                // what is new since the last flush, as one record
  void load(Check check);
  void load_journal(Check check);                // folds <path>.journal into what load() read
  void apply_journal_record(const unsigned char* p, std::uint32_t payload, const std::string& where);
  // hid_t, hsize_t; file_bytes: the file's size, which bounds what it can hold
  void load_buckets(long long file, unsigned long long rows, unsigned long long cols, unsigned long long file_bytes);
  void load_evals(long long file, unsigned long long file_bytes);
  void load_attempts(long long file, unsigned long long file_bytes);
  std::string path_;
  int ranks_;
  Attributes attrs_;
  std::vector<std::vector<StepRecord>> steps_;
  std::vector<EpochRecord> epochs_;
  std::vector<EvalRecord> evals_;
  std::vector<Attempt> attempts_;
  // What <path> and its journal hold: rows of each table, the attributes as
  // last written, the file's size and CRC (the journal is bound to them).
  bool compacted_ = false;  // this writer has written <path> (a resume first rewrites it)
  std::size_t flushed_steps_ = 0, flushed_epochs_ = 0, flushed_evals_ = 0;
  Attributes flushed_attrs_;
  std::uint64_t file_bytes_ = 0, journal_bytes_ = 0;
  std::uint32_t file_crc_ = 0;
  std::int64_t journal_steps_ = 0;
  bool merging_ = false;  // the journal's attributes update attrs_ (merge), else the new attempt's stand
};

// HDF5 library version, e.g. "1.10.8".
std::string hdf5_version();

}  // namespace qsgd::trace
