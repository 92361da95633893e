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
#include "qsgd/kernels/detail/dispatch.hpp"
#include "qsgd/kernels/detail/sinks.hpp"
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

// ---- dense-code decoding table ----------------------------------------------
// The next 12 bits of a dense chunk -> the whole codewords (omega(|l| + 1),
// then the sign bit when l != 0) that fit in them, up to three, of levels
// |l| <= s: one look-up decodes several short codewords (a 4-bit level at
// max norm takes 1-4 bits most of the time). A codeword of a level above s
// ends the entry, so it reaches the bit-serial path, which reports it.
// Entry: bits 0-1 count (0: no whole codeword of a valid level; decode bit
// by bit), 2-5 bits consumed, then per symbol its level as a signed 8-bit
// integer from bit 6, first symbol lowest; unused symbols are 0.
constexpr std::uint32_t dense_peek_bits = 12;
constexpr std::uint64_t dense_table_size = std::uint64_t(1) << dense_peek_bits;
constexpr std::uint32_t dense_table_symbols = 3;
constexpr std::uint64_t dense_segment = 256;        // coordinates decoded before they are delivered (host)
constexpr std::uint64_t dense_segment_device = 32;  // the same on a device
constexpr int dense_group = 3;                      // chunks one work item decodes side by side (host)
// Chunks per work item by backend: three side by side overlap the look-up
// latency of one CPU core; on a GPU one chunk per thread (thousands of
// threads, a third of the registers and local arrays per thread).
template <class ExecSpace>
constexpr int dense_group_for() {
  return use_device_shapes<ExecSpace>() ? 1 : dense_group;
}
// Segment by backend: long segments keep a CPU core's decode loop apart from
// its delivery loop; on a GPU a thread's staging arrays are local memory,
// so short ones (39 B of levels and 128 B of wide levels, against 263 B and
// 1 KiB).
template <class ExecSpace>
constexpr std::uint64_t dense_segment_for() {
  return use_device_shapes<ExecSpace>() ? dense_segment_device : dense_segment;
}

KOKKOS_INLINE_FUNCTION std::uint32_t dense_table_entry(std::uint32_t pattern, std::uint32_t s) {
  constexpr std::uint32_t w = dense_peek_bits;
  std::uint32_t pos = 0, count = 0, syms = 0;
  while (count < dense_table_symbols) {
    std::uint32_t q = pos;
    std::uint32_t nval = 1;
    bool whole = false;
    while (q < w) {  // omega: a 0 ends the codeword; a 1 and nval more bits form the next value
      if (((pattern >> (w - 1 - q++)) & 1u) == 0) {
        whole = true;
        break;
      }
      if (nval > w - q) break;
      std::uint32_t rest = 0;
      for (std::uint32_t k = 0; k < nval; ++k) rest = (rest << 1) | ((pattern >> (w - 1 - q++)) & 1u);
      nval = (1u << nval) | rest;
    }
    if (!whole || nval - 1 > s) break;
    const std::uint32_t mag = nval - 1;  // at most 16: a longer codeword does not fit in 12 bits
    std::uint32_t neg = 0;
    if (mag != 0) {
      if (q >= w) break;
      neg = (pattern >> (w - 1 - q++)) & 1u;
    }
    const std::uint32_t level = neg != 0 ? (0u - mag) & 0xFFu : mag;
    syms |= level << (8 * count);
    pos = q;
    ++count;
  }
  return count | (pos << 2) | (syms << 6);
}

// The table for levels up to s.
template <class ExecSpace, class TableView>
void fill_dense_table(const ExecSpace& exec, const TableView& tab, std::uint32_t s) {
  Kokkos::parallel_for(
      "qsgd::elias_dense_table", Kokkos::RangePolicy<ExecSpace>(exec, 0, dense_table_size),
      KOKKOS_LAMBDA(std::uint64_t p) { tab(p) = dense_table_entry(static_cast<std::uint32_t>(p), s); });
}

KOKKOS_INLINE_FUNCTION std::uint64_t magnitude_of(std::int32_t l) {
  return static_cast<std::uint64_t>(l < 0 ? -static_cast<std::int64_t>(l) : l);
}

// ---- dense-code encoding table ----------------------------------------------
// Entry l + s, for |l| <= s: the whole dense codeword of level l (omega(|l|
// + 1), then the sign bit when l != 0) as (bits << 6 | length), so the
// encoder has no branch on the level. Built per encoder for the s it encodes
// (at most dense_encode_max_s: a codeword of at most 21 bits, two of which
// fit one BitWriter::put); a level outside the table is coded on the fly.
constexpr std::uint32_t dense_encode_max_s = 4095;

KOKKOS_INLINE_FUNCTION std::uint64_t dense_codeword(std::int32_t l) {
  const std::uint64_t a = magnitude_of(l);
  const Codeword c = omega_encode(a + 1);
  const std::uint64_t bits = a == 0 ? c.bits : (c.bits << 1) | (l < 0 ? 1u : 0u);
  return (bits << 6) | (c.len + (a != 0 ? 1u : 0u));
}

// 2 * ts + 2 entries: the last is a sentinel of length 63 that
// DenseCodewords::clamped returns for a level outside the table.
constexpr std::uint64_t dense_encode_sentinel = 63;

