#include "trace.hpp"

#include <hdf5.h>

#include <cstdio>
#include <stdexcept>
#include <sys/stat.h>

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

template <class T>
std::vector<T> read_dataset(hid_t group, const std::string& name, hsize_t expect) {
  Handle dset(H5Dopen2(group, name.c_str(), H5P_DEFAULT), H5Dclose, "dataset " + name + " missing");
  Handle space(H5Dget_space(dset.id), H5Sclose, "dataspace of " + name);
  const hssize_t count = H5Sget_simple_extent_npoints(space.id);
  if (count < 0 || static_cast<hsize_t>(count) != expect) fail("dataset " + name + " has an unexpected size");
  std::vector<T> out(expect);
  if (expect > 0 && H5Dread(dset.id, native_type<T>(), H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()) < 0)
    fail("reading dataset " + name);
  return out;
}

// Step fields: name, units, description, member.
struct DoubleField {
  const char* name;
  const char* units;
  const char* description;
  double StepRecord::*member;
};
const DoubleField step_fields[] = {
    {"forward", "s", "forward pass", &StepRecord::forward},
    {"backward", "s", "backward pass (compute only)", &StepRecord::backward},
    {"quantize", "s", "stochastic quantization of gradients", &StepRecord::quantize},
    {"encode", "s", "encoding into messages", &StepRecord::encode},
    {"exchange_exposed", "s", "time the step waited for communication", &StepRecord::exchange_exposed},
    {"exchange_overlapped", "s", "communication time hidden behind compute", &StepRecord::exchange_overlapped},
    {"decode", "s", "decoding and accumulation of received messages", &StepRecord::decode},
    {"update", "s", "optimizer update", &StepRecord::update},
    {"step_time", "s", "wall time of the whole step", &StepRecord::step_time},
    {"bits_per_dim", "bit", "wire bits per gradient element", &StepRecord::bits_per_dim},
    {"loss", "1", "training loss of the rank's mini-batch", &StepRecord::loss},
};

bool exists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}

}  // namespace

std::string hdf5_version() {
  unsigned maj = 0, min = 0, rel = 0;
  H5get_libversion(&maj, &min, &rel);
  return std::to_string(maj) + "." + std::to_string(min) + "." + std::to_string(rel);
}

TraceWriter::TraceWriter(std::string path, int ranks, Attributes attrs, bool resume)
    : path_(std::move(path)), ranks_(ranks), attrs_(std::move(attrs)) {
  if (ranks_ < 1) fail("rank count must be positive");
  if (exists(path_)) {
    if (!resume) fail(path_ + " exists; traces are never overwritten (choose another output or resume the run)");
    load();
  }
}

void TraceWriter::add_step(const std::vector<StepRecord>& per_rank) {
  if (static_cast<int>(per_rank.size()) != ranks_) fail("a step needs one record per rank");
  steps_.push_back(per_rank);
}

void TraceWriter::add_epoch(const EpochRecord& e) { epochs_.push_back(e); }

void TraceWriter::truncate(std::int64_t steps_done, std::int32_t epochs_done) {
  while (!steps_.empty() && steps_.back().front().step >= steps_done) steps_.pop_back();
  while (!epochs_.empty() && epochs_.back().epoch >= epochs_done) epochs_.pop_back();
}

void TraceWriter::flush() {
  const std::string tmp = path_ + ".tmp";
  {
    Handle file(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose, "cannot create " + tmp);
    write_int_attr(file.id, "schema_version", schema_version);
    write_int_attr(file.id, "ranks", ranks_);
    for (const auto& [k, v] : attrs_) write_string_attr(file.id, k, v);

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
    write_dataset(steps.id, "wire_bytes", wire, rows, cols, "byte", "bytes the rank sent in the step");

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
  if (std::rename(tmp.c_str(), path_.c_str()) != 0) fail("cannot rename " + tmp + " to " + path_);
}

void TraceWriter::load() {
  Handle file(H5Fopen(path_.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose, "cannot open " + path_);
  long long ranks = 0;
  {
    Handle attr(H5Aopen(file.id, "ranks", H5P_DEFAULT), H5Aclose, path_ + " has no 'ranks' attribute");
    H5Aread(attr.id, H5T_NATIVE_LLONG, &ranks);
  }
  if (ranks != ranks_)
    fail(path_ + " was written by " + std::to_string(ranks) + " ranks, this run has " + std::to_string(ranks_));
  Handle steps(H5Gopen2(file.id, "steps", H5P_DEFAULT), H5Gclose, path_ + " has no /steps group");
  Handle sd(H5Dopen2(steps.id, "step", H5P_DEFAULT), H5Dclose, "dataset steps/step missing");
  Handle ss(H5Dget_space(sd.id), H5Sclose, "dataspace of steps/step");
  const hsize_t rows = static_cast<hsize_t>(H5Sget_simple_extent_npoints(ss.id));
  const hsize_t cols = static_cast<hsize_t>(ranks_);
  const auto ids = read_dataset<std::int64_t>(steps.id, "step", rows);
  const auto eps = read_dataset<std::int32_t>(steps.id, "epoch", rows);
  steps_.assign(rows, std::vector<StepRecord>(cols));
  for (hsize_t r = 0; r < rows; ++r)
    for (hsize_t c = 0; c < cols; ++c) {
      steps_[r][c].step = ids[r];
      steps_[r][c].epoch = eps[r];
    }
  for (const auto& f : step_fields) {
    const auto v = read_dataset<double>(steps.id, f.name, rows * cols);
    for (hsize_t r = 0; r < rows; ++r)
      for (hsize_t c = 0; c < cols; ++c) steps_[r][c].*(f.member) = v[r * cols + c];
  }
  const auto wire = read_dataset<std::uint64_t>(steps.id, "wire_bytes", rows * cols);
  for (hsize_t r = 0; r < rows; ++r)
    for (hsize_t c = 0; c < cols; ++c) steps_[r][c].wire_bytes = wire[r * cols + c];
  Handle epochs(H5Gopen2(file.id, "epochs", H5P_DEFAULT), H5Gclose, path_ + " has no /epochs group");
  Handle ed(H5Dopen2(epochs.id, "epoch", H5P_DEFAULT), H5Dclose, "dataset epochs/epoch missing");
  Handle es(H5Dget_space(ed.id), H5Sclose, "dataspace of epochs/epoch");
  const hsize_t ne = static_cast<hsize_t>(H5Sget_simple_extent_npoints(es.id));
  const auto ep = read_dataset<std::int32_t>(epochs.id, "epoch", ne);
  const auto ns = read_dataset<std::int64_t>(epochs.id, "steps", ne);
  const auto et = read_dataset<double>(epochs.id, "epoch_time", ne);
  const auto trl = read_dataset<double>(epochs.id, "train_loss", ne);
  const auto tel = read_dataset<double>(epochs.id, "test_loss", ne);
  const auto acc = read_dataset<double>(epochs.id, "test_accuracy", ne);
  epochs_.resize(ne);
  for (hsize_t i = 0; i < ne; ++i) epochs_[i] = EpochRecord{ep[i], et[i], trl[i], tel[i], acc[i], ns[i]};
}

}  // namespace qsgd::trace
