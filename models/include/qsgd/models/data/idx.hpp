#pragma once
// Reader for IDX files (the MNIST / Fashion-MNIST format), gzipped or not.
//
// Format: a 4-byte big-endian magic 0x00 0x00 <type> <ndims>, then ndims
// big-endian uint32 dimensions, then the data, row-major. Only type 0x08
// (unsigned byte) is accepted, which is what (Fashion-)MNIST uses.
// The reader is strict: any deviation is a DataError naming the file and the
// problem (missing file, unreadable or corrupt gzip stream, bad magic,
// unsupported type, zero dimensions, data shorter or longer than the header
// says, more data than the caller's limit).
//
// Bounded work: read_idx streams the file (a gzip stream is inflated piece by
// piece): it reads the header, rejects dimensions that announce more than
// `max_bytes` of data before allocating anything, then reads exactly the
// announced bytes and one more to detect trailing data. Memory is at most
// the announced size, whatever the file would inflate to (a 10 MB gzip bomb
// of 10 GB is rejected at its header or after count + 1 bytes).

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace qsgd::models {

struct IdxArray {
  std::vector<std::uint32_t> dims;
  std::vector<std::uint8_t> data;  // product(dims) bytes
};

// Default limit on an IDX file's data: 1 GiB (Fashion-MNIST's training
// images are 47 MB).
constexpr std::size_t idx_default_max_bytes = std::size_t(1) << 30;

// Reads an IDX file, streamed (see above).
IdxArray read_idx(const std::string& path, std::size_t max_bytes = idx_default_max_bytes);

}  // namespace qsgd::models