template <class ExecSpace, class TableView>
void fill_dense_encode_table(const ExecSpace& exec, const TableView& tab, std::uint32_t s) {
  const std::int64_t ts = s < dense_encode_max_s ? s : dense_encode_max_s;
  Kokkos::parallel_for(
      "qsgd::elias_dense_encode_table", Kokkos::RangePolicy<ExecSpace>(exec, 0, 2 * ts + 2),
      KOKKOS_LAMBDA(std::uint64_t k) {
        tab(k) = k == std::uint64_t(2 * ts + 1) ? dense_encode_sentinel
                                                : dense_codeword(static_cast<std::int32_t>(std::int64_t(k) - ts));
      });
}

// The length of the longest codeword in a table for s (that of level s).
inline std::uint32_t dense_encode_max_len(std::uint32_t s) {
  return static_cast<std::uint32_t>(dense_codeword(static_cast<std::int32_t>(s < dense_encode_max_s ? s : dense_encode_max_s)) & 63);
}

template <class TableView>
struct DenseCodewords {
  TableView tab;    // 2 * ts + 1 entries
  std::int64_t ts;  // the largest |level| in the table
  bool quad;        // four codewords of the table fit one put (4 x dense_encode_max_len <= 63)
  KOKKOS_INLINE_FUNCTION std::uint64_t entry(std::int32_t l) const {
    const std::uint64_t k = static_cast<std::uint64_t>(std::int64_t(l) + ts);
    return k <= static_cast<std::uint64_t>(2 * ts) ? tab(k) : dense_codeword(l);
  }
  // Without a branch: the sentinel (length 63) for a level outside the table.
  KOKKOS_INLINE_FUNCTION std::uint64_t clamped(std::int32_t l) const {
    const std::uint64_t k = static_cast<std::uint64_t>(std::int64_t(l) + ts);
    const std::uint64_t last = static_cast<std::uint64_t>(2 * ts + 1);
    return tab(k < last ? k : last);
  }
};

// The sparse code's coordinates [i0, i1) of a chunk: their non-zeros'
// bits except the first one's gap, which runs from a non-zero before i0
// (its bits are lead_bits(prev)).
struct SparseRun {
  std::uint64_t bits = 0;   // sign and magnitude of every non-zero, the gaps after the first
  std::uint64_t count = 0;  // non-zeros
  std::uint64_t first = 0, last = 0;  // the first and last non-zero (when count > 0)
  template <class Table>
  KOKKOS_INLINE_FUNCTION std::uint64_t lead_bits(std::uint64_t prev, const Table& om) const {
    return count > 0 ? om.length(first - prev) : 0;
  }
};

template <class LView, class Table>
KOKKOS_INLINE_FUNCTION SparseRun sparse_run(const LView& levels, std::uint64_t i0, std::uint64_t i1,
                                            const Table& om) {
  SparseRun r;
  for (std::uint64_t i = i0; i < i1; ++i) {
    const std::int32_t l = levels(i);
    if (l == 0) continue;
    r.bits += (r.count > 0 ? om.length(i - r.last) : 0) + 1 + om.length(magnitude_of(l));
    if (r.count == 0) r.first = i;
    r.last = i;
    ++r.count;
  }
  return r;
}

// Bits of one chunk [i0, i1) in the given code.
template <bool Sparse, class LView, class Table>
KOKKOS_INLINE_FUNCTION std::uint64_t chunk_bits(const LView& levels, std::uint64_t i0, std::uint64_t i1,
                                                const Table& om) {
  std::uint64_t bits = 0;
  if constexpr (Sparse) {
    const SparseRun r = sparse_run(levels, i0, i1, om);
    // The first gap counts from position i0 - 1 (wraps for i0 == 0; only differences are used).
    bits = r.bits + r.lead_bits(i0 - 1, om) + om.length(r.count + 1);
  } else {  // without a branch, then again with one if a level was outside the table
    std::uint64_t outside = 0;
    for (std::uint64_t i = i0; i < i1; ++i) {
      const std::uint64_t e = om.clamped(levels(i));
      bits += e & 63;
      outside += e == dense_encode_sentinel;
    }
    if (outside != 0) {
      bits = 0;
      for (std::uint64_t i = i0; i < i1; ++i) bits += om.entry(levels(i)) & 63;
    }
  }
  return bits;
}

// The dense codewords of levels [i0, i1) into the chunk's bits [start, end)
// of wr. Inside the words the chunk owns alone (not the first or last word
// it shares with a neighbour), G = 4 or 2 codewords of the table are joined
// into one put that stores the current word every time instead of
// branching on a full word (on local copies of the writer's state, so that
// they stay in registers); elsewhere, and for a level outside the
// table, one codeword per BitWriter::put.
template <int G, class LView, class WordView, class Table>
KOKKOS_INLINE_FUNCTION void write_dense_run(const LView& levels, std::uint64_t& i, std::uint64_t i1,
                                            std::uint64_t owned_end, BitWriter<WordView>& wr, const Table& om) {
  std::uint64_t acc = wr.acc, pos = wr.pos;
  std::uint32_t fill = wr.fill;
  while (i + G <= i1 && pos < owned_end) {
    std::uint64_t v;
    std::uint32_t len;
    if constexpr (G == 4) {
      const std::uint64_t e0 = om.entry(levels(i)), e1 = om.entry(levels(i + 1));
      const std::uint64_t e2 = om.entry(levels(i + 2)), e3 = om.entry(levels(i + 3));
      const std::uint32_t l1 = e1 & 63, l2 = e2 & 63, l3 = e3 & 63;
      len = static_cast<std::uint32_t>(e0 & 63) + l1 + l2 + l3;
      v = (((((e0 >> 6) << l1) | (e1 >> 6)) << (l2 + l3)) | (((e2 >> 6) << l3) | (e3 >> 6)));
    } else {
      const std::uint64_t e0 = om.entry(levels(i)), e1 = om.entry(levels(i + 1));
      const std::uint32_t l1 = e1 & 63;
      len = static_cast<std::uint32_t>(e0 & 63) + l1;
      v = ((e0 >> 6) << l1) | (e1 >> 6);
    }
    if (len > 63) break;  // long codewords of levels outside the table: the caller's general put
    const std::uint32_t total = fill + len;
    acc |= (v << (64 - len)) >> fill;
    wr.words(pos >> 6) = acc;
    const std::uint64_t carry = (v << 1) << ((127 - total) & 63);
    acc = total >= 64 ? carry : acc;
    fill = total & 63;
    pos += len;
    i += G;
  }
  wr.acc = acc;
  wr.pos = pos;
  wr.fill = fill;
}

