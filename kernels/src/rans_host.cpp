// Host paths of the rANS codec; see detail/rans_host.hpp.
#include "qsgd/kernels/detail/rans_host.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include "qsgd/kernels/quantize.hpp"

namespace qsgd::detail::rans_host {
namespace {

// Unit k of an MSB-first stream of 64-bit words is the 16-bit value at byte
// 2 (k ^ 3) on a little-endian host.
constexpr bool little_endian = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;

inline std::uint32_t unit_at(const unsigned char* base, std::uint64_t k) {
  std::uint16_t u;
  std::memcpy(&u, base + 2 * (k ^ 3), 2);
  return u;
}

inline void put_unit(unsigned char* base, std::uint64_t k, std::uint16_t u) { std::memcpy(base + 2 * (k ^ 3), &u, 2); }

// One encoder step of a lane (the arithmetic of encode_rans_chunks).
inline void enc_step(std::uint32_t& x, const RansEncSym& e, std::uint16_t*& p) {
  const std::uint32_t emit = x >= e.x_max ? 1u : 0u;
  p[-1] = static_cast<std::uint16_t>(x & 0xFFFFu);
  p -= emit;
  x >>= 16 * emit;
  x = rans_advance(x, e);
}

// One decoder step of a lane; false when a read would pass the chunk.
inline bool dec_step(std::uint32_t& x, const std::uint64_t* dec, std::uint32_t mask, std::uint32_t precision,
                     const unsigned char* units, std::uint64_t& p, std::uint64_t pend, std::int32_t& sym) {
  const std::uint64_t e = dec[x & mask];
  std::uint32_t xs = static_cast<std::uint32_t>(e >> 32) * (x >> precision) + static_cast<std::uint32_t>((e >> 16) & 0xFFFFu);
  const bool low = xs < rans_low;
  if (low && p == pend) return false;
  const std::uint32_t u = unit_at(units, p < pend ? p : pend - 1);
  xs = low ? (xs << 16) | u : xs;
  p += low ? 1 : 0;
  x = xs;
  sym = static_cast<std::int32_t>(e & 0xFFFFu);
  return true;
}

// The value of a level is LevelUnit::value: one float multiply, except for
// buckets that take the double path (LevelUnit::via_double; Wide = true).
template <Sink M, bool Wide>
inline void deliver(std::uint64_t i, std::int32_t level, const LevelUnit& unit, float weight, float* out,
                    std::int32_t* levels_out) {
  if constexpr (M == Sink::values || M == Sink::accumulate) {
    const float value = Wide ? unit.value(level) : static_cast<float>(level) * unit.unit;
    if constexpr (M == Sink::values) out[i] = value;
    if constexpr (M == Sink::accumulate) out[i] = out[i] + weight * value;
  }
  if constexpr (M == Sink::levels) levels_out[i] = level;
  (void)i, (void)level, (void)unit, (void)weight, (void)out, (void)levels_out;
}

// Decodes coordinates [i, e) of one bucket; returns false on an over-read.
template <Sink M, bool Wide>
inline bool decode_segment(std::uint64_t& i, std::uint64_t e, std::uint64_t i0, std::uint32_t& x0, std::uint32_t& x1,
                           std::uint32_t& x2, std::uint32_t& x3, const std::uint64_t* dec, std::uint32_t mask,
                           std::uint32_t precision, const unsigned char* units, std::uint64_t& p, std::uint64_t pend,
                           std::int32_t si, const LevelUnit& unit, float weight, float* out,
                           std::int32_t* levels_out) {
  // Whole groups of four (lanes 0..3 in order) while the group starts at lane 0.
  while (i + 4 <= e && ((i - i0) & 3) == 0) {
    std::int32_t y0, y1, y2, y3;
    if (!dec_step(x0, dec, mask, precision, units, p, pend, y0)) return false;
    if (!dec_step(x1, dec, mask, precision, units, p, pend, y1)) return false;
    if (!dec_step(x2, dec, mask, precision, units, p, pend, y2)) return false;
    if (!dec_step(x3, dec, mask, precision, units, p, pend, y3)) return false;
    deliver<M, Wide>(i, y0 - si, unit, weight, out, levels_out);
    deliver<M, Wide>(i + 1, y1 - si, unit, weight, out, levels_out);
    deliver<M, Wide>(i + 2, y2 - si, unit, weight, out, levels_out);
    deliver<M, Wide>(i + 3, y3 - si, unit, weight, out, levels_out);
    i += 4;
  }
  // The rest of the segment one coordinate at a time.
  for (; i < e; ++i) {
    const std::uint64_t lane = (i - i0) & 3;
    std::uint32_t& xs = lane == 0 ? x0 : lane == 1 ? x1 : lane == 2 ? x2 : x3;
    std::int32_t y;
    if (!dec_step(xs, dec, mask, precision, units, p, pend, y)) return false;
    deliver<M, Wide>(i, y - si, unit, weight, out, levels_out);
  }
  return true;
}

template <Sink M>
bool decode_chunk(const unsigned char* units, std::uint64_t p, std::uint64_t pend, const std::uint64_t* dec,
                  std::uint32_t precision, const float* scales, std::uint64_t i0, std::uint64_t i1, std::uint32_t d,
                  std::uint32_t s, float weight, float* out, std::int32_t* levels_out) {
  const std::uint32_t mask = (1u << precision) - 1;
  const std::int32_t si = static_cast<std::int32_t>(s);
  std::uint32_t x[rans_lanes];
  for (std::uint32_t k = 0; k < rans_lanes; ++k) {
    x[k] = unit_at(units, p) | (unit_at(units, p + 1) << 16);
    p += 2;
    if (x[k] < rans_low || x[k] >= (rans_low << 16)) return false;
  }
  std::uint32_t x0 = x[0], x1 = x[1], x2 = x[2], x3 = x[3];
  std::uint64_t i = i0;
  while (i < i1) {
    const std::uint64_t b = i / d;
    const std::uint64_t e = std::min<std::uint64_t>((b + 1) * d, i1);
    const LevelUnit unit(scales[b], s);
    const bool ok = unit.via_double ? decode_segment<M, true>(i, e, i0, x0, x1, x2, x3, dec, mask, precision, units, p, pend,
                                                        si, unit, weight, out, levels_out)
                              : decode_segment<M, false>(i, e, i0, x0, x1, x2, x3, dec, mask, precision, units, p,
                                                         pend, si, unit, weight, out, levels_out);
    if (!ok) return false;
  }
  return p == pend && x0 == rans_low && x1 == rans_low && x2 == rans_low && x3 == rans_low;
}

template <Sink M>
std::uint64_t decode_all(const std::uint64_t* offsets, const std::uint64_t* payload, std::uint64_t first_bit,
                         std::uint64_t payload_bits, const std::uint64_t* dec, std::uint32_t precision,
                         const float* scales, std::uint64_t n, std::uint32_t d, std::uint32_t s, std::uint32_t chunk,
                         float weight, float* out, std::int32_t* levels_out) {
  const std::uint64_t nchunks = ceil_div(n, chunk);
  const auto* units = reinterpret_cast<const unsigned char*>(payload);
  std::uint64_t first_bad = no_index;
  for (std::uint64_t c = 0; c < nchunks; ++c) {
    const std::uint64_t i0 = c * chunk;
    const std::uint64_t i1 = std::min<std::uint64_t>(i0 + chunk, n);
    const std::uint64_t start = offsets[c];
    const std::uint64_t end = c + 1 < nchunks ? offsets[c + 1] : payload_bits;
    const bool framed = !((c == 0 && start != first_bit) || start > end || end > payload_bits || (start & 15) ||
                          (end & 15) || end - start < 16 * std::uint64_t(rans_state_units));
    if (!framed || !decode_chunk<M>(units, start >> 4, end >> 4, dec, precision, scales, i0, i1, d, s, weight, out,
                                    levels_out))
      first_bad = std::min(first_bad, c);
  }
  return first_bad;
}

struct Scratch {
  std::vector<std::uint64_t> hist;  // 4 sub-histograms: consecutive equal symbols do not wait on one counter
};

Scratch& scratch() {
  static thread_local Scratch s;
  return s;
}

}  // namespace

bool enabled() { return little_endian && simd::host_paths_enabled(); }

std::uint64_t histogram(const std::int32_t* levels, std::uint64_t n, std::uint32_t s, std::uint64_t* counts) {
  const std::uint64_t alphabet = 2 * std::uint64_t(s) + 1;
  std::vector<std::uint64_t>& h = scratch().hist;
  if (h.size() < 4 * alphabet) h.resize(4 * alphabet);
  std::fill(h.begin(), h.begin() + static_cast<std::ptrdiff_t>(4 * alphabet), 0);
  std::uint64_t bad = 0;
  const std::uint32_t top = 2 * s;
  std::uint64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const std::uint32_t k0 = static_cast<std::uint32_t>(levels[i] + static_cast<std::int32_t>(s));
    const std::uint32_t k1 = static_cast<std::uint32_t>(levels[i + 1] + static_cast<std::int32_t>(s));
    const std::uint32_t k2 = static_cast<std::uint32_t>(levels[i + 2] + static_cast<std::int32_t>(s));
    const std::uint32_t k3 = static_cast<std::uint32_t>(levels[i + 3] + static_cast<std::int32_t>(s));
    if ((k0 > top) | (k1 > top) | (k2 > top) | (k3 > top)) {
      for (std::uint32_t k : {k0, k1, k2, k3})
        if (k > top) ++bad; else ++h[k];
      continue;
    }
    ++h[k0];
    ++h[alphabet + k1];
    ++h[2 * alphabet + k2];
    ++h[3 * alphabet + k3];
  }
  for (; i < n; ++i) {
    const std::uint32_t k = static_cast<std::uint32_t>(levels[i] + static_cast<std::int32_t>(s));
    if (k > top) ++bad; else ++h[k];
  }
  for (std::uint64_t k = 0; k < alphabet; ++k) counts[k] = h[k] + h[alphabet + k] + h[2 * alphabet + k] + h[3 * alphabet + k];
  return bad;
}

