// qsgd-trace: what a trace and its journal hold, and folding the journal in.
// qsgd-train appends each flush to FILE.journal and rewrites FILE only when
// the journal has grown to a multiple of it (train/include/qsgd/train/
// trace.hpp): a finished or stopped run leaves one file, a running, killed or
// lost one a file and a journal. `merge` folds the journal into the file (as
// a resume does); `steps` counts the steps of both without changing either.
#include <cstdio>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli.hpp"
#include "qsgd/train/trace.hpp"

namespace qs = qsgd::support;
namespace qt = qsgd::trace;

namespace {

constexpr const char* program = "qsgd-trace";

void usage(std::FILE* f) {
  std::fputs(
      "usage: qsgd-trace merge FILE [FILE ...]\n"
      "       qsgd-trace steps FILE\n"
      "qsgd-train's traces (docs/traces.md): a flush appends to FILE.journal, and FILE is rewritten\n"
      "when the journal has grown to 4x its size, at a resume, and when the run finishes or stops at\n"
      "its checkpoint signal. A running, killed or lost run leaves FILE (complete, readable by h5dump\n"
      "and h5py) and FILE.journal (every later flushed step).\n"
      "\n"
      "  merge   folds each FILE.journal into FILE (rewritten through a temporary file and renamed)\n"
      "          and removes it; prints the steps it added. Not while the run is writing FILE.\n"
      "  steps   prints the steps FILE and FILE.journal hold together (a running run's progress),\n"
      "          changing neither\n"
      "\n"
      "Exit status: 0, 1 on a damaged or unreadable FILE or journal (the message names it),\n"
      "2 on wrong usage.\n",
      f);
}

int run(const std::vector<std::string>& args) {
  if (args.empty()) throw qs::UsageError("a command is required: merge or steps (see --help)");
  const std::string& cmd = args[0];
  const std::vector<std::string> files(args.begin() + 1, args.end());
  if (files.empty()) throw qs::UsageError(cmd + " needs a trace FILE");
  for (const auto& f : files)
    if (!f.empty() && f[0] == '-') throw qs::UsageError("unknown option '" + f + "' (see --help)");
  if (cmd == "merge") {
    for (const auto& f : files) {
      const std::int64_t n = qt::merge_journal(f);
      std::cout << f << ": " << n << " step(s) folded in from " << qt::journal_path(f) << "\n";
    }
    return 0;
  }
  if (cmd == "steps") {
    if (files.size() != 1) throw qs::UsageError("steps takes one FILE");
    const qt::Contents c = qt::inspect(files[0]);
    std::cout << c.file_steps + c.journal_steps << "\n";
    return 0;
  }
  throw qs::UsageError("unknown command '" + cmd + "': merge or steps (see --help)");
}

}  // namespace

int main(int argc, char** argv) {
  if (const auto code = qsgd::bench::early_options(argc, argv, program, usage)) return *code;
  try {
    return run(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const qs::UsageError& e) {
    std::cerr << program << ": error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << program << ": error: " << e.what() << "\n";
    return 1;
  }
}