template <class LView, class WordView, class Table>
KOKKOS_INLINE_FUNCTION void write_dense_chunk(const LView& levels, std::uint64_t i0, std::uint64_t i1,
                                              std::uint64_t start, std::uint64_t end, BitWriter<WordView>& wr,
                                              const Table& om) {
  const std::uint64_t owned_begin = (start + 63) & ~std::uint64_t(63);
  const std::uint64_t owned_end = (end >> 6) << 6;
  std::uint64_t i = i0;
  while (i < i1) {
    if (wr.pos >= owned_begin) {
      if (om.quad)
        write_dense_run<4>(levels, i, i1, owned_end, wr, om);
      else
        write_dense_run<2>(levels, i, i1, owned_end, wr, om);
      if (i >= i1) break;
    }
    const std::uint64_t e = om.entry(levels(i));
    wr.put(e >> 6, static_cast<std::uint32_t>(e & 63));
    ++i;
  }
}

/*
 * plan_elias_chunks<Sparse> + write_elias_chunks<Sparse> (a thread per chunk)
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
// Chunk bit offsets (exclusive scan of chunk_len) into offsets; returns the
// payload's bits.
template <class ExecSpace, class OffView, class ScratchView>
std::uint64_t scan_chunk_lengths(const ExecSpace& exec, const ScratchView& chunk_len, const OffView& offsets,
                                 std::uint64_t nchunks) {
  std::uint64_t total = 0;
  Kokkos::parallel_scan(
      "qsgd::encode[elias]::scan", Kokkos::RangePolicy<ExecSpace>(exec, 0, nchunks),
      KOKKOS_LAMBDA(std::uint64_t c, std::uint64_t& run, bool final) {
        if (final) offsets(c) = run;
        run += chunk_len(c);
      },
      total);
  return total;
}

template <bool Sparse, class ExecSpace, class LView, class OffView, class ScratchView, class Table>
std::uint64_t plan_elias_chunks(const ExecSpace& exec, const LView& levels, std::uint64_t n, std::uint32_t chunk,
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
  return scan_chunk_lengths(exec, chunk_len, offsets, nchunks);
}

// The sparse codewords of the non-zeros of [i0, i1), the first gap counted
// from prev.
template <class LView, class Writer, class Table>
KOKKOS_INLINE_FUNCTION void write_sparse_run(const LView& levels, std::uint64_t i0, std::uint64_t i1,
                                             std::uint64_t prev, Writer& wr, const Table& om) {
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
}

// One chunk's codewords (coordinates [i0, i1), bits [start, end) of the
// payload). A function rather than a branch in the kernel's lambda: nvcc does
// not let an extended lambda first capture a variable inside `if constexpr`.
template <bool Sparse, class LView, class Writer, class Table>
KOKKOS_INLINE_FUNCTION void write_chunk(const LView& levels, std::uint64_t i0, std::uint64_t i1, std::uint64_t start,
                                        std::uint64_t end, Writer& wr, const Table& om) {
  if constexpr (Sparse) {
    std::uint64_t count = 0;
    for (std::uint64_t i = i0; i < i1; ++i) count += levels(i) != 0;
    const Codeword cc = om.get(count + 1);
    wr.put(cc.bits, cc.len);
    write_sparse_run(levels, i0, i1, i0 - 1, wr, om);
    (void)start;
    (void)end;
  } else {
    write_dense_chunk(levels, i0, i1, start, end, wr, om);
  }
}

// Zeroes the words each chunk shares with a neighbour, before any chunk ORs into them.
template <class ExecSpace, class OffView, class ScratchView, class WordView>
void zero_shared_words(const ExecSpace& exec, const OffView& offsets, const ScratchView& chunk_len,
                       const WordView& payload_all, std::uint64_t nchunks) {
  Kokkos::parallel_for(
      "qsgd::encode[elias]::zero_shared", Kokkos::RangePolicy<ExecSpace>(exec, 0, nchunks),
      KOKKOS_LAMBDA(std::uint64_t c) {
        const std::uint64_t start = offsets(c);
        const std::uint64_t end = start + chunk_len(c);
        if (end == start) return;
        if (start & 63) payload_all(start >> 6) = 0;
        if (end & 63) payload_all((end - 1) >> 6) = 0;
      });
}

template <bool Sparse, class ExecSpace, class LView, class OffView, class ScratchView, class WordView, class Table>
void write_elias_chunks(const ExecSpace& exec, const LView& levels, std::uint64_t n, std::uint32_t chunk,
                        const OffView& offsets, const ScratchView& chunk_len, const WordView& payload_all,
                        const Table& om) {
  const std::uint64_t nchunks = ceil_div(n, chunk);
  if (nchunks == 0) return;
  using range = Kokkos::RangePolicy<ExecSpace>;
  zero_shared_words(exec, offsets, chunk_len, payload_all, nchunks);
  Kokkos::parallel_for(
      Sparse ? "qsgd::encode[elias-sparse]::write" : "qsgd::encode[elias-dense]::write", range(exec, 0, nchunks),
      KOKKOS_LAMBDA(std::uint64_t c) {
        const std::uint64_t i0 = c * chunk;
        const std::uint64_t i1 = i0 + chunk < n ? i0 + chunk : n;
        const std::uint64_t start = offsets(c);
        BitWriter<WordView> wr(payload_all, start, start + chunk_len(c));
        write_chunk<Sparse>(levels, i0, i1, start, start + chunk_len(c), wr, om);
        wr.finish();
      });
}

/*
 * plan_elias_teams<Sparse> + write_elias_teams<Sparse>
 * Purpose: plan_elias_chunks and write_elias_chunks's GPU shape: the same chunk lengths,
 *   offsets and payload bits, with a team per chunk instead of a thread
 *   walking its 4096 coordinates.
 * Algorithm: a chunk is cut into elias_parts parts of ceil(len / elias_parts)
 *   coordinates (the last ones may be short or empty), and a team runs its
 *   parts (TeamThreadRange: a thread per part on a device, one thread
 *   walking the parts in order on the host). Each part measures its own
 *   coordinates into team scratch (EliasPart: bits; for the sparse code its
 *   non-zeros, first and last, as SparseRun). After a barrier one thread
 *   walks the 32 parts once: the gap of a part's first non-zero runs from
 *   the last non-zero of the parts before it (or from i0 - 1), and a part's
 *   bits [begin, end) in the chunk follow the count's codeword (sparse, in
 *   part 0) and the parts before it. Another barrier.
 *   plan: the chunk's length is the last part's end; then the chunk scan.
 *   write: zero_shared_words zeroes the words each chunk shares with a
 *   neighbour chunk (a kernel of its own: another team may OR into them at
 *   any time afterwards); then, per chunk (write_elias_team_chunks), the
 *   words two of its parts share are zeroed, a barrier, and each part
 *   writes its codewords with a BitWriter over its own bits, OR-ing its
 *   shared words.
 * Cost: plan reads the levels once, write twice (the parts' sizes, then the
 *   codewords); a part's loop is chunk / 32 = 128 coordinates at the
 *   defaults. Chunks under elias_team_min_chunk keep a thread per chunk
 *   (elias_teams_for): most of a team would idle.
 */
