// Trace journal harness: what qsgd-train --resume and qsgd-trace read after a
// run that did not finish (TraceWriter::load_journal, train/src/trace.cpp;
// format: docs/traces.md, "Journal"). Contract (trace.hpp): the writer loads
// the file and its journal or throws std::runtime_error ("trace: ..."); it
// never takes more rows than the reader's limits; a journal bound to another
// file adds nothing; what it loaded is written back whole by flush() (the
// journal removed) and loads again with the same steps.
//
// Input: u8 mode (bit 0: the run's rank count - 1; bit 1: the input follows
// a header bound to the harness's trace file, as a writer would have put it,
// so that the records are read; bit 2: each record's frame and payload CRCs
// are recomputed from its stated length, so that the payload's fields are
// reached), then the
// journal's bytes (after the header where bit 1 is set). The trace file
// itself (3 steps, written by TraceWriter once per process and rank count) is
// the same for every input.

#include <hdf5.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "common.hpp"
#include "qsgd/kernels/crc32c.hpp"
#include "qsgd/train/trace.hpp"

using namespace qsgd_fuzz;
namespace qtr = qsgd::trace;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  return 0;
}

namespace {

constexpr int base_steps = 3;

std::uint32_t crc32c(const std::uint8_t* p, std::size_t n) { return qsgd::detail::crc32c_bytes_host(p, n); }

// The trace file every input's journal extends: its bytes, per rank count.
const std::vector<std::uint8_t>& base_file(const ScratchFile& file, int ranks) {
  static std::vector<std::uint8_t> bytes[2];
  auto& b = bytes[ranks - 1];
  if (b.empty()) {
    std::remove(file.path().c_str());
    std::remove(qtr::journal_path(file.path()).c_str());
    {
      qtr::TraceWriter w(file.path(), ranks, {{"label", "fuzz"}}, false);
      for (int s = 0; s < base_steps; ++s) {
        std::vector<qtr::StepRecord> row(static_cast<std::size_t>(ranks));
        for (auto& r : row) {
          r.step = s;
          r.buckets = 1;
        }
        w.add_step(row);
      }
      w.flush();
    }
    b = file.read();
  }
  return b;
}

// The 64-byte header a writer puts before the records, bound to `file`.
std::vector<std::uint8_t> header_for(const std::vector<std::uint8_t>& file, int ranks) {
  std::vector<std::uint8_t> h(64, 0);
  const char magic[16] = {'Q', 'S', 'G', 'D', '-', 'T', 'R', 'A', 'C', 'E', '-', 'J', 'R', 'N', 'L', '1'};
  std::memcpy(h.data(), magic, 16);
  std::memcpy(h.data() + 16, file.data() + 16, 8);  // the size and CRC the file's checksum block states
  std::memcpy(h.data() + 24, file.data() + 24, 4);
  const std::uint32_t k = static_cast<std::uint32_t>(ranks);
  const std::uint64_t steps = base_steps, zero = 0;
  std::memcpy(h.data() + 28, &k, 4);
  std::memcpy(h.data() + 32, &steps, 8);
  std::memcpy(h.data() + 40, &zero, 8);
  std::memcpy(h.data() + 48, &zero, 8);
  const std::uint32_t c = crc32c(h.data(), 56);
  std::memcpy(h.data() + 56, &c, 4);
  return h;
}

// Recomputes each record's frame and payload CRCs from its stated length,
// from byte `at` on (a frame: mark, payload bytes, CRC32C of those 8 bytes).
void reseal_records(std::vector<std::uint8_t>& j, std::size_t at) {
  while (at <= j.size() && j.size() - at >= 12) {
    std::uint32_t payload = 0;
    std::memcpy(&payload, j.data() + at + 4, 4);
    const std::uint32_t frame = crc32c(j.data() + at, 8);
    std::memcpy(j.data() + at + 8, &frame, 4);
    if (j.size() - at - 12 < std::uint64_t{payload} + 4) return;
    const std::uint32_t c = crc32c(j.data() + at + 12, payload);
    std::memcpy(j.data() + at + 12 + payload, &c, 4);
    at += 12 + std::size_t{payload} + 4;
  }
}

void one_input(const ScratchFile& file, const std::uint8_t* data, std::size_t size) {
  const std::uint8_t mode = data[0];
  const int ranks = 1 + (mode & 1);
  const auto& base = base_file(file, ranks);
  std::vector<std::uint8_t> journal;
  if (mode & 2) journal = header_for(base, ranks);
  const std::size_t records_at = journal.size();
  journal.insert(journal.end(), data + 1, data + size);
  if (mode & 4) reseal_records(journal, (mode & 2) ? records_at : 64);
  file.write(base.data(), base.size());
  const std::string jpath = qtr::journal_path(file.path());
  {
    std::FILE* f = std::fopen(jpath.c_str(), "wb");
    if (!f || (!journal.empty() && std::fwrite(journal.data(), 1, journal.size(), f) != journal.size()) ||
        std::fclose(f) != 0) {
      std::perror("qsgd-fuzz-trace-journal: writing the journal");
      std::abort();
    }
  }

  std::int64_t steps = 0;
  try {
    qtr::TraceWriter w(file.path(), ranks, {}, true);
    steps = w.steps();
    QSGD_FUZZ_CHECK(steps >= base_steps && w.journal_steps() == steps - base_steps, "journal.rows",
                    "loaded " << steps << " steps, " << w.journal_steps() << " from the journal, over a file of "
                              << base_steps);
    QSGD_FUZZ_CHECK(static_cast<unsigned long long>(steps) <= qtr::max_trace_rows &&
                        static_cast<unsigned long long>(steps) * static_cast<unsigned long long>(ranks) <=
                            qtr::max_trace_records,
                    "journal.limits", "loaded " << steps << " steps of " << ranks << " ranks, beyond the limits");
    try {
      w.flush();
    } catch (const std::exception& e) {
      violation("journal.flush", std::string("writing back a loaded trace failed: ") + e.what());
    }
  } catch (const std::runtime_error& e) {
    QSGD_FUZZ_CHECK(std::string(e.what()).rfind("trace: ", 0) == 0, "journal.error-message",
                    "an error without the reader's prefix: " << e.what());
    std::remove(jpath.c_str());
    return;
  } catch (const std::exception& e) {
    violation("journal.error-type", std::string("loading threw a non-runtime_error exception: ") + e.what());
  }
  QSGD_FUZZ_CHECK(std::fopen(jpath.c_str(), "rb") == nullptr, "journal.flush",
                  "the first flush after a resume left the journal");
  try {
    qtr::TraceWriter again(file.path(), ranks, {}, true);
    QSGD_FUZZ_CHECK(again.steps() == steps && again.journal_steps() == 0, "journal.reload",
                    "reloading the written-back trace gave " << again.steps() << " steps, it held " << steps);
  } catch (const std::exception& e) {
    violation("journal.reload", std::string("a trace the writer wrote does not load: ") + e.what());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const ScratchFile file("trace-journal");
  if (size == 0) return 0;
  one_input(file, data, size);
  const ssize_t still_open = H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL);
  QSGD_FUZZ_CHECK(still_open == 0, "journal.handles-closed", still_open << " HDF5 objects are still open");
  return 0;
}
