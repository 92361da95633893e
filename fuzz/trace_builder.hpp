#pragma once
// Structure-aware trace files for the trace harness: an HDF5 file built with
// the HDF5 API from a recipe, following the schema of docs/traces.md (what
// TraceWriter::flush writes), with each attribute and dataset either as the
// writer makes it or deviating from it: missing, another type, a row more or
// fewer, another rank, scalar or null dataspace, odd values, or a chunked
// dataset that claims more rows than it stores. Byte-level mutations of an
// HDF5 file mostly break the file's own structure; these reach the reader's
// checks behind it.
//
//   u8 rows (mod 65)   u8 buckets per record (mod 33)   u8 evals (mod 17)
//   u8 epochs (mod 17)   u8 groups left out (bits: steps, buckets, evals, epochs)
//   2 x attribute (ranks, schema_version): u8 kind (mod 4), i8 offset from the right value
//   per dataset (trace_datasets order): u8 deviation (mod 10), u8 salt,
//   and 8 bytes per value for the first min(count, 8) values when the
//   deviation is raw_values.
//   u8 attempts (mod 6; 0: no /attempts group, as in files of earlier
//   builds; 5: /attempts is a dataset), then per attempt: u8 deviation
//   (mod 8, AttemptDeviation), u8 string attributes (mod 5), u8 salt.
// Claimed extents stay small (4096 rows) or beyond the reader's limits,
// where the reader must refuse them before allocating.

#include <hdf5.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common.hpp"
#include "qsgd/train/trace.hpp"

