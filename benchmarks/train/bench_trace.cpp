// qsgd-bench-trace: what a trace flush costs as a run grows. Writes a
// synthetic trace (K ranks, B buckets a step) through qsgd::trace's
// TraceWriter, flushing every F steps as qsgd-train does, and reports at
// each step of --at the median flush time over the next flushes (journal
// appends), then the time of one whole rewrite there (what every flush cost
// when each one rewrote the file, and what the rewrites the journal still
// makes cost: close()), and in the end the bytes the process wrote
// (/proc/self/io write_bytes) over the trace's final size.
#include <Kokkos_Core.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unistd.h>
#include <vector>

#include "cli.hpp"
#include "dates.hpp"
#include "json.hpp"
#include "provenance.hpp"
#include "qsgd/support/option_values.hpp"
#include "qsgd/train/trace.hpp"
#include "stats.hpp"

namespace qs = qsgd::support;
namespace qt = qsgd::trace;

namespace {

constexpr const char* program = "qsgd-bench-trace";

void usage(std::FILE* f) {
  std::fputs(
      "usage: qsgd-bench-trace [options]\n"
      "Flush times of a growing trace: a synthetic run of K ranks written through qsgd-train's trace\n"
      "writer (a journal append per flush, a rewrite of the file when the journal reaches 4x it).\n"
      "\n"
      "  --trace-dir DIR    where the trace is written, then removed (.; on a disk: tmpfs accounts no writes)\n"
      "  --ranks K          ranks per step record (4)\n"
      "  --buckets B        buckets per step (4)\n"
      "  --steps N          steps written (100000)\n"
      "  --flush-every F    steps between flushes, as qsgd-train's --flush-every (20)\n"
      "  --at LIST          steps at which to report (100,100000); each must be at most N - 10 F\n"
      "  -o, --out FILE     also write the figures as JSON to FILE (none)\n"
      "\n"
      "At each step S of --at: the median and maximum time of the 10 flushes after S (ms), then the time\n"
      "of one rewrite of the whole trace at S (ms; TraceWriter::close, as a rewrite or the end of a run\n"
      "costs). At the end: the trace's size, the journal's rewrites, the slowest flush, and the bytes the\n"
      "process wrote (/proc/self/io write_bytes) over the trace's size.\n",
      f);
}

struct Args {
  std::string dir = ".", out;
  std::uint64_t ranks = 4, buckets = 4, steps = 100000, flush_every = 20;
  std::vector<std::uint64_t> at{100, 100000};
};

Args parse(int argc, char** argv) {
  Args a;
  bool at_given = false;
  for (int i = 1; i < argc; ++i) {
    const std::string o = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) throw qs::UsageError(o + " needs a value");
      return argv[++i];
    };
    if (o == "--trace-dir") a.dir = val();
    else if (o == "--out" || o == "-o") a.out = val();
    else if (o == "--ranks") a.ranks = qs::parse_count(o, val(), 1, 4096);
    else if (o == "--buckets") a.buckets = qs::parse_count(o, val(), 0, qt::max_buckets);
    else if (o == "--steps") a.steps = qs::parse_count(o, val(), 1, qt::max_trace_rows);
    else if (o == "--flush-every") a.flush_every = qs::parse_count(o, val(), 1, 1u << 20);
    else if (o == "--at") {
      a.at = qs::parse_count_list(o, val(), 1, 0, qt::max_trace_rows);
      at_given = true;
    } else throw qs::UsageError("unknown option '" + o + "' (see --help)");
  }
  if (!at_given) a.at = {std::min<std::uint64_t>(100, a.steps), a.steps};
  for (auto& s : a.at) {
    if (s + 10 * a.flush_every > a.steps) {
      if (!at_given) s = a.steps > 10 * a.flush_every ? a.steps - 10 * a.flush_every : 0;
      else throw qs::UsageError("--at " + std::to_string(s) + ": the 10 flushes after it pass --steps " +
                                std::to_string(a.steps));
    }
  }
  if (a.ranks * a.steps > qt::max_trace_records)
    throw qs::UsageError("--ranks x --steps exceeds the trace reader's limit of " +
                         std::to_string(qt::max_trace_records) + " step records");
  return a;
}

std::uint64_t write_bytes_so_far() {
  std::ifstream io("/proc/self/io");
  std::string key;
  std::uint64_t v = 0;
  while (io >> key >> v)
    if (key == "write_bytes:") return v;
  throw std::runtime_error("no write_bytes in /proc/self/io");
}