constexpr int elias_parts = 32;
constexpr std::uint32_t elias_team_min_chunk = 1024;  // 32 coordinates per part
struct EliasPart {
  SparseRun run;           // the sparse code's measures (count 0 for the dense code)
  std::uint64_t bits = 0;  // the part's codewords, the sparse first gap not included
  std::uint64_t prev = 0;  // where the part's first gap counts from
  std::uint64_t begin = 0, end = 0;  // the part's bits in the chunk (part 0: the count's codeword first)
};

// Whether a device space encodes chunks of this size with a team per chunk.
template <class ExecSpace>
constexpr bool elias_teams_for(std::uint32_t chunk) {
  return use_device_shapes<ExecSpace>() && chunk >= elias_team_min_chunk;
}

template <class ExecSpace>
struct EliasTeamLaunch {
  using policy = Kokkos::TeamPolicy<ExecSpace>;
  using member = typename policy::member_type;
  using parts_view = Kokkos::View<EliasPart*, typename ExecSpace::scratch_memory_space, Kokkos::MemoryUnmanaged>;
  static constexpr int threads = use_device_shapes<ExecSpace>() ? elias_parts : 1;
  // The teams of chunks [c0, min(c0 + max_league, nchunks)).
  static policy slice(const ExecSpace& exec, std::uint64_t c0, std::uint64_t nchunks) {
    return policy(exec, static_cast<int>(league_slice(nchunks, c0)), threads)
        .set_scratch_size(0, Kokkos::PerTeam(parts_view::shmem_size(elias_parts)));
  }
};

// Part p of the chunk [i0, i1): its coordinates [a, b).
KOKKOS_INLINE_FUNCTION void elias_part_range(std::uint64_t i0, std::uint64_t i1, int p, std::uint64_t& a,
                                             std::uint64_t& b) {
  const std::uint64_t len = ceil_div(i1 - i0, static_cast<std::uint64_t>(elias_parts));
  a = i0 + len * static_cast<std::uint64_t>(p);
  a = a < i1 ? a : i1;
  b = a + len < i1 ? a + len : i1;
}

// The chunk's non-zeros: the sum of its parts' (sparse code).
template <class PartsView>
KOKKOS_INLINE_FUNCTION std::uint64_t elias_chunk_count(const PartsView& parts) {
  std::uint64_t count = 0;
  for (int p = 0; p < elias_parts; ++p) count += parts(p).run.count;
  return count;
}

// Every part's bits [begin, end) in the chunk and its first gap's origin,
// walking the measured parts once.
template <bool Sparse, class PartsView, class Table>
KOKKOS_INLINE_FUNCTION void place_elias_parts(const PartsView& parts, std::uint64_t i0, const Table& om) {
  std::uint64_t at = 0, prev = i0 - 1;  // wraps for i0 == 0; only differences are used
  if constexpr (Sparse) at = om.length(elias_chunk_count(parts) + 1);
  for (int p = 0; p < elias_parts; ++p) {
    EliasPart& e = parts(p);
    e.prev = prev;
    e.begin = p == 0 ? 0 : at;
    if constexpr (Sparse) {
      at += e.bits + e.run.lead_bits(prev, om);
      if (e.run.count > 0) prev = e.run.last;
    } else {
      at += e.bits;
    }
    e.end = at;
  }
}

