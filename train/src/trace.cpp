#include "qsgd/train/trace.hpp"

#include <hdf5.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <memory>
#include <stdexcept>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "qsgd/support/durable_file.hpp"

#include "qsgd/kernels/crc32c.hpp"

namespace qsgd::trace {
namespace {

[[noreturn]] void fail(const std::string& what) { throw std::runtime_error("trace: " + what); }

// Owns one HDF5 handle; closes it with the right call.
struct Handle {
  hid_t id;
  herr_t (*close)(hid_t);
  Handle(hid_t i, herr_t (*c)(hid_t), const std::string& what) : id(i), close(c) {
    if (id < 0) fail(what);
  }
  ~Handle() {
    if (id >= 0) close(id);
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
};

void write_string_attr(hid_t obj, const std::string& name, const std::string& value) {
  // Variable-length UTF-8 strings: h5py reads them as str (fixed-length ones come back as bytes).
  Handle type(H5Tcopy(H5T_C_S1), H5Tclose, "string type");
  H5Tset_size(type.id, H5T_VARIABLE);
  H5Tset_cset(type.id, H5T_CSET_UTF8);
  Handle space(H5Screate(H5S_SCALAR), H5Sclose, "scalar space");
  Handle attr(H5Acreate2(obj, name.c_str(), type.id, space.id, H5P_DEFAULT, H5P_DEFAULT), H5Aclose,
              "attribute " + name);
  const char* p = value.c_str();
  if (H5Awrite(attr.id, type.id, &p) < 0) fail("writing attribute " + name);
}

void write_int_attr(hid_t obj, const std::string& name, long long value) {
  Handle space(H5Screate(H5S_SCALAR), H5Sclose, "scalar space");
  Handle attr(H5Acreate2(obj, name.c_str(), H5T_NATIVE_LLONG, space.id, H5P_DEFAULT, H5P_DEFAULT), H5Aclose,
              "attribute " + name);
  H5Awrite(attr.id, H5T_NATIVE_LLONG, &value);
}

template <class T>
hid_t native_type();
template <>
hid_t native_type<double>() { return H5T_NATIVE_DOUBLE; }
template <>
hid_t native_type<std::int64_t>() { return H5T_NATIVE_INT64; }
template <>
hid_t native_type<std::int32_t>() { return H5T_NATIVE_INT32; }
template <>
hid_t native_type<std::uint64_t>() { return H5T_NATIVE_UINT64; }

template <class T>
void write_dataset(hid_t group, const std::string& name, const std::vector<T>& data, hsize_t rows, hsize_t cols,
                   const std::string& units, const std::string& description) {
  hsize_t dims[2] = {rows, cols};
  Handle space(H5Screate_simple(cols == 0 ? 1 : 2, dims, nullptr), H5Sclose, "dataspace " + name);
  Handle dset(H5Dcreate2(group, name.c_str(), native_type<T>(), space.id, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
              H5Dclose, "dataset " + name);
  if (!data.empty() && H5Dwrite(dset.id, native_type<T>(), H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data()) < 0)
    fail("writing dataset " + name);
  write_string_attr(dset.id, "units", units);
  write_string_attr(dset.id, "description", description);
}

// What a dataset of untrusted structure must be before HDF5 reads its data:
// of the type the writer gave it (class, element size and, for integers,
// sign), and, where its layout is compact (data kept in the object header,
// which the writer never uses), holding the bytes its dataspace claims:
// HDF5 1.10.8's H5Dread copies a compact dataset's buffer without checking
// its size, and a header that says 0 bytes for a dataspace of elements
// crashes it (fuzz/regressions: trace-hdf5-compact-segv).
// `what` names the dataset and its file.
template <class T>
void check_structure(hid_t dset, const std::string& what, hsize_t count) {
  Handle type(H5Dget_type(dset), H5Tclose, "datatype of " + what);
  const hid_t want = native_type<T>();
  const H5T_class_t cls = H5Tget_class(want);
  const std::size_t size = H5Tget_size(type.id);
  if (H5Tget_class(type.id) != cls || size != sizeof(T) ||
      (cls == H5T_INTEGER && H5Tget_sign(type.id) != H5Tget_sign(want)))
    fail(what + " is not of the type the writer stores (" + std::to_string(sizeof(T)) + "-byte " +
         (cls == H5T_FLOAT ? "floats" : H5Tget_sign(want) == H5T_SGN_NONE ? "unsigned integers" : "integers") + ")");
  Handle dcpl(H5Dget_create_plist(dset), H5Pclose, "creation properties of " + what);
  const H5D_layout_t layout = H5Pget_layout(dcpl.id);
  if (layout == H5D_LAYOUT_ERROR) fail("cannot read the layout of " + what);
  if (layout != H5D_COMPACT) return;
  const hsize_t stored = H5Dget_storage_size(dset);
  if (stored != count * size)
    fail(what + " keeps " + std::to_string(stored) + " bytes for " + std::to_string(count) + " elements of " +
         std::to_string(size) + " bytes");
}

// "PATH: dataset /GROUP/NAME", for messages.
std::string dataset_in(hid_t group, const std::string& name, const std::string& path) {
  char group_name[256] = {};
  if (H5Iget_name(group, group_name, sizeof group_name) < 0) group_name[0] = 0;
  return path + ": dataset " + group_name + (std::string(group_name) == "/" ? "" : "/") + name;
}

template <class T>
std::vector<T> read_dataset(hid_t group, const std::string& name, hsize_t expect, const std::string& path) {
  const std::string what = dataset_in(group, name, path);
  Handle dset(H5Dopen2(group, name.c_str(), H5P_DEFAULT), H5Dclose, what + " is missing");
  Handle space(H5Dget_space(dset.id), H5Sclose, "dataspace of " + what);
  const hssize_t count = H5Sget_simple_extent_npoints(space.id);
  if (count < 0 || static_cast<hsize_t>(count) != expect) fail(what + " has an unexpected size");
  check_structure<T>(dset.id, what, expect);
  std::vector<T> out(expect);
  if (expect > 0 && H5Dread(dset.id, native_type<T>(), H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()) < 0)
    fail("reading " + what);
  return out;
}

// Element count of a dataset of untrusted size, checked against `limit`
// before anything is sized from it.
hsize_t extent_of(hid_t group, const std::string& name, hsize_t limit, const std::string& path) {
  const std::string what = dataset_in(group, name, path);
  Handle dset(H5Dopen2(group, name.c_str(), H5P_DEFAULT), H5Dclose, what + " is missing");
  Handle space(H5Dget_space(dset.id), H5Sclose, "dataspace of " + what);
  const hssize_t count = H5Sget_simple_extent_npoints(space.id);
  if (count < 0) fail("cannot read the dataspace of " + what);
  if (static_cast<hsize_t>(count) > limit)
    fail(what + " has " + std::to_string(count) + " rows, more than the reader's limit of " + std::to_string(limit));
  return static_cast<hsize_t>(count);
}

// Memory is bounded by the file, not by what its dataspaces claim: `rows`
// rows of at least `bytes_each` bytes (as the writer stores them, contiguous
// and uncompressed) must fit in the file's `file_bytes`. A chunked dataset
// that was never written claims rows it does not store.
void within_file(hsize_t rows, hsize_t bytes_each, unsigned long long file_bytes, const std::string& table,
                 const std::string& path) {
  if (rows > file_bytes / bytes_each)
    fail(path + ": " + table + " claims " + std::to_string(rows) + " rows of at least " +
         std::to_string(bytes_each) + " bytes each, more than its " + std::to_string(file_bytes) +
         " bytes can hold");
}

// Step fields: name, units, description, member, and whether traces of the
// same schema may lack it (added later; read as NaN, "not measured").
using StepMember = double StepRecord::*;  // an alias: nvcc's host pass warns on the bare declarator
struct DoubleField {
  const char* name;
  const char* units;
  const char* description;
  StepMember member;
  bool optional = false;
};
const DoubleField step_fields[] = {
    {"forward", "s", "forward pass", &StepRecord::forward},
    {"backward", "s", "backward pass (compute only)", &StepRecord::backward},
    {"quantize", "s", "stochastic quantization of gradients", &StepRecord::quantize},
    {"encode", "s", "encoding into messages", &StepRecord::encode},
    {"requantize", "s", "second-stage quantization and encoding (server, chunk owner)", &StepRecord::requantize},
    {"comm_exposed", "s", "time blocked in MPI waits: communication the step waited for", &StepRecord::comm_exposed},
    {"comm_hidden", "s",
     "in flight outside waits: union of network intervals - comm_exposed (transfers, and the coding, reductions "
     "and waiting inside them; not a bound on hidden link time: docs/traces.md)",
     &StepRecord::comm_hidden},
    {"decode", "s", "decoding, accumulation and ring additions of received data", &StepRecord::decode},
    {"update", "s", "optimizer update", &StepRecord::update},
    {"step_time", "s", "wall time of the whole step", &StepRecord::step_time},
    {"bits_per_dim", "bit", "wire bits per gradient element", &StepRecord::bits_per_dim},
    {"loss", "1", "training loss of the rank's mini-batch", &StepRecord::loss},
    {"grad_norm", "1", "L2 norm of the averaged gradient before --clip-norm (NaN: clipping off, not measured)",
     &StepRecord::grad_norm, true},
};

bool exists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}

// The checksum block: magic (16 bytes), the file's size (u64), the CRC32C of
// bytes [checksum_block_bytes, size) (u32), zeros to checksum_block_bytes.
constexpr char seal_magic[16] = {'Q', 'S', 'G', 'D', '-', 'T', 'R', 'A', 'C', 'E', '-', 'C', 'R', 'C', '3', '2'};

struct File {
  std::FILE* f;
  explicit File(std::FILE* p) : f(p) {}
  ~File() {
    if (f) std::fclose(f);
  }
  File(const File&) = delete;
  File& operator=(const File&) = delete;
};

// CRC32C of the file from checksum_block_bytes to its end, read in 64 KiB
// pieces into a buffer left uninitialized (a zeroed 1 MiB one per call cost
// more than the checksum of a small trace: page faults and a memset, a third
// of the trace fuzz harness's time); `size` gets the file's size.
std::uint32_t crc_after_block(std::FILE* f, const std::string& path, std::uint64_t& size) {
  if (std::fseek(f, static_cast<long>(checksum_block_bytes), SEEK_SET) != 0) fail("cannot seek in " + path);
  constexpr std::size_t piece = std::size_t(1) << 16;
  const std::unique_ptr<unsigned char[]> buf(new unsigned char[piece]);
  std::uint32_t crc = 0xFFFFFFFFu;
  size = checksum_block_bytes;
  for (;;) {
    const std::size_t got = std::fread(buf.get(), 1, piece, f);
    crc = qsgd::detail::crc32c_host(crc, buf.get(), got);
    size += got;
    if (got < piece) break;
  }
  if (std::ferror(f)) fail("reading " + path + " failed");
  return ~crc;
}

// ---- the journal (docs/traces.md, "Journal") ----
// Little-endian, as the writer's CPU stores it. Header: magic (16 bytes),
// the trace file's size (u64) and CRC (u32) as its checksum block states
// them, ranks (u32), the rows of /steps, /epochs and /evals the file holds
// (u64 each), CRC32C of those 56 bytes (u32), zeros to 64 bytes. Then one
// record per flush: record_magic (u32), payload bytes (u32), CRC32C of those
// 8 bytes (u32), the payload, CRC32C of the payload (u32). Payload: counts of steps, epochs,
// evaluations and attributes (u32 each), then each step's K records, each
// epoch, each evaluation, each attribute (key, value).
constexpr char journal_magic[16] = {'Q', 'S', 'G', 'D', '-', 'T', 'R', 'A', 'C', 'E', '-', 'J', 'R', 'N', 'L', '1'};
constexpr std::size_t journal_header_bytes = 64;
constexpr std::uint32_t record_magic = 0x524A5351u;  // "QSJR"
constexpr std::size_t frame_bytes = 12;              // mark, payload bytes, CRC32C of those 8 bytes
// What one step record occupies at least: step, epoch, buckets, the fields,
// wire bytes (no bucket times).
constexpr std::size_t min_step_bytes = 8 + 4 + 4 + std::size(step_fields) * 8 + 8;

std::uint32_t crc32c(const void* p, std::size_t n) {
  return qsgd::detail::crc32c_bytes_host(static_cast<const unsigned char*>(p), n);
}

struct Out {
  std::string b;
  template <class T>
  void put(T v) {
    b.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  void put_string(const std::string& v) {
    put(static_cast<std::uint32_t>(v.size()));
    b.append(v);
  }
};

struct In {
  const unsigned char* p;
  std::size_t n, at = 0;
  const std::string& where;
  template <class T>
  T get() {
    if (n - at < sizeof(T)) fail(where + " ends inside a field");
    T v;
    std::memcpy(&v, p + at, sizeof v);
    at += sizeof v;
    return v;
  }
  std::string get_string(std::size_t limit) {
    const auto len = get<std::uint32_t>();
    if (len > limit || n - at < len) fail(where + " holds a string of " + std::to_string(len) + " bytes");
    std::string v(reinterpret_cast<const char*>(p + at), len);
    at += len;
    return v;
  }
};

void put_step(Out& o, const StepRecord& r) {
  o.put(r.step);
  o.put(r.epoch);
  o.put(r.buckets);
  for (const auto& f : step_fields) o.put(r.*(f.member));
  o.put(r.wire_bytes);
  for (int b = 0; b < std::min(std::max(r.buckets, 0), max_buckets); ++b) {
    o.put(r.bucket_start[b]);
    o.put(r.bucket_posted[b]);
    o.put(r.bucket_done[b]);
  }
}

StepRecord get_step(In& in) {
  StepRecord r;
  r.step = in.get<std::int64_t>();
  r.epoch = in.get<std::int32_t>();
  r.buckets = in.get<std::int32_t>();
  if (r.buckets < 0) fail(in.where + " holds a negative bucket count (" + std::to_string(r.buckets) + ")");
  for (const auto& f : step_fields) r.*(f.member) = in.get<double>();
  r.wire_bytes = in.get<std::uint64_t>();
  for (int b = 0; b < std::min(r.buckets, max_buckets); ++b) {
    r.bucket_start[b] = in.get<double>();
    r.bucket_posted[b] = in.get<double>();
    r.bucket_done[b] = in.get<double>();
  }
  return r;
}

struct JournalHeader {
  Seal file;
  std::uint32_t ranks = 0;
  std::uint64_t steps = 0, epochs = 0, evals = 0;
};

std::string journal_header(const JournalHeader& h) {
  Out o;
  o.b.append(journal_magic, sizeof journal_magic);
  o.put(h.file.size);
  o.put(h.file.crc);
  o.put(h.ranks);
  o.put(h.steps);
  o.put(h.epochs);
  o.put(h.evals);
  o.put(crc32c(o.b.data(), o.b.size()));
  o.b.resize(journal_header_bytes, '\0');
  return o.b;
}

// Writes all of `data` at the end of fd; false (errno set) on failure.
bool write_all(int fd, const char* data, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    data += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

// Reads exactly n bytes at the descriptor's position; false at the end of
// the file first (a torn record), throws on an error.
bool read_all(int fd, unsigned char* out, std::size_t n, const std::string& path) {
  while (n > 0) {
    const ssize_t r = ::read(fd, out, n);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) fail("reading " + path + " failed: " + std::strerror(errno));
    if (r == 0) return false;
    out += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

struct Fd {
  int fd;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

}  // namespace

Seal seal(const std::string& path) {
  File file(std::fopen(path.c_str(), "r+b"));
  if (!file.f) fail("cannot open " + path + " to seal it");
  std::uint64_t size = 0;
  const std::uint32_t crc = crc_after_block(file.f, path, size);
  unsigned char block[checksum_block_bytes] = {};
  std::memcpy(block, seal_magic, sizeof seal_magic);
  std::memcpy(block + 16, &size, 8);
  std::memcpy(block + 24, &crc, 4);
  if (std::fseek(file.f, 0, SEEK_SET) != 0 || std::fwrite(block, 1, sizeof block, file.f) != sizeof block ||
      std::fflush(file.f) != 0 || ::fsync(fileno(file.f)) != 0)
    fail("writing the checksum block of " + path + " failed");
  return {size, crc};
}

namespace {

// The size and CRC a file's checksum block states, unverified; {0, 0}
// without a block (what a journal bound to it can be checked against when
// the seal itself is not: Check::structure_only).
Seal stored_seal(const std::string& path) {
  File file(std::fopen(path.c_str(), "rb"));
  unsigned char block[checksum_block_bytes];
  if (!file.f || std::fread(block, 1, sizeof block, file.f) != sizeof block || std::memcmp(block, seal_magic, 16) != 0)
    return {};
  Seal s;
  std::memcpy(&s.size, block + 16, 8);
  std::memcpy(&s.crc, block + 24, 4);
  return s;
}

}  // namespace

Seal verify_seal(const std::string& path) {
  File file(std::fopen(path.c_str(), "rb"));
  if (!file.f) fail("cannot open " + path);
  unsigned char block[checksum_block_bytes];
  if (std::fread(block, 1, sizeof block, file.f) != sizeof block || std::memcmp(block, seal_magic, 16) != 0)
    fail(path + " has no checksum block: it is not a trace, or was written before traces had one (those cannot " +
         "be resumed), or its first " + std::to_string(checksum_block_bytes) + " bytes are damaged");
  std::uint64_t stored_size = 0, size = 0;
  std::uint32_t stored_crc = 0;
  std::memcpy(&stored_size, block + 16, 8);
  std::memcpy(&stored_crc, block + 24, 4);
  const std::uint32_t crc = crc_after_block(file.f, path, size);
  if (size != stored_size)
    fail(path + " is " + std::to_string(size) + " bytes, its checksum block says " + std::to_string(stored_size) +
         " (truncated or appended to)");
  if (crc != stored_crc) fail(path + " fails its checksum (damaged since it was written)");
  return {size, crc};
}

std::string hdf5_version() {
  unsigned maj = 0, min = 0, rel = 0;
  H5get_libversion(&maj, &min, &rel);
  return std::to_string(maj) + "." + std::to_string(min) + "." + std::to_string(rel);
}

TraceWriter::TraceWriter(std::string path, int ranks, Attributes attrs, bool resume, Check check)
    : path_(std::move(path)), ranks_(ranks), attrs_(std::move(attrs)) {
  if (ranks_ < 1) fail("rank count must be positive");
  if (exists(path_)) {
    if (!resume) fail(path_ + " exists; traces are never overwritten (choose another output or resume the run)");
    load(check);
  }
  attempts_.push_back(Attempt{0, attrs_});
}

void TraceWriter::add_step(const std::vector<StepRecord>& per_rank) {
  if (static_cast<int>(per_rank.size()) != ranks_) fail("a step needs one record per rank");
  steps_.push_back(per_rank);
}

void TraceWriter::add_epoch(const EpochRecord& e) { epochs_.push_back(e); }
void TraceWriter::add_eval(const EvalRecord& e) { evals_.push_back(e); }

void TraceWriter::truncate(std::int64_t steps_done, std::int32_t epochs_done) {
  while (!steps_.empty() && steps_.back().front().step >= steps_done) steps_.pop_back();
  while (!epochs_.empty() && epochs_.back().epoch >= epochs_done) epochs_.pop_back();
  while (!evals_.empty() && evals_.back().step > steps_done) evals_.pop_back();
  attempts_.back().first_step = steps_done;
  compacted_ = false;  // what is on disk may hold more: the next flush rewrites the file
}

namespace {

// /buckets: [step, rank, bucket] times, NaN where a step had fewer buckets.
void write_buckets(hid_t file, const std::vector<std::vector<StepRecord>>& steps, hsize_t ranks) {
  Handle g(H5Gcreate2(file, "buckets", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose, "group buckets");
  write_string_attr(g.id, "layout", "datasets are [step row, rank, bucket] in seconds since the step began");
  hsize_t nb = 0;
  for (const auto& row : steps)
    for (const auto& r : row) nb = std::max<hsize_t>(nb, static_cast<hsize_t>(std::min(r.buckets, max_buckets)));
  const hsize_t rows = steps.size();
  const hsize_t dims[3] = {rows, ranks, nb};
  using BucketMember = double (StepRecord::*)[max_buckets];
  struct Field {
    const char* name;
    BucketMember member;
    const char* description;
  };
  const Field fields[] = {
      {"start", &StepRecord::bucket_start, "the bucket's exchange started (all its gradients were in)"},
      {"posted", &StepRecord::bucket_posted, "its first bytes were posted to the network"},
      {"done", &StepRecord::bucket_done, "completion of its last network phase was observed"},
  };
  std::vector<double> buf(rows * ranks * nb);
  for (const Field& f : fields) {
    for (hsize_t i = 0; i < rows; ++i)
      for (hsize_t r = 0; r < ranks; ++r)
        for (hsize_t b = 0; b < nb; ++b) {
          const StepRecord& rec = steps[i][r];
          buf[(i * ranks + r) * nb + b] = static_cast<int>(b) < rec.buckets ? (rec.*(f.member))[b] : NAN;
        }
    Handle space(H5Screate_simple(3, dims, nullptr), H5Sclose, std::string("dataspace buckets/") + f.name);
    Handle d(H5Dcreate2(g.id, f.name, H5T_NATIVE_DOUBLE, space.id, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Dclose,
             std::string("dataset buckets/") + f.name);
    if (!buf.empty() && H5Dwrite(d.id, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()) < 0)
      fail(std::string("writing buckets/") + f.name);
    write_string_attr(d.id, "units", "s");
    write_string_attr(d.id, "description", f.description);
  }
  std::vector<std::int32_t> counts(rows * ranks);
  for (hsize_t i = 0; i < rows; ++i)
    for (hsize_t r = 0; r < ranks; ++r) counts[i * ranks + r] = steps[i][r].buckets;
  write_dataset(g.id, "count", counts, rows, ranks, "1", "buckets exchanged in the step (times kept for 32)");
}

void write_evals(hid_t file, const std::vector<EvalRecord>& evals) {
  Handle g(H5Gcreate2(file, "evals", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose, "group evals");
  const hsize_t n = evals.size();
  std::vector<std::int64_t> step(n);
  std::vector<std::int32_t> epoch(n);
  std::vector<double> tt(n), loss(n), acc(n);
  for (hsize_t i = 0; i < n; ++i) {
    step[i] = evals[i].step;
    epoch[i] = evals[i].epoch;
    tt[i] = evals[i].train_time;
    loss[i] = evals[i].test_loss;
    acc[i] = evals[i].test_accuracy;
  }
  write_dataset(g.id, "step", step, n, 0, "1", "global steps done at the evaluation");
  write_dataset(g.id, "epoch", epoch, n, 0, "1", "epoch of the evaluation");
  write_dataset(g.id, "train_time", tt, n, 0, "s", "training wall time so far, evaluations excluded, max over ranks");
  write_dataset(g.id, "test_loss", loss, n, 0, "1", "loss on the test set");
  write_dataset(g.id, "test_accuracy", acc, n, 0, "1", "fraction of the test set classified correctly");
}

// /attempts/<i>: attempt i's root attributes as it started, and first_step.
void write_attempts(hid_t file, const std::vector<Attempt>& attempts) {
  Handle g(H5Gcreate2(file, "attempts", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose, "group attempts");
  write_string_attr(g.id, "layout",
                    "one group per start of the run (the first, then each resume), named 0, 1, ...: the root "
                    "attributes as that attempt started, and first_step, the global step it started from");
  for (std::size_t i = 0; i < attempts.size(); ++i) {
    const std::string name = std::to_string(i);
    Handle a(H5Gcreate2(g.id, name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose, "group attempts/" + name);
    write_int_attr(a.id, "first_step", attempts[i].first_step);
    for (const auto& [k, v] : attempts[i].attrs) write_string_attr(a.id, k, v);
  }
}

// A string attribute of untrusted size (variable- or fixed-length).
std::string read_string_attr(hid_t attr, const std::string& what, const std::string& path) {
  Handle type(H5Aget_type(attr), H5Tclose, "type of " + what + " in " + path);
  if (H5Tget_class(type.id) != H5T_STRING) fail(path + ": " + what + " is not a string");
  Handle space(H5Aget_space(attr), H5Sclose, "dataspace of " + what + " in " + path);
  if (H5Sget_simple_extent_npoints(space.id) != 1) fail(path + ": " + what + " is not a single string");
  const htri_t variable = H5Tis_variable_str(type.id);
  if (variable < 0) fail(path + ": cannot read the type of " + what);
  // The memory type takes the file's character set: HDF5 does not convert
  // between ASCII and UTF-8.
  const H5T_cset_t cset = H5Tget_cset(type.id);
  if (cset < 0) fail(path + ": cannot read the character set of " + what);
  std::string out;
  if (variable > 0) {
    Handle mem(H5Tcopy(H5T_C_S1), H5Tclose, "string type");
    H5Tset_size(mem.id, H5T_VARIABLE);
    H5Tset_cset(mem.id, cset);
    char* p = nullptr;
    if (H5Aread(attr, mem.id, &p) < 0) fail(path + ": cannot read " + what);
    if (p != nullptr) {
      const std::size_t n = ::strnlen(p, max_attr_bytes + 1);
      out.assign(p, std::min<std::size_t>(n, max_attr_bytes));
      H5free_memory(p);
      if (n > max_attr_bytes) fail(path + ": " + what + " is longer than the reader's limit of " +
                                   std::to_string(max_attr_bytes) + " bytes");
    }
  } else {
    const std::size_t n = H5Tget_size(type.id);
    if (n == 0 || n > max_attr_bytes) fail(path + ": " + what + " has a size of " + std::to_string(n) + " bytes");
    Handle mem(H5Tcopy(H5T_C_S1), H5Tclose, "string type");
    H5Tset_size(mem.id, n);
    H5Tset_cset(mem.id, cset);
    std::vector<char> buf(n);
    if (H5Aread(attr, mem.id, buf.data()) < 0) fail(path + ": cannot read " + what);
    out.assign(buf.data(), ::strnlen(buf.data(), n));
  }
  return out;
}

// Every string attribute of an object but `skip` (at most max_attempt_attrs,
// each at most max_attr_bytes), by name.
Attributes read_string_attrs(hid_t obj, const std::string& where, const std::string& path,
                             std::initializer_list<const char*> skip) {
  // The attribute names, at most max_attempt_attrs + 1 (then refused).
  struct Names {
    std::vector<std::string> v;
    bool name_too_long = false;
  } names;
  const auto collect = [](hid_t, const char* n, const H5A_info_t*, void* data) -> herr_t {
    auto* out = static_cast<Names*>(data);
    const std::size_t len = ::strnlen(n, 256);
    if (len >= 256) {
      out->name_too_long = true;
      return 1;
    }
    out->v.emplace_back(n, len);
    return out->v.size() > max_attempt_attrs ? 1 : 0;
  };
  if (H5Aiterate2(obj, H5_INDEX_NAME, H5_ITER_INC, nullptr, collect, &names) < 0)
    fail(path + ": cannot list the attributes of " + where);
  if (names.name_too_long) fail(path + ": an attribute name of " + where + " is longer than 255 bytes");
  if (names.v.size() > max_attempt_attrs)
    fail(path + ": " + where + " has more attributes than the reader's limit of " + std::to_string(max_attempt_attrs));
  Attributes out;
  for (const std::string& key : names.v) {
    if (std::any_of(skip.begin(), skip.end(), [&](const char* k) { return key == k; })) continue;
    Handle attr(H5Aopen(obj, key.c_str(), H5P_DEFAULT), H5Aclose,
                path + ": cannot open attribute '" + key + "' of " + where);
    out[key] = read_string_attr(attr.id, where + " attribute '" + key + "'", path);
  }
  return out;
}

}  // namespace

std::string journal_path(const std::string& path) { return path + ".journal"; }

void TraceWriter::flush(Sync sync) {
  if (!compacted_ || journal_bytes_ >= compaction_factor * file_bytes_)
    compact();
  else
    append_journal(sync);
}

void TraceWriter::close() { compact(); }

void TraceWriter::compact() {
  const std::string tmp = qsgd::support::temporary_name(path_);
  Seal sealed;
  try {
    write_file(tmp);
    sealed = seal(tmp);
  } catch (...) {
    std::remove(tmp.c_str());  // the last complete trace stays under path_
    throw;
  }
  try {
    qsgd::support::durable_rename(tmp, path_);
  } catch (const std::exception& e) {
    fail(e.what());
  }
  compacted_ = true;
  file_bytes_ = sealed.size;
  file_crc_ = sealed.crc;
  flushed_steps_ = steps_.size();
  flushed_epochs_ = epochs_.size();
  flushed_evals_ = evals_.size();
  flushed_attrs_ = attrs_;
  // The old journal is bound to the file just replaced: the next append
  // starts a new one. Removing it need not be durable (one that comes back
  // after a power loss is bound to another file, and ignored).
  const std::string jp = journal_path(path_);
  journal_bytes_ = 0;  // whatever happens below, the next append starts a journal bound to this file
  if (std::remove(jp.c_str()) != 0 && errno != ENOENT)
    fail("cannot remove " + jp + ": " + std::strerror(errno));
}

void TraceWriter::append_journal(Sync sync) {
  const std::string jp = journal_path(path_);
  Out rec;
  const std::size_t ns = steps_.size() - flushed_steps_, ne = epochs_.size() - flushed_epochs_,
                    nv = evals_.size() - flushed_evals_;
  std::vector<const std::pair<const std::string, std::string>*> changed;
  for (const auto& kv : attrs_) {
    const auto it = flushed_attrs_.find(kv.first);
    if (it == flushed_attrs_.end() || it->second != kv.second) changed.push_back(&kv);
  }
  if (ns + ne + nv + changed.size() == 0 && journal_bytes_ == 0) return;  // nothing new, nothing to sync
  if (ns + ne + nv + changed.size() > 0) {
    rec.put(record_magic);
    rec.put(std::uint32_t{0});  // payload bytes, below
    rec.put(std::uint32_t{0});  // the frame's CRC, below
    rec.put(static_cast<std::uint32_t>(ns));
    rec.put(static_cast<std::uint32_t>(ne));
    rec.put(static_cast<std::uint32_t>(nv));
    rec.put(static_cast<std::uint32_t>(changed.size()));
    for (std::size_t i = flushed_steps_; i < steps_.size(); ++i)
      for (const StepRecord& r : steps_[i]) put_step(rec, r);
    for (std::size_t i = flushed_epochs_; i < epochs_.size(); ++i) {
      const EpochRecord& e = epochs_[i];
      rec.put(e.epoch);
      rec.put(e.epoch_time);
      rec.put(e.train_loss);
      rec.put(e.test_loss);
      rec.put(e.test_accuracy);
      rec.put(e.steps);
    }
    for (std::size_t i = flushed_evals_; i < evals_.size(); ++i) {
      const EvalRecord& e = evals_[i];
      rec.put(e.step);
      rec.put(e.epoch);
      rec.put(e.train_time);
      rec.put(e.test_loss);
      rec.put(e.test_accuracy);
    }
    for (const auto* kv : changed) {
      rec.put_string(kv->first);
      rec.put_string(kv->second);
    }
    const std::size_t payload = rec.b.size() - frame_bytes;
    if (payload > 0xFFFFFFFFull - frame_bytes) fail("a flush of more than 4 GiB of records: flush more often");
    const auto n = static_cast<std::uint32_t>(payload);
    std::memcpy(&rec.b[4], &n, 4);
    const std::uint32_t frame_crc = crc32c(rec.b.data(), 8);
    std::memcpy(&rec.b[8], &frame_crc, 4);
    rec.put(crc32c(rec.b.data() + frame_bytes, payload));
  }
  if (journal_bytes_ == 0) {  // a new journal, bound to the file as it is
    const std::string head = journal_header(
        {{file_bytes_, file_crc_}, static_cast<std::uint32_t>(ranks_), flushed_steps_, flushed_epochs_, flushed_evals_});
    const std::string tmp = qsgd::support::temporary_name(jp);
    {
      Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
      if (fd.fd < 0) fail("cannot create " + tmp + ": " + std::strerror(errno));
      if (!write_all(fd.fd, head.data(), head.size()) || ::fsync(fd.fd) != 0) {
        const int err = errno;
        std::remove(tmp.c_str());
        fail("writing " + tmp + " failed: " + std::strerror(err));
      }
    }
    try {
      qsgd::support::durable_rename(tmp, jp);
    } catch (const std::exception& e) {
      fail(e.what());
    }
    journal_bytes_ = head.size();
  }
  Fd fd(::open(jp.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC));
  if (fd.fd < 0) fail("cannot open " + jp + " to append: " + std::strerror(errno));
  if (!write_all(fd.fd, rec.b.data(), rec.b.size()) ||
      (sync == Sync::durable && ::fdatasync(fd.fd) != 0)) {
    const int err = errno;
    // A torn record must not be followed by the next flush's: cut it off.
    const bool cut = ::ftruncate(fd.fd, static_cast<off_t>(journal_bytes_)) == 0;
    fail("appending to " + jp + " failed: " + std::strerror(err) +
         (cut ? "" : " (and cutting the partial record off failed: a resume ignores it only as the last one)"));
  }
  journal_bytes_ += rec.b.size();
  flushed_steps_ = steps_.size();
  flushed_epochs_ = epochs_.size();
  flushed_evals_ = evals_.size();
  flushed_attrs_ = attrs_;
}

// One valid record of the journal (its payload, `payload` bytes at p): its
// rows appended, its attributes taken where merging.
void TraceWriter::apply_journal_record(const unsigned char* p, std::uint32_t payload, const std::string& rec_where) {
  const std::size_t K = static_cast<std::size_t>(ranks_);
  In r{p, payload, 0, rec_where};
  const std::size_t ns = r.get<std::uint32_t>(), ne = r.get<std::uint32_t>(), nv = r.get<std::uint32_t>(),
                    na = r.get<std::uint32_t>();
  if (ns > (payload - r.at) / (min_step_bytes * K))
    fail(rec_where + " claims " + std::to_string(ns) + " steps, more than its " + std::to_string(payload) +
         " bytes hold");
  if (steps_.size() + ns > max_trace_rows || (steps_.size() + ns) * K > max_trace_records)
    fail(rec_where + " takes the trace past the reader's limit of " + std::to_string(max_trace_records) +
         " step records");
  if (ne > payload || nv > payload || na > payload) fail(rec_where + " claims more rows than its bytes hold");
  for (std::size_t i = 0; i < ns; ++i) {
    std::vector<StepRecord> row(K);
    for (auto& rr : row) rr = get_step(r);
    steps_.push_back(std::move(row));
  }
  for (std::size_t i = 0; i < ne; ++i) {
    EpochRecord e;
    e.epoch = r.get<std::int32_t>();
    e.epoch_time = r.get<double>();
    e.train_loss = r.get<double>();
    e.test_loss = r.get<double>();
    e.test_accuracy = r.get<double>();
    e.steps = r.get<std::int64_t>();
    epochs_.push_back(e);
  }
  for (std::size_t i = 0; i < nv; ++i) {
    EvalRecord e;
    e.step = r.get<std::int64_t>();
    e.epoch = r.get<std::int32_t>();
    e.train_time = r.get<double>();
    e.test_loss = r.get<double>();
    e.test_accuracy = r.get<double>();
    evals_.push_back(e);
  }
  for (std::size_t i = 0; i < na; ++i) {
    std::string key = r.get_string(255), value = r.get_string(max_attr_bytes);
    if (merging_) attrs_[std::move(key)] = std::move(value);
  }
  if (r.at != payload) fail(rec_where + " holds " + std::to_string(payload - r.at) + " bytes after its last row");
  journal_steps_ += static_cast<std::int64_t>(ns);
}

void TraceWriter::load_journal(Check check) {
  const std::string jp = journal_path(path_);
  Fd fd(::open(jp.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.fd < 0) {
    if (errno == ENOENT) return;
    fail("cannot open " + jp + ": " + std::strerror(errno));
  }
  struct stat sb;
  if (::fstat(fd.fd, &sb) != 0) fail("cannot stat " + jp);
  const auto bytes = static_cast<std::uint64_t>(sb.st_size);
  // A writer's journal stays under compaction_factor x its file plus one
  // flush; 1 GiB more is room for a flush far larger than any trace's.
  const std::uint64_t limit = compaction_factor * std::max<std::uint64_t>(file_bytes_, stored_seal(path_).size) +
                              (std::uint64_t(1) << 30);
  if (bytes > limit)
    fail(jp + " is " + std::to_string(bytes) + " bytes, more than a journal of " + path_ + " can hold (" +
         std::to_string(limit) + ")");
  unsigned char head[journal_header_bytes];
  if (!read_all(fd.fd, head, sizeof head, jp) || std::memcmp(head, journal_magic, sizeof journal_magic) != 0)
    fail(jp + " is not a trace journal (no header), or its header is damaged: move it away to resume from " + path_ +
         " alone (its steps are then lost)");
  const std::string where = jp + " header";
  In in{head, sizeof head, 16, where};
  JournalHeader h;
  h.file.size = in.get<std::uint64_t>();
  h.file.crc = in.get<std::uint32_t>();
  h.ranks = in.get<std::uint32_t>();
  h.steps = in.get<std::uint64_t>();
  h.epochs = in.get<std::uint64_t>();
  h.evals = in.get<std::uint64_t>();
  const std::size_t covered = in.at;
  if (in.get<std::uint32_t>() != crc32c(head, covered)) fail(jp + ": its header fails its checksum");
  // Bound to another file (the one before the last rewrite): nothing in it
  // is missing from this one.
  const Seal file = check == Check::seal_and_structure ? Seal{file_bytes_, file_crc_} : stored_seal(path_);
  if (h.file.size != file.size || h.file.crc != file.crc) return;
  if (h.ranks != static_cast<std::uint32_t>(ranks_) || h.steps != steps_.size() || h.epochs != epochs_.size() ||
      h.evals != evals_.size())
    fail(jp + " extends a trace of " + std::to_string(h.ranks) + " ranks and " + std::to_string(h.steps) +
         " steps, " + path_ + " holds " + std::to_string(ranks_) + " ranks and " + std::to_string(steps_.size()));
  // The records, whole: the journal's size bounds it (a file's bytes, not a
  // field's claim).
  if (bytes < journal_header_bytes) fail(jp + " changed while it was read");
  std::vector<unsigned char> all(static_cast<std::size_t>(bytes - journal_header_bytes));
  if (!all.empty() && !read_all(fd.fd, all.data(), all.size(), jp))
    fail(jp + " grew shorter while it was read");
  const std::size_t n = all.size();
  // A whole record at p, its frame and payload checksums valid.
  const auto record_at = [&](std::size_t p, std::uint32_t& payload) {
    if (n - p < frame_bytes) return false;
    std::uint32_t magic = 0, frame_crc = 0, crc = 0;
    std::memcpy(&magic, &all[p], 4);
    std::memcpy(&payload, &all[p + 4], 4);
    std::memcpy(&frame_crc, &all[p + 8], 4);
    if (magic != record_magic || frame_crc != crc32c(&all[p], 8)) return false;
    if (n - p - frame_bytes < std::uint64_t{payload} + 4) return false;
    std::memcpy(&crc, &all[p + frame_bytes + payload], 4);
    return crc == crc32c(&all[p + frame_bytes], payload);
  };
  // Whether a valid record starts after p. A valid frame whose payload then
  // fails is checked at most a few times (crash residue holds none: a frame
  // is 12 bytes with its own CRC), so the scan stays linear in the bytes.
  const auto record_after = [&](std::size_t p, const std::string& rec) {
    std::uint32_t payload = 0, magic = 0, frame_crc = 0;
    int failed_payloads = 0;
    for (std::size_t q = p; q < n && n - q >= frame_bytes; ++q) {
      if (all[q] != (record_magic & 0xFFu)) continue;
      std::memcpy(&magic, &all[q], 4);
      std::memcpy(&frame_crc, &all[q + 8], 4);
      if (magic != record_magic || frame_crc != crc32c(&all[q], 8)) continue;
      if (record_at(q, payload)) return true;
      if (++failed_payloads == 8)
        fail(rec + " is followed by damaged records (frames whose payloads fail their checksums)");
    }
    return false;
  };
  std::size_t at = 0;
  for (int index = 0; at < n; ++index) {
    const std::string rec_where =
        jp + ": record " + std::to_string(index) + " (byte " + std::to_string(journal_header_bytes + at) + ")";
    std::uint32_t payload = 0;
    if (!record_at(at, payload)) {
      // A record that is not whole and valid, with none after it, is what a
      // crash leaves: an append cut short, or bytes a power loss left after
      // the last synced record. With a valid record after it, it is damage.
      if (record_after(at + 1, rec_where))
        fail(rec_where + " is damaged (valid records follow it); moving " + jp + " away resumes from " + path_ +
             " alone, without the journal's steps");
      break;
    }
    apply_journal_record(&all[at + frame_bytes], payload, rec_where);
    at += frame_bytes + std::size_t{payload} + 4;
  }
}

TraceWriter::TraceWriter(std::string path, Merging) : path_(std::move(path)), ranks_(1), merging_(true) {
  if (!exists(path_)) fail(path_ + " does not exist");
  load(Check::seal_and_structure);
}

Contents inspect(const std::string& path) {
  // A running writer may replace the file between the reads of its seal, its
  // tables and its journal: a mismatch is read again, twice at most.
  for (int attempt = 0;; ++attempt) {
    try {
      TraceWriter w(path, TraceWriter::Merging{});
      return {static_cast<std::int64_t>(w.flushed_steps_), w.journal_steps_};
    } catch (const std::runtime_error&) {
      if (attempt == 2 || !exists(path)) throw;
    }
  }
}

std::int64_t merge_journal(const std::string& path) {
  if (!exists(journal_path(path))) return 0;
  TraceWriter w(path, TraceWriter::Merging{});
  if (w.journal_steps_ == 0 && w.steps_.size() == w.flushed_steps_ && w.epochs_.size() == w.flushed_epochs_ &&
      w.evals_.size() == w.flushed_evals_ && w.attrs_ == w.flushed_attrs_) {
    std::remove(journal_path(path).c_str());  // bound to another file, or empty: nothing to fold in
    return 0;
  }
  w.close();
  return w.journal_steps_;
}

void TraceWriter::write_file(const std::string& tmp) const {
  {
    Handle fcpl(H5Pcreate(H5P_FILE_CREATE), H5Pclose, "file creation properties");
    if (H5Pset_userblock(fcpl.id, checksum_block_bytes) < 0) fail("cannot reserve the checksum block");
    Handle file(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, fcpl.id, H5P_DEFAULT), H5Fclose, "cannot create " + tmp);
    write_int_attr(file.id, "schema_version", schema_version);
    write_int_attr(file.id, "ranks", ranks_);
    for (const auto& [k, v] : attrs_) write_string_attr(file.id, k, v);
    write_attempts(file.id, attempts_);

    const hsize_t rows = steps_.size(), cols = static_cast<hsize_t>(ranks_);
    Handle steps(H5Gcreate2(file.id, "steps", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose, "group steps");
    write_string_attr(steps.id, "layout", "datasets are [step row, rank]; raw samples, nothing averaged");
    std::vector<std::int64_t> step_ids(rows);
    std::vector<std::int32_t> epoch_ids(rows);
    for (hsize_t r = 0; r < rows; ++r) {
      step_ids[r] = steps_[r][0].step;
      epoch_ids[r] = steps_[r][0].epoch;
    }
    write_dataset(steps.id, "step", step_ids, rows, 0, "1", "global step index");
    write_dataset(steps.id, "epoch", epoch_ids, rows, 0, "1", "epoch of the step");
    std::vector<double> buf(rows * cols);
    for (const auto& f : step_fields) {
      for (hsize_t r = 0; r < rows; ++r)
        for (hsize_t c = 0; c < cols; ++c) buf[r * cols + c] = steps_[r][c].*(f.member);
      write_dataset(steps.id, f.name, buf, rows, cols, f.units, f.description);
    }
    std::vector<std::uint64_t> wire(rows * cols);
    for (hsize_t r = 0; r < rows; ++r)
      for (hsize_t c = 0; c < cols; ++c) wire[r * cols + c] = steps_[r][c].wire_bytes;
    write_dataset(steps.id, "wire_bytes", wire, rows, cols, "byte", "bytes the rank received in the step");
    write_buckets(file.id, steps_, cols);
    write_evals(file.id, evals_);

    Handle epochs(H5Gcreate2(file.id, "epochs", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose, "group epochs");
    const hsize_t ne = epochs_.size();
    std::vector<std::int32_t> ep(ne);
    std::vector<std::int64_t> nsteps(ne);
    std::vector<double> et(ne), trl(ne), tel(ne), acc(ne);
    for (hsize_t i = 0; i < ne; ++i) {
      ep[i] = epochs_[i].epoch;
      nsteps[i] = epochs_[i].steps;
      et[i] = epochs_[i].epoch_time;
      trl[i] = epochs_[i].train_loss;
      tel[i] = epochs_[i].test_loss;
      acc[i] = epochs_[i].test_accuracy;
    }
    write_dataset(epochs.id, "epoch", ep, ne, 0, "1", "epoch index");
    write_dataset(epochs.id, "steps", nsteps, ne, 0, "1", "steps in the epoch");
    write_dataset(epochs.id, "epoch_time", et, ne, 0, "s", "wall time of the epoch, max over ranks");
    write_dataset(epochs.id, "train_loss", trl, ne, 0, "1", "mean training loss over the epoch");
    write_dataset(epochs.id, "test_loss", tel, ne, 0, "1", "loss on the test set");
    write_dataset(epochs.id, "test_accuracy", acc, ne, 0, "1", "fraction of the test set classified correctly");
    if (H5Fflush(file.id, H5F_SCOPE_GLOBAL) < 0) fail("flushing " + tmp);
  }
}

void TraceWriter::load_buckets(long long file, unsigned long long rows, unsigned long long cols,
                               unsigned long long file_bytes) {
  Handle g(H5Gopen2(file, "buckets", H5P_DEFAULT), H5Gclose, path_ + " has no /buckets group");
  const auto counts = read_dataset<std::int32_t>(g.id, "count", rows * cols, path_);
  int nb = 0;
  for (std::int32_t c : counts) {
    if (c < 0) fail(path_ + ": /buckets/count holds a negative bucket count (" + std::to_string(c) + ")");
    nb = std::max(nb, std::min(c, max_buckets));
  }
  const hsize_t total = rows * cols * static_cast<hsize_t>(nb);
  if (3 * 8 * total > file_bytes)
    fail(path_ + ": /buckets claims " + std::to_string(total) + " times per table, more than its " +
         std::to_string(file_bytes) + " bytes can hold");
  const auto st = read_dataset<double>(g.id, "start", total, path_);
  const auto po = read_dataset<double>(g.id, "posted", total, path_);
  const auto dn = read_dataset<double>(g.id, "done", total, path_);
  for (hsize_t i = 0; i < rows; ++i)
    for (hsize_t r = 0; r < cols; ++r) {
      StepRecord& rec = steps_[i][r];
      rec.buckets = counts[i * cols + r];
      for (int b = 0; b < std::min(rec.buckets, max_buckets); ++b) {
        const hsize_t k = (i * cols + r) * static_cast<hsize_t>(nb) + static_cast<hsize_t>(b);
        rec.bucket_start[b] = st[k];
        rec.bucket_posted[b] = po[k];
        rec.bucket_done[b] = dn[k];
      }
    }
}

void TraceWriter::load_evals(long long file, unsigned long long file_bytes) {
  Handle g(H5Gopen2(file, "evals", H5P_DEFAULT), H5Gclose, path_ + " has no /evals group");
  const hsize_t n = extent_of(g.id, "step", max_trace_rows, path_);
  within_file(n, 8 + 4 + 3 * 8, file_bytes, "/evals", path_);
  const auto step = read_dataset<std::int64_t>(g.id, "step", n, path_);
  const auto epoch = read_dataset<std::int32_t>(g.id, "epoch", n, path_);
  const auto tt = read_dataset<double>(g.id, "train_time", n, path_);
  const auto loss = read_dataset<double>(g.id, "test_loss", n, path_);
  const auto acc = read_dataset<double>(g.id, "test_accuracy", n, path_);
  evals_.resize(n);
  for (hsize_t i = 0; i < n; ++i) evals_[i] = EvalRecord{step[i], epoch[i], tt[i], loss[i], acc[i]};
}

void TraceWriter::load_attempts(long long file, unsigned long long file_bytes) {
  if (H5Lexists(file, "attempts", H5P_DEFAULT) <= 0) return;  // written before /attempts existed
  Handle g(H5Gopen2(file, "attempts", H5P_DEFAULT), H5Gclose, path_ + ": /attempts is not a group");
  H5G_info_t info;
  if (H5Gget_info(g.id, &info) < 0) fail(path_ + ": cannot read /attempts");
  if (info.nlinks > max_attempts)
    fail(path_ + ": /attempts has " + std::to_string(info.nlinks) + " entries, more than the reader's limit of " +
         std::to_string(max_attempts));
  within_file(info.nlinks, 64, file_bytes, "/attempts", path_);
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    const std::string name = std::to_string(i), where = "/attempts/" + name;
    if (H5Lexists(g.id, name.c_str(), H5P_DEFAULT) <= 0) fail(path_ + ": " + where + " is missing");
    Handle a(H5Gopen2(g.id, name.c_str(), H5P_DEFAULT), H5Gclose, path_ + ": " + where + " is not a group");
    Attempt at;
    {
      Handle attr(H5Aopen(a.id, "first_step", H5P_DEFAULT), H5Aclose, path_ + ": " + where + " has no first_step");
      long long first = 0;
      if (H5Aread(attr.id, H5T_NATIVE_LLONG, &first) < 0) fail(path_ + ": cannot read " + where + "/first_step");
      at.first_step = first;
    }
    at.attrs = read_string_attrs(a.id, where, path_, {"first_step"});
    attempts_.push_back(std::move(at));
  }
}

void TraceWriter::load(Check check) {
  if (check == Check::seal_and_structure) {
    const Seal sealed = verify_seal(path_);
    file_bytes_ = sealed.size;
    file_crc_ = sealed.crc;
  }
  struct stat sb;
  if (::stat(path_.c_str(), &sb) != 0) fail("cannot stat " + path_);
  const auto file_bytes = static_cast<unsigned long long>(sb.st_size);
  Handle file(H5Fopen(path_.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose, "cannot open " + path_);
  long long ranks = 0;
  {
    Handle attr(H5Aopen(file.id, "ranks", H5P_DEFAULT), H5Aclose, path_ + " has no 'ranks' attribute");
    if (H5Aread(attr.id, H5T_NATIVE_LLONG, &ranks) < 0) fail("reading the 'ranks' attribute of " + path_);
  }
  if (merging_) {
    if (ranks < 1 || static_cast<unsigned long long>(ranks) > max_trace_records)
      fail(path_ + ": its 'ranks' attribute is " + std::to_string(ranks));
    ranks_ = static_cast<int>(ranks);
    attrs_ = read_string_attrs(file.id, "the root group", path_, {"schema_version", "ranks"});
  }
  if (ranks != ranks_)
    fail(path_ + " was written by " + std::to_string(ranks) + " ranks, this run has " + std::to_string(ranks_));
  long long version = 0;
  {
    Handle attr(H5Aopen(file.id, "schema_version", H5P_DEFAULT), H5Aclose, path_ + " has no 'schema_version'");
    if (H5Aread(attr.id, H5T_NATIVE_LLONG, &version) < 0) fail("reading schema_version of " + path_);
  }
  if (version != schema_version)
    fail(path_ + " has trace schema " + std::to_string(version) + ", this program writes " +
         std::to_string(schema_version) + " (resume it with the program that started it)");
  Handle steps(H5Gopen2(file.id, "steps", H5P_DEFAULT), H5Gclose, path_ + " has no /steps group");
  const hsize_t rows = extent_of(steps.id, "step", max_trace_rows, path_);
  const hsize_t cols = static_cast<hsize_t>(ranks_);
  if (rows * cols > max_trace_records)
    fail(path_ + ": " + std::to_string(rows) + " steps x " + std::to_string(cols) + " ranks exceed the reader's limit of " +
         std::to_string(max_trace_records) + " step records");
  // What a row occupies in the file at least: per rank its step fields and
  // wire bytes (8 bytes each) and its bucket count; the step and epoch.
  within_file(rows, cols * ((std::size(step_fields) + 1) * 8 + 4) + 12, file_bytes, "/steps", path_);
  const auto ids = read_dataset<std::int64_t>(steps.id, "step", rows, path_);
  const auto eps = read_dataset<std::int32_t>(steps.id, "epoch", rows, path_);
  steps_.assign(rows, std::vector<StepRecord>(cols));
  for (hsize_t r = 0; r < rows; ++r)
    for (hsize_t c = 0; c < cols; ++c) {
      steps_[r][c].step = ids[r];
      steps_[r][c].epoch = eps[r];
    }
  for (const auto& f : step_fields) {
    if (f.optional && H5Lexists(steps.id, f.name, H5P_DEFAULT) <= 0) {
      for (auto& row : steps_)
        for (auto& rec : row) rec.*(f.member) = std::numeric_limits<double>::quiet_NaN();
      continue;
    }
    const auto v = read_dataset<double>(steps.id, f.name, rows * cols, path_);
    for (hsize_t r = 0; r < rows; ++r)
      for (hsize_t c = 0; c < cols; ++c) steps_[r][c].*(f.member) = v[r * cols + c];
  }
  const auto wire = read_dataset<std::uint64_t>(steps.id, "wire_bytes", rows * cols, path_);
  for (hsize_t r = 0; r < rows; ++r)
    for (hsize_t c = 0; c < cols; ++c) steps_[r][c].wire_bytes = wire[r * cols + c];
  load_buckets(file.id, rows, cols, file_bytes);
  load_evals(file.id, file_bytes);
  Handle epochs(H5Gopen2(file.id, "epochs", H5P_DEFAULT), H5Gclose, path_ + " has no /epochs group");
  const hsize_t ne = extent_of(epochs.id, "epoch", max_trace_rows, path_);
  within_file(ne, 4 + 8 + 4 * 8, file_bytes, "/epochs", path_);
  const auto ep = read_dataset<std::int32_t>(epochs.id, "epoch", ne, path_);
  const auto ns = read_dataset<std::int64_t>(epochs.id, "steps", ne, path_);
  const auto et = read_dataset<double>(epochs.id, "epoch_time", ne, path_);
  const auto trl = read_dataset<double>(epochs.id, "train_loss", ne, path_);
  const auto tel = read_dataset<double>(epochs.id, "test_loss", ne, path_);
  const auto acc = read_dataset<double>(epochs.id, "test_accuracy", ne, path_);
  epochs_.resize(ne);
  for (hsize_t i = 0; i < ne; ++i) epochs_[i] = EpochRecord{ep[i], et[i], trl[i], tel[i], acc[i], ns[i]};
  load_attempts(file.id, file_bytes);
  flushed_steps_ = steps_.size();
  flushed_epochs_ = epochs_.size();
  flushed_evals_ = evals_.size();
  flushed_attrs_ = attrs_;
  load_journal(check);
}

}  // namespace qsgd::trace