void encode_chunks(const std::int32_t* levels, std::uint64_t n, std::uint32_t s, std::uint32_t chunk,
                   const RansEncSym* enc, std::uint16_t* scratch_units, std::uint64_t* chunk_units) {
  const std::uint64_t nchunks = ceil_div(n, chunk);
  const std::uint64_t cap = std::uint64_t(chunk) + rans_state_units;
  const std::int32_t si = static_cast<std::int32_t>(s);
  for (std::uint64_t c = 0; c < nchunks; ++c) {
    const std::uint64_t i0 = c * chunk;
    const std::uint64_t i1 = std::min<std::uint64_t>(i0 + chunk, n);
    std::uint16_t* const region_end = scratch_units + (c + 1) * cap;
    std::uint16_t* p = region_end;
    std::uint32_t x[rans_lanes] = {rans_low, rans_low, rans_low, rans_low};
    // The coordinates past the last whole group of four, last first.
    const std::uint64_t whole = i0 + (i1 - i0) / 4 * 4;
    for (std::uint64_t i = i1; i-- > whole;)
      enc_step(x[(i - i0) & 3], enc[levels[i] + si], p);
    std::uint32_t x0 = x[0], x1 = x[1], x2 = x[2], x3 = x[3];
    for (std::uint64_t i = whole; i > i0; i -= 4) {
      enc_step(x3, enc[levels[i - 1] + si], p);
      enc_step(x2, enc[levels[i - 2] + si], p);
      enc_step(x1, enc[levels[i - 3] + si], p);
      enc_step(x0, enc[levels[i - 4] + si], p);
    }
    const std::uint32_t xs[rans_lanes] = {x0, x1, x2, x3};
    for (std::uint32_t k = rans_lanes; k-- > 0;) {
      *--p = static_cast<std::uint16_t>(xs[k] >> 16);
      *--p = static_cast<std::uint16_t>(xs[k] & 0xFFFFu);
    }
    chunk_units[c] = static_cast<std::uint64_t>(region_end - p);
  }
}