std::vector<qt::StepRecord> row(std::int64_t step, std::uint64_t ranks, std::uint64_t buckets) {
  std::vector<qt::StepRecord> r(ranks);
  for (std::uint64_t k = 0; k < ranks; ++k) {
    auto& x = r[k];
    x.step = step;
    x.forward = 0.01 + 1e-6 * static_cast<double>(k);
    x.backward = 0.02;
    x.step_time = 0.05 + 1e-7 * static_cast<double>(step % 997);
    x.loss = 1.0 / (1.0 + static_cast<double>(step));
    x.grad_norm = std::numeric_limits<double>::quiet_NaN();
    x.wire_bytes = 1000000 + k;
    x.buckets = static_cast<std::int32_t>(buckets);
    for (std::uint64_t b = 0; b < buckets; ++b) {
      x.bucket_start[b] = 0.001 * static_cast<double>(b);
      x.bucket_posted[b] = x.bucket_start[b] + 1e-4;
      x.bucket_done[b] = x.bucket_start[b] + 0.01;
    }
  }
  return r;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

int run(const Args& a) {
  const std::string path = a.dir + "/bench-trace-" + std::to_string(::getpid()) + ".h5";
  nlohmann::ordered_json doc;
  doc["program"] = program;
  doc["date"] = qsgd::bench::utc_now();
  for (const auto& [k, v] : qsgd::bench::provenance()) doc["provenance"][k] = v;
  doc["ranks"] = a.ranks;
  doc["buckets"] = a.buckets;
  doc["steps"] = a.steps;
  doc["flush_every"] = a.flush_every;
  doc["compaction_factor"] = qt::compaction_factor;
  std::printf("# %s: %llu steps x %llu ranks, %llu buckets, a flush every %llu steps\n", program,
              static_cast<unsigned long long>(a.steps), static_cast<unsigned long long>(a.ranks),
              static_cast<unsigned long long>(a.buckets), static_cast<unsigned long long>(a.flush_every));
  std::printf("%10s %14s %14s %14s\n", "step", "flush med ms", "flush max ms", "rewrite ms");
  const std::uint64_t bytes0 = write_bytes_so_far();
  qt::TraceWriter w(path, static_cast<int>(a.ranks), {{"label", "qsgd-bench-trace"}}, false);
  std::vector<double> all;
  std::size_t next_at = 0;
  std::vector<double> window;
  std::uint64_t window_end = 0;
  auto& points = doc["at"] = nlohmann::ordered_json::array();
  for (std::uint64_t s = 0; s < a.steps; ++s) {
    w.add_step(row(static_cast<std::int64_t>(s), a.ranks, a.buckets));
    if ((s + 1) % a.flush_every != 0) continue;
    const auto t0 = std::chrono::steady_clock::now();
    w.flush();
    const double t = ms_since(t0);
    all.push_back(t);
    if (window_end == 0 && next_at < a.at.size() && s + 1 >= a.at[next_at]) window_end = s + 1 + 10 * a.flush_every;
    if (window_end != 0) {
      window.push_back(t);
      if (s + 1 >= window_end) {
        const auto r0 = std::chrono::steady_clock::now();
        w.close();
        const double rewrite = ms_since(r0);
        const double med = qsgd::bench::median_of(window), mx = qsgd::bench::maximum_of(window);
        std::printf("%10llu %14.3f %14.3f %14.3f\n", static_cast<unsigned long long>(a.at[next_at]), med, mx, rewrite);
        points.push_back({{"step", a.at[next_at]}, {"flushes", window.size()}, {"flush_median_ms", med},
                          {"flush_max_ms", mx}, {"rewrite_ms", rewrite}});
        window.clear();
        window_end = 0;
        ++next_at;
        while (next_at < a.at.size() && a.at[next_at] <= s + 1) ++next_at;  // points inside the window: taken
      }
    }
  }
  w.close();
  const std::uint64_t written = write_bytes_so_far() - bytes0;
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  const auto size = static_cast<std::uint64_t>(f.tellg());
  std::printf("# trace %llu bytes; %zu flushes, slowest %.3f ms; wrote %llu bytes (%.2fx the trace)%s\n",
              static_cast<unsigned long long>(size), all.size(), qsgd::bench::maximum_of(all),
              static_cast<unsigned long long>(written), static_cast<double>(written) / static_cast<double>(size),
              written == 0 ? " (write_bytes 0: is --trace-dir on tmpfs?)" : "");
  doc["trace_bytes"] = size;
  doc["flushes"] = all.size();
  doc["flush_max_ms"] = qsgd::bench::maximum_of(all);
  doc["flush_median_ms"] = qsgd::bench::median_of(all);
  doc["written_bytes"] = written;
  doc["written_over_trace"] = static_cast<double>(written) / static_cast<double>(size);
  std::remove(path.c_str());
  if (!a.out.empty()) {
    std::ofstream j(a.out);
    j << doc.dump(2) << "\n";
    if (!j) throw std::runtime_error("cannot write " + a.out);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (const auto code = qsgd::bench::early_options(argc, argv, program, usage)) return *code;
  try {
    const Args a = parse(argc, argv);
    Kokkos::ScopeGuard guard;  // provenance names Kokkos' execution space
    return run(a);
  } catch (const qs::UsageError& e) {
    std::cerr << program << ": error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << program << ": error: " << e.what() << "\n";
    return 1;
  }
}