// The team's chunk c = c0 + its league rank and the chunk's coordinates
// [i0, i1); every part of it measured and placed in team scratch.
template <bool Sparse, class Member, class LView, class Table>
KOKKOS_INLINE_FUNCTION auto measure_elias_chunk(const Member& m, std::uint64_t c0, std::uint32_t chunk,
                                                std::uint64_t n, const LView& levels, const Table& om,
                                                std::uint64_t& c, std::uint64_t& i0, std::uint64_t& i1) {
  c = c0 + static_cast<std::uint64_t>(m.league_rank());
  i0 = c * chunk;
  i1 = i0 + chunk < n ? i0 + chunk : n;
  using space = typename Member::execution_space;
  const typename EliasTeamLaunch<space>::parts_view parts(m.team_scratch(0), elias_parts);
  Kokkos::parallel_for(Kokkos::TeamThreadRange(m, elias_parts), [&](int p) {
    std::uint64_t a, b;
    elias_part_range(i0, i1, p, a, b);
    EliasPart e;
    if constexpr (Sparse) {
      e.run = sparse_run(levels, a, b, om);
      e.bits = e.run.bits;
    } else {
      e.bits = a < b ? chunk_bits<false>(levels, a, b, om) : 0;
    }
    parts(p) = e;
  });
  m.team_barrier();
  Kokkos::single(Kokkos::PerTeam(m), [&]() { place_elias_parts<Sparse>(parts, i0, om); });
  m.team_barrier();
  return parts;
}

template <bool Sparse, class ExecSpace, class LView, class OffView, class ScratchView, class Table>
std::uint64_t plan_elias_teams(const ExecSpace& exec, const LView& levels, std::uint64_t n, std::uint32_t chunk,
                               const OffView& offsets, const ScratchView& chunk_len, const Table& om) {
  using Launch = EliasTeamLaunch<ExecSpace>;
  const std::uint64_t nchunks = ceil_div(n, chunk);
  if (nchunks == 0) return 0;
  for (std::uint64_t c0 = 0; c0 < nchunks; c0 += max_league)
    Kokkos::parallel_for(
        Sparse ? "qsgd::encode[elias-sparse]::lengths_teams" : "qsgd::encode[elias-dense]::lengths_teams",
        Launch::slice(exec, c0, nchunks), KOKKOS_LAMBDA(const typename Launch::member& m) {
          std::uint64_t c, i0, i1;
          const auto parts = measure_elias_chunk<Sparse>(m, c0, chunk, n, levels, om, c, i0, i1);
          Kokkos::single(Kokkos::PerTeam(m), [&]() { chunk_len(c) = parts(elias_parts - 1).end; });
        });
  return scan_chunk_lengths(exec, chunk_len, offsets, nchunks);
}

// Part p's codewords ([a, b), bits [begin, end)): the count's codeword first in part 0 of a sparse chunk.
template <bool Sparse, class PartsView, class LView, class Writer, class Table>
KOKKOS_INLINE_FUNCTION void write_elias_part(const PartsView& parts, int p, const LView& levels, std::uint64_t a,
                                             std::uint64_t b, std::uint64_t begin, std::uint64_t end, Writer& wr,
                                             const Table& om) {
  if constexpr (Sparse) {
    if (p == 0) {
      const Codeword cc = om.get(elias_chunk_count(parts) + 1);
      wr.put(cc.bits, cc.len);
    }
    write_sparse_run(levels, a, b, parts(p).prev, wr, om);
  } else {
    write_dense_chunk(levels, a, b, begin, end, wr, om);
  }
}

// The team kernel of write_elias_teams: the codewords of chunks [first,
// min(last, nchunks)), after the words chunks share with their neighbours
// were zeroed (a range so that tests can order the chunks).
template <bool Sparse, class ExecSpace, class LView, class OffView, class ScratchView, class WordView, class Table>
void write_elias_team_chunks(const ExecSpace& exec, const LView& levels, std::uint64_t n, std::uint32_t chunk,
                             const OffView& offsets, const ScratchView& chunk_len, const WordView& payload_all,
                             const Table& om, std::uint64_t first = 0, std::uint64_t last = no_index) {
  using Launch = EliasTeamLaunch<ExecSpace>;
  const std::uint64_t nchunks = ceil_div(n, chunk);
  const std::uint64_t stop_chunk = last < nchunks ? last : nchunks;
  for (std::uint64_t c0 = first; c0 < stop_chunk; c0 += max_league)
    Kokkos::parallel_for(
        Sparse ? "qsgd::encode[elias-sparse]::write_teams" : "qsgd::encode[elias-dense]::write_teams",
        Launch::slice(exec, c0, stop_chunk), KOKKOS_LAMBDA(const typename Launch::member& m) {
          std::uint64_t c, i0, i1;
          const auto parts = measure_elias_chunk<Sparse>(m, c0, chunk, n, levels, om, c, i0, i1);
          const std::uint64_t start = offsets(c), stop = start + chunk_len(c);
          // The word a part ends in, when a later part of this chunk starts
          // in it (a word shared with a neighbour chunk is not touched here).
          const bool shared_first = (start & 63) != 0, shared_last = (stop & 63) != 0;
          Kokkos::parallel_for(Kokkos::TeamThreadRange(m, elias_parts), [&](int p) {
            const std::uint64_t end = start + parts(p).end;
            if (parts(p).end == parts(p).begin || (end & 63) == 0) return;
            const std::uint64_t w = (end - 1) >> 6;
            if ((shared_first && w == start >> 6) || (shared_last && w == (stop - 1) >> 6)) return;
            payload_all(w) = 0;
          });
          m.team_barrier();
          Kokkos::parallel_for(Kokkos::TeamThreadRange(m, elias_parts), [&](int p) {
            if (parts(p).end == parts(p).begin) return;
            std::uint64_t a, b;
            elias_part_range(i0, i1, p, a, b);
            const std::uint64_t begin = start + parts(p).begin, end = start + parts(p).end;
            BitWriter<WordView> wr(payload_all, begin, end);
            write_elias_part<Sparse>(parts, p, levels, a, b, begin, end, wr, om);
            wr.finish();
          });
        });
}

