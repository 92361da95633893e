// rANS frequency tables (detail/rans.hpp): normalization on the encoder's
// side, parsing and validation of untrusted tables on the decoder's side.
#include "qsgd/kernels/detail/rans_table.hpp"

#include <algorithm>
#include <numeric>

namespace qsgd::detail {

std::uint32_t rans_precision_for(std::uint32_t present) {
  // 2^P >= 64 x the number of present symbols where possible, so that the
  // rounding of frequencies costs little; at least 12, at most 15 bits.
  std::uint32_t p = bit_width64(present > 0 ? present - 1 : 0) + 6;
  return std::min<std::uint32_t>(rans_max_precision, std::max<std::uint32_t>(12, p));
}

RansTableHost rans_build_table(const std::uint64_t* counts, std::uint32_t alphabet, std::uint64_t n) {
  RansTableHost t;
  std::vector<std::uint32_t> present;
  std::uint64_t total = 0;
  for (std::uint32_t k = 0; k < alphabet; ++k)
    if (counts[k] > 0) {
      present.push_back(k);
      total += counts[k];
    }
  if (n == 0 || total != n || present.empty())
    throw Error(Errc::invalid_argument, "rans: symbol counts do not add up to n");
  const std::uint32_t m = static_cast<std::uint32_t>(present.size());
  t.precision = rans_precision_for(m);
  const std::uint64_t M = std::uint64_t(1) << t.precision;
  // Integer-only normalization (the same table on every host): floor of the
  // scaled count, at least 1; the deficit goes to the most frequent symbol,
  // an excess (from the symbols raised to 1) is taken from the largest
  // frequencies first. M >= m, so an excess can always be absorbed.
  std::vector<std::uint64_t> f(m);
  std::uint64_t sum = 0;
  std::uint32_t top = 0;
  for (std::uint32_t k = 0; k < m; ++k) {
    const std::uint64_t c = counts[present[k]];
    // c * M fits 64 bits: c <= 2^40 (max_elements), M <= 2^15.
    f[k] = std::max<std::uint64_t>(1, c * M / n);
    sum += f[k];
    if (c > counts[present[top]]) top = k;
  }
  if (sum < M) {
    f[top] += M - sum;
  } else if (sum > M) {
    std::vector<std::uint32_t> order(m);
    std::iota(order.begin(), order.end(), 0u);
    std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) { return f[a] > f[b]; });
    std::uint64_t excess = sum - M;
    for (std::uint32_t k : order) {
      if (excess == 0) break;
      const std::uint64_t take = std::min(excess, f[k] - 1);
      f[k] -= take;
      excess -= take;
    }
  }
  t.enc.assign(alphabet, RansEncSym{});
  t.units.reserve(2 + 2 * std::size_t(m));
  t.units.push_back(static_cast<std::uint16_t>(t.precision));
  t.units.push_back(static_cast<std::uint16_t>(m));
  std::uint32_t start = 0, prev = 0;
  for (std::uint32_t k = 0; k < m; ++k) {
    const std::uint32_t sym = present[k];
    t.units.push_back(static_cast<std::uint16_t>(k == 0 ? sym : sym - prev - 1));
    t.units.push_back(static_cast<std::uint16_t>(f[k]));
    t.enc[sym] = rans_enc_sym(start, static_cast<std::uint32_t>(f[k]), t.precision);
    start += static_cast<std::uint32_t>(f[k]);
    prev = sym;
  }
  while (t.units.size() % 4 != 0) t.units.push_back(0);
  return t;
}

std::uint64_t rans_parse_table(const std::uint16_t* units, std::uint64_t avail, std::uint32_t alphabet,
                               std::vector<std::uint64_t>& dec, std::uint32_t& precision, std::string& error) {
  if (avail < 2) {
    error = "rANS table truncated";
    return 0;
  }
  precision = units[0];
  const std::uint32_t m = units[1];
  if (precision < 1 || precision > rans_max_precision) {
    error = "rANS precision " + std::to_string(precision) + " is outside 1.." + std::to_string(rans_max_precision);
    return 0;
  }
  if (m < 1 || m > alphabet) {
    error = "rANS table of " + std::to_string(m) + " symbols (alphabet " + std::to_string(alphabet) + ")";
    return 0;
  }
  const std::uint64_t used = 2 + 2 * std::uint64_t(m);
  if (avail < used) {
    error = "rANS table truncated";
    return 0;
  }
  const std::uint32_t M = 1u << precision;
  dec.assign(M, 0);
  std::uint64_t start = 0;
  std::uint64_t sym = 0;
  for (std::uint32_t k = 0; k < m; ++k) {
    sym = k == 0 ? units[2] : sym + 1 + units[2 + 2 * k];
    const std::uint32_t f = units[3 + 2 * k];
    if (sym >= alphabet) {
      error = "rANS symbol " + std::to_string(sym) + " outside the alphabet of " + std::to_string(alphabet);
      return 0;
    }
    if (f == 0 || start + f > M) {
      error = "rANS frequencies are zero or exceed 2^" + std::to_string(precision);
      return 0;
    }
    for (std::uint32_t j = 0; j < f; ++j)
      dec[start + j] = rans_dec_entry(f, j, static_cast<std::uint32_t>(sym));
    start += f;
  }
  if (start != M) {
    error = "rANS frequencies add up to " + std::to_string(start) + ", not 2^" + std::to_string(precision);
    return 0;
  }
  const std::uint64_t padded = (used + 3) / 4 * 4;
  if (avail < padded) {
    error = "rANS table truncated";
    return 0;
  }
  for (std::uint64_t k = used; k < padded; ++k)
    if (units[k] != 0) {
      error = "rANS table padding is not zero";
      return 0;
    }
  return padded;
}

}  // namespace qsgd::detail
