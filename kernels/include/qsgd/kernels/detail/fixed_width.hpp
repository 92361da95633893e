#pragma once
// Fixed-width packing (spec section 2): each coordinate is 1 sign bit followed
// by ceil(log2(s+1)) level bits, MSB first, densely packed.

#include <Kokkos_Core.hpp>
#include <cstdint>

#include "qsgd/kernels/counter_rng.hpp"
#include "qsgd/kernels/detail/arith.hpp"
#include "qsgd/kernels/detail/bitstream.hpp"
#include "qsgd/kernels/detail/dispatch.hpp"
#include "qsgd/kernels/quantize.hpp"

namespace qsgd::detail {

constexpr std::uint64_t fixed_group = 64;  // coordinates per work item: b whole words

KOKKOS_INLINE_FUNCTION std::uint32_t fixed_level_bits(std::uint32_t s) { return bit_width64(s); }

// Level sources fill levels[0, i1 - i0) for coordinates [i0, i1) of a
// 64-coordinate group, bucket by bucket.

// Quantizes on the fly (fused quantize + pack).
template <class VView, class SView>
struct StochasticSource {
  VView v;
  SView scales;
  std::uint32_t s;
  StreamKey key;
  std::uint64_t offset = 0;  // coordinate i draws with index i + offset
  KOKKOS_INLINE_FUNCTION void fill(std::int32_t* lv, std::uint64_t i0, std::uint64_t i1, std::uint32_t d) const {
    std::uint64_t i = i0;
    while (i < i1) {
      const std::uint64_t b = i / d;
      const std::uint64_t e = (b + 1) * d < i1 ? (b + 1) * d : i1;
      const BucketFactor bf(scales(b), s);
      quantize_segment(v.data(), lv - i0, i, e, bf, key, offset);
      i = e;
    }
  }
};

// Reads levels already quantized.
template <class LView>
struct StoredSource {
  LView levels;
  KOKKOS_INLINE_FUNCTION void fill(std::int32_t* lv, std::uint64_t i0, std::uint64_t i1, std::uint32_t) const {
    for (std::uint64_t i = i0; i < i1; ++i) lv[i - i0] = levels(i);
  }
};

// Full 64-coordinate groups with a bit width known at compile time: every
// shift and word boundary is a constant, so the loops unroll into straight
// shifts and ORs. Word k of a group holds stream bits [64k, 64k + 64).
template <int B, class WordView>
KOKKOS_INLINE_FUNCTION void pack_full_group(const std::uint64_t* code, const WordView& payload, std::uint64_t w) {
  for (int k = 0; k < B; ++k) {
    std::uint64_t word = 0;
    for (int j = (64 * k) / B; j <= (64 * k + 63) / B; ++j) {
      const int sh = 64 * (k + 1) - (j + 1) * B;  // left shift that puts code j's last bit in place
      word |= sh >= 0 ? (code[j] << sh) : (code[j] >> -sh);
    }
    payload(w + k) = word;
  }
}

template <int B, class WordView>
KOKKOS_INLINE_FUNCTION void unpack_full_group(const WordView& payload, std::uint64_t w, std::uint64_t* code) {
  std::uint64_t wd[B];
  for (int k = 0; k < B; ++k) wd[k] = payload(w + k);
  for (int j = 0; j < 64; ++j) {
    const int k = (j * B) / 64, off = (j * B) % 64;
    std::uint64_t hi = wd[k] << off;
    if (off + B > 64) hi |= wd[k + 1] >> (64 - off);
    code[j] = hi >> (64 - B);
  }
}

// Generic (any width, any count) versions.
template <class WordView>
KOKKOS_INLINE_FUNCTION void pack_codes(const std::uint64_t* code, std::uint32_t cnt, std::uint32_t b,
                                       const WordView& payload, std::uint64_t w) {
  std::uint64_t acc = 0;
  std::uint32_t fill = 0;
  for (std::uint32_t j = 0; j < cnt; ++j) {
    const std::uint32_t room = 64 - fill;
    if (b < room) {
      acc |= code[j] << (room - b);
      fill += b;
    } else {
      const std::uint32_t rest = b - room;
      acc |= code[j] >> rest;
      payload(w++) = acc;
      acc = rest == 0 ? 0 : code[j] << (64 - rest);
      fill = rest;
    }
  }
  if (fill > 0) payload(w) = acc;
}

template <class WordView>
KOKKOS_INLINE_FUNCTION void unpack_codes(const WordView& payload, std::uint64_t w, std::uint32_t cnt, std::uint32_t b,
                                         std::uint64_t* code) {
  std::uint64_t cur = payload(w);
  std::uint32_t avail = 64;  // unread bits in cur, left-aligned
  for (std::uint32_t j = 0; j < cnt; ++j) {
    if (b <= avail) {
      code[j] = cur >> (64 - b);
      cur = b == 64 ? 0 : cur << b;
      avail -= b;
    } else {
      const std::uint32_t rest = b - avail;
      std::uint64_t c = avail == 0 ? 0 : (cur >> (64 - avail)) << rest;
      cur = payload(++w);
      c |= cur >> (64 - rest);
      cur <<= rest;
      avail = 64 - rest;
      code[j] = c;
    }
  }
}

// Widths 2..9 (s = 1..255, the usual range) take the unrolled paths.
template <class WordView>
KOKKOS_INLINE_FUNCTION void pack_group(const std::uint64_t* code, std::uint32_t cnt, std::uint32_t b,
                                       const WordView& payload, std::uint64_t w) {
  if (cnt == fixed_group) {
    switch (b) {
      case 2: pack_full_group<2>(code, payload, w); return;
      case 3: pack_full_group<3>(code, payload, w); return;
      case 4: pack_full_group<4>(code, payload, w); return;
      case 5: pack_full_group<5>(code, payload, w); return;
      case 6: pack_full_group<6>(code, payload, w); return;
      case 7: pack_full_group<7>(code, payload, w); return;
      case 8: pack_full_group<8>(code, payload, w); return;
      case 9: pack_full_group<9>(code, payload, w); return;
      default: break;
    }
  }
  pack_codes(code, cnt, b, payload, w);
}

template <class WordView>
KOKKOS_INLINE_FUNCTION void unpack_group(const WordView& payload, std::uint64_t w, std::uint32_t cnt, std::uint32_t b,
                                         std::uint64_t* code) {
  if (cnt == fixed_group) {
    switch (b) {
      case 2: unpack_full_group<2>(payload, w, code); return;
      case 3: unpack_full_group<3>(payload, w, code); return;
      case 4: unpack_full_group<4>(payload, w, code); return;
      case 5: unpack_full_group<5>(payload, w, code); return;
      case 6: unpack_full_group<6>(payload, w, code); return;
      case 7: unpack_full_group<7>(payload, w, code); return;
      case 8: unpack_full_group<8>(payload, w, code); return;
      case 9: unpack_full_group<9>(payload, w, code); return;
      default: break;
    }
  }
  unpack_codes(payload, w, cnt, b, code);
}

// One 64-coordinate group g of encode_fixed: fills its levels from the source
// and writes its b words. Shared by the Kokkos kernel and the host SIMD path
// (which calls it for the groups it does not vectorize).
template <class Source, class WordView>
KOKKOS_INLINE_FUNCTION void encode_fixed_group(const Source& src, std::uint64_t g, std::uint64_t n, std::uint32_t d,
                                               std::uint32_t s, const WordView& payload) {
  const std::uint32_t lb = fixed_level_bits(s);
  const std::uint32_t b = lb + 1;
  const std::uint64_t i0 = g * fixed_group;
  const std::uint64_t i1 = i0 + fixed_group < n ? i0 + fixed_group : n;
  const std::uint32_t cnt = static_cast<std::uint32_t>(i1 - i0);
  std::int32_t lv[fixed_group];
  src.fill(lv, i0, i1, d);
  std::uint64_t code[fixed_group];
  for (std::uint32_t j = 0; j < cnt; ++j) {
    const std::int32_t l = lv[j];
    const std::int32_t neg = l >> 31;  // 0 or -1
    code[j] = static_cast<std::uint64_t>(static_cast<std::uint32_t>((l ^ neg) - neg)) |
              (static_cast<std::uint64_t>(neg & 1) << lb);
  }
  pack_group(code, cnt, b, payload, g * b);
}

/*
 * encode_fixed
 * Purpose: pack n signed levels at b = 1 + bit_width(s) bits each.
 * Algorithm: one work item per 64 coordinates, which fill exactly b words, so
 *   no two items share a word and no atomics are needed. The item first
 *   fills 64 levels (a vectorizable loop per bucket segment), then packs them.
 *   (Codec uses the host SIMD path of fixed_simd.hpp instead where the CPU
 *   has one; it writes the same words.)
 * Cost: writes n*b/8 bytes; reads what the source reads (4n bytes of levels,
 *   or 4n bytes of input when quantizing on the fly).
 * Requirements: payload has ceil(n*b/64) words.
 */
template <class ExecSpace, class Source, class WordView>
void encode_fixed_groups(const ExecSpace& exec, const Source& src, std::uint64_t n, std::uint32_t d, std::uint32_t s,
                         const WordView& payload) {
  const std::uint64_t groups = ceil_div(n, fixed_group);
  Kokkos::parallel_for(
      "qsgd::encode[fixed]", Kokkos::RangePolicy<ExecSpace>(exec, 0, groups),
      KOKKOS_LAMBDA(std::uint64_t g) { encode_fixed_group(src, g, n, d, s, payload); });
}

// The GPU shape of the fixed-width kernels (docs/parallelism.md): a team per
// 64-coordinate group instead of a thread, so no thread holds the group's
// 64 levels and codes in local memory. Lane j quantizes (or reads)
// coordinate j and writes its code to team scratch; after a barrier, lane k
// builds word k of the group from the codes that overlap it. Decoding runs
// the reverse: lane k loads word k into scratch, lane j extracts code j
// and checks it (a team OR of the invalid flags), then, for a valid group,
// hands its level to the sink. Same words, same values, same first bad
// group as the per-group kernels (tested on the host, where the team has
// one lane). Chosen for spaces the host cannot access (use_device_shapes).
template <class ExecSpace>
constexpr int fixed_team_size() {
  return use_device_shapes<ExecSpace>() ? static_cast<int>(fixed_group) : 1;  // a lane per coordinate on a GPU
}

template <class ExecSpace, class Source, class WordView>
void encode_fixed_teams(const ExecSpace& exec, const Source& src, std::uint64_t n, std::uint32_t d, std::uint32_t s,
                        const WordView& payload) {
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  using Member = typename Policy::member_type;
  using Codes = Kokkos::View<std::uint64_t*, typename ExecSpace::scratch_memory_space, Kokkos::MemoryUnmanaged>;
  const std::uint64_t groups = ceil_div(n, fixed_group);
  if (groups == 0) return;
  const std::uint32_t lb = fixed_level_bits(s), b = lb + 1;
  for (std::uint64_t g0 = 0; g0 < groups; g0 += max_league) {
    const std::uint64_t league = league_slice(groups, g0);
    Kokkos::parallel_for(
      "qsgd::encode[fixed,teams]",
      Policy(exec, static_cast<int>(league), fixed_team_size<ExecSpace>())
          .set_scratch_size(0, Kokkos::PerTeam(Codes::shmem_size(fixed_group))),
      KOKKOS_LAMBDA(const Member& m) {
        const std::uint64_t g = g0 + static_cast<std::uint64_t>(m.league_rank());
        const std::uint64_t i0 = g * fixed_group;
        const std::uint32_t cnt = static_cast<std::uint32_t>((i0 + fixed_group < n ? i0 + fixed_group : n) - i0);
        const Codes code(m.team_scratch(0), fixed_group);
        Kokkos::parallel_for(Kokkos::TeamThreadRange(m, cnt), [&](std::uint32_t j) {
          std::int32_t l = 0;
          src.fill(&l, i0 + j, i0 + j + 1, d);
          const std::int32_t neg = l >> 31;  // 0 or -1
          code(j) = static_cast<std::uint64_t>(static_cast<std::uint32_t>((l ^ neg) - neg)) |
                    (static_cast<std::uint64_t>(neg & 1) << lb);
        });
        m.team_barrier();
        const std::uint32_t words = (cnt * b + 63) / 64;
        Kokkos::parallel_for(Kokkos::TeamThreadRange(m, words), [&](std::uint32_t k) {
          const std::uint32_t j0 = 64 * k / b, last = (64 * k + 63) / b;
          const std::uint32_t j1 = last < cnt - 1 ? last : cnt - 1;
          std::uint64_t word = 0;
          for (std::uint32_t j = j0; j <= j1; ++j) {
            const int sh = static_cast<int>(64 * (k + 1)) - static_cast<int>((j + 1) * b);  // puts code j's last bit in place
            word |= sh >= 0 ? (code(j) << sh) : (code(j) >> -sh);
          }
          payload(g * b + k) = word;
        });
      });
  }
}

template <class ExecSpace, class Source, class WordView>
void encode_fixed(const ExecSpace& exec, const Source& src, std::uint64_t n, std::uint32_t d, std::uint32_t s,
                  const WordView& payload) {
  if constexpr (use_device_shapes<ExecSpace>())
    encode_fixed_teams(exec, src, n, d, s, payload);
  else
    encode_fixed_groups(exec, src, n, d, s, payload);
}

// One 64-coordinate group g of decode_fixed. Returns false, and hands nothing
// to the sink, when a code of the group is invalid.
template <class WordView, class ScaleView, class Sink>
KOKKOS_INLINE_FUNCTION bool decode_fixed_group(const WordView& payload, const ScaleView& scales, std::uint64_t g,
                                               std::uint64_t n, std::uint32_t d, std::uint32_t s, const Sink& sink) {
  const std::uint32_t lb = fixed_level_bits(s);
  const std::uint32_t b = lb + 1;
  const std::uint64_t lmask = (std::uint64_t(1) << lb) - 1;
  const std::uint64_t i0 = g * fixed_group;
  const std::uint64_t i1 = i0 + fixed_group < n ? i0 + fixed_group : n;
  const std::uint32_t cnt = static_cast<std::uint32_t>(i1 - i0);
  std::int32_t lv[fixed_group];
  std::uint64_t code[fixed_group];
  unpack_group(payload, g * b, cnt, b, code);
  std::uint32_t invalid = 0;
  for (std::uint32_t j = 0; j < cnt; ++j) {
    const std::int32_t l = static_cast<std::int32_t>(code[j] & lmask);
    const std::int32_t neg = -static_cast<std::int32_t>(code[j] >> lb);  // 0 or -1
    invalid |= static_cast<std::uint32_t>(l > static_cast<std::int32_t>(s)) |
               static_cast<std::uint32_t>(neg != 0 && l == 0);
    lv[j] = (l ^ neg) - neg;
  }
  if (invalid) return false;
  std::uint64_t i = i0;
  while (i < i1) {
    const std::uint64_t bk = i / d;
    const std::uint64_t e = (bk + 1) * d < i1 ? (bk + 1) * d : i1;
    const LevelUnit unit(scales(bk), s);
    for (; i < e; ++i) sink.put(i, lv[i - i0], unit);
  }
  return true;
}

/*
 * decode_fixed
 * Purpose: unpack and validate levels, hand each to the sink.
 * Algorithm: one work item per 64 coordinates (b words). A level above s, or a
 *   set sign bit on level 0 (never produced by the encoder), marks the item bad.
 * Cost: reads n*b/8 bytes plus 4n/d bytes of scales; the sink writes 4n bytes
 *   (plus reads 4n for accumulation).
 * Returns the first coordinate of the first bad group, or no_index.
 */
template <class ExecSpace, class WordView, class ScaleView, class Sink>
std::uint64_t decode_fixed_groups(const ExecSpace& exec, const WordView& payload, const ScaleView& scales,
                                  std::uint64_t n, std::uint32_t d, std::uint32_t s, const Sink& sink) {
  const std::uint64_t groups = ceil_div(n, fixed_group);
  std::uint64_t first_bad = no_index;
  Kokkos::parallel_reduce(
      "qsgd::decode[fixed]", Kokkos::RangePolicy<ExecSpace>(exec, 0, groups),
      KOKKOS_LAMBDA(std::uint64_t g, std::uint64_t& bad) {
        if (!decode_fixed_group(payload, scales, g, n, d, s, sink) && g * fixed_group < bad) bad = g * fixed_group;
      },
      Kokkos::Min<std::uint64_t>(first_bad));
  return first_bad;
}

// decode_fixed with a team per group (see encode_fixed_teams).
template <class ExecSpace, class WordView, class ScaleView, class Sink>
std::uint64_t decode_fixed_teams(const ExecSpace& exec, const WordView& payload, const ScaleView& scales,
                                 std::uint64_t n, std::uint32_t d, std::uint32_t s, const Sink& sink) {
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  using Member = typename Policy::member_type;
  using Words = Kokkos::View<std::uint64_t*, typename ExecSpace::scratch_memory_space, Kokkos::MemoryUnmanaged>;
  using Levels = Kokkos::View<std::int32_t*, typename ExecSpace::scratch_memory_space, Kokkos::MemoryUnmanaged>;
  const std::uint64_t groups = ceil_div(n, fixed_group);
  std::uint64_t first_bad = no_index;
  if (groups == 0) return first_bad;
  const std::uint32_t lb = fixed_level_bits(s), b = lb + 1;
  const std::uint64_t lmask = (std::uint64_t(1) << lb) - 1;
  for (std::uint64_t g0 = 0; g0 < groups; g0 += max_league) {
    const std::uint64_t league = league_slice(groups, g0);
    std::uint64_t slice_bad = no_index;
    Kokkos::parallel_reduce(
      "qsgd::decode[fixed,teams]",
      Policy(exec, static_cast<int>(league), fixed_team_size<ExecSpace>())
          .set_scratch_size(0, Kokkos::PerTeam(Words::shmem_size(b) + Levels::shmem_size(fixed_group))),
      KOKKOS_LAMBDA(const Member& m, std::uint64_t& bad) {
        const std::uint64_t g = g0 + static_cast<std::uint64_t>(m.league_rank());
        const std::uint64_t i0 = g * fixed_group;
        const std::uint32_t cnt = static_cast<std::uint32_t>((i0 + fixed_group < n ? i0 + fixed_group : n) - i0);
        const std::uint32_t words = (cnt * b + 63) / 64;
        const Words wd(m.team_scratch(0), b);
        const Levels lv(m.team_scratch(0), fixed_group);
        Kokkos::parallel_for(Kokkos::TeamThreadRange(m, words), [&](std::uint32_t k) { wd(k) = payload(g * b + k); });
        m.team_barrier();
        std::uint32_t invalid = 0;
        Kokkos::parallel_reduce(
            Kokkos::TeamThreadRange(m, cnt),
            [&](std::uint32_t j, std::uint32_t& inv) {
              const std::uint32_t p = j * b, k = p / 64, off = p % 64;
              std::uint64_t hi = wd(k) << off;
              if (off + b > 64) hi |= wd(k + 1) >> (64 - off);
              const std::uint64_t code = hi >> (64 - b);
              const std::int32_t l = static_cast<std::int32_t>(code & lmask);
              const std::int32_t neg = -static_cast<std::int32_t>(code >> lb);  // 0 or -1
              inv |= static_cast<std::uint32_t>(l > static_cast<std::int32_t>(s)) |
                     static_cast<std::uint32_t>(neg != 0 && l == 0);
              lv(j) = (l ^ neg) - neg;
            },
            Kokkos::BOr<std::uint32_t>(invalid));
        if (invalid) {
          Kokkos::single(Kokkos::PerTeam(m), [&]() {
            if (i0 < bad) bad = i0;
          });
          return;
        }
        Kokkos::parallel_for(Kokkos::TeamThreadRange(m, cnt), [&](std::uint32_t j) {
          const std::uint64_t i = i0 + j;
          sink.put(i, lv(j), LevelUnit(scales(i / d), s));
        });
      },
      Kokkos::Min<std::uint64_t>(slice_bad));
    if (slice_bad < first_bad) first_bad = slice_bad;
  }
  return first_bad;
}

template <class ExecSpace, class WordView, class ScaleView, class Sink>
std::uint64_t decode_fixed(const ExecSpace& exec, const WordView& payload, const ScaleView& scales, std::uint64_t n,
                           std::uint32_t d, std::uint32_t s, const Sink& sink) {
  if constexpr (use_device_shapes<ExecSpace>())
    return decode_fixed_teams(exec, payload, scales, n, d, s, sink);
  else
    return decode_fixed_groups(exec, payload, scales, n, d, s, sink);
}

}  // namespace qsgd::detail