template <bool Sparse, class ExecSpace, class LView, class OffView, class ScratchView, class WordView, class Table>
void write_elias_teams(const ExecSpace& exec, const LView& levels, std::uint64_t n, std::uint32_t chunk,
                       const OffView& offsets, const ScratchView& chunk_len, const WordView& payload_all,
                       const Table& om) {
  const std::uint64_t nchunks = ceil_div(n, chunk);
  if (nchunks == 0) return;
  zero_shared_words(exec, offsets, chunk_len, payload_all, nchunks);
  write_elias_team_chunks<Sparse>(exec, levels, n, chunk, offsets, chunk_len, payload_all, om);
}

// plan_elias / write_elias: the backend's shape (elias_teams_for: a team per
// chunk on a device, for chunks of elias_team_min_chunk or more; a thread
// per chunk otherwise).
template <bool Sparse, class ExecSpace, class LView, class OffView, class ScratchView, class Table>
std::uint64_t plan_elias(const ExecSpace& exec, const LView& levels, std::uint64_t n, std::uint32_t chunk,
                         const OffView& offsets, const ScratchView& chunk_len, const Table& om) {
  if constexpr (use_device_shapes<ExecSpace>())
    if (elias_teams_for<ExecSpace>(chunk))
      return plan_elias_teams<Sparse>(exec, levels, n, chunk, offsets, chunk_len, om);
  return plan_elias_chunks<Sparse>(exec, levels, n, chunk, offsets, chunk_len, om);
}
template <bool Sparse, class ExecSpace, class LView, class OffView, class ScratchView, class WordView, class Table>
void write_elias(const ExecSpace& exec, const LView& levels, std::uint64_t n, std::uint32_t chunk,
                 const OffView& offsets, const ScratchView& chunk_len, const WordView& payload_all, const Table& om) {
  if constexpr (use_device_shapes<ExecSpace>())
    if (elias_teams_for<ExecSpace>(chunk))
      return write_elias_teams<Sparse>(exec, levels, n, chunk, offsets, chunk_len, payload_all, om);
  write_elias_chunks<Sparse>(exec, levels, n, chunk, offsets, chunk_len, payload_all, om);
}

// One dense chunk being decoded: its reader, a 64-bit window on it (buf: the
// `avail` bits at rd.pos, first bit highest), its bucket, and the levels of
// its current segment of up to Segment coordinates (lv).
template <class WordView, std::uint64_t Segment = dense_segment>
struct DenseChunk {
  BitReader<WordView> rd{WordView(), 0, 0};
  std::uint64_t buf = 0;
  std::uint32_t avail = 0;
  std::uint64_t i = 0, i1 = 0;  // next coordinate to deliver, end of the chunk
  std::uint64_t bucket = 0, bucket_end = 0;
  LevelUnit unit;
  bool ok = false;
  // Levels as bytes: a table look-up stores its three symbols with one 4-byte
  // store; a level that a byte does not hold (only from the bit-serial path)
  // is wide_escape in lv and the level itself in wide.
  static constexpr std::int8_t wide_escape = -128;
  std::int8_t lv[Segment + 2 * dense_table_symbols + 1];
  std::int32_t wide[Segment];

  KOKKOS_INLINE_FUNCTION void open(const WordView& w, std::uint64_t start, std::uint64_t end, std::uint64_t i0,
                                    std::uint64_t i1_, bool ok_) {
    rd = BitReader<WordView>(w, start, ok_ ? end : start);
    buf = 0;
    avail = 0;
    i = i0;
    i1 = ok_ ? i1_ : i0;
    bucket = bucket_end = 0;
    ok = ok_;
  }

