#include "qsgd/models/data/idx.hpp"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <sstream>
#include <sys/stat.h>

#include "qsgd/models/error.hpp"

namespace qsgd::models {

std::vector<std::uint8_t> read_file_maybe_gzip(const std::string& path) {
  // zlib opens plain files too (transparent mode); stat first so that a
  // missing file gets errno's message, not zlib's.
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    throw DataError(path + ": cannot open: " + std::strerror(errno));
  }
  if (S_ISDIR(st.st_mode)) throw DataError(path + ": cannot read: is a directory");
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw DataError(path + ": cannot open: " + std::strerror(errno ? errno : ENOMEM));
  std::vector<std::uint8_t> out;
  std::uint8_t chunk[1 << 16];
  for (;;) {
    const int got = gzread(f, chunk, sizeof chunk);
    if (got < 0) {
      int code = 0;
      const std::string msg = gzerror(f, &code);
      gzclose(f);
      throw DataError(path + ": corrupt or unreadable gzip data: " + msg);
    }
    if (got == 0) break;
    out.insert(out.end(), chunk, chunk + got);
  }
  // A gzip stream cut short reads as end-of-file with Z_BUF_ERROR pending.
  int code = 0;
  const char* msg = gzerror(f, &code);
  if (code != Z_OK && code != Z_STREAM_END) {
    const std::string m = msg ? msg : "";
    gzclose(f);
    throw DataError(path + ": truncated or corrupt gzip data: " + m);
  }
  if (gzclose(f) != Z_OK) throw DataError(path + ": truncated or corrupt gzip data");
  return out;
}

IdxArray parse_idx(const std::vector<std::uint8_t>& b, const std::string& path) {
  auto fail = [&](const std::string& what) { throw DataError(path + ": " + what); };
  if (b.size() < 4) fail("truncated: " + std::to_string(b.size()) + " bytes, shorter than the 4-byte IDX magic");
  if (b[0] != 0 || b[1] != 0) {
    std::ostringstream os;
    os << "bad magic 0x" << std::hex;
    for (int i = 0; i < 4; ++i) os << (b[i] < 16 ? "0" : "") << static_cast<unsigned>(b[i]);
    os << " (an IDX file starts with two zero bytes)";
    fail(os.str());
  }
  if (b[2] != 0x08) {
    std::ostringstream os;
    os << "unsupported IDX element type 0x" << std::hex << static_cast<unsigned>(b[2])
       << " (only 0x08, unsigned byte, is supported)";
    fail(os.str());
  }
  const std::size_t nd = b[3];
  if (nd == 0) fail("bad magic: zero dimensions");
  const std::size_t header = 4 + 4 * nd;
  if (b.size() < header) {
    fail("truncated: header of " + std::to_string(nd) + " dimensions needs " + std::to_string(header) +
         " bytes, file has " + std::to_string(b.size()));
  }
  IdxArray a;
  std::size_t count = 1;
  for (std::size_t d = 0; d < nd; ++d) {
    const std::uint8_t* p = &b[4 + 4 * d];
    const std::uint32_t v = (std::uint32_t(p[0]) << 24) | (std::uint32_t(p[1]) << 16) | (std::uint32_t(p[2]) << 8) | p[3];
    if (v == 0) fail("dimension " + std::to_string(d) + " is zero");
    if (count > (std::size_t(1) << 40) / v) fail("dimensions describe more than 2^40 bytes");
    count *= v;
    a.dims.push_back(v);
  }
  const std::size_t have = b.size() - header;
  if (have < count) {
    fail("truncated: dimensions need " + std::to_string(count) + " data bytes, file has " + std::to_string(have));
  }
  if (have > count) {
    fail("trailing data: dimensions need " + std::to_string(count) + " data bytes, file has " + std::to_string(have));
  }
  a.data.assign(b.begin() + static_cast<std::ptrdiff_t>(header), b.end());
  return a;
}

}  // namespace qsgd::models
