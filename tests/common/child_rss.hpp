#pragma once
// Test helper shared by the test programs that bound a reader's memory on
// untrusted input (test_message, test_models_data): runs a check in a forked
// child and measures how far the child's peak resident set grew.

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <utility>

namespace qsgd_test {

// Runs f in a forked child; returns the child's exit status (0: f returned
// true; 1: it returned false or threw; -1: the child did not exit, e.g. it
// was killed) and how far its peak resident set grew over this process's
// resident set at the fork, in MiB. Peak RSS, not an address-space limit
// (which AddressSanitizer's shadow memory would exceed).
inline std::pair<int, double> in_child(const std::function<bool()>& f) {
  auto rss_kib = [] {
    std::ifstream st("/proc/self/statm");
    long pages = 0, resident = 0;
    st >> pages >> resident;
    return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / 1024.0;
  };
  const double base = rss_kib();
  const pid_t pid = fork();
  if (pid == 0) {
    bool ok = false;
    try {
      ok = f();
    } catch (...) {
    }
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  struct rusage ru {};
  if (pid < 0 || wait4(pid, &status, 0, &ru) != pid) return {-1, 0.0};
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, (static_cast<double>(ru.ru_maxrss) - base) / 1024.0};
}

}  // namespace qsgd_test
