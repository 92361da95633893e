#include "qsgd/models/data/idx.hpp"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sstream>
#include <sys/stat.h>

#include "qsgd/models/error.hpp"

namespace qsgd::models {

namespace {

// Fails with "<path>: <what>".
[[noreturn]] void fail(const std::string& path, const std::string& what) { throw DataError(path + ": " + what); }

// The 4-byte magic: type 0x08 and the number of dimensions.
std::size_t check_magic(const std::uint8_t* b, std::size_t size, const std::string& path) {
  if (size < 4) fail(path, "truncated: " + std::to_string(size) + " bytes, shorter than the 4-byte IDX magic");
  if (b[0] != 0 || b[1] != 0) {
    std::ostringstream os;
    os << "bad magic 0x" << std::hex;
    for (int i = 0; i < 4; ++i) os << (b[i] < 16 ? "0" : "") << static_cast<unsigned>(b[i]);
    os << " (an IDX file starts with two zero bytes)";
    fail(path, os.str());
  }
  if (b[2] != 0x08) {
    std::ostringstream os;
    os << "unsupported IDX element type 0x" << std::hex << static_cast<unsigned>(b[2])
       << " (only 0x08, unsigned byte, is supported)";
    fail(path, os.str());
  }
  const std::size_t nd = b[3];
  if (nd == 0) fail(path, "bad magic: zero dimensions");
  return nd;
}

// The dimensions (b points at the first); returns the data size in bytes,
// checked against `max_bytes` before anything of that size exists.
std::size_t parse_dims(const std::uint8_t* b, std::size_t nd, std::size_t max_bytes, const std::string& path,
                       std::vector<std::uint32_t>& dims) {
  std::size_t count = 1;
  for (std::size_t d = 0; d < nd; ++d) {
    const std::uint8_t* p = b + 4 * d;
    const std::uint32_t v = (std::uint32_t(p[0]) << 24) | (std::uint32_t(p[1]) << 16) | (std::uint32_t(p[2]) << 8) | p[3];
    if (v == 0) fail(path, "dimension " + std::to_string(d) + " is zero");
    if (count > max_bytes / v)
      fail(path, "dimensions describe more than the limit of " + std::to_string(max_bytes) + " data bytes");
    count *= v;
    dims.push_back(v);
  }
  return count;
}

// A gzip (or plain) file read through zlib, in pieces.
class GzReader {
 public:
  explicit GzReader(const std::string& path) : path_(path) {
    // zlib opens plain files too (transparent mode); stat first so that a
    // missing file gets errno's message, not zlib's.
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) fail(path, std::string("cannot open: ") + std::strerror(errno));
    if (S_ISDIR(st.st_mode)) fail(path, "cannot read: is a directory");
    f_ = gzopen(path.c_str(), "rb");
    if (!f_) fail(path, std::string("cannot open: ") + std::strerror(errno ? errno : ENOMEM));
  }
  ~GzReader() {
    if (f_) gzclose(f_);
  }
  GzReader(const GzReader&) = delete;
  GzReader& operator=(const GzReader&) = delete;

  // Reads up to n bytes into out (appended); returns the count (< n at the end).
  std::size_t read(std::vector<std::uint8_t>& out, std::size_t n) {
    std::size_t total = 0;
    while (total < n) {
      const std::size_t want = std::min<std::size_t>(n - total, std::size_t(1) << 20);
      const std::size_t at = out.size();
      out.resize(at + want);
      const int got = gzread(f_, out.data() + at, static_cast<unsigned>(want));
      if (got < 0) {
        int code = 0;
        const std::string msg = gzerror(f_, &code);
        fail(path_, "corrupt or unreadable gzip data: " + msg);
      }
      out.resize(at + static_cast<std::size_t>(got));
      total += static_cast<std::size_t>(got);
      if (got == 0) break;
    }
    if (total < n) check_end();
    return total;
  }

 private:
  // A gzip stream cut short reads as end-of-file with Z_BUF_ERROR pending.
  void check_end() {
    int code = 0;
    const char* msg = gzerror(f_, &code);
    if (code != Z_OK && code != Z_STREAM_END) fail(path_, std::string("truncated or corrupt gzip data: ") + (msg ? msg : ""));
  }

  std::string path_;
  gzFile f_ = nullptr;
};

}  // namespace

IdxArray read_idx(const std::string& path, std::size_t max_bytes) {
  // Streamed: the header first, then exactly the data it announces (at most
  // max_bytes), then one byte more to tell trailing data; memory never
  // exceeds what the header announces, whatever the file inflates to.
  GzReader in(path);
  std::vector<std::uint8_t> head;
  in.read(head, 4);
  const std::size_t nd = check_magic(head.data(), head.size(), path);
  in.read(head, 4 * nd);
  if (head.size() < 4 + 4 * nd)
    fail(path, "truncated: header of " + std::to_string(nd) + " dimensions needs " + std::to_string(4 + 4 * nd) +
                   " bytes, file has " + std::to_string(head.size()));
  IdxArray a;
  const std::size_t count = parse_dims(&head[4], nd, max_bytes, path, a.dims);
  a.data.reserve(count);
  const std::size_t have = in.read(a.data, count);
  if (have < count)
    fail(path, "truncated: dimensions need " + std::to_string(count) + " data bytes, file has " + std::to_string(have));
  std::vector<std::uint8_t> more;
  if (in.read(more, 1) != 0) fail(path, "trailing data: dimensions need " + std::to_string(count) + " data bytes, file has more");
  return a;
}

}  // namespace qsgd::models
