#pragma once
// Elias-omega codes of spec section 2, encoded and decoded chunk-parallel.
//
// Dense code: per coordinate omega(|l| + 1), then a sign bit when l != 0.
// Sparse code: per chunk omega(count + 1), then per non-zero coordinate
//   omega(gap), sign bit, omega(|l|); gap counts from the previous non-zero of
//   the chunk (the first from position -1, so gaps are >= 1).
// Scales travel in their own section (32 bits per bucket), so chunks need not
// align with buckets.

#include <Kokkos_Core.hpp>
#include <cstdint>

#include "qsgd/kernels/detail/arith.hpp"
#include "qsgd/kernels/detail/bitstream.hpp"
#include "qsgd/kernels/quantize.hpp"

namespace qsgd::detail {

// Codewords of the small integers that dominate (levels, gaps, counts),
// precomputed once per codec: entry k holds omega(k) as (bits << 6 | length).
// Larger integers are encoded on the fly.
constexpr std::uint64_t omega_table_size = 4096;

template <class TableView>
struct OmegaTable {
  TableView tab;
  KOKKOS_INLINE_FUNCTION Codeword get(std::uint64_t k) const {
    if (k < omega_table_size) {
      const std::uint64_t e = tab(k);
      return Codeword{e >> 6, static_cast<std::uint32_t>(e & 63)};
    }
    return omega_encode(k);
  }
  KOKKOS_INLINE_FUNCTION std::uint32_t length(std::uint64_t k) const {
    return k < omega_table_size ? static_cast<std::uint32_t>(tab(k) & 63) : omega_length(k);
  }
};

template <class ExecSpace, class TableView>
void fill_omega_table(const ExecSpace& exec, const TableView& tab) {
  Kokkos::parallel_for(
      "qsgd::omega_table", Kokkos::RangePolicy<ExecSpace>(exec, 0, omega_table_size), KOKKOS_LAMBDA(std::uint64_t k) {
        const Codeword c = k == 0 ? Codeword{0, 0} : omega_encode(k);
        tab(k) = (c.bits << 6) | c.len;
      });
}

KOKKOS_INLINE_FUNCTION std::uint64_t magnitude_of(std::int32_t l) {
  return static_cast<std::uint64_t>(l < 0 ? -static_cast<std::int64_t>(l) : l);
}

// Bits of one chunk [i0, i1) in the given code.
template <bool Sparse, class LView, class Table>
KOKKOS_INLINE_FUNCTION std::uint64_t chunk_bits(const LView& levels, std::uint64_t i0, std::uint64_t i1,
                                                const Table& om) {
  std::uint64_t bits = 0;
  if constexpr (Sparse) {
    std::uint64_t count = 0;
    std::uint64_t prev = i0 - 1;  // wraps for i0 == 0; only differences are used
    for (std::uint64_t i = i0; i < i1; ++i) {
      const std::int32_t l = levels(i);
      if (l != 0) {
        bits += om.length(i - prev) + 1 + om.length(magnitude_of(l));
        prev = i;
        ++count;
      }
    }
    bits += om.length(count + 1);
  } else {
    for (std::uint64_t i = i0; i < i1; ++i) {
      const std::uint64_t a = magnitude_of(levels(i));
      bits += om.length(a + 1) + (a != 0 ? 1u : 0u);
    }
  }
  return bits;
}

/*
 * plan_elias<Sparse> + write_elias<Sparse>
 * Purpose: variable-length encoding of signed levels with per-chunk bit offsets.
 * Algorithm: plan: (1) code length of every coordinate, summed per chunk;
 *   (2) exclusive parallel_scan of chunk lengths -> chunk bit offsets, written
 *   straight into the message; returns the payload length in bits, so the
 *   caller can check its buffer before anything is written there.
 *   write: (3) the words a chunk shares with a neighbour are zeroed; (4) each
 *   chunk writes its codewords sequentially, storing the words it owns and
 *   OR-ing (atomically) the at most two it shares.
 * Cost: reads 8n bytes of levels (two passes), writes the payload once.
 * Requirements: offsets has ceil(n/chunk) entries; chunk_len scratch too;
 *   write: the payload holds the planned bits.
 */
template <bool Sparse, class ExecSpace, class LView, class OffView, class ScratchView, class Table>
std::uint64_t plan_elias(const ExecSpace& exec, const LView& levels, std::uint64_t n, std::uint32_t chunk,
                         const OffView& offsets, const ScratchView& chunk_len, const Table& om) {
  const std::uint64_t nchunks = ceil_div(n, chunk);
  if (nchunks == 0) return 0;
  using range = Kokkos::RangePolicy<ExecSpace>;
  Kokkos::parallel_for(
      Sparse ? "qsgd::encode[elias-sparse]::lengths" : "qsgd::encode[elias-dense]::lengths", range(exec, 0, nchunks),
      KOKKOS_LAMBDA(std::uint64_t c) {
        const std::uint64_t i0 = c * chunk;
        const std::uint64_t i1 = i0 + chunk < n ? i0 + chunk : n;
        chunk_len(c) = chunk_bits<Sparse>(levels, i0, i1, om);
      });
  std::uint64_t total = 0;
  Kokkos::parallel_scan(
      "qsgd::encode[elias]::scan", range(exec, 0, nchunks),
      KOKKOS_LAMBDA(std::uint64_t c, std::uint64_t& run, bool final) {
        if (final) offsets(c) = run;
        run += chunk_len(c);
      },
      total);
  return total;
}

template <bool Sparse, class ExecSpace, class LView, class OffView, class ScratchView, class WordView, class Table>
void write_elias(const ExecSpace& exec, const LView& levels, std::uint64_t n, std::uint32_t chunk,
                 const OffView& offsets, const ScratchView& chunk_len, const WordView& payload_all, const Table& om) {
  const std::uint64_t nchunks = ceil_div(n, chunk);
  if (nchunks == 0) return;
  using range = Kokkos::RangePolicy<ExecSpace>;
  Kokkos::parallel_for(
      "qsgd::encode[elias]::zero_shared", range(exec, 0, nchunks), KOKKOS_LAMBDA(std::uint64_t c) {
        const std::uint64_t start = offsets(c);
        const std::uint64_t end = start + chunk_len(c);
        if (end == start) return;
        if (start & 63) payload_all(start >> 6) = 0;
        if (end & 63) payload_all((end - 1) >> 6) = 0;
      });
  Kokkos::parallel_for(
      Sparse ? "qsgd::encode[elias-sparse]::write" : "qsgd::encode[elias-dense]::write", range(exec, 0, nchunks),
      KOKKOS_LAMBDA(std::uint64_t c) {
        const std::uint64_t i0 = c * chunk;
        const std::uint64_t i1 = i0 + chunk < n ? i0 + chunk : n;
        const std::uint64_t start = offsets(c);
        BitWriter<WordView> wr(payload_all, start, start + chunk_len(c));
        if (Sparse) {
          std::uint64_t count = 0;
          for (std::uint64_t i = i0; i < i1; ++i) count += levels(i) != 0;
          const Codeword cc = om.get(count + 1);
          wr.put(cc.bits, cc.len);
          std::uint64_t prev = i0 - 1;
          for (std::uint64_t i = i0; i < i1; ++i) {
            const std::int32_t l = levels(i);
            if (l == 0) continue;
            const Codeword g = om.get(i - prev);
            wr.put(g.bits, g.len);
            wr.put(l < 0 ? 1u : 0u, 1);
            const Codeword lc = om.get(magnitude_of(l));
            wr.put(lc.bits, lc.len);
            prev = i;
          }
        } else {
          for (std::uint64_t i = i0; i < i1; ++i) {
            const std::int32_t l = levels(i);
            const std::uint64_t a = magnitude_of(l);
            const Codeword cw = om.get(a + 1);
            if (a == 0) {
              wr.put(cw.bits, cw.len);
            } else {
              wr.put((cw.bits << 1) | (l < 0 ? 1u : 0u), cw.len + 1);
            }
          }
        }
        wr.finish();
      });
}

/*
 * decode_elias<Sparse>
 * Purpose: decode and validate every chunk in parallel.
 * Algorithm: chunk c reads exactly [offsets(c), offsets(c+1)) (the last chunk
 *   up to payload_bits). A chunk is bad when its offsets are out of order or
 *   out of range, a codeword runs past the chunk, a level exceeds s, a gap
 *   leaves the chunk, the count exceeds the chunk, or bits are left over.
 * Cost: reads the payload once plus scales; the sink writes 4n bytes.
 * Returns the first bad chunk, or no_index.
 */
template <bool Sparse, class ExecSpace, class OffView, class WordView, class ScaleView, class Sink>
std::uint64_t decode_elias(const ExecSpace& exec, const OffView& offsets, const WordView& payload,
                           std::uint64_t payload_bits, const ScaleView& scales, std::uint64_t n, std::uint32_t d,
                           std::uint32_t s, std::uint32_t chunk, const Sink& sink) {
  const std::uint64_t nchunks = ceil_div(n, chunk);
  std::uint64_t first_bad = no_index;
  if (nchunks == 0) return first_bad;
  Kokkos::parallel_reduce(
      Sparse ? "qsgd::decode[elias-sparse]" : "qsgd::decode[elias-dense]",
      Kokkos::RangePolicy<ExecSpace>(exec, 0, nchunks),
      KOKKOS_LAMBDA(std::uint64_t c, std::uint64_t& bad) {
        const std::uint64_t i0 = c * chunk;
        const std::uint64_t i1 = i0 + chunk < n ? i0 + chunk : n;
        const std::uint64_t start = offsets(c);
        const std::uint64_t end = c + 1 < nchunks ? offsets(c + 1) : payload_bits;
        if ((c == 0 && start != 0) || start > end || end > payload_bits) {
          if (c < bad) bad = c;
          return;
        }
        BitReader<WordView> rd(payload, start, end);
        std::uint64_t bucket = i0 / d;
        std::uint64_t bucket_end = (bucket + 1) * d;
        LevelUnit unit(scales(bucket), s);
        bool ok = true;
        if (Sparse) {
          const std::uint64_t count1 = rd.omega(i1 - i0 + 1);
          ok = count1 != 0;
          const std::uint64_t count = ok ? count1 - 1 : 0;
          std::uint64_t next = i0;  // first coordinate not yet written
          std::uint64_t prev = i0 - 1;
          for (std::uint64_t k = 0; ok && k < count; ++k) {
            const std::uint64_t gap = rd.omega(i1 - i0);
            const std::uint64_t i = prev + gap;
            if (gap == 0 || i >= i1) { ok = false; break; }
            const bool neg = rd.get(1) != 0;
            const std::uint64_t l = rd.omega(s);
            if (l == 0 || rd.overrun) { ok = false; break; }
            for (; next < i; ++next) sink.zero(next);
            while (i >= bucket_end) {
              ++bucket;
              bucket_end += d;
              unit = LevelUnit(scales(bucket), s);
            }
            sink.put(i, neg ? -static_cast<std::int32_t>(l) : static_cast<std::int32_t>(l), unit);
            next = i + 1;
            prev = i;
          }
          if (ok)
            for (; next < i1; ++next) sink.zero(next);
        } else {
          for (std::uint64_t i = i0; i < i1; ++i) {
            if (i == bucket_end) {
              ++bucket;
              bucket_end += d;
              unit = LevelUnit(scales(bucket), s);
            }
            const std::uint64_t k = rd.omega(std::uint64_t(s) + 1);
            if (k == 0) { ok = false; break; }
            const std::uint64_t l = k - 1;
            const bool neg = l != 0 && rd.get(1) != 0;
            if (rd.overrun) { ok = false; break; }
            sink.put(i, neg ? -static_cast<std::int32_t>(l) : static_cast<std::int32_t>(l), unit);
          }
        }
        if (!ok || rd.overrun || rd.pos != end) {
          if (c < bad) bad = c;
        }
      },
      Kokkos::Min<std::uint64_t>(first_bad));
  return first_bad;
}

}  // namespace qsgd::detail
