#pragma once
// Values of command-line options, parsed strictly and in one place for every
// program of the suite (qsgd-train's options and the benchmark drivers): a
// value is taken whole, as written, or refused with a UsageError whose
// message names the option and what it needs. No sign or white space the
// C library would skip, no wrap-around, no "inf" or "nan".

#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace qsgd::support {

// A wrong command line; programs print "<program>: error: <message>" and
// exit with status 2.
struct UsageError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// An integer option's value: decimal digits only (no sign, no white space,
// nothing after them), in lo..hi.
inline std::uint64_t parse_count(const std::string& opt, const std::string& text, std::uint64_t lo = 0,
                                 std::uint64_t hi = std::numeric_limits<std::uint64_t>::max()) {
  std::uint64_t v = 0;
  bool ok = !text.empty() && text.size() <= 20;
  for (std::size_t i = 0; ok && i < text.size(); ++i) {
    const char c = text[i];
    const std::uint64_t digit = static_cast<std::uint64_t>(c - '0');
    ok = c >= '0' && c <= '9' && v <= (std::numeric_limits<std::uint64_t>::max() - digit) / 10;
    v = v * 10 + digit;
  }
  if (!ok || v < lo || v > hi) {
    const std::string range = hi == std::numeric_limits<std::uint64_t>::max()
                                  ? (lo == 0 ? "a non-negative integer" : "an integer >= " + std::to_string(lo))
                                  : "an integer in " + std::to_string(lo) + ".." + std::to_string(hi);
    throw UsageError(opt + " needs " + range + ", got '" + text + "'");
  }
  return v;
}

// A real option's value: a whole decimal number (std::strtod's syntax,
// nothing before or after it), finite, in lo..hi.
inline double parse_real(const std::string& opt, const std::string& text,
                         double lo = -std::numeric_limits<double>::max(),
                         double hi = std::numeric_limits<double>::max()) {
  const char* begin = text.c_str();
  char* end = nullptr;
  // strtod skips leading white space; an option value must not have any.
  const bool starts_ok = !text.empty() && !std::isspace(static_cast<unsigned char>(text[0]));
  const double v = starts_ok ? std::strtod(begin, &end) : 0.0;
  if (!starts_ok || end != begin + text.size() || !std::isfinite(v) || !(v >= lo && v <= hi)) {
    auto num = [](double x) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%g", x);
      return std::string(buf);
    };
    const bool no_lo = lo == -std::numeric_limits<double>::max(), no_hi = hi == std::numeric_limits<double>::max();
    const std::string range = no_lo && no_hi ? ""
                              : no_hi        ? " >= " + num(lo)
                              : no_lo        ? " <= " + num(hi)
                                             : " from " + num(lo) + " to " + num(hi);
    throw UsageError(opt + " needs a finite number" + range + ", got '" + text + "'");
  }
  return v;
}

// A size option's value: a whole number of bytes with an optional suffix K,
// M or G (powers of 1024), in lo..hi bytes.
inline std::uint64_t parse_bytes(const std::string& opt, const std::string& text, std::uint64_t lo,
                                 std::uint64_t hi) {
  std::uint64_t mult = 1;
  std::string digits = text;
  if (!text.empty()) {
    switch (text.back()) {
      case 'K': case 'k': mult = 1ull << 10; break;
      case 'M': case 'm': mult = 1ull << 20; break;
      case 'G': case 'g': mult = 1ull << 30; break;
      default: break;
    }
    if (mult > 1) digits.pop_back();
  }
  const std::string need = opt + " needs a size in bytes (suffix K, M or G) from " + std::to_string(lo) + " to " +
                           std::to_string(hi) + ", got '" + text + "'";
  std::uint64_t v = 0;
  try {
    v = parse_count(opt, digits, 0, hi / mult);
  } catch (const UsageError&) {
    throw UsageError(need);
  }
  if (v * mult < lo) throw UsageError(need);
  return v * mult;
}

// A comma-separated list's non-empty items, in order (lists of names).
inline std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

// A comma-separated list of integers, each in lo..hi; an empty item is
// refused (a typo, not a value), as is a list of fewer than `min_items`.
inline std::vector<std::uint64_t> parse_count_list(const std::string& opt, const std::string& text,
                                                   std::size_t min_items, std::uint64_t lo = 0,
                                                   std::uint64_t hi = std::numeric_limits<std::uint64_t>::max()) {
  std::vector<std::uint64_t> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    out.push_back(parse_count(opt, text.substr(start, comma - start), lo, hi));
    start = comma + 1;
  }
  if (out.size() < min_items)
    throw UsageError(opt + " needs at least " + std::to_string(min_items) + " comma-separated values, got '" + text +
                     "'");
  return out;
}

}  // namespace qsgd::support
