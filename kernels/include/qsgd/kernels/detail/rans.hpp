#pragma once
// Interleaved rANS over the signed levels (the `rans` codec, spec section 2).
//
// Symbols: sym = l + s for a level l in [-s, s] (alphabet 2s + 1, s <=
//   rans_max_s), so sign and magnitude are coded jointly at their empirical
//   probability.
// Frequency table (per message, at the start of the payload, counted on the
//   wire): 16-bit units  P, m, then m pairs (gap, f): the present symbols in
//   increasing order (sym_0 = gap_0, sym_k = sym_{k-1} + 1 + gap_k) with
//   frequencies f >= 1 summing to 2^P, 1 <= P <= 15; zero units pad it to a
//   whole number of 64-bit words.
// Chunks (cfg.chunk coordinates each, independently decodable, bit offsets in
//   the message's offset section): rans_lanes interleaved 32-bit states;
//   coordinate i0 + j belongs to lane j % rans_lanes. A chunk is its final
//   encoder states (lane 0 low half, lane 0 high half, lane 1 ...) followed by
//   the 16-bit renormalization units in the order the decoder reads them.
// State invariant: x in [2^15, 2^31). Encoding symbol (start c, freq f): if
//   x >= 2^(31-P) f, emit its low 16 bits and shift right by 16 (at most once
//   per symbol); then x <- floor(x / f) 2^P + x mod f + c, with the division
//   done by a multiply with an exact reciprocal (x < 2^31). Decoding inverts
//   it: slot = x mod 2^P, x <- f (x >> P) + slot - c, and one 16-bit unit is
//   read when x < 2^15. Every lane starts at 2^15 in the encoder, so a
//   decoder must end every lane there and consume the chunk exactly: bad
//   offsets or states, over-reads and left-over units are always detected,
//   other corruption almost always, even behind a valid checksum.
// Payload units: unit k is bits [16k, 16k + 16) of the MSB-first payload
//   stream (as for every code), i.e. the high 16 bits of word k / 4 first.

#include <Kokkos_Core.hpp>
#include <cstdint>

#include "qsgd/kernels/detail/arith.hpp"
#include "qsgd/kernels/detail/bitstream.hpp"
#include "qsgd/kernels/detail/dispatch.hpp"
#include "qsgd/kernels/quantize.hpp"

