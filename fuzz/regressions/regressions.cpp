// The regression inputs (regressions.hpp), each built from what it means.
// Each comment says what the input broke and where; open findings are listed
// in open.txt, and regressions.cmake says what each input must do.

#include "regressions/regressions.hpp"

#include <hdf5.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

#include <qsgd/kernels/crc32c.hpp>

#include "common.hpp"
#include "message_recipe.hpp"
#include "qsgd/train/trace.hpp"
#include "trace_builder.hpp"

namespace qsgd_fuzz {
namespace {

// LevelUnit::value (kernels/include/qsgd/kernels/quantize.hpp:118-130)
// decodes level l as l * fl(scale / s), one rounded float multiply. When the
// division rounds up, s * fl(scale / s) exceeds FLT_MAX for a scale within
// rounding of FLT_MAX (s = 25, 31, 127, 1001, 16383, ...; not powers of two),
// and the bucket's largest coordinate, which max-norm scaling quantizes to
// level s, decodes to infinity. The library's own encoder makes such a
// message from a finite gradient: here fixed-width, s = 127 (8-bit wire
// convention), max norm, and the vector {FLT_MAX, 1, -2, 0}; every decoder
// entry point accepts it and decode gives +inf at element 0
// (tests/kernels/test_message.cpp holds accepted messages to finite values).
// Found while reviewing the harness's clause, then checked with it. Fixed:
// such buckets form the value in double (LevelUnit::via_double); test
// QuantizedRoundTrip.ScaleAtFloatMaxDecodesToFiniteValues.
std::vector<std::uint8_t> message_float_max_scale() {
  MessageRecipe r;
  r.codec = static_cast<std::uint8_t>(qsgd::CodecKind::fixed);
  r.flags = 2 << 4;  // raw float values
  r.n = 4;
  r.s_class = 1;
  r.s = 126;  // s = 1 + 126
  r.d = 0;
  const float v[4] = {std::numeric_limits<float>::max(), 1.0f, -2.0f, 0.0f};
  r.value_bytes.resize(sizeof v);
  std::memcpy(r.value_bytes.data(), v, sizeof v);
  ByteWriter w;
  r.write(w);
  return w.data();
}

// Options::to_json (train/src/options.cpp) escapes strings
// with json_escape (44-51), which escapes only '"' and '\\': a control
// character in --label or --data-dir goes raw into the JSON that becomes the
// trace's `config` attribute, and JSON readers (Python's json.loads) reject
// it. Fixed: control characters are written as \u00XX (nlohmann::json
// writes the configuration now, train/src/options.cpp).
std::vector<std::uint8_t> options_label_control_char() { return join_args({"--label", "run\n1"}); }

// The same clause: --lr inf (std::stod accepts it, and "inf > 0") is written
// as the bare token inf, which is not JSON. Fixed: real options must be
// finite (tests/train/bad_input.sh).
std::vector<std::uint8_t> options_lr_inf() { return join_args({"--lr", "inf"}); }

// parse (train/src/options.cpp) reads --s, --d and
// --window as 64-bit numbers and stores them with static_cast<uint32_t>: a
// value of 2^32 or more is silently reduced modulo 2^32 instead of refused.
// Found by the harness as --s 14021422214 kept as 1136520326; here
// --s 4294967312 (2^32 + 16), which trains with s = 16. Fixed: values
// above 2^32 - 1 are refused (tests/train/bad_input.sh).
std::vector<std::uint8_t> options_s_truncated() {
  return join_args({"--strategy", "allgather", "--codec", "fixed", "--s", "4294967312"});
}

// to_uint (train/src/options.cpp) refuses a value whose first
// character is '-', but std::stoull skips leading white space and then
// accepts a minus sign, negating the result: --batch " -1" is accepted as a
// batch of 2^64 - 1. The harness's check found it on this input, written from
// reading the code (10 minutes of fuzzing did not produce the space-minus
// prefix). Fixed: integer options are decimal digits only
// (tests/train/bad_input.sh).
std::vector<std::uint8_t> options_negative_wraps() { return join_args({"--batch", " -1"}); }

// load_checkpoint (train/src/checkpoint.cpp) copies the
// parameters with std::memcpy(st.params.data(), ...): for a checkpoint of
// n = 0 parameters data() is the null pointer of an empty vector, which
// memcpy may not receive even for 0 bytes (UBSan reports it). The file:
// checkpoint.hpp's layout with n = 0, and mode 0 (the harness expects the
// hash and size the file states). Fixed. (Found in format version 1; the file
// is written in the current version 2, one rank.)
std::vector<std::uint8_t> checkpoint_empty_state() {
  ByteWriter w;
  w.bytes("QSGDCKPT", 8);
  w.u32(2);                      // version
  w.u32(1);                      // ranks
  w.u64(77);                     // configuration hash
  w.u64(0), w.u64(0), w.u64(0);  // step, epoch, step in epoch
  w.u64(0);                      // n
  w.u32(0), w.u32(0);            // flags, reserved
  w.u64(0), w.u64(0), w.u64(0), w.u64(0);  // rank 0's totals
  std::vector<std::uint8_t> file = w.data();
  const std::uint32_t crc = qsgd::detail::crc32c_bytes_host(file.data(), file.size());
  for (int k = 0; k < 4; ++k) file.push_back(static_cast<std::uint8_t>(crc >> (8 * k)));
  file.insert(file.begin(), std::uint8_t(0));  // the harness's mode byte
  return file;
}

// The bytes of an HDF5 file that `build` fills (through a temporary file:
// HDF5 writes files, not buffers, with the default driver).
template <class Build>
std::vector<std::uint8_t> hdf5_bytes(Build build) {
  const ScratchFile scratch("regression-hdf5");
  const hid_t file = H5Fcreate(scratch.path().c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  build(file);
  H5Fclose(file);
  return scratch.read();
}

// A dataset of `dims` that is chunked and never written: its dataspace claims
// rows the file does not store; reading it yields `fill`.
void claimed(hid_t group, const char* name, hid_t type, std::vector<hsize_t> dims, double fill = 0) {
  std::vector<hsize_t> chunk(dims.size(), 1);
  chunk[0] = 4096;
  const hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
  const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_chunk(dcpl, static_cast<int>(chunk.size()), chunk.data());
  H5Pset_fill_value(dcpl, H5T_NATIVE_DOUBLE, &fill);
  H5Dclose(H5Dcreate2(group, name, type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT));
  H5Pclose(dcpl);
  H5Sclose(space);
}

void int_attribute(hid_t file, const char* name, long long v) {
  const hid_t space = H5Screate(H5S_SCALAR);
  const hid_t attr = H5Acreate2(file, name, H5T_NATIVE_LLONG, space, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(attr, H5T_NATIVE_LLONG, &v);
  H5Aclose(attr);
  H5Sclose(space);
}

// TraceWriter::load (train/src/trace.cpp: extent_of, then its reads) bounds what it
// allocates by its own limits (2^24 rows, 2^22 step records), not by the
// file: a 16 KB trace whose chunked, unwritten datasets claim 2^21 steps of
// 2 ranks, each with 32 buckets (the bucket counts' fill value), is accepted
// by every check and makes the reader build 2^22 StepRecords (about 3.7 GB)
// and then read three 2^27-double bucket tables (1 GiB each): about 7 GB
// from a size field alone, against docs/reliability.md's rule that a reader
// allocates in proportion to the bytes it was given or to a limit its caller
// set. The harness stopped it at its -rss_limit_mb / -malloc_limit_mb. Mode 1:
// a run of 2 ranks, read behind the checksum. Fixed: rows are bounded by
// the file's size at the bytes each row occupies at least (within_file).
std::vector<std::uint8_t> trace_claimed_steps() {
  const hsize_t rows = hsize_t(1) << 21, ranks = 2;
  std::vector<std::uint8_t> file = hdf5_bytes([&](hid_t f) {
    int_attribute(f, "schema_version", qsgd::trace::schema_version);
    int_attribute(f, "ranks", static_cast<long long>(ranks));
    const hid_t steps = H5Gcreate2(f, "steps", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    claimed(steps, "step", H5T_NATIVE_INT64, {rows});
    claimed(steps, "epoch", H5T_NATIVE_INT32, {rows});
    for (const char* name : {"forward", "backward", "quantize", "encode", "requantize", "comm_exposed", "comm_hidden",
                             "decode", "update", "step_time", "bits_per_dim", "loss", "grad_norm"})
      claimed(steps, name, H5T_NATIVE_DOUBLE, {rows, ranks});
    claimed(steps, "wire_bytes", H5T_NATIVE_UINT64, {rows, ranks});
    H5Gclose(steps);
    const hid_t buckets = H5Gcreate2(f, "buckets", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    claimed(buckets, "count", H5T_NATIVE_INT32, {rows, ranks}, qsgd::trace::max_buckets);
    for (const char* name : {"start", "posted", "done"})
      claimed(buckets, name, H5T_NATIVE_DOUBLE, {rows, ranks, hsize_t(qsgd::trace::max_buckets)});
    H5Gclose(buckets);
    for (const char* group : {"evals", "epochs"}) {
      const hid_t g = H5Gcreate2(f, group, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
      for (const char* name :
           {"step", "epoch", "train_time", "test_loss", "test_accuracy", "steps", "epoch_time", "train_loss"})
        claimed(g, name, H5T_NATIVE_DOUBLE, {0});
      H5Gclose(g);
    }
  });
  file.insert(file.begin(), std::uint8_t(1));  // a run of 2 ranks
  return file;
}

// TraceWriter::load_buckets (train/src/trace.cpp) accepts a negative
// bucket count, and TraceWriter::flush then casts it to an unsigned size
// (write_buckets): the bucket tables' length overflows and
// flush throws std::length_error ("cannot create std::vector larger than
// max_size()"), a std::logic_error, not the reader's
// runtime_error naming the file, and only at the first flush after resuming.
// Found by the structure-aware trace harness in a 15 s CI run; here a recipe
// of 3 steps of 2 ranks with 2 buckets each, every dataset as the writer
// writes it but /buckets/count, whose first value is -1 (raw values).
// Fixed: the reader refuses a negative count, naming the file.
std::vector<std::uint8_t> trace_negative_bucket_count() {
  ByteWriter w;
  w.u8(1);  // mode: a run of 2 ranks
  TraceShape{3, 2, 1, 1, 0}.write(w);
  for (int a = 0; a < 2; ++a) w.u8(attr_int), w.u8(0);
  for (const DatasetSpec& spec : trace_datasets()) {
    const bool count = std::strcmp(spec.group, "buckets") == 0 && std::strcmp(spec.name, "count") == 0;
    w.u8(count ? raw_values : as_written);
    w.u8(count ? 0 : 1);
    if (count)  // the first min(3 x 2, 8) values
      for (int k = 0; k < 6; ++k) w.u64(k == 0 ? ~std::uint64_t(0) : 2);
  }
  return w.data();
}

// A 2-rank, 3-step trace written by TraceWriter, with the first message of
// type `type` in the object header of `object` changed by `patch(file, at)`
// (`at`: the message's data), behind the harness's mode byte (a run of 2
// ranks, read behind the checksum block, which the patch invalidates).
// HDF5's version-1 object header: a 16-byte prefix (version 1, reserved, message count u16, reference count u32, size of the first chunk
// u32, padding), then messages of type u16, size u16, flags and 3 reserved
// bytes, and the data; a continuation message (0x10: address u64, length
// u64) names a further chunk of messages. Empty when there is no such
// message.
template <class Patch>
std::vector<std::uint8_t> patched_trace(const char* object, std::uint16_t type, Patch patch) {
  const ScratchFile scratch("regression-trace");
  const std::string& path = scratch.path();
  std::remove(path.c_str());
  {
    qsgd::trace::TraceWriter w(path, 2, {{"label", "regression"}}, false);
    for (int step = 0; step < 3; ++step) {
      std::vector<qsgd::trace::StepRecord> per_rank(2);
      for (auto& r : per_rank) r.step = step, r.buckets = 1, r.comm_hidden = 0.25 * step;
      w.add_step(per_rank);
    }
    w.flush();
  }
  H5O_info_t info{};
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  const bool found = f >= 0 && H5Oget_info_by_name2(f, object, &info, H5O_INFO_BASIC, H5P_DEFAULT) >= 0;
  if (f >= 0) H5Fclose(f);
  std::vector<std::uint8_t> file = scratch.read();
  // Addresses are relative to the HDF5 data, which starts after the
  // writer's checksum block (the user block).
  const std::uint64_t base = qsgd::trace::checksum_block_bytes, header = info.addr + base;
  if (!found || header + 16 > file.size() || file[header] != 1) return {};
  auto le = [&](std::size_t at, int bytes) {
    std::uint64_t v = 0;
    for (int k = bytes - 1; k >= 0; --k) v = v << 8 | file[at + k];
    return v;
  };
  std::vector<std::pair<std::uint64_t, std::uint64_t>> chunks = {{header + 16, le(header + 8, 4)}};
  for (std::size_t c = 0; c < chunks.size() && c < 16; ++c) {
    const std::uint64_t end = std::min<std::uint64_t>(chunks[c].first + chunks[c].second, file.size());
    for (std::uint64_t at = chunks[c].first; at + 8 <= end; at += 8 + le(at + 2, 2)) {
      const auto t = static_cast<std::uint16_t>(le(at, 2));
      if (t == type) {
        patch(file, static_cast<std::size_t>(at + 8));
        file.insert(file.begin(), std::uint8_t(1));
        return file;
      }
      if (t == 0x10 && at + 24 <= end) chunks.emplace_back(le(at + 8, 8) + base, le(at + 16, 8));
    }
  }
  return {};
}

// Debian 12's HDF5 1.10.8 leaks from its metadata cache when an object
// header fails to load (H5O_protect): 56 bytes inside H5Fopen (under
// H5G_mkroot) when a header continuation points past the end of the file;
// H5Fopen fails, and the reader (TraceWriter::load) has no handle to release.
// Found by the trace harness (LeakSanitizer) on a mutated TraceWriter file,
// and later under H5Dopen2; here the continuation message of
// /steps/comm_hidden's header aimed at twice the file's size. Third-party
// and open: suppressed in lsan.supp (by its frame) for the fuzz runs.
std::vector<std::uint8_t> trace_hdf5_open_leak() {
  return patched_trace("/steps/comm_hidden", 0x10, [](std::vector<std::uint8_t>& file, std::size_t data) {
    std::uint64_t beyond = 2 * file.size();
    for (int k = 0; k < 8; ++k, beyond >>= 8) file[data + k] = static_cast<std::uint8_t>(beyond);
  });
}

// Debian 12's HDF5 1.10.8 allocates what an object header's continuation
// message says the next header chunk holds before checking it against the
// file: when TraceWriter::load opens the dataset (H5Dopen2 in read_dataset),
// a length of a few GiB is an out-of-memory under H5C_protect, from a 22 KB
// file, and 2^41 makes ASan refuse a 2 TiB allocation. Found by the raw
// trace harness (several crashes and out-of-memory inputs under
// H5C_protect); here the continuation message of /steps/comm_hidden's
// header with its length (the u64 after the address) set to 2^41.
// Third-party and open.
std::vector<std::uint8_t> trace_hdf5_continuation_alloc() {
  return patched_trace("/steps/comm_hidden", 0x10, [](std::vector<std::uint8_t>& file, std::size_t data) {
    std::uint64_t length = std::uint64_t(1) << 41;
    for (int k = 0; k < 8; ++k, length >>= 8) file[data + 8 + k] = static_cast<std::uint8_t>(length);
  });
}

// Debian 12's HDF5 1.10.8 crashes (SIGSEGV, memcpy from address 0x4 under
// H5Dread, H5D__contig_read, H5VM_memcpyvv) reading a dataset whose layout
// message says "compact, 0 bytes of data" while its dataspace holds
// elements: it copies from the empty compact buffer. Found by the raw trace
// harness, when TraceWriter::load read such a dataset and qsgd-train
// --resume died instead of naming the file; here /steps/epoch's layout
// message (0x08, version 3: class u8, for compact a u16 size) rewritten to
// compact with size 0. HDF5's bug stays; the reader keeps away from it:
// before H5Dread, check_structure (train/src/trace.cpp) refuses a compact
// dataset whose storage does not hold what its dataspace claims.
std::vector<std::uint8_t> trace_hdf5_compact_segv() {
  return patched_trace("/steps/epoch", 0x08, [](std::vector<std::uint8_t>& file, std::size_t data) {
    file[data] = 3;      // version
    file[data + 1] = 0;  // compact
    file[data + 2] = 0;  // size, u16
    file[data + 3] = 0;
  });
}

// Debian 12's HDF5 1.10.8 reads past an attribute message when its
// dataspace size field says more than the message holds (a memcpy out of
// bounds under H5O__attr_open_by_name's message iteration; the input the
// harness found overran into a SIGSEGV): TraceWriter::load's
// H5Aopen(file, "ranks") dies on it. Found by the raw trace
// harness as one byte changed in a written trace (the high byte of that
// field); here the first attribute message of the root group (version 1:
// version, reserved, name size u16, datatype size u16, dataspace size u16,
// ...) with its dataspace size set to 0xFC00. Third-party and open.
std::vector<std::uint8_t> trace_hdf5_attribute_segv() {
  return patched_trace("/", 0x0C, [](std::vector<std::uint8_t>& file, std::size_t data) {
    file[data + 6] = 0x00;
    file[data + 7] = 0xFC;
  });
}

// The same bytes read as qsgd-train --resume reads them (mode bit 4: the
// checksum block verified first): the patched file fails its checksum and is
// refused with a message naming it before HDF5 parses it. What HDF5's bugs
// still reach is a file forged with a valid checksum block.
std::vector<std::uint8_t> seal_checked(std::vector<std::uint8_t> input) {
  if (!input.empty()) input[0] |= 16;
  return input;
}

}  // namespace

const std::vector<Regression>& regressions() {
  static const std::vector<Regression> all = {
      {"train-options", "options-label-control-char", options_label_control_char},
      {"train-options", "options-lr-inf", options_lr_inf},
      {"train-options", "options-s-truncated", options_s_truncated},
      {"train-options", "options-negative-wraps", options_negative_wraps},
      {"checkpoint", "checkpoint-empty-state", checkpoint_empty_state},
      {"trace", "trace-negative-bucket-count", trace_negative_bucket_count},
      {"trace-raw", "trace-claimed-steps", trace_claimed_steps},
      {"trace-raw", "trace-hdf5-open-leak", trace_hdf5_open_leak},
      {"trace-raw", "trace-hdf5-compact-segv", trace_hdf5_compact_segv},
      {"trace-raw", "trace-hdf5-continuation-alloc", trace_hdf5_continuation_alloc},
      {"trace-raw", "trace-hdf5-attribute-segv", trace_hdf5_attribute_segv},
      {"trace-raw", "trace-hdf5-open-leak-checked", [] { return seal_checked(trace_hdf5_open_leak()); }},
      {"trace-raw", "trace-hdf5-compact-segv-checked", [] { return seal_checked(trace_hdf5_compact_segv()); }},
      {"trace-raw", "trace-hdf5-continuation-alloc-checked",
       [] { return seal_checked(trace_hdf5_continuation_alloc()); }},
      {"trace-raw", "trace-hdf5-attribute-segv-checked", [] { return seal_checked(trace_hdf5_attribute_segv()); }},
      {"message-struct", "message-float-max-scale", message_float_max_scale},
  };
  return all;
}

}  // namespace qsgd_fuzz
