#pragma once
// Host side of the rANS codec (detail/rans.hpp): frequency tables.

#include <cstdint>
#include <string>
#include <vector>

#include "qsgd/kernels/detail/rans.hpp"
#include "qsgd/kernels/error.hpp"

namespace qsgd::detail {

struct RansTableHost {
  std::uint32_t precision = 0;
  std::vector<std::uint16_t> units;  // the table as sent: P, m, (gap, f) pairs, zero padding to 4k units
  std::vector<RansEncSym> enc;       // one entry per symbol of the alphabet (absent: zero)
};

// Most units a table of an alphabet of `alphabet` symbols can take (padding included).
inline std::uint64_t rans_table_units_max(std::uint64_t alphabet) { return (2 + 2 * alphabet + 3) / 4 * 4; }

// P for a message with `present` distinct symbols: 12..15 bits.
std::uint32_t rans_precision_for(std::uint32_t present);

// Normalized table of the symbol counts counts[0, alphabet), which add up to
// n > 0. Deterministic (integer arithmetic only). Throws invalid_argument
// when the counts do not add up to n.
RansTableHost rans_build_table(const std::uint64_t* counts, std::uint32_t alphabet, std::uint64_t n);

// Parses an untrusted table from the first `avail` units of a payload: on
// success fills dec (2^P decoder entries) and precision and returns the
// number of units the table takes (padding included, which must be zero); on
// failure returns 0 and says why in `error`. Bounded: at most 2^15 entries
// are allocated.
std::uint64_t rans_parse_table(const std::uint16_t* units, std::uint64_t avail, std::uint32_t alphabet,
                               std::vector<std::uint64_t>& dec, std::uint32_t& precision, std::string& error);

}  // namespace qsgd::detail
