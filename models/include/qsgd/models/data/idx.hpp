#pragma once
// Reader for IDX files (the MNIST / Fashion-MNIST format), gzipped or not.
//
// Format: a 4-byte big-endian magic 0x00 0x00 <type> <ndims>, then ndims
// big-endian uint32 dimensions, then the data, row-major. Only type 0x08
// (unsigned byte) is accepted, which is what (Fashion-)MNIST uses.
// The reader is strict: any deviation is a DataError naming the file and the
// problem (missing file, unreadable or corrupt gzip stream, bad magic,
// unsupported type, zero dimensions, data shorter or longer than the header
// says).

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace qsgd::models {

struct IdxArray {
  std::vector<std::uint32_t> dims;
  std::vector<std::uint8_t> data;  // product(dims) bytes
};

// Reads a whole file through zlib, which reads gzip and plain files alike.
std::vector<std::uint8_t> read_file_maybe_gzip(const std::string& path);

// Parses IDX bytes; `path` only names the source in error messages.
IdxArray parse_idx(const std::vector<std::uint8_t>& bytes, const std::string& path);

inline IdxArray read_idx(const std::string& path) { return parse_idx(read_file_maybe_gzip(path), path); }

}  // namespace qsgd::models