namespace qsgd::detail {

constexpr std::uint32_t rans_lanes = 4;
constexpr std::uint32_t rans_low = 1u << 15;        // lower bound of a state
constexpr std::uint32_t rans_max_precision = 15;    // P <= 15: 2^P divides rans_low
constexpr std::uint32_t rans_state_units = 2 * rans_lanes;

// Unit k of a payload: bits [16k, 16k + 16) of the MSB-first stream.
template <class WordView>
KOKKOS_INLINE_FUNCTION std::uint32_t rans_unit(const WordView& words, std::uint64_t k) {
  return static_cast<std::uint32_t>(words(k >> 2) >> (48 - 16 * (k & 3))) & 0xFFFFu;
}

// Encoder entry of one symbol (exact reciprocal division, as in ryg_rans).
struct RansEncSym {
  std::uint32_t x_max = 0;   // renormalize when x >= x_max
  std::uint32_t rcp = 0;     // reciprocal of f
  std::uint32_t bias = 0;    // start, or start + 2^P - 1 when f == 1
  std::uint16_t cmpl = 0;    // 2^P - f
  std::uint16_t shift = 0;   // reciprocal shift
};

// Decoder entry of one slot: f (16 bits) | slot - start (16 bits) | sym (16 bits).
KOKKOS_INLINE_FUNCTION std::uint64_t rans_dec_entry(std::uint32_t f, std::uint32_t bias, std::uint32_t sym) {
  return (static_cast<std::uint64_t>(f) << 32) | (static_cast<std::uint64_t>(bias) << 16) | sym;
}

KOKKOS_INLINE_FUNCTION RansEncSym rans_enc_sym(std::uint32_t start, std::uint32_t f, std::uint32_t precision) {
  RansEncSym e;
  e.x_max = ((rans_low >> precision) << 16) * f;
  e.cmpl = static_cast<std::uint16_t>((1u << precision) - f);
  if (f < 2) {
    e.rcp = ~0u;
    e.shift = 0;
    e.bias = start + (1u << precision) - 1;
  } else {
    std::uint32_t sh = 0;
    while (f > (1u << sh)) ++sh;
    e.rcp = static_cast<std::uint32_t>(((std::uint64_t(1) << (sh + 31)) + f - 1) / f);
    e.shift = static_cast<std::uint16_t>(sh - 1);
    e.bias = start;
  }
  return e;
}

// x <- C(x, sym) after renormalization; x < 2^31 here, where the reciprocal is exact.
KOKKOS_INLINE_FUNCTION std::uint32_t rans_advance(std::uint32_t x, const RansEncSym& e) {
  const std::uint32_t q = static_cast<std::uint32_t>((static_cast<std::uint64_t>(x) * e.rcp) >> 32) >> e.shift;
  return x + e.bias + q * e.cmpl;
}

/*
 * encode_rans_chunks
 * Purpose: rANS-code the symbols of every chunk into its own scratch region.
 * Algorithm: one work item per chunk; coordinates from last to first (lane
 *   j % rans_lanes), units written downwards from the region's end, then the
 *   final states. chunk_units(c) receives the chunk's size in units; its data
 *   are the last chunk_units(c) units of region c.
 * Cost: reads 4n bytes of levels; writes at most 2n + 16 nchunks bytes.
 * Requirements: scratch has nchunks * (chunk + rans_state_units) units; enc
 *   has 2s + 1 entries, valid for every symbol present.
 */
template <class ExecSpace, class LView, class EncView, class UnitView, class LenView>
void encode_rans_chunks(const ExecSpace& exec, const LView& levels, std::uint64_t n, std::uint32_t s,
                        std::uint32_t chunk, const EncView& enc, const UnitView& scratch, const LenView& chunk_units) {
  const std::uint64_t nchunks = ceil_div(n, chunk);
  const std::uint64_t cap = std::uint64_t(chunk) + rans_state_units;
  Kokkos::parallel_for(
      "qsgd::encode[rans]", Kokkos::RangePolicy<ExecSpace>(exec, 0, nchunks), KOKKOS_LAMBDA(std::uint64_t c) {
        const std::uint64_t i0 = c * chunk;
        const std::uint64_t i1 = i0 + chunk < n ? i0 + chunk : n;
        const std::uint64_t region_end = (c + 1) * cap;
        std::uint64_t p = region_end;
        std::uint32_t x[rans_lanes];
        for (std::uint32_t k = 0; k < rans_lanes; ++k) x[k] = rans_low;
        for (std::uint64_t i = i1; i-- > i0;) {
          const std::uint32_t lane = static_cast<std::uint32_t>((i - i0) % rans_lanes);
          const RansEncSym e = enc(static_cast<std::uint32_t>(levels(i) + static_cast<std::int32_t>(s)));
          std::uint32_t xs = x[lane];
          // Branch-free renormalization (the branch is unpredictable): the
          // unit is always stored, and kept only if the state moves.
          const std::uint32_t emit = xs >= e.x_max ? 1u : 0u;
          scratch(p - 1) = static_cast<std::uint16_t>(xs & 0xFFFFu);
          p -= emit;
          xs >>= 16 * emit;
          x[lane] = rans_advance(xs, e);
        }
        for (std::uint32_t k = rans_lanes; k-- > 0;) {
          scratch(--p) = static_cast<std::uint16_t>(x[k] >> 16);
          scratch(--p) = static_cast<std::uint16_t>(x[k] & 0xFFFFu);
        }
        chunk_units(c) = region_end - p;
      });
}

// Histogram of the symbols l + s of levels[0, n) into counts (zeroed by the
// caller); returns the number of levels outside [-s, s] (not counted).
// Portable path: a team per rans_hist_tile coordinates counts in
// team scratch and adds each nonzero bin to the global counts once (one
// atomic per bin per team, not one per coordinate on 2s + 1 counters);
// alphabets over rans_hist_scratch_bins bins count with global atomics.
// Counts are integers, so the result does not depend on the split.
constexpr std::uint64_t rans_hist_tile = 16384;
constexpr std::uint64_t rans_hist_scratch_bins = 4096;

template <class ExecSpace, class LView, class CountView>
std::uint64_t rans_histogram(const ExecSpace& exec, const LView& levels, std::uint64_t n, std::uint32_t s,
                             const CountView& counts) {
  std::uint64_t out_of_range = 0;
  const std::uint64_t alphabet = 2 * std::uint64_t(s) + 1;
  const std::int32_t si = static_cast<std::int32_t>(s);
  if (alphabet > rans_hist_scratch_bins) {
    Kokkos::parallel_reduce(
        "qsgd::encode[rans]::histogram", Kokkos::RangePolicy<ExecSpace>(exec, 0, n),
        KOKKOS_LAMBDA(std::uint64_t i, std::uint64_t& bad) {
          const std::int32_t l = levels(i);
          if (l < -si || l > si) {
            ++bad;
            return;
          }
          Kokkos::atomic_increment(&counts(static_cast<std::uint64_t>(l + si)));
        },
        out_of_range);
    return out_of_range;
  }
  if (n == 0) return 0;
  using policy_t = Kokkos::TeamPolicy<ExecSpace>;
  using member_t = typename policy_t::member_type;
  const std::uint64_t teams = (n + rans_hist_tile - 1) / rans_hist_tile;
  policy_t policy(exec, static_cast<int>(teams), Kokkos::AUTO);
  const std::size_t bytes = static_cast<std::size_t>(alphabet) * sizeof(std::uint32_t);
  policy.set_scratch_size(0, Kokkos::PerTeam(bytes));
  Kokkos::parallel_reduce(
      "qsgd::encode[rans]::histogram", policy,
      KOKKOS_LAMBDA(const member_t& m, std::uint64_t& bad) {
        auto* h = static_cast<std::uint32_t*>(m.team_scratch(0).get_shmem(bytes));
        Kokkos::parallel_for(Kokkos::TeamThreadRange(m, alphabet), [&](std::uint64_t k) { h[k] = 0; });
        m.team_barrier();
        const std::uint64_t begin = static_cast<std::uint64_t>(m.league_rank()) * rans_hist_tile;
        const std::uint64_t end = begin + rans_hist_tile < n ? begin + rans_hist_tile : n;
        std::uint64_t team_bad = 0;
        Kokkos::parallel_reduce(
            Kokkos::TeamThreadRange(m, begin, end),
            [&](std::uint64_t i, std::uint64_t& b) {
              const std::int32_t l = levels(i);
              if (l < -si || l > si) {
                ++b;
                return;
              }
              Kokkos::atomic_increment(&h[l + si]);
            },
            team_bad);
        m.team_barrier();
        Kokkos::parallel_for(Kokkos::TeamThreadRange(m, alphabet), [&](std::uint64_t k) {
          if (h[k] != 0) Kokkos::atomic_add(&counts(k), static_cast<std::uint64_t>(h[k]));
        });
        Kokkos::single(Kokkos::PerTeam(m), [&]() { bad += team_bad; });
      },
      out_of_range);
  return out_of_range;
}

// Chunk bit offsets (the first chunk after `first` table units) from the
// chunk lengths in units; returns the chunks' total length in units.
template <class ExecSpace, class LenView, class OffView>
std::uint64_t rans_offsets(const ExecSpace& exec, const LenView& chunk_units, std::uint64_t nchunks,
                           std::uint64_t first, const OffView& offsets) {
  std::uint64_t total = 0;
  Kokkos::parallel_scan(
      "qsgd::encode[rans]::scan", Kokkos::RangePolicy<ExecSpace>(exec, 0, nchunks),
      KOKKOS_LAMBDA(std::uint64_t c, std::uint64_t& run, bool final) {
        if (final) offsets(c) = 16 * (first + run);
        run += chunk_units(c);
      },
      total);
  return total;
}

/*
 * write_rans_chunks
 * Purpose: place every chunk's units at its bit offset in the payload.
 * Algorithm: as for the Elias codes, the (at most two) words a chunk shares
 *   with a neighbour are zeroed first, then each chunk writes its units with
 *   a BitWriter (plain stores for the words it owns, atomic OR for shared ones).
 */
template <class ExecSpace, class OffView, class LenView, class UnitView, class WordView>
void write_rans_chunks(const ExecSpace& exec, std::uint64_t nchunks, std::uint32_t chunk, const OffView& offsets,
                       const LenView& chunk_units, const UnitView& scratch, const WordView& payload) {
  using range = Kokkos::RangePolicy<ExecSpace>;
  const std::uint64_t cap = std::uint64_t(chunk) + rans_state_units;
  Kokkos::parallel_for(
      "qsgd::encode[rans]::zero_shared", range(exec, 0, nchunks), KOKKOS_LAMBDA(std::uint64_t c) {
        const std::uint64_t start = offsets(c);
        const std::uint64_t end = start + 16 * chunk_units(c);
        if (start & 63) payload(start >> 6) = 0;
        if (end & 63) payload((end - 1) >> 6) = 0;
      });
  Kokkos::parallel_for(
      "qsgd::encode[rans]::write", range(exec, 0, nchunks), KOKKOS_LAMBDA(std::uint64_t c) {
        const std::uint64_t len = chunk_units(c);
        const std::uint64_t start = offsets(c);
        const std::uint64_t src = (c + 1) * cap - len;
        BitWriter<WordView> wr(payload, start, start + 16 * len);
        for (std::uint64_t k = 0; k < len; ++k) wr.put(scratch(src + k), 16);
        wr.finish();
      });
}

// Chunk c's bits [start, end) as its offsets give them: in order, inside the
// payload, whole units, the first chunk right after the table, and room for
// the final states. Shared by both decoder shapes.
KOKKOS_INLINE_FUNCTION bool rans_chunk_span_ok(std::uint64_t c, std::uint64_t start, std::uint64_t end,
                                               std::uint64_t first_bit, std::uint64_t payload_bits) {
  return !((c == 0 && start != first_bit) || start > end || end > payload_bits || (start & 15) || (end & 15) ||
           end - start < 16 * std::uint64_t(rans_state_units));
}

/*
 * decode_rans
 * Purpose: decode and validate every chunk in parallel, handing levels to the sink.
 * Algorithm: chunk c reads units [offsets(c)/16, offsets(c+1)/16) (the last
 *   chunk up to the payload's end). A chunk is bad when its offsets are out of
 *   order, out of range or not unit-aligned, an initial state is outside
 *   [2^15, 2^31), a read passes the chunk's end, or the chunk ends with units
 *   left over or a lane not back at 2^15.
 * Cost: reads the payload once plus one 8-byte table entry per coordinate.
 * Returns the first bad chunk, or no_index.
 */
template <class ExecSpace, class OffView, class WordView, class DecView, class ScaleView, class Sink>
std::uint64_t decode_rans(const ExecSpace& exec, const OffView& offsets, const WordView& payload,
                          std::uint64_t first_bit, std::uint64_t payload_bits, const DecView& dec,
                          std::uint32_t precision, const ScaleView& scales, std::uint64_t n, std::uint32_t d,
                          std::uint32_t s, std::uint32_t chunk, const Sink& sink) {
  const std::uint64_t nchunks = ceil_div(n, chunk);
  std::uint64_t first_bad = no_index;
  if (nchunks == 0) return first_bad;
  const std::uint32_t mask = (1u << precision) - 1;
  Kokkos::parallel_reduce(
      "qsgd::decode[rans]", Kokkos::RangePolicy<ExecSpace>(exec, 0, nchunks),
      KOKKOS_LAMBDA(std::uint64_t c, std::uint64_t& bad) {
        const std::uint64_t i0 = c * chunk;
        const std::uint64_t i1 = i0 + chunk < n ? i0 + chunk : n;
        const std::uint64_t start = offsets(c);
        const std::uint64_t end = c + 1 < nchunks ? offsets(c + 1) : payload_bits;
        if (!rans_chunk_span_ok(c, start, end, first_bit, payload_bits)) {
          if (c < bad) bad = c;
          return;
        }
        std::uint64_t p = start >> 4;
        const std::uint64_t pend = end >> 4;
        std::uint32_t x[rans_lanes];
        bool ok = true;
        for (std::uint32_t k = 0; k < rans_lanes; ++k) {
          x[k] = rans_unit(payload, p) | (rans_unit(payload, p + 1) << 16);
          p += 2;
          ok = ok && x[k] >= rans_low && x[k] < (rans_low << 16);
        }
        std::uint64_t bucket = i0 / d;
        std::uint64_t bucket_end = (bucket + 1) * d;
        LevelUnit unit(scales(bucket), s);
        for (std::uint64_t i = i0; ok && i < i1; ++i) {
          if (i == bucket_end) {
            ++bucket;
            bucket_end += d;
            unit = LevelUnit(scales(bucket), s);
          }
          const std::uint32_t lane = static_cast<std::uint32_t>((i - i0) % rans_lanes);
          std::uint32_t xs = x[lane];
          const std::uint64_t e = dec(xs & mask);
          xs = static_cast<std::uint32_t>(e >> 32) * (xs >> precision) + static_cast<std::uint32_t>((e >> 16) & 0xFFFFu);
          // Renormalization without a data-dependent branch on valid input:
          // one unit is read when the state falls below 2^15 (the load
          // always happens and stays inside the chunk).
          const bool low = xs < rans_low;
          if (low && p == pend) {
            ok = false;
            break;
          }
          const std::uint32_t u = rans_unit(payload, p < pend ? p : pend - 1);
          xs = low ? (xs << 16) | u : xs;
          p += low ? 1 : 0;
          x[lane] = xs;
          sink.put(i, static_cast<std::int32_t>(e & 0xFFFFu) - static_cast<std::int32_t>(s), unit);
        }
        for (std::uint32_t k = 0; k < rans_lanes; ++k) ok = ok && x[k] == rans_low;
        if (!ok || p != pend) {
          if (c < bad) bad = c;
        }
      },
      Kokkos::Min<std::uint64_t>(first_bad));
  return first_bad;
}

// The GPU shapes of the chunk kernels (encode_rans_chunks_lanes,
// decode_rans_lanes; docs/parallelism.md): chunks per team on a device.
constexpr int rans_chunks_per_team = 32;
// The number of lanes set in a mask of rans_lanes bits.
KOKKOS_INLINE_FUNCTION std::uint64_t rans_lanes_set(std::uint32_t mask) {
  static_assert(rans_lanes == 4, "rans_lanes_set counts four bits");
  return (mask & 1u) + ((mask >> 1) & 1u) + ((mask >> 2) & 1u) + ((mask >> 3) & 1u);
}
// The launches of a lane kernel over nchunks chunks: per_team chunks and
// `vector` lanes per team thread (one of each on the host), the league in
// slices of at most max_league teams.
template <class ExecSpace>
struct RansLaneLaunch {
  static constexpr bool device = use_device_shapes<ExecSpace>();
  static constexpr int per_team = device ? rans_chunks_per_team : 1;
  static constexpr int vector = device ? static_cast<int>(rans_lanes) : 1;
  std::uint64_t league;
  explicit RansLaneLaunch(std::uint64_t nchunks) : league(ceil_div(nchunks, static_cast<std::uint64_t>(per_team))) {}
  // The slice of teams that starts at team t0.
  Kokkos::TeamPolicy<ExecSpace> slice(const ExecSpace& exec, std::uint64_t t0) const {
    return Kokkos::TeamPolicy<ExecSpace>(exec, static_cast<int>(league_slice(league, t0)), per_team, vector);
  }
};

/*
 * encode_rans_chunks_lanes
 * Purpose: encode_rans_chunks's GPU shape: the same chunk lengths and the
 *   same units at the end of every region, with a chunk's four rANS lanes on
 *   four vector lanes.
 * Algorithm: a team thread per chunk, vector length rans_lanes. Rounds of
 *   four coordinates from the chunk's last round to its first; in a round,
 *   lane k looks up the symbol of coordinate i + k and tests its state
 *   against the symbol's bound; the emitting lanes form a mask (a vector OR),
 *   and lane k stores its unit at p - 1 - popcount(mask above k), where the
 *   serial encoder, walking the round's coordinates downwards, puts it.
 *   Then p falls by popcount(mask), and the final states go below, lane 0
 *   lowest. Units below a chunk's data are not written (the serial encoder
 *   leaves scratch values there; neither is read).
 */
template <class ExecSpace, class LView, class EncView, class UnitView, class LenView>
void encode_rans_chunks_lanes(const ExecSpace& exec, const LView& levels, std::uint64_t n, std::uint32_t s,
                              std::uint32_t chunk, const EncView& enc, const UnitView& scratch,
                              const LenView& chunk_units) {
  using Launch = RansLaneLaunch<ExecSpace>;
  using member_t = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  const std::uint64_t nchunks = ceil_div(n, chunk);
  if (nchunks == 0) return;
  const std::uint64_t cap = std::uint64_t(chunk) + rans_state_units;
  const Launch launch(nchunks);
  const int per_team = Launch::per_team;
  for (std::uint64_t t0 = 0; t0 < launch.league; t0 += max_league) {
    Kokkos::parallel_for(
        "qsgd::encode[rans]::lanes", launch.slice(exec, t0),
        KOKKOS_LAMBDA(const member_t& m) {
          Kokkos::parallel_for(Kokkos::TeamThreadRange(m, per_team), [&](int t) {
            const std::uint64_t c = (t0 + static_cast<std::uint64_t>(m.league_rank())) * per_team + t;
            if (c >= nchunks) return;
            const std::uint64_t i0 = c * chunk;
            const std::uint64_t i1 = i0 + chunk < n ? i0 + chunk : n;
            const std::uint64_t region_end = (c + 1) * cap;
            std::uint64_t p = region_end;
            std::uint32_t x[rans_lanes];
            Kokkos::parallel_for(Kokkos::ThreadVectorRange(m, rans_lanes), [&](std::uint32_t k) { x[k] = rans_low; });
            for (std::uint64_t r = ceil_div(i1 - i0, rans_lanes); r-- > 0;) {
              const std::uint64_t i = i0 + rans_lanes * r;
              const std::uint32_t width = i1 - i < rans_lanes ? static_cast<std::uint32_t>(i1 - i) : rans_lanes;
              RansEncSym e[rans_lanes];
              std::uint32_t emit = 0;
              Kokkos::parallel_reduce(
                  Kokkos::ThreadVectorRange(m, width),
                  [&](std::uint32_t k, std::uint32_t& bits) {
                    e[k] = enc(static_cast<std::uint32_t>(levels(i + k) + static_cast<std::int32_t>(s)));
                    bits |= x[k] >= e[k].x_max ? (1u << k) : 0u;
                  },
                  Kokkos::BOr<std::uint32_t>(emit));
              Kokkos::parallel_for(Kokkos::ThreadVectorRange(m, width), [&](std::uint32_t k) {
                std::uint32_t xs = x[k];
                if ((emit >> k) & 1u) {
                  scratch(p - 1 - rans_lanes_set(emit & ~((2u << k) - 1u))) = static_cast<std::uint16_t>(xs & 0xFFFFu);
                  xs >>= 16;
                }
                x[k] = rans_advance(xs, e[k]);
              });
              p -= rans_lanes_set(emit);
            }
            Kokkos::parallel_for(Kokkos::ThreadVectorRange(m, rans_lanes), [&](std::uint32_t k) {
              const std::uint64_t below = p - 2 * (rans_lanes - k);  // lane 0 lowest, low half first
              scratch(below) = static_cast<std::uint16_t>(x[k] & 0xFFFFu);
              scratch(below + 1) = static_cast<std::uint16_t>(x[k] >> 16);
            });
            Kokkos::single(Kokkos::PerThread(m), [&]() { chunk_units(c) = region_end - (p - rans_state_units); });
          });
        });
  }
}

/*
 * decode_rans_lanes
 * Purpose: decode_rans's GPU shape: the same checks, levels, sink calls and
 *   first bad chunk, with the four rANS lanes of a chunk on four vector lanes
 *   instead of one thread walking the chunk's coordinates.
 * Algorithm: a team thread per chunk (rans_chunks_per_team of them per team),
 *   vector length rans_lanes. Per round of four coordinates, lane k decodes
 *   coordinate i + k from its own state; the lanes whose state fell below
 *   2^15 form a bit mask (a vector OR, seen by every lane), and lane k reads
 *   unit p + popcount(mask below k), as the serial decoder reads them in
 *   coordinate order. A lane puts its level only if every read up to and
 *   including its own stays inside the chunk (the serial decoder stops at
 *   the first read past the end), then p advances by popcount(mask).
 *   Per-lane arrays (states, bucket ends, units) are indexed by the lane:
 *   on a device each lane keeps its own copy and uses its own entry; on the
 *   host a team has one thread that runs the four lanes one after the other
 *   over one shared copy, so the same code gives the same bits on both
 *   (tested on the host).
 * Cost: the payload once and one table entry per coordinate; the serial
 *   chain per vector lane is a quarter of the chunk.
 */
template <class ExecSpace, class OffView, class WordView, class DecView, class ScaleView, class Sink>
std::uint64_t decode_rans_lanes(const ExecSpace& exec, const OffView& offsets, const WordView& payload,
                                std::uint64_t first_bit, std::uint64_t payload_bits, const DecView& dec,
                                std::uint32_t precision, const ScaleView& scales, std::uint64_t n, std::uint32_t d,
                                std::uint32_t s, std::uint32_t chunk, const Sink& sink) {
  using Launch = RansLaneLaunch<ExecSpace>;
  using member_t = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  const std::uint64_t nchunks = ceil_div(n, chunk);
  std::uint64_t first_bad = no_index;
  if (nchunks == 0) return first_bad;
  const std::uint32_t mask = (1u << precision) - 1;
  const Launch launch(nchunks);
  const int per_team = Launch::per_team;
  for (std::uint64_t t0 = 0; t0 < launch.league; t0 += max_league) {
    std::uint64_t slice_bad = no_index;
    Kokkos::parallel_reduce(
        "qsgd::decode[rans]::lanes", launch.slice(exec, t0),
        KOKKOS_LAMBDA(const member_t& m, std::uint64_t& bad) {
          std::uint64_t team_bad = no_index;
          Kokkos::parallel_reduce(
              Kokkos::TeamThreadRange(m, per_team),
              [&](int t, std::uint64_t& tb) {
                const std::uint64_t c = (t0 + static_cast<std::uint64_t>(m.league_rank())) * per_team + t;
                if (c >= nchunks) return;
                const std::uint64_t i0 = c * chunk;
                const std::uint64_t i1 = i0 + chunk < n ? i0 + chunk : n;
                const std::uint64_t start = offsets(c);
                const std::uint64_t end = c + 1 < nchunks ? offsets(c + 1) : payload_bits;
                if (!rans_chunk_span_ok(c, start, end, first_bit, payload_bits)) {
                  if (c < tb) tb = c;
                  return;
                }
                const std::uint64_t p0 = start >> 4;
                const std::uint64_t pend = end >> 4;
                std::uint32_t x[rans_lanes];
                std::uint64_t bend[rans_lanes];
                LevelUnit unit[rans_lanes];
                std::uint32_t bad_states = 0;
                Kokkos::parallel_reduce(
                    Kokkos::ThreadVectorRange(m, rans_lanes),
                    [&](std::uint32_t k, std::uint32_t& b) {
                      x[k] = rans_unit(payload, p0 + 2 * k) | (rans_unit(payload, p0 + 2 * k + 1) << 16);
                      b += x[k] >= rans_low && x[k] < (rans_low << 16) ? 0u : 1u;
                      bend[k] = i0;  // the first coordinate of each lane looks its bucket up
                    },
                    bad_states);
                bool ok = bad_states == 0;
                std::uint64_t p = p0 + rans_state_units;
                for (std::uint64_t i = i0; ok && i < i1; i += rans_lanes) {
                  const std::uint32_t width = i1 - i < rans_lanes ? static_cast<std::uint32_t>(i1 - i) : rans_lanes;
                  std::uint64_t e[rans_lanes];
                  std::uint32_t low = 0;
                  Kokkos::parallel_reduce(
                      Kokkos::ThreadVectorRange(m, width),
                      [&](std::uint32_t k, std::uint32_t& bits) {
                        const std::uint32_t xs = x[k];
                        e[k] = dec(xs & mask);
                        const std::uint32_t next = static_cast<std::uint32_t>(e[k] >> 32) * (xs >> precision) +
                                                   static_cast<std::uint32_t>((e[k] >> 16) & 0xFFFFu);
                        bits |= next < rans_low ? (1u << k) : 0u;
                      },
                      Kokkos::BOr<std::uint32_t>(low));
                  Kokkos::parallel_for(Kokkos::ThreadVectorRange(m, width), [&](std::uint32_t k) {
                    const std::uint32_t below = low & ((1u << k) - 1u);
                    const std::uint32_t mine = (low >> k) & 1u;
                    const std::uint64_t q = p + rans_lanes_set(below);
                    if (q + mine > pend) return;  // a read up to this lane passes the chunk's end
                    std::uint32_t xs = x[k];
                    xs = static_cast<std::uint32_t>(e[k] >> 32) * (xs >> precision) +
                         static_cast<std::uint32_t>((e[k] >> 16) & 0xFFFFu);
                    if (mine) xs = (xs << 16) | rans_unit(payload, q);
                    x[k] = xs;
                    const std::uint64_t ik = i + k;
                    if (ik >= bend[k]) {
                      const std::uint64_t b = ik / d;
                      bend[k] = (b + 1) * d;
                      unit[k] = LevelUnit(scales(b), s);
                    }
                    sink.put(ik, static_cast<std::int32_t>(e[k] & 0xFFFFu) - static_cast<std::int32_t>(s), unit[k]);
                  });
                  const std::uint64_t reads = rans_lanes_set(low);
                  if (p + reads > pend) ok = false;
                  p += reads;
                }
                std::uint32_t off_state = 0;
                Kokkos::parallel_reduce(
                    Kokkos::ThreadVectorRange(m, rans_lanes),
                    [&](std::uint32_t k, std::uint32_t& b) { b += x[k] == rans_low ? 0u : 1u; }, off_state);
                if (!ok || off_state != 0 || p != pend) {
                  if (c < tb) tb = c;
                }
              },
              Kokkos::Min<std::uint64_t>(team_bad));
          Kokkos::single(Kokkos::PerTeam(m), [&]() {
            if (team_bad < bad) bad = team_bad;
          });
        },
        Kokkos::Min<std::uint64_t>(slice_bad));
    if (slice_bad < first_bad) first_bad = slice_bad;
  }
  return first_bad;
}

}  // namespace qsgd::detail
