#pragma once
// Shared by every harness: how a broken contract ends the run, findings that
// are known and still open, a byte reader for structured inputs, and a
// scratch file for readers that take a path.
//
// A harness checks a reader's documented contract on each input and calls
// violation(id, ...) when it does not hold; violation() aborts, which
// libFuzzer reports as a crash and saves the input. Each clause has an id
// (e.g. "options.int-wraps") so that a finding in code that is not fixed yet
// can be tolerated while fuzzing goes on: QSGD_FUZZ_TOLERATE names them
// (comma-separated; fuzz/run.sh sets it from fuzz/regressions/open.txt),
// and the regression replay checks that each one still reproduces without it.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

namespace qsgd_fuzz {

inline const std::set<std::string>& tolerated() {
  static const std::set<std::string> ids = [] {
    std::set<std::string> out;
    const char* env = std::getenv("QSGD_FUZZ_TOLERATE");
    std::stringstream ss(env ? env : "");
    std::string id;
    while (std::getline(ss, id, ','))
      if (!id.empty()) out.insert(id);
    return out;
  }();
  return ids;
}

inline bool is_tolerated(const char* id) { return tolerated().count(id) != 0; }

// Ends the run: the message names the clause, so a regression test can match it.
[[noreturn]] inline void violation(const char* id, const std::string& what) {
  std::fprintf(stderr, "qsgd-fuzz: contract violated [%s]: %s\n", id, what.c_str());
  std::fflush(stderr);
  std::abort();
}

// The message is built only when the check fails (checks run millions of times).
#define QSGD_FUZZ_CHECK(cond, id, msg)                 \
  do {                                                 \
    if (!(cond)) {                                     \
      std::ostringstream qsgd_fuzz_os_;                \
      qsgd_fuzz_os_ << msg;                            \
      ::qsgd_fuzz::violation(id, qsgd_fuzz_os_.str()); \
    }                                                  \
  } while (0)

// A check for a finding that may be listed as open: when tolerated, the
// harness returns early from the input instead (the caller's `return 0`).
#define QSGD_FUZZ_CHECK_OPEN(cond, id, msg)            \
  do {                                                 \
    if (!(cond)) {                                     \
      if (::qsgd_fuzz::is_tolerated(id)) return 0;     \
      std::ostringstream qsgd_fuzz_os_;                \
      qsgd_fuzz_os_ << msg;                            \
      ::qsgd_fuzz::violation(id, qsgd_fuzz_os_.str()); \
    }                                                  \
  } while (0)

// Reads a structured input front to back; past the end every read yields
// zero, so any prefix of an input is an input. The seed generator writes the
// same layouts with ByteWriter.
class ByteReader {
 public:
  ByteReader(const std::uint8_t* data, std::size_t size) : p_(data), end_(data + size) {}
  std::uint8_t u8() { return p_ < end_ ? *p_++ : 0; }
  std::uint16_t u16() { return static_cast<std::uint16_t>(u8() | (std::uint16_t(u8()) << 8)); }
  std::uint32_t u32() { return u16() | (std::uint32_t(u16()) << 16); }
  std::uint64_t u64() { return u32() | (std::uint64_t(u32()) << 32); }
  float f32() {
    const std::uint32_t b = u32();
    float f;
    std::memcpy(&f, &b, 4);
    return f;
  }
  std::size_t left() const { return static_cast<std::size_t>(end_ - p_); }
  const std::uint8_t* here() const { return p_; }
  void skip(std::size_t n) { p_ += n < left() ? n : left(); }

 private:
  const std::uint8_t* p_;
  const std::uint8_t* end_;
};

class ByteWriter {
 public:
  void u8(std::uint8_t v) { b_.push_back(v); }
  void u16(std::uint16_t v) { u8(static_cast<std::uint8_t>(v)), u8(static_cast<std::uint8_t>(v >> 8)); }
  void u32(std::uint32_t v) { u16(static_cast<std::uint16_t>(v)), u16(static_cast<std::uint16_t>(v >> 16)); }
  void u64(std::uint64_t v) { u32(static_cast<std::uint32_t>(v)), u32(static_cast<std::uint32_t>(v >> 32)); }
  void f32(float f) {
    std::uint32_t b;
    std::memcpy(&b, &f, 4);
    u32(b);
  }
  void bytes(const void* p, std::size_t n) {
    const auto* c = static_cast<const std::uint8_t*>(p);
    b_.insert(b_.end(), c, c + n);
  }
  const std::vector<std::uint8_t>& data() const { return b_; }

 private:
  std::vector<std::uint8_t> b_;
};

// The train-options harness's input: the arguments after argv[0], separated
// by NUL bytes.
inline std::vector<std::uint8_t> join_args(const std::vector<std::string>& args) {
  std::vector<std::uint8_t> b;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (i > 0) b.push_back(0);
    b.insert(b.end(), args[i].begin(), args[i].end());
  }
  return b;
}

// One file per process in $TMPDIR (libFuzzer's -fork and -jobs run several
// processes at once), rewritten for each input and removed at exit.
class ScratchFile {
 public:
  explicit ScratchFile(const std::string& tag) {
    const char* dir = std::getenv("TMPDIR");
    path_ = std::string(dir && *dir ? dir : "/tmp") + "/qsgd-fuzz-" + tag + "-" + std::to_string(::getpid());
  }
  ~ScratchFile() {
    std::remove(path_.c_str());  // a writer removes its own temporary file when it fails
  }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;

  const std::string& path() const { return path_; }

  // A failure here is the machine's (disk full), not the reader's: it stops
  // the run with a message that says so rather than hiding the input.
  void write(const void* data, std::size_t size) const {
    std::FILE* f = std::fopen(path_.c_str(), "wb");
    if (!f) fail();
    const bool ok = size == 0 || std::fwrite(data, 1, size, f) == size;
    if (std::fclose(f) != 0 || !ok) fail();
  }
  std::vector<std::uint8_t> read() const {
    std::vector<std::uint8_t> out;
    std::FILE* f = std::fopen(path_.c_str(), "rb");
    if (!f) fail();
    std::uint8_t buf[65536];
    std::size_t got;
    while ((got = std::fread(buf, 1, sizeof buf, f)) > 0) out.insert(out.end(), buf, buf + got);
    std::fclose(f);
    return out;
  }

 private:
  [[noreturn]] void fail() const {
    std::fprintf(stderr, "qsgd-fuzz: cannot write or read the scratch file %s (set TMPDIR)\n", path_.c_str());
    std::exit(2);
  }
  std::string path_;
};

}  // namespace qsgd_fuzz
