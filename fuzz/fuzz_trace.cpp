// HDF5 trace reader harnesses: what qsgd-train --resume reads
// (TraceWriter::load, benchmarks/trace/trace.cpp). Contract
// (docs/reliability.md, trace.hpp): the writer loads the file or throws
// std::runtime_error ("trace: ..."); every dataspace is checked against the
// reader's limits before a buffer is sized from it; it closes every HDF5
// object it opened; a trace it loaded can be truncated, written back by
// flush() and loaded again with the same steps and the same attempts
// (/attempts), plus the one that wrote it back.
//
// Input: u8 mode (bits 0-1: the run's rank count - 1; bits 2-3: how many of
// the last steps a resume drops; bit 4, raw harness: verify the checksum
// block as --resume does, instead of reading behind it), then, for
// qsgd-fuzz-trace, a recipe that trace_builder.hpp turns into an HDF5 file
// through the HDF5 API (the schema's deviations, in files HDF5 itself wrote,
// sealed with their checksum block), and for qsgd-fuzz-trace-raw
// (QSGD_FUZZ_TRACE_RAW) the file's bytes as they are.
//
// Debian's HDF5 library is not instrumented: coverage guides the search
// through trace.cpp only. The raw harness reading behind the checksum (what
// a file forged with a valid checksum block reaches) fuzzes HDF5's own file
// parser as much as the reader, and HDF5 1.10.8 crashes on some corrupt
// files (regressions/open.txt); it runs in long runs, not in CI's bounded
// one.

#include <hdf5.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "common.hpp"
#include "qsgd/train/trace.hpp"
#include "trace_builder.hpp"

using namespace qsgd_fuzz;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // The reader reports failures through its exceptions; HDF5's own error
  // stack printout would only flood the log.
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  return 0;
}

namespace {

void one_input(const ScratchFile& file, const std::uint8_t* data, std::size_t size) {
  const std::uint8_t mode = data[0];
  const int ranks = 1 + (mode & 3);
#if defined(QSGD_FUZZ_TRACE_RAW)
  file.write(data + 1, size - 1);
  const auto check = (mode & 16) ? qsgd::trace::Check::seal_and_structure : qsgd::trace::Check::structure_only;
#else
  ByteReader in(data + 1, size - 1);
  if (!TraceBuilder::build(in, file.path(), ranks)) return;
  qsgd::trace::seal(file.path());
  const auto check = qsgd::trace::Check::seal_and_structure;
#endif

  std::int64_t steps = 0, last = -1;
  std::vector<qsgd::trace::Attempt> attempts;
  try {
    qsgd::trace::TraceWriter w(file.path(), ranks, {}, true, check);
    steps = w.steps();
    last = w.last_step();
    QSGD_FUZZ_CHECK(w.attempts().size() <= qsgd::trace::max_attempts + 1, "trace.limits",
                    "loaded " << w.attempts().size() - 1 << " attempts, beyond the reader's limit");
    QSGD_FUZZ_CHECK(static_cast<unsigned long long>(steps) <= qsgd::trace::max_trace_rows &&
                        static_cast<unsigned long long>(steps) * ranks <= qsgd::trace::max_trace_records,
                    "trace.limits",
                    "loaded " << steps << " steps of " << ranks << " ranks, beyond the reader's limits");
    // A resume keeps the steps before the one it restarts from.
    const int drop = (mode >> 2) & 3;
    if (drop > 0 && last >= 0) {
      w.truncate(last + 1 - drop, 1 << 30);
      steps = w.steps();
      last = w.last_step();
    }
    attempts = w.attempts();
    try {
      w.flush();
    } catch (const std::exception& e) {
      violation("trace.flush", std::string("writing back a loaded trace failed: ") + e.what());
    }
  } catch (const std::runtime_error& e) {
    QSGD_FUZZ_CHECK(std::string(e.what()).rfind("trace: ", 0) == 0, "trace.error-message",
                    "an error without the reader's prefix: " << e.what());
    return;
  } catch (const std::exception& e) {
    violation("trace.error-type", std::string("loading threw a non-runtime_error exception: ") + e.what());
  }

  try {
    qsgd::trace::TraceWriter again(file.path(), ranks, {}, true);
    QSGD_FUZZ_CHECK(again.steps() == steps && again.last_step() == last, "trace.reload",
                    "reloading a written trace gave " << again.steps() << " steps (last " << again.last_step()
                                                      << "), it held " << steps << " (last " << last << ")");
    // Every attempt written back as it was loaded, and the reload's own last.
    const auto& back = again.attempts();
    bool same = back.size() == attempts.size() + 1;
    for (std::size_t i = 0; same && i < attempts.size(); ++i)
      same = back[i].first_step == attempts[i].first_step && back[i].attrs == attempts[i].attrs;
    QSGD_FUZZ_CHECK(same, "trace.reload",
                    "reloading a written trace gave " << back.size() << " attempts, not the " << attempts.size()
                                                      << " written and the reload's own, or changed one");
  } catch (const std::exception& e) {
    violation("trace.reload", std::string("a trace the writer wrote does not load: ") + e.what());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const ScratchFile file("trace");
  if (size == 0) return 0;
  one_input(file, data, size);
  // The reader closes every file, group, dataset, dataspace and attribute it
  // opened, on every path (LeakSanitizer cannot tell: HDF5's own leaks on
  // corrupt files are suppressed, fuzz/lsan.supp).
  const ssize_t still_open = H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL);
  QSGD_FUZZ_CHECK(still_open == 0, "trace.handles-closed",
                  still_open << " HDF5 objects are still open after the input");
  return 0;
}
