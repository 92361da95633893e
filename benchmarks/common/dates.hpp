#pragma once
// The date field of every result.

#include <ctime>
#include <string>

namespace qsgd::bench {

// The current time in UTC, ISO 8601 to the second ("2026-12-01T05:30:00Z").
inline std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace qsgd::bench
