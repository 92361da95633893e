// IDX reader harness (models/src/idx.cpp), gzipped and plain. Contract
// (idx.hpp): read_idx returns the array or throws DataError whose message
// starts with the file's name; it allocates at most the data size its caller
// allows (max_bytes), whatever the file inflates to; an array it returns has
// non-zero dimensions whose product is its size, and is exactly what the
// file holds (no trailing data).
//
// Input: u8 mode, then the file's bytes. Mode bit 0 gzips them first
// (level from bits 1-3), so that mutations of the IDX structure reach the
// reader through a valid gzip stream; without it, gzip seeds are mutated as
// they are, which exercises zlib's error paths. Bit 4 lowers the caller's
// limit from 1 MiB to 4 KiB.

#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common.hpp"
#include "qsgd/models/data/idx.hpp"
#include "qsgd/models/error.hpp"

namespace {

using namespace qsgd_fuzz;

void write_gzip(const std::string& path, const std::uint8_t* data, std::size_t size, int level) {
  const std::string mode = "wb" + std::to_string(level);
  gzFile f = gzopen(path.c_str(), mode.c_str());
  const bool ok = f && (size == 0 || gzwrite(f, data, static_cast<unsigned>(size)) == static_cast<int>(size));
  if (!f || gzclose(f) != Z_OK || !ok) {
    std::fprintf(stderr, "qsgd-fuzz: cannot write %s (set TMPDIR)\n", path.c_str());
    std::exit(2);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const ScratchFile file("idx");
  if (size == 0) return 0;
  const std::uint8_t mode = data[0];
  const std::uint8_t* body = data + 1;
  const std::size_t len = size - 1;
  const bool gz = mode & 1;
  if (gz)
    write_gzip(file.path(), body, len, (mode >> 1) & 7);
  else
    file.write(body, len);
  const std::size_t max_bytes = mode & 16 ? 4096 : std::size_t(1) << 20;

  qsgd::models::IdxArray a;
  try {
    a = qsgd::models::read_idx(file.path(), max_bytes);
  } catch (const qsgd::models::DataError& e) {
    QSGD_FUZZ_CHECK(std::string(e.what()).rfind(file.path() + ": ", 0) == 0, "idx.error-names-file",
                    "the message does not start with the file's name: " << e.what());
    return 0;
  } catch (const std::exception& e) {
    violation("idx.error-type", std::string("read_idx threw a non-DataError exception: ") + e.what());
  }

  std::size_t count = 1;
  for (std::uint32_t d : a.dims) {
    QSGD_FUZZ_CHECK(d != 0, "idx.accepted-shape", "accepted a zero dimension");
    count *= d;
  }
  QSGD_FUZZ_CHECK(
      !a.dims.empty() && count == a.data.size() && count <= max_bytes, "idx.accepted-shape",
      "dimensions give " << count << " bytes, the array holds " << a.data.size() << ", the limit is " << max_bytes);
  // Plain (or gzipped here) bytes are the file's content: it must be the
  // header and exactly the data returned. Gzip input that arrives compressed
  // is not inflated again here.
  const bool compressed_input = !gz && len >= 2 && body[0] == 0x1f && body[1] == 0x8b;
  if (!compressed_input) {
    std::vector<std::uint8_t> want = {0, 0, 0x08, static_cast<std::uint8_t>(a.dims.size())};
    for (std::uint32_t d : a.dims)
      for (int k = 3; k >= 0; --k) want.push_back(static_cast<std::uint8_t>(d >> (8 * k)));
    want.insert(want.end(), a.data.begin(), a.data.end());
    QSGD_FUZZ_CHECK(want.size() == len && std::memcmp(want.data(), body, len) == 0, "idx.accepted-content",
                    "the array returned is not the file's content (" << want.size() << " vs " << len << " bytes)");
  }
  return 0;
}