  // At least `need` bits in the window, if the chunk has them.
  KOKKOS_INLINE_FUNCTION bool window(std::uint32_t need) {
    if (avail >= need) return true;
    const std::uint64_t left = rd.remaining();
    const std::uint32_t r = left < 64 ? static_cast<std::uint32_t>(left) : 64u;
    if (r < need) return false;
    buf = r == 64 ? rd.peek(64) : rd.peek(r) << (64 - r);
    avail = r;
    return true;
  }
  // One table look-up into lv[j, j + 3) (all three slots written, j advanced
  // by the count); false, nothing consumed, when the window's first codeword
  // is not in the table. Needs 12 bits in the window.
  template <class TableView>
  KOKKOS_INLINE_FUNCTION bool step(const TableView& tab, std::uint64_t& j) {
    const std::uint32_t e = tab(buf >> (64 - dense_peek_bits));
    if ((e & 3u) == 0) return false;
    const std::uint32_t symbols = e >> 6;  // three levels, a byte each, first lowest (little-endian bytes)
    store_symbols(&lv[j], symbols);
    const std::uint32_t used = (e >> 2) & 15u;
    rd.pos += used;
    buf <<= used;
    avail -= used;
    j += e & 3u;
    return true;
  }
  // lv[j, m): table look-ups where three slots fit and 12 bits remain, one
  // codeword bit by bit otherwise (levels up to s). False on an invalid code.
  template <class TableView>
  KOKKOS_INLINE_FUNCTION bool fill(const TableView& tab, std::uint32_t s, std::uint64_t j, std::uint64_t m) {
    while (j < m) {
      while (j + 2 * dense_table_symbols <= m && window(2 * dense_peek_bits))
        if (!step(tab, j) || !step(tab, j)) break;
      if (j >= m) break;
      if (j + dense_table_symbols <= m && window(dense_peek_bits) && step(tab, j)) continue;
      avail = 0;  // the bit-serial path moves rd.pos: the window is stale
      const std::uint64_t k = rd.omega(std::uint64_t(s) + 1);
      if (k == 0) return false;
      const std::uint64_t l = k - 1;
      const bool neg = l != 0 && rd.get(1) != 0;
      if (rd.overrun) return false;
      const std::int32_t level = neg ? -static_cast<std::int32_t>(l) : static_cast<std::int32_t>(l);
      if (level > -128 && level < 128) {
        lv[j++] = static_cast<std::int8_t>(level);
      } else {
        wide[j] = level;
        lv[j++] = wide_escape;
      }
    }
    return true;
  }
  // The three symbol bytes of a table entry to lv[j, j + 3) (and one byte
  // past them, which a later look-up overwrites or nothing reads).
  KOKKOS_INLINE_FUNCTION static void store_symbols(std::int8_t* at, std::uint32_t symbols) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    __builtin_memcpy(at, &symbols, 4);
#else
    for (std::uint32_t k = 0; k < dense_table_symbols; ++k)
      at[k] = static_cast<std::int8_t>(static_cast<std::uint8_t>(symbols >> (8 * k)));
#endif
  }
  // lv[0, m) to coordinates [i, i + m), bucket by bucket.
  template <class ScaleView, class Sink>
  KOKKOS_INLINE_FUNCTION void deliver(const ScaleView& scales, std::uint32_t d, std::uint32_t s, std::uint64_t m,
                                      const Sink& sink) {
    for (std::uint64_t p = 0; p < m;) {
      if (i + p == bucket_end) {
        ++bucket;
        bucket_end += d;
        unit = LevelUnit(scales(bucket), s);
      }
      const std::uint64_t q = bucket_end - i < m ? bucket_end - i : m;
      for (; p < q; ++p) sink.put(i + p, lv[p] != wide_escape ? std::int32_t(lv[p]) : wide[p], unit);
    }
    i += m;
  }
};

/*
 * decode_elias_dense_grouped<G> (decode_elias<false>, through decode_elias_dense)
 * Algorithm: one work item per G chunks (dense_group_for: three on the host,
 *   one on a GPU; G a template argument for tests), decoded side by side
 *   so that the chains of table look-ups (each look-up needs the bits the one
 *   before consumed) overlap. Per segment of up to Segment coordinates
 *   (dense_segment_for: 256 on the host, 32 on a GPU)
 *   and chunk: (1) the levels into the chunk's local array: look-ups in the
 *   dense table (dense_table_entry, built for the message's s by the caller:
 *   Codec::decode_body), two per chunk and round while all chunks have room,
 *   then the chunk alone, and one codeword bit by bit where the table does
 *   not hold it whole or 12 bits do not remain; (2) the levels to the sink,
 *   bucket by bucket. A chunk that fails delivers nothing of its segment.
 * Validity and the bad-chunk report are those of the bit-serial decoder.
 */
template <int G, std::uint64_t Segment, class ExecSpace, class OffView, class WordView, class ScaleView,
          class TableView, class Sink>
