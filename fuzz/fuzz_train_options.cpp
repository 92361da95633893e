// Command-line harness of qsgd-train (train/src/options.cpp). The
// input is split at NUL bytes into argv[1..]. Contract (options.hpp):
// parse() returns the options or throws std::invalid_argument; the options
// it returns hold what the command line said (an integer option holds the
// number given, never a wrapped or truncated one), and they describe
// themselves: exchange_config() and describe() work, and to_json(), which
// becomes the trace's `config` attribute (docs/traces.md), is JSON.

#include <cctype>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "common.hpp"
#include "json_check.hpp"
#include "qsgd/train/options.hpp"

namespace {

using namespace qsgd_fuzz;
using qsgd::train::Options;

// What a strict reader makes of an integer option's value: optional leading
// white space (std::stoull skips it too), an optional '+', decimal digits,
// nothing after them.
enum class Int { ok, negative, malformed };
Int read_uint(const std::string& v, std::uint64_t& out) {
  std::size_t i = 0;
  while (i < v.size() && std::isspace(static_cast<unsigned char>(v[i]))) ++i;
  if (i < v.size() && v[i] == '-') return Int::negative;
  if (i < v.size() && v[i] == '+') ++i;
  if (i == v.size()) return Int::malformed;
  out = 0;
  for (; i < v.size(); ++i) {
    if (v[i] < '0' || v[i] > '9') return Int::malformed;
    const std::uint64_t digit = static_cast<std::uint64_t>(v[i] - '0');
    if (out > (std::numeric_limits<std::uint64_t>::max() - digit) / 10) return Int::malformed;
    out = out * 10 + digit;
  }
  return Int::ok;
}

struct IntField {
  const char* option;
  std::uint64_t max;  // largest value the field holds
  std::uint64_t (*get)(const Options&);
};

constexpr std::uint64_t u32_max = std::numeric_limits<std::uint32_t>::max();
constexpr std::uint64_t u64_max = std::numeric_limits<std::uint64_t>::max();

const IntField int_fields[] = {
    {"--teacher-samples", u64_max, [](const Options& o) -> std::uint64_t { return o.teacher_samples; }},
    {"--lstm-hidden", u64_max, [](const Options& o) -> std::uint64_t { return o.lstm_hidden; }},
    {"--lstm-seq", u64_max, [](const Options& o) -> std::uint64_t { return o.lstm_seq; }},
    {"--batch", u64_max, [](const Options& o) -> std::uint64_t { return o.batch; }},
    {"--epochs", u64_max, [](const Options& o) -> std::uint64_t { return o.epochs; }},
    {"--max-steps", u64_max, [](const Options& o) -> std::uint64_t { return o.max_steps; }},
    {"--warmup", u64_max, [](const Options& o) -> std::uint64_t { return o.warmup; }},
    {"--seed", u64_max, [](const Options& o) -> std::uint64_t { return o.seed; }},
    {"--d", u32_max, [](const Options& o) -> std::uint64_t { return o.d; }},
    {"--fusion-mb", u64_max, [](const Options& o) -> std::uint64_t { return o.fusion_mb; }},
    {"--layer-filter", u64_max, [](const Options& o) -> std::uint64_t { return o.layer_filter; }},
    {"--segment-kb", u64_max, [](const Options& o) -> std::uint64_t { return o.segment_kb; }},
    {"--window", u32_max, [](const Options& o) -> std::uint64_t { return o.window; }},
    {"--poll-us", u32_max, [](const Options& o) -> std::uint64_t { return o.poll_us; }},
    {"--eval-every", u64_max, [](const Options& o) -> std::uint64_t { return o.eval_every; }},
    {"--flush-every", u64_max, [](const Options& o) -> std::uint64_t { return o.flush_every; }},
    {"--checkpoint-every", u64_max, [](const Options& o) -> std::uint64_t { return o.checkpoint_every; }},
    {"--hash-every", u64_max, [](const Options& o) -> std::uint64_t { return o.hash_every; }},
    {"--eval-limit", u64_max, [](const Options& o) -> std::uint64_t { return o.eval_limit; }},
    {"--s", u32_max, [](const Options& o) -> std::uint64_t { return o.s; }},
};

// The options that take a value (each consumes the next argument).
const char* const takes_value[] = {"--model",
                                   "--mlp-widths",
                                   "--dataset",
                                   "--data-dir",
                                   "--teacher-samples",
                                   "--lstm-hidden",
                                   "--lstm-seq",
                                   "--batch",
                                   "--epochs",
                                   "--max-steps",
                                   "--lr",
                                   "--momentum",
                                   "--weight-decay",
                                   "--warmup",
                                   "--lr-warmup",
                                   "--lr-decay",
                                   "--seed",
                                   "--strategy",
                                   "--codec",
                                   "--bits",
                                   "--wire-bits",
                                   "--s",
                                   "--d",
                                   "--norm",
                                   "--fusion-mb",
                                   "--layer-filter",
                                   "--transport",
                                   "--segment-kb",
                                   "--segment",
                                   "--window",
                                   "--progress",
                                   "--poll-us",
                                   "--synthetic-backward-ms",
                                   "--eval-every",
                                   "--target-accuracy",
                                   "--trace",
                                   "--flush-every",
                                   "--checkpoint",
                                   "--checkpoint-every",
                                   "--hash-every",
                                   "--eval-limit",
                                   "--label"};

bool has_value(const std::string& a) {
  for (const char* o : takes_value)
    if (a == o) return true;
  return false;
}

// Checks every integer option against what the accepted options hold; the
// last occurrence of an option is the one in effect. --bits and --wire-bits
// set s as well.
int check_integers(const std::vector<std::string>& args, const Options& o) {
  for (const IntField& f : int_fields) {
    const std::string* given = nullptr;
    bool s_from_bits = false;
    for (std::size_t i = 1; i + 1 < args.size(); ++i) {
      if (!has_value(args[i])) continue;
      if (args[i] == f.option || (std::strcmp(f.option, "--warmup") == 0 && args[i] == "--lr-warmup"))
        given = &args[i + 1], s_from_bits = false;
      // --segment SIZE sets segment_kb in another unit (bytes with K, M, G): not this check's.
      if (std::strcmp(f.option, "--segment-kb") == 0 && args[i] == "--segment") given = nullptr;
      if (std::strcmp(f.option, "--s") == 0 && (args[i] == "--bits" || args[i] == "--wire-bits")) s_from_bits = true;
      ++i;
    }
    if (!given || s_from_bits) continue;
    std::uint64_t v = 0;
    const Int r = read_uint(*given, v);
    QSGD_FUZZ_CHECK(r != Int::negative, "options.negative-accepted",
                    f.option << " '" << *given << "' was accepted as " << f.get(o));
    QSGD_FUZZ_CHECK(r == Int::ok, "options.int-value", f.option << " '" << *given << "' was accepted");
    QSGD_FUZZ_CHECK(
        v <= f.max, "options.int-truncated",
        f.option << " " << v << " was accepted as " << f.get(o) << " (the field holds at most " << f.max << ")");
    QSGD_FUZZ_CHECK(f.get(o) == v, "options.int-value", f.option << " " << v << " was stored as " << f.get(o));
  }
  return 1;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> args = {"qsgd-train"};
  std::string cur;
  for (std::size_t i = 0; i < size; ++i) {
    if (data[i] == 0) {
      args.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(static_cast<char>(data[i]));
    }
  }
  if (size > 0) args.push_back(cur);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  Options o;
  try {
    o = qsgd::train::parse(static_cast<int>(args.size()), argv.data());
  } catch (const std::invalid_argument& e) {
    QSGD_FUZZ_CHECK(std::strlen(e.what()) > 0, "options.error-message", "an empty error message");
    return 0;
  } catch (const std::exception& e) {
    violation("options.error-type", std::string("parse threw a non-invalid_argument exception: ") + e.what());
  }

  if (check_integers(args, o) == 0) return 0;
  try {
    (void)o.exchange_config();
    (void)o.describe();
  } catch (const std::exception& e) {
    violation("options.describe", std::string("accepted options do not describe themselves: ") + e.what());
  }
  const std::string json = o.to_json();
  std::string why;
  QSGD_FUZZ_CHECK(JsonCheck::valid(json, why), "options.json", "to_json() is not JSON (" << why << "): " << json);
  return 0;
}