void write_chunks(std::uint64_t nchunks, std::uint32_t chunk, const std::uint64_t* offsets,
                  const std::uint64_t* chunk_units, const std::uint16_t* scratch_units, std::uint64_t* payload) {
  if (nchunks == 0) return;
  const std::uint64_t cap = std::uint64_t(chunk) + rans_state_units;
  auto* units = reinterpret_cast<unsigned char*>(payload);
  // Padding after the last unit is zero, as the portable writer leaves it.
  const std::uint64_t end = offsets[nchunks - 1] + 16 * chunk_units[nchunks - 1];
  if (end & 63) payload[(end - 1) >> 6] = 0;
  for (std::uint64_t c = 0; c < nchunks; ++c) {
    const std::uint64_t len = chunk_units[c];
    const std::uint64_t dst = offsets[c] >> 4;
    const std::uint16_t* src = scratch_units + (c + 1) * cap - len;
    for (std::uint64_t k = 0; k < len; ++k) put_unit(units, dst + k, src[k]);
  }
}

std::uint64_t decode(const std::uint64_t* offsets, const std::uint64_t* payload, std::uint64_t first_bit,
                     std::uint64_t payload_bits, const std::uint64_t* dec, std::uint32_t precision, const float* scales,
                     std::uint64_t n, std::uint32_t d, std::uint32_t s, std::uint32_t chunk, Sink mode, float weight,
                     float* out, std::int32_t* levels_out) {
  switch (mode) {
    case Sink::values:
      return decode_all<Sink::values>(offsets, payload, first_bit, payload_bits, dec, precision, scales, n, d, s, chunk,
                                      weight, out, levels_out);
    case Sink::accumulate:
      return decode_all<Sink::accumulate>(offsets, payload, first_bit, payload_bits, dec, precision, scales, n, d, s,
                                          chunk, weight, out, levels_out);
    case Sink::levels:
      return decode_all<Sink::levels>(offsets, payload, first_bit, payload_bits, dec, precision, scales, n, d, s, chunk,
                                      weight, out, levels_out);
    case Sink::validate: break;
  }
  return decode_all<Sink::validate>(offsets, payload, first_bit, payload_bits, dec, precision, scales, n, d, s, chunk,
                                    weight, out, levels_out);
}

}  // namespace qsgd::detail::rans_host