std::uint64_t decode_elias_dense_grouped(const ExecSpace& exec, const OffView& offsets, const WordView& payload,
                                         std::uint64_t payload_bits, const ScaleView& scales, std::uint64_t n,
                                         std::uint32_t d, std::uint32_t s, std::uint32_t chunk, const TableView& tab,
                                         const Sink& sink) {
  static_assert(G >= 1, "at least one chunk per work item");
  const std::uint64_t nchunks = ceil_div(n, chunk);
  std::uint64_t first_bad = no_index;
  if (nchunks == 0) return first_bad;
  Kokkos::parallel_reduce(
      "qsgd::decode[elias-dense]", Kokkos::RangePolicy<ExecSpace>(exec, 0, ceil_div(nchunks, std::uint64_t(G))),
      KOKKOS_LAMBDA(std::uint64_t group, std::uint64_t& bad) {
        DenseChunk<WordView, Segment> ch[G];
        for (int g = 0; g < G; ++g) {
          const std::uint64_t c = G * group + static_cast<std::uint64_t>(g);
          const std::uint64_t i0 = c * chunk, i1 = c < nchunks ? (i0 + chunk < n ? i0 + chunk : n) : i0;
          const std::uint64_t start = c < nchunks ? offsets(c) : 0;
          const std::uint64_t end = c + 1 < nchunks ? offsets(c + 1) : payload_bits;
          const bool ok = c < nchunks && !((c == 0 && start != 0) || start > end || end > payload_bits);
          if (c < nchunks && !ok && c < bad) bad = c;
          ch[g].open(payload, start, end, i0, i1, ok);
          if (ok) {
            ch[g].bucket = i0 / d;
            ch[g].bucket_end = (ch[g].bucket + 1) * d;
            ch[g].unit = LevelUnit(scales(ch[g].bucket), s);
          }
        }
        constexpr std::uint64_t room = 2 * dense_table_symbols;
        for (;;) {
          std::uint64_t m[G], j[G];
          bool any = false;
          for (int g = 0; g < G; ++g) {
            const std::uint64_t left = ch[g].ok ? ch[g].i1 - ch[g].i : 0;
            m[g] = left < Segment ? left : Segment;
            j[g] = 0;
            any = any || m[g] > 0;
          }
          if (!any) break;
          // All chunks side by side, two look-ups each per round, while all have room.
          for (bool go = true; go;) {
            for (int g = 0; g < G; ++g)
              go = go && j[g] + room <= m[g] && ch[g].window(2 * dense_peek_bits);
            for (int g = 0; go && g < G; ++g) go = ch[g].step(tab, j[g]) && ch[g].step(tab, j[g]);
          }
          for (int g = 0; g < G; ++g) {
            if (m[g] == 0) continue;
            ch[g].ok = ch[g].fill(tab, s, j[g], m[g]);
            if (ch[g].ok) ch[g].deliver(scales, d, s, m[g], sink);
          }
        }
        for (int g = 0; g < G; ++g) {
          const std::uint64_t c = G * group + static_cast<std::uint64_t>(g);
          if (c >= nchunks) continue;
          if (!ch[g].ok || ch[g].rd.overrun || ch[g].rd.pos != ch[g].rd.end) {
            if (c < bad) bad = c;
          }
        }
      },
      Kokkos::Min<std::uint64_t>(first_bad));
  return first_bad;
}

// With the backend's group size.
template <class ExecSpace, class OffView, class WordView, class ScaleView, class TableView, class Sink>
std::uint64_t decode_elias_dense(const ExecSpace& exec, const OffView& offsets, const WordView& payload,
                                 std::uint64_t payload_bits, const ScaleView& scales, std::uint64_t n, std::uint32_t d,
                                 std::uint32_t s, std::uint32_t chunk, const TableView& tab, const Sink& sink) {
  return decode_elias_dense_grouped<dense_group_for<ExecSpace>(), dense_segment_for<ExecSpace>()>(
      exec, offsets, payload, payload_bits, scales, n, d, s, chunk, tab, sink);
}

/*
 * decode_elias_sparse (decode_elias<true>)
 * Purpose: decode and validate every chunk of the sparse code in parallel.
 * Algorithm: a thread per chunk; chunk c reads exactly [offsets(c),
 *   offsets(c+1)) (the last chunk up to payload_bits). A chunk is bad when its
 *   offsets are out of order or out of range, a codeword runs past the chunk,
 *   a level exceeds s, a gap leaves the chunk, the count exceeds the chunk, or
 *   bits are left over. The coordinates between non-zeros go to sink.zero.
 * Cost: reads the payload once plus scales; the sink writes 4n bytes.
 * Returns the first bad chunk, or no_index.
 */
template <class ExecSpace, class OffView, class WordView, class ScaleView, class Sink>
std::uint64_t decode_elias_sparse(const ExecSpace& exec, const OffView& offsets, const WordView& payload,
                                  std::uint64_t payload_bits, const ScaleView& scales, std::uint64_t n,
                                  std::uint32_t d, std::uint32_t s, std::uint32_t chunk, const Sink& sink) {
  const std::uint64_t nchunks = ceil_div(n, chunk);
  std::uint64_t first_bad = no_index;
  if (nchunks == 0) return first_bad;
  Kokkos::parallel_reduce(
      "qsgd::decode[elias-sparse]", Kokkos::RangePolicy<ExecSpace>(exec, 0, nchunks),
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
        {
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
        }
        if (!ok || rd.overrun || rd.pos != end) {
          if (c < bad) bad = c;
        }
      },
      Kokkos::Min<std::uint64_t>(first_bad));
  return first_bad;
}

/*
 * decode_elias<Sparse>: the dense or the sparse decoder. On a device, a sparse
 * decode into a sink that writes zeros (levels, values) writes them first in
 * a coalesced pass (zero_all), so that a chunk's thread walks its non-zeros
 * only, not the chunk's 4096 coordinates; a corrupt message leaves the
 * output unspecified in both shapes (the caller throws).
 */
template <bool Sparse, class ExecSpace, class OffView, class WordView, class ScaleView, class TableView, class Sink>
std::uint64_t decode_elias(const ExecSpace& exec, const OffView& offsets, const WordView& payload,
                           std::uint64_t payload_bits, const ScaleView& scales, std::uint64_t n, std::uint32_t d,
                           std::uint32_t s, std::uint32_t chunk, const TableView& dense_table, const Sink& sink) {
  if constexpr (!Sparse) {
    return decode_elias_dense(exec, offsets, payload, payload_bits, scales, n, d, s, chunk, dense_table, sink);
  } else if constexpr (use_device_shapes<ExecSpace>() && Sink::writes_zeros) {
    zero_all(exec, n, sink);
    return decode_elias_sparse(exec, offsets, payload, payload_bits, scales, n, d, s, chunk,
                               ZerosWritten<Sink>{sink});
  } else {
    return decode_elias_sparse(exec, offsets, payload, payload_bits, scales, n, d, s, chunk, sink);
  }
}

}  // namespace qsgd::detail