namespace qsgd_fuzz {

enum class Family { i64, i32, u64, f64 };
enum class Shape { rows, rows_ranks, rows_ranks_buckets, evals, epochs };

struct DatasetSpec {
  const char* group;
  const char* name;
  Family family;
  Shape shape;
};

// docs/traces.md: every dataset the reader needs, in the order the recipe
// lists them.
inline const std::vector<DatasetSpec>& trace_datasets() {
  static const std::vector<DatasetSpec> specs = {
      {"steps", "step", Family::i64, Shape::rows},
      {"steps", "epoch", Family::i32, Shape::rows},
      {"steps", "forward", Family::f64, Shape::rows_ranks},
      {"steps", "backward", Family::f64, Shape::rows_ranks},
      {"steps", "quantize", Family::f64, Shape::rows_ranks},
      {"steps", "encode", Family::f64, Shape::rows_ranks},
      {"steps", "requantize", Family::f64, Shape::rows_ranks},
      {"steps", "comm_exposed", Family::f64, Shape::rows_ranks},
      {"steps", "comm_hidden", Family::f64, Shape::rows_ranks},
      {"steps", "decode", Family::f64, Shape::rows_ranks},
      {"steps", "update", Family::f64, Shape::rows_ranks},
      {"steps", "step_time", Family::f64, Shape::rows_ranks},
      {"steps", "bits_per_dim", Family::f64, Shape::rows_ranks},
      {"steps", "loss", Family::f64, Shape::rows_ranks},
      {"steps", "grad_norm", Family::f64, Shape::rows_ranks},
      {"steps", "wire_bytes", Family::u64, Shape::rows_ranks},
      {"buckets", "count", Family::i32, Shape::rows_ranks},
      {"buckets", "start", Family::f64, Shape::rows_ranks_buckets},
      {"buckets", "posted", Family::f64, Shape::rows_ranks_buckets},
      {"buckets", "done", Family::f64, Shape::rows_ranks_buckets},
      {"evals", "step", Family::i64, Shape::evals},
      {"evals", "epoch", Family::i32, Shape::evals},
      {"evals", "train_time", Family::f64, Shape::evals},
      {"evals", "test_loss", Family::f64, Shape::evals},
      {"evals", "test_accuracy", Family::f64, Shape::evals},
      {"epochs", "epoch", Family::i32, Shape::epochs},
      {"epochs", "steps", Family::i64, Shape::epochs},
      {"epochs", "epoch_time", Family::f64, Shape::epochs},
      {"epochs", "train_loss", Family::f64, Shape::epochs},
      {"epochs", "test_loss", Family::f64, Shape::epochs},
      {"epochs", "test_accuracy", Family::f64, Shape::epochs},
  };
  return specs;
}

inline const char* const trace_groups[] = {"steps", "buckets", "evals", "epochs"};

enum Deviation : std::uint8_t {
  as_written = 0,
  missing,
  other_type,
  row_more,
  row_fewer,
  other_rank,
  claimed_extent,
  scalar_space,
  null_space,
  raw_values,
  deviation_count
};

enum AttrKind : std::uint8_t { attr_int = 0, attr_missing, attr_double, attr_string, attr_kind_count };

// How an /attempts/<i> group deviates from what the writer makes.
enum AttemptDeviation : std::uint8_t {
  attempt_as_written = 0,
  attempt_no_first_step,
  attempt_first_step_string,  // first_step as a string
  attempt_int_attribute,      // an integer attribute among the strings
  attempt_fixed_strings,      // fixed-length strings (the writer's are variable)
  attempt_misnamed,           // named i + 1: a gap in the numbering
  attempt_dataset,            // a dataset, not a group
  attempt_array_string,       // a string attribute holding two strings
  attempt_deviation_count
};

// Shape fields of a recipe; the seed generator writes recipes with it.
struct TraceShape {
  std::uint8_t rows = 3, buckets = 2, evals = 1, epochs = 1;
  std::uint8_t groups_left_out = 0;
  void write(ByteWriter& w) const { w.u8(rows), w.u8(buckets), w.u8(evals), w.u8(epochs), w.u8(groups_left_out); }
};

class TraceBuilder {
 public:
  // Builds the file at `path` for a run of `ranks` ranks; false when the
  // HDF5 library refuses a combination (nothing to test then).
  static bool build(ByteReader& in, const std::string& path, int ranks) {
    const hsize_t rows = in.u8() % 65, nb = in.u8() % 33, evals = in.u8() % 17, epochs = in.u8() % 17;
    const std::uint8_t left_out = in.u8();
    // With the writer's user block, for the checksum block the caller seals.
    H fcpl(H5Pcreate(H5P_FILE_CREATE), H5Pclose);
    if (fcpl.id < 0 || H5Pset_userblock(fcpl.id, qsgd::trace::checksum_block_bytes) < 0) return false;
    H file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, fcpl.id, H5P_DEFAULT), H5Fclose);
    if (file.id < 0) return false;
    if (!attribute(file.id, "ranks", in, ranks) ||
        !attribute(file.id, "schema_version", in, qsgd::trace::schema_version))
      return false;
    hid_t groups[4];
    std::vector<H> owned;
    for (int g = 0; g < 4; ++g) {
      if (left_out & (1u << g)) {
        groups[g] = -1;
        continue;
      }
      owned.emplace_back(H5Gcreate2(file.id, trace_groups[g], H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
      groups[g] = owned.back().id;
      if (groups[g] < 0) return false;
    }
    for (const DatasetSpec& spec : trace_datasets()) {
      const int g = group_index(spec.group);
      std::vector<hsize_t> dims;
      switch (spec.shape) {
        case Shape::rows: dims = {rows}; break;
        case Shape::rows_ranks: dims = {rows, hsize_t(ranks)}; break;
        case Shape::rows_ranks_buckets: dims = {rows, hsize_t(ranks), nb}; break;
        case Shape::evals: dims = {evals}; break;
        case Shape::epochs: dims = {epochs}; break;
      }
      const std::uint8_t dev = in.u8() % deviation_count;
      const std::uint8_t salt = in.u8();
      if (groups[g] < 0 || dev == missing) continue;
      if (!dataset(groups[g], spec, dims, static_cast<Deviation>(dev), salt, nb, in)) return false;
    }
    return attempts(file.id, in);
  }

 private:
  struct H {
    hid_t id;
    herr_t (*close)(hid_t);
    H(hid_t i, herr_t (*c)(hid_t)) : id(i), close(c) {}
    H(H&& o) noexcept : id(o.id), close(o.close) { o.id = -1; }
    H(const H&) = delete;
    H& operator=(const H&) = delete;
    H& operator=(H&&) = delete;
    ~H() {
      if (id >= 0) close(id);
    }
  };

  static int group_index(const char* g) {
    for (int k = 0; k < 4; ++k)
      if (std::strcmp(g, trace_groups[k]) == 0) return k;
    return 0;
  }

  static bool attribute(hid_t file, const char* name, ByteReader& in, long long right) {
    const std::uint8_t kind = in.u8() % attr_kind_count;
    const long long value = right + static_cast<std::int8_t>(in.u8());
    if (kind == attr_missing) return true;
    H space(H5Screate(H5S_SCALAR), H5Sclose);
    if (kind == attr_string) {
      H type(H5Tcopy(H5T_C_S1), H5Tclose);
      const std::string text = std::to_string(value);
      if (H5Tset_size(type.id, text.size() + 1) < 0) return false;
      H attr(H5Acreate2(file, name, type.id, space.id, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
      return attr.id >= 0 && H5Awrite(attr.id, type.id, text.c_str()) >= 0;
    }
    const hid_t type = kind == attr_double ? H5T_NATIVE_DOUBLE : H5T_NATIVE_LLONG;
    H attr(H5Acreate2(file, name, type, space.id, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
    if (attr.id < 0) return false;
    const double d = static_cast<double>(value);
    return H5Awrite(attr.id, type, kind == attr_double ? static_cast<const void*>(&d) : &value) >= 0;
  }

  // /attempts: what TraceWriter::flush writes, or one of AttemptDeviation.
  static bool attempts(hid_t file, ByteReader& in) {
    const std::uint8_t n = in.u8() % 6;
    if (n == 0) return true;
    if (n == 5) {
      H space(H5Screate(H5S_SCALAR), H5Sclose);
      H d(H5Dcreate2(file, "attempts", H5T_NATIVE_INT64, space.id, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Dclose);
      return d.id >= 0;
    }
    H group(H5Gcreate2(file, "attempts", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
    if (group.id < 0) return false;
    for (std::uint8_t i = 0; i < n; ++i) {
      const auto dev = static_cast<AttemptDeviation>(in.u8() % attempt_deviation_count);
      const std::uint8_t strings = in.u8() % 5, salt = in.u8();
      const std::string name = std::to_string(dev == attempt_misnamed ? i + 1 : i);
      if (dev == attempt_dataset) {
        H space(H5Screate(H5S_SCALAR), H5Sclose);
        H d(H5Dcreate2(group.id, name.c_str(), H5T_NATIVE_INT64, space.id, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
            H5Dclose);
        if (d.id < 0) return false;
        continue;
      }
      H a(H5Gcreate2(group.id, name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
      if (a.id < 0) return false;
      const long long first = static_cast<long long>(salt) * i;
      if (dev == attempt_first_step_string) {
        if (!string_attr(a.id, "first_step", std::to_string(first), false)) return false;
      } else if (dev != attempt_no_first_step) {
        if (!int_attr(a.id, "first_step", first)) return false;
      }
      for (std::uint8_t k = 0; k < strings; ++k) {
        const std::string key = "key" + std::to_string(k);
        const std::string value(static_cast<std::size_t>(salt) * k, static_cast<char>('a' + k));
        if (dev == attempt_int_attribute && k == 0) {
          if (!int_attr(a.id, key.c_str(), salt)) return false;
        } else if (dev == attempt_array_string && k == 0) {
          H type(H5Tcopy(H5T_C_S1), H5Tclose);
          const hsize_t two = 2;
          H space(H5Screate_simple(1, &two, nullptr), H5Sclose);
          const char* values[2] = {"x", "y"};
          if (H5Tset_size(type.id, H5T_VARIABLE) < 0) return false;
          H at(H5Acreate2(a.id, key.c_str(), type.id, space.id, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
          if (at.id < 0 || H5Awrite(at.id, type.id, values) < 0) return false;
        } else if (!string_attr(a.id, key.c_str(), value, dev != attempt_fixed_strings)) {
          return false;
        }
      }
    }
    return true;
  }

  static bool int_attr(hid_t obj, const char* name, long long v) {
    H space(H5Screate(H5S_SCALAR), H5Sclose);
    H attr(H5Acreate2(obj, name, H5T_NATIVE_LLONG, space.id, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
    return attr.id >= 0 && H5Awrite(attr.id, H5T_NATIVE_LLONG, &v) >= 0;
  }

  static bool string_attr(hid_t obj, const char* name, const std::string& v, bool variable) {
    H space(H5Screate(H5S_SCALAR), H5Sclose);
    H type(H5Tcopy(H5T_C_S1), H5Tclose);
    if (H5Tset_size(type.id, variable ? H5T_VARIABLE : v.size() + 1) < 0) return false;
    H attr(H5Acreate2(obj, name, type.id, space.id, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
    if (attr.id < 0) return false;
    const char* p = v.c_str();
    return H5Awrite(attr.id, type.id, variable ? static_cast<const void*>(&p) : p) >= 0;
  }

  static hid_t native(Family f) {
    switch (f) {
      case Family::i64: return H5T_NATIVE_INT64;
      case Family::i32: return H5T_NATIVE_INT32;
      case Family::u64: return H5T_NATIVE_UINT64;
      case Family::f64: return H5T_NATIVE_DOUBLE;
    }
    return H5T_NATIVE_DOUBLE;
  }

  static bool dataset(hid_t group, const DatasetSpec& spec, std::vector<hsize_t> dims, Deviation dev, std::uint8_t salt,
                      hsize_t nb, ByteReader& in) {
    if (dev == row_more) dims[0] += 1;
    if (dev == row_fewer && dims[0] > 0) dims[0] -= 1;
    if (dev == other_rank) {
      hsize_t count = 1;
      for (hsize_t d : dims) count *= d;
      dims = dims.size() == 1 ? std::vector<hsize_t>{count, 1} : std::vector<hsize_t>{count};
    }
    Family family = spec.family;
    hid_t file_type = native(family);
    if (dev == other_type) file_type = family == Family::f64 ? H5T_NATIVE_INT8 : H5T_NATIVE_FLOAT;

    if (dev == claimed_extent) {
      // Chunked and never written: the dataspace claims what the file does
      // not hold (the reader must check it before sizing a buffer from it).
      const hsize_t claims[] = {4096, qsgd::trace::max_trace_rows + 1, hsize_t(1) << 40};
      dims[0] = claims[salt % 3];
      std::vector<hsize_t> maxdims(dims.size(), H5S_UNLIMITED), chunk(dims.size(), 1);
      chunk[0] = 1024;
      H space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), maxdims.data()), H5Sclose);
      H dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
      if (space.id < 0 || dcpl.id < 0 || H5Pset_chunk(dcpl.id, static_cast<int>(chunk.size()), chunk.data()) < 0)
        return false;
      H d(H5Dcreate2(group, spec.name, file_type, space.id, H5P_DEFAULT, dcpl.id, H5P_DEFAULT), H5Dclose);
      return d.id >= 0;
    }

    H space(dev == scalar_space ? H5Screate(H5S_SCALAR)
            : dev == null_space ? H5Screate(H5S_NULL)
                                : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
            H5Sclose);
    if (space.id < 0) return false;
    H d(H5Dcreate2(group, spec.name, file_type, space.id, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Dclose);
    if (d.id < 0) return false;
    if (dev == null_space) return true;
    hsize_t count = 1;
    if (dev != scalar_space)
      for (hsize_t x : dims) count *= x;
    // Values: what a run could write (bucket counts up to nb, so that the
    // bucket datasets' size follows), or raw bits for the first few.
    std::vector<double> f(count);
    std::vector<std::int64_t> i(count);
    for (hsize_t k = 0; k < count; ++k) {
      i[k] = std::strcmp(spec.name, "count") == 0 ? (salt == 0 ? std::int64_t(nb) : std::int64_t((k * salt) % (nb + 1)))
                                                  : std::int64_t(k) + salt;
      f[k] = (static_cast<double>(k) + salt) * 0.25;
    }
    if (dev == raw_values) {
      for (hsize_t k = 0; k < count && k < 8; ++k) {
        const std::uint64_t bits = in.u64();
        std::memcpy(&f[k], &bits, 8);
        std::memcpy(&i[k], &bits, 8);
      }
    }
    if (count == 0) return true;
    if (family == Family::f64) return H5Dwrite(d.id, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, f.data()) >= 0;
    return H5Dwrite(d.id, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, i.data()) >= 0;
  }
};

}  // namespace qsgd_fuzz
