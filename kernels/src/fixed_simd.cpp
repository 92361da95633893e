// Host SIMD paths of the fixed-width code; see detail/fixed_simd.hpp.
#include "qsgd/kernels/detail/fixed_simd.hpp"

#include <Kokkos_Core.hpp>
#include <array>
#include <cstdlib>
#include <cstring>

#include "qsgd/kernels/detail/fixed_width.hpp"
#include "qsgd/kernels/detail/sinks.hpp"
#include "qsgd/kernels/quantize.hpp"

#include "host_x86.hpp"

#if defined(__GNUC__) && !defined(__clang__)
// GCC 12 reports the _mm512_undefined_*() start of masked operations as
// used uninitialized where they sit in the fully unrolled loops over arrays
// of vectors below (the lock-step draws): the false positive host_x86.hpp
// silences as -Wmaybe-uninitialized, here a definite one.
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#ifdef QSGD_HAVE_AVX512_PATH
#define QSGD_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512vbmi")))
#endif

namespace qsgd::detail::simd {
namespace {

using HostWords = Kokkos::View<std::uint64_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;
using HostConstWords = Kokkos::View<const std::uint64_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;
using HostFloats = Kokkos::View<float*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;
using HostConstFloats = Kokkos::View<const float*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;
using HostLevels = Kokkos::View<std::int32_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;

enum class Isa { portable, avx512_vbmi };

Isa detect() {
#ifdef QSGD_HAVE_AVX512_PATH
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512vbmi"))
    return Isa::avx512_vbmi;
#endif
  return Isa::portable;
}

struct State {
  Isa cpu = detect();
  bool enabled = true;
  State() {
    const char* e = std::getenv("QSGD_SIMD");
    if (e != nullptr && std::strcmp(e, "portable") == 0) enabled = false;
  }
};

State& state() {
  static State st;
  return st;
}

Isa active() { return state().enabled ? state().cpu : Isa::portable; }

#ifdef QSGD_HAVE_AVX512_PATH

// Portable per-group fallbacks (the same functions the Kokkos kernels run).
void encode_group_portable(const float* v, const float* scales, std::uint64_t g, std::uint64_t n, std::uint32_t d,
                           std::uint32_t s, const StreamKey& key, std::uint64_t offset, std::uint64_t* payload,
                           std::uint64_t nb, std::uint64_t words) {
  const StochasticSource<HostConstFloats, HostConstFloats> src{HostConstFloats(v, n), HostConstFloats(scales, nb), s,
                                                               key, offset};
  encode_fixed_group(src, g, n, d, s, HostWords(payload, words));
}

template <class Sink>
bool decode_group_portable(const std::uint64_t* payload, const float* scales, std::uint64_t g, std::uint64_t n,
                           std::uint32_t d, std::uint32_t s, const Sink& sink, std::uint64_t nb, std::uint64_t words) {
  return decode_fixed_group(HostConstWords(payload, words), HostConstFloats(scales, nb), g, n, d, s, sink);
}

bool decode_group_portable_mode(const std::uint64_t* payload, const float* scales, std::uint64_t g, std::uint64_t n,
                                std::uint32_t d, std::uint32_t s, FixedSink mode, float weight, float* out,
                                std::int32_t* levels, std::uint64_t nb, std::uint64_t words) {
  switch (mode) {
    case FixedSink::add_levels:
      return decode_group_portable(payload, scales, g, n, d, s, LevelAddSink<HostLevels>{HostLevels(levels, n)}, nb,
                                   words);
    case FixedSink::values:
      return decode_group_portable(payload, scales, g, n, d, s, ValueSink<HostFloats>{HostFloats(out, n)}, nb, words);
    case FixedSink::accumulate:
      return decode_group_portable(payload, scales, g, n, d, s, AccumulateSink<HostFloats>{HostFloats(out, n), weight},
                                   nb, words);
    case FixedSink::validate: break;
  }
  return decode_group_portable(payload, scales, g, n, d, s, NullSink{}, nb, words);
}

// Byte permutations between 8 runs of 8b bits (run m right-aligned in qword m,
// its most significant byte first in the stream) and the b words of the
// MSB-first stream (stream byte 8k + 7 - j is byte j of word k).
struct Perm {
  alignas(64) std::array<std::uint8_t, 64> pack{};    // word byte <- run byte
  alignas(64) std::array<std::uint8_t, 64> unpack{};  // run byte <- word byte
  std::uint64_t keep = 0;                             // run bytes that carry bits
};

Perm make_perm(int b) {
  Perm p;
  for (int k = 0; k < b; ++k)
    for (int j = 0; j < 8; ++j) {
      const int sb = 8 * k + 7 - j;  // stream byte
      const int m = sb / b, r = sb % b;
      p.pack[8 * k + j] = static_cast<std::uint8_t>(8 * m + (b - 1 - r));
    }
  for (int m = 0; m < 8; ++m)
    for (int t = 0; t < b; ++t) {
      const int sb = b * m + (b - 1 - t);
      p.unpack[8 * m + t] = static_cast<std::uint8_t>(8 * (sb / 8) + (7 - sb % 8));
      p.keep |= std::uint64_t(1) << (8 * m + t);
    }
  return p;
}

const Perm& perm(int b) {
  static const std::array<Perm, 9> table = [] {
    std::array<Perm, 9> t{};
    for (int w = 2; w <= 8; ++w) t[w] = make_perm(w);
    return t;
  }();
  return table[b];
}

// Byte-shuffle controls of the 32-bit lane shifts x >> 16 and x >> 8 (zeros
// shifted in). On Intel cores 512-bit shifts, multiplies and conversions all
// issue on port 0 while byte shuffles issue on port 5: the draw's hash spends
// eight port-0 uops on its two multiplies, so each shift by whole bytes moved
// to a shuffle takes work off that port. On its own this change was measured
// on an Intel core and changed nothing (docs/kernels.md); it is part of the
// lock-step encoder measured as a whole there ("Draws in lock-step").
struct ShiftCtl {
  alignas(64) std::array<std::uint8_t, 64> shr16{};
  alignas(64) std::array<std::uint8_t, 64> shr8{};
  // Byte k of the packs_epi32/packus_epi16 result of four 16-code vectors
  // holds code 16 q + 4 L + j at byte 16 L + 4 q + j: this index restores
  // code order (code k in byte k).
  alignas(64) std::array<std::uint8_t, 64> order{};
  ShiftCtl() {
    for (int k = 0; k < 64; ++k) {
      const int j = k % 4, base = k - j;
      shr16[k] = static_cast<std::uint8_t>(j < 2 ? (base + j + 2) % 16 : 0x80);
      shr8[k] = static_cast<std::uint8_t>(j < 3 ? (base + j + 1) % 16 : 0x80);
      const int q = k / 16, lane = (k % 16) / 4;
      order[k] = static_cast<std::uint8_t>(16 * lane + 4 * q + j);
    }
  }
};

const ShiftCtl& shift_ctl() {
  static const ShiftCtl c;
  return c;
}

struct EncodeConsts {
  __m512i shr16, shr8, order;
};

// The unsigned levels l[0, nv) of the 16 nv coordinates v[i, i + 16 nv), all
// in one bucket with factor f, drawing with indices draw, draw + 1, ...: the
// arithmetic of quantize_segment, lane by lane, in nv vectors of 16. Each
// step runs on all nv vectors before the next: the draw's hash is a chain of
// about 50 cycles of latency (four 10-cycle multiplies), and written one
// vector after the other the chains fill the scheduler before independent
// work can enter it. The lock-step change as a whole made the encoder 1.32x
// and quantize() 1.30x faster on an AMD EPYC (Zen 5) core (docs/kernels.md,
// "Draws in lock-step").
// Only the position and the hash state live across the steps. The fraction
// pos - trunc(pos) is vreduceps's exact result, the same float as
// pos - float(trunc(pos)) (s <= 2^24, so pos < 2^25 and trunc is exact).
// Vectors of 16 coordinates drawn in lock-step by the quantizer and the
// encoder (two groups of 64 codes).
constexpr int lockstep_vectors = 8;

template <int nv>
QSGD_AVX512 inline void draw_levels(const float* v, std::uint64_t i, std::uint64_t draw, __m512 f, __m512 s_f,
                                    std::uint32_t k0, std::uint32_t hi_key, const EncodeConsts& c, __m512i* l) {
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i m1 = _mm512_set1_epi32(0x7feb352d), m2 = _mm512_set1_epi32(static_cast<int>(0x846ca68bu));
  __m512 pos[nv];
  __m512i r[nv];
  const __m512i base = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(static_cast<std::uint32_t>(draw))), lane);
#pragma GCC unroll 16
  for (int q = 0; q < nv; ++q) {
    // min(|x f|, s_f) = min(|x| f, s_f) (f > 0), as vrangeps: one of its inputs exactly.
    pos[q] = _mm512_range_ps(_mm512_mul_ps(_mm512_loadu_ps(v + i + 16 * q), f), s_f, 0x0a);
    r[q] = _mm512_xor_si512(_mm512_add_epi32(base, _mm512_set1_epi32(16 * q)),
                            _mm512_set1_epi32(static_cast<int>(k0)));
  }
  // Two rounds of lowbias32, the first one's result xor-ed with hi_key.
  for (int round = 0; round < 2; ++round) {
    const __m512i then = round == 0 ? _mm512_set1_epi32(static_cast<int>(hi_key)) : _mm512_setzero_si512();
#pragma GCC unroll 16
    for (int q = 0; q < nv; ++q) r[q] = _mm512_xor_si512(r[q], _mm512_shuffle_epi8(r[q], c.shr16));
#pragma GCC unroll 16
    for (int q = 0; q < nv; ++q) r[q] = _mm512_mullo_epi32(r[q], m1);
#pragma GCC unroll 16
    for (int q = 0; q < nv; ++q) r[q] = _mm512_xor_si512(r[q], _mm512_srli_epi32(r[q], 15));
#pragma GCC unroll 16
    for (int q = 0; q < nv; ++q) r[q] = _mm512_mullo_epi32(r[q], m2);
#pragma GCC unroll 16
    for (int q = 0; q < nv; ++q)
      r[q] = _mm512_ternarylogic_epi32(r[q], _mm512_shuffle_epi8(r[q], c.shr16), then, 0x96);  // ^ (>> 16) ^ then
  }
#pragma GCC unroll 16
  for (int q = 0; q < nv; ++q) {
    const __m512i t = _mm512_cvttps_epi32(pos[q]);
    const __m512 p = _mm512_reduce_ps(pos[q], _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m512 u =
        _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_shuffle_epi8(r[q], c.shr8)), _mm512_set1_ps(1.0f / 16777216.0f));
    l[q] = _mm512_mask_add_epi32(t, _mm512_cmp_ps_mask(u, p, _CMP_LT_OQ), t, _mm512_set1_epi32(1));
  }
}

// The 16 nv codes (1 sign bit, lb level bits) of v[i, i + 16 nv) (as
// draw_levels): code 64 m + k in byte k of bytes[m] (codes are below 2^8, so
// the saturating packs are exact). The input is loaded again for the sign.
template <int lb, int nv>
QSGD_AVX512 inline void codes(const float* v, std::uint64_t i, std::uint64_t draw, __m512 f, __m512 s_f,
                              std::uint32_t k0, std::uint32_t hi_key, const EncodeConsts& c, __m512i* bytes) {
  static_assert(nv % 4 == 0, "codes come in groups of 64");
  __m512i l[nv];
  draw_levels<nv>(v, i, draw, f, s_f, k0, hi_key, c, l);
#pragma GCC unroll 16
  for (int q = 0; q < nv; ++q) {
    // Sign bit only where the level is non-zero (level 0 is never negative).
    const __mmask16 neg = _mm512_mask_cmplt_epi32_mask(_mm512_test_epi32_mask(l[q], l[q]),
                                                       _mm512_loadu_si512(v + i + 16 * q), _mm512_setzero_si512());
    l[q] = _mm512_mask_or_epi32(l[q], neg, l[q], _mm512_set1_epi32(1 << lb));
  }
#pragma GCC unroll 4
  for (int m = 0; m < nv / 4; ++m)
    bytes[m] = _mm512_permutexvar_epi8(c.order, _mm512_packus_epi16(_mm512_packus_epi32(l[4 * m], l[4 * m + 1]),
                                                                    _mm512_packus_epi32(l[4 * m + 2], l[4 * m + 3])));
}

// The signed levels (Q_s, level 0 never negative) of v[i, i + 16 nv) (as
// draw_levels) into out[i, i + 16 nv).
template <int nv>
QSGD_AVX512 inline void signed_levels(const float* v, std::uint64_t i, std::uint64_t draw, __m512 f, __m512 s_f,
                                      std::uint32_t k0, std::uint32_t hi_key, const EncodeConsts& c,
                                      std::int32_t* out) {
  __m512i l[nv];
  draw_levels<nv>(v, i, draw, f, s_f, k0, hi_key, c, l);
#pragma GCC unroll 16
  for (int q = 0; q < nv; ++q) {
    const __mmask16 neg = _mm512_movepi32_mask(_mm512_loadu_si512(v + i + 16 * q));
    _mm512_storeu_si512(out + i + 16 * q, _mm512_mask_sub_epi32(l[q], neg, _mm512_setzero_si512(), l[q]));
  }
}

QSGD_AVX512 inline EncodeConsts encode_consts() {
  const ShiftCtl& t = shift_ctl();
  return EncodeConsts{_mm512_load_si512(t.shr16.data()), _mm512_load_si512(t.shr8.data()),
                      _mm512_load_si512(t.order.data())};
}

// Fused scales + quantize into levels, bucket by bucket (the scale computed
// just before the bucket's levels, its input two buckets ahead prefetched):
// the scales and levels of quantize_fused_host. Runs of 128 coordinates
// inside a bucket and one 2^32 block of draws take the SIMD steps; the rest
// of a bucket, and buckets that divide first, quantize_segment. Returns false
// at the first bucket with a NaN/Inf coordinate or an L2 norm beyond the
// float range.
QSGD_AVX512 bool quantize_avx512(const float* v, float* scales, std::int32_t* levels, std::uint64_t n,
                                 std::uint32_t d, std::uint32_t s, Norm norm, const StreamKey& key,
                                 std::uint64_t offset) {
  constexpr int nv = lockstep_vectors;
  constexpr std::uint64_t step = 16 * nv;
  const EncodeConsts c = encode_consts();
  const std::uint64_t nb = ceil_div(n, d);
  for (std::uint64_t bk = 0; bk < nb; ++bk) {
    prefetch_bucket_ahead(v, bk, d, n);
    const std::uint64_t begin = bk * d, end = begin + d < n ? begin + d : n;
    bool finite = true;
    const float sc = host_bucket_scale(v + begin, end - begin, norm, finite);
    if (!finite || !is_finite_f(sc)) return false;
    scales[bk] = sc;
    const BucketFactor bf(sc, s);
    std::uint64_t i = begin;
    if (bf.scale > 0.0f && !bf.divide_first) {
      const __m512 f = _mm512_set1_ps(bf.factor), s_f = _mm512_set1_ps(bf.s_f);
      for (; i + step <= end; i += step) {
        const std::uint64_t gi = i + offset;
        if ((gi >> 32) != ((gi + step - 1) >> 32)) {
          quantize_segment(v, levels, i, i + step, bf, key, offset);
          continue;
        }
        const std::uint32_t hi_key = key.k1 ^ (static_cast<std::uint32_t>(gi >> 32) * 0x9E3779B9u);
        signed_levels<nv>(v, i, gi, f, s_f, key.k0, hi_key, c, levels);
      }
    }
    quantize_segment(v, levels, i, end, bf, key, offset);
  }
  return true;
}

// Stores the b words of a group. Groups are written in increasing order, so
// a full 64-byte store may spill garbage into the next group's words (they
// are written next); only where that would pass the end of the payload is
// the store masked (masked stores are slow on some CPUs).
template <int b>
QSGD_AVX512 inline void store_group(std::uint64_t* out, __m512i w, bool room) {
  if (room)
    _mm512_storeu_si512(out, w);
  else
    _mm512_mask_storeu_epi64(out, static_cast<__mmask8>((1u << b) - 1), w);
}

// 64 byte codes (code j in byte j) -> b words of the stream: adjacent codes
// joined pairwise into 16-, 32- and 64-bit runs. Up to b = 6 the first two
// joins are multiply-adds and the third a multiply and a shuffle (one port-0
// uop each instead of two shifts); wider codes do not fit their factors.
template <int b>
QSGD_AVX512 inline void pack64(__m512i bytes, const __m512i pack_idx, std::uint64_t* out, bool room) {
  __m512i o;
  if constexpr (b <= 6) {
    const __m512i y = _mm512_maddubs_epi16(bytes, _mm512_set1_epi16(static_cast<short>(0x0100 | (1 << b))));
    const __m512i z = _mm512_madd_epi16(y, _mm512_set1_epi32(0x00010000 | (1 << (2 * b))));
    o = _mm512_or_si512(_mm512_mul_epu32(z, _mm512_set1_epi64(std::int64_t(1) << (4 * b))),
                        _mm512_maskz_shuffle_epi32(static_cast<__mmask16>(0x5555), z, _MM_PERM_DDBB));
  } else {
    const __m512i y = _mm512_or_si512(_mm512_slli_epi16(_mm512_and_si512(bytes, _mm512_set1_epi16(0x00ff)), b),
                                      _mm512_srli_epi16(bytes, 8));
    const __m512i z = _mm512_or_si512(_mm512_slli_epi32(_mm512_and_si512(y, _mm512_set1_epi32(0xffff)), 2 * b),
                                      _mm512_srli_epi32(y, 16));
    o = _mm512_or_si512(_mm512_slli_epi64(_mm512_and_si512(z, _mm512_set1_epi64(0xffffffffll)), 4 * b),
                        _mm512_srli_epi64(z, 32));
  }
  store_group<b>(out, _mm512_permutexvar_epi8(pack_idx, o), room);
}

// b words of the stream -> 64 byte codes (code j in byte j).
template <int b>
QSGD_AVX512 inline __m512i unpack64(const std::uint64_t* in, const __m512i unpack_idx, __mmask64 keep, bool room) {
  // The permutation reads only the first b words: a full load where 8 words
  // are inside the payload, a masked one at its end.
  const __m512i w = room ? _mm512_loadu_si512(in) : _mm512_maskz_loadu_epi64(static_cast<__mmask8>((1u << b) - 1), in);
  const __m512i o = _mm512_maskz_permutexvar_epi8(keep, unpack_idx, w);
  const __m512i z = _mm512_or_si512(_mm512_srli_epi64(o, 4 * b),
                                    _mm512_slli_epi64(_mm512_and_si512(o, _mm512_set1_epi64((1ll << (4 * b)) - 1)), 32));
  const __m512i y = _mm512_or_si512(_mm512_srli_epi32(z, 2 * b),
                                    _mm512_slli_epi32(_mm512_and_si512(z, _mm512_set1_epi32((1 << (2 * b)) - 1)), 16));
  return _mm512_or_si512(_mm512_srli_epi16(y, b),
                         _mm512_slli_epi16(_mm512_and_si512(y, _mm512_set1_epi16(static_cast<short>((1 << b) - 1))), 8));
}

// Buckets of the first and last coordinates of consecutive groups, without
// 64-bit divisions per group (the encoder's three cost about 2% of its time,
// measured).
struct GroupBuckets {
  std::uint64_t d, first = 0, first_end;  // bucket of the group's first coordinate, and that bucket's end
  explicit GroupBuckets(std::uint64_t d_) : d(d_), first_end(d_) {}
  void advance_to(std::uint64_t i0) {
    while (i0 >= first_end) ++first, first_end += d;
  }
  std::uint64_t of(std::uint64_t i) const { return i < first_end ? first : first + 1 + (i - first_end) / d; }
};

// Groups of 64 coordinates the encoder codes in lock-step (codes above).
constexpr int encode_groups = lockstep_vectors / 4;

// Fused encoder: each bucket's scale (host_bucket_scale, as bucket_scales
// computes it) just before its first group, so the bucket is read from DRAM
// once and quantized from cache. Returns false at the first bucket with a
// NaN/Inf coordinate or an L2 norm beyond the float range.
template <int b>
QSGD_AVX512 bool encode_avx512(const float* v, float* scales, std::uint64_t n, std::uint32_t d, std::uint32_t s,
                               Norm norm, const StreamKey& key, std::uint64_t offset, std::uint64_t* payload,
                               bool scales_given) {
  constexpr int lb = b - 1;
  const Perm& pm = perm(b);
  const __m512i pack_idx = _mm512_load_si512(pm.pack.data());
  const EncodeConsts c = encode_consts();
  const std::uint64_t groups = ceil_div(n, fixed_group);
  const std::uint64_t nb = ceil_div(n, d);
  const std::uint64_t words = ceil_div(n * static_cast<std::uint64_t>(b), 64);
  std::uint64_t next_scale = scales_given ? nb : 0;  // buckets below it have their scale
  std::uint64_t cur = no_index;
  BucketFactor bf;
  GroupBuckets gb(d);
  for (std::uint64_t g = 0; g < groups; ++g) {
    const std::uint64_t i0 = g * fixed_group;
    const std::uint64_t last = (i0 + fixed_group < n ? i0 + fixed_group : n) - 1;
    gb.advance_to(i0);
    const std::uint64_t bk = gb.first, last_bk = gb.of(last);
    for (; next_scale <= last_bk; ++next_scale) {
      prefetch_bucket_ahead(v, next_scale, d, n);
      const std::uint64_t begin = next_scale * d;
      bool finite = true;
      const float sc = host_bucket_scale(v + begin, (begin + d < n ? begin + d : n) - begin, norm, finite);
      if (!finite || !is_finite_f(sc)) return false;
      scales[next_scale] = sc;
    }
    const std::uint64_t gi0 = i0 + offset;  // index of the first draw
    if (i0 + fixed_group > n || last_bk != bk || (gi0 >> 32) != ((gi0 + fixed_group - 1) >> 32)) {
      encode_group_portable(v, scales, g, n, d, s, key, offset, payload, nb, words);
      continue;
    }
    if (bk != cur) {
      bf = BucketFactor(scales[bk], s);
      cur = bk;
    }
    std::uint64_t* out = payload + g * static_cast<std::uint64_t>(b);
    if (!(bf.scale > 0.0f)) {  // all levels 0: all codes 0
      store_group<b>(out, _mm512_setzero_si512(), g * b + 8 <= words);
      continue;
    }
    if (bf.divide_first) {
      encode_group_portable(v, scales, g, n, d, s, key, offset, payload, nb, words);
      continue;
    }
    const __m512 f = _mm512_set1_ps(bf.factor), s_f = _mm512_set1_ps(bf.s_f);
    const std::uint32_t hi_key = key.k1 ^ (static_cast<std::uint32_t>(gi0 >> 32) * 0x9E3779B9u);
    // encode_groups groups at once where the next ones are full, in the same
    // bucket and the same 2^32 block of draws.
    const std::uint64_t multi_last = i0 + encode_groups * fixed_group - 1;
    __m512i bytes[encode_groups];
    if (multi_last < n && gb.of(multi_last) == bk && (gi0 >> 32) == ((gi0 + encode_groups * fixed_group - 1) >> 32)) {
      codes<lb, 4 * encode_groups>(v, i0, gi0, f, s_f, key.k0, hi_key, c, bytes);
      for (int m = 0; m < encode_groups; ++m) pack64<b>(bytes[m], pack_idx, out + m * b, (g + m) * b + 8 <= words);
      g += encode_groups - 1;
    } else {
      codes<lb, 4>(v, i0, gi0, f, s_f, key.k0, hi_key, c, bytes);
      pack64<b>(bytes[0], pack_idx, out, g * b + 8 <= words);
    }
  }
  return true;
}

template <int b>
QSGD_AVX512 void decode_avx512(const std::uint64_t* payload, const float* scales, std::uint64_t n, std::uint32_t d,
                               std::uint32_t s, FixedSink mode, float weight, float* out, std::int32_t* levels,
                               std::uint64_t* first_bad) {
  constexpr int lb = b - 1;
  const Perm& pm = perm(b);
  const __m512i unpack_idx = _mm512_load_si512(pm.unpack.data());
  const __mmask64 keep = pm.keep;
  const std::uint64_t groups = ceil_div(n, fixed_group);
  const std::uint64_t nb = ceil_div(n, d);
  const std::uint64_t words = ceil_div(n * static_cast<std::uint64_t>(b), 64);
  const __m512i lmask = _mm512_set1_epi32((1 << lb) - 1);
  const __m512i smax = _mm512_set1_epi32(static_cast<int>(s));
  const __m512 wv = _mm512_set1_ps(weight);
  std::uint64_t bad = no_index;
  std::uint64_t cur = no_index;
  LevelUnit unit;
  for (std::uint64_t g = 0; g < groups; ++g) {
    const std::uint64_t i0 = g * fixed_group;
    const std::uint64_t bk = i0 / d;
    bool ok;
    if (i0 + fixed_group > n || (i0 + fixed_group - 1) / d != bk) {
      ok = decode_group_portable_mode(payload, scales, g, n, d, s, mode, weight, out, levels, nb, words);
    } else {
      if (bk != cur) {
        unit = LevelUnit(scales[bk], s);
        cur = bk;
      }
      if (unit.via_double) {
        ok = decode_group_portable_mode(payload, scales, g, n, d, s, mode, weight, out, levels, nb, words);
      } else {
        const __m512i bytes = unpack64<b>(payload + g * static_cast<std::uint64_t>(b), unpack_idx, keep, g * b + 8 <= words);
        // Immediates must be constants at every optimization level: the four
        // quarters are extracted explicitly.
        const __m512i codes[4] = {_mm512_cvtepu8_epi32(_mm512_extracti32x4_epi32(bytes, 0)),
                                  _mm512_cvtepu8_epi32(_mm512_extracti32x4_epi32(bytes, 1)),
                                  _mm512_cvtepu8_epi32(_mm512_extracti32x4_epi32(bytes, 2)),
                                  _mm512_cvtepu8_epi32(_mm512_extracti32x4_epi32(bytes, 3))};
        __m512i lv[4];
        __mmask16 invalid = 0;
        for (int q = 0; q < 4; ++q) {
          const __m512i code = codes[q];
          const __m512i l = _mm512_and_si512(code, lmask);
          const __mmask16 neg = _mm512_test_epi32_mask(code, _mm512_set1_epi32(1 << lb));
          const __mmask16 zero = _mm512_testn_epi32_mask(l, l);
          invalid |= _mm512_cmpgt_epi32_mask(l, smax) | (neg & zero);
          lv[q] = _mm512_mask_sub_epi32(l, neg, _mm512_setzero_si512(), l);
        }
        ok = invalid == 0;
        if (ok && mode == FixedSink::add_levels) {
          for (int q = 0; q < 4; ++q) {
            std::int32_t* o = levels + i0 + 16 * q;
            _mm512_storeu_si512(o, _mm512_add_epi32(_mm512_loadu_si512(o), lv[q]));
          }
        } else if (ok && mode != FixedSink::validate) {
          const __m512 uv = _mm512_set1_ps(unit.unit);
          for (int q = 0; q < 4; ++q) {
            const __m512 val = _mm512_mul_ps(_mm512_cvtepi32_ps(lv[q]), uv);
            float* o = out + i0 + 16 * q;
            if (mode == FixedSink::values)
              _mm512_storeu_ps(o, val);
            else
              _mm512_storeu_ps(o, _mm512_add_ps(_mm512_loadu_ps(o), _mm512_mul_ps(wv, val)));
          }
        }
      }
    }
    if (!ok && i0 < bad) bad = i0;
  }
  *first_bad = bad;
}

using EncodeFn = bool (*)(const float*, float*, std::uint64_t, std::uint32_t, std::uint32_t, Norm, const StreamKey&,
                         std::uint64_t, std::uint64_t*, bool);
using DecodeFn = void (*)(const std::uint64_t*, const float*, std::uint64_t, std::uint32_t, std::uint32_t, FixedSink,
                         float, float*, std::int32_t*, std::uint64_t*);
constexpr EncodeFn encoders[9] = {nullptr, nullptr, encode_avx512<2>, encode_avx512<3>, encode_avx512<4>,
                                  encode_avx512<5>, encode_avx512<6>, encode_avx512<7>, encode_avx512<8>};
constexpr DecodeFn decoders[9] = {nullptr, nullptr, decode_avx512<2>, decode_avx512<3>, decode_avx512<4>,
                                  decode_avx512<5>, decode_avx512<6>, decode_avx512<7>, decode_avx512<8>};

#endif  // QSGD_HAVE_AVX512_PATH

}  // namespace

const char* fixed_isa() { return active() == Isa::avx512_vbmi ? "avx512-vbmi" : "portable"; }

bool host_paths_enabled() { return state().enabled; }

bool set_simd_enabled(bool on) {
  const bool prev = state().enabled;
  state().enabled = on;
  return prev;
}

EncodeStatus encode_fixed_stochastic(const float* v, float* scales, std::uint64_t n, std::uint32_t d, std::uint32_t s,
                                     Norm norm, const StreamKey& key, std::uint64_t index_offset,
                                     std::uint64_t* payload, bool scales_given) {
#ifdef QSGD_HAVE_AVX512_PATH
  const std::uint32_t b = fixed_level_bits(s) + 1;
  if (active() == Isa::avx512_vbmi && b >= 2 && b <= 8 && n > 0 && d > 0)
    return encoders[b](v, scales, n, d, s, norm, key, index_offset, payload, scales_given) ? EncodeStatus::done
                                                                                           : EncodeStatus::bad_input;
#else
  (void)v, (void)scales, (void)n, (void)d, (void)s, (void)norm, (void)key, (void)index_offset, (void)payload,
      (void)scales_given;
#endif
  return EncodeStatus::not_applicable;
}

EncodeStatus quantize_stochastic(const float* v, float* scales, std::int32_t* levels, std::uint64_t n, std::uint32_t d,
                                 std::uint32_t s, Norm norm, const StreamKey& key, std::uint64_t index_offset) {
#ifdef QSGD_HAVE_AVX512_PATH
  if (active() == Isa::avx512_vbmi && n > 0 && d > 0 && s <= max_levels)
    return quantize_avx512(v, scales, levels, n, d, s, norm, key, index_offset) ? EncodeStatus::done
                                                                                 : EncodeStatus::bad_input;
#else
  (void)v, (void)scales, (void)levels, (void)n, (void)d, (void)s, (void)norm, (void)key, (void)index_offset;
#endif
  return EncodeStatus::not_applicable;
}

bool decode_fixed(const std::uint64_t* payload, const float* scales, std::uint64_t n, std::uint32_t d, std::uint32_t s,
                  FixedSink mode, float weight, float* out, std::int32_t* levels, std::uint64_t* first_bad) {
#ifdef QSGD_HAVE_AVX512_PATH
  const std::uint32_t b = fixed_level_bits(s) + 1;
  if (active() == Isa::avx512_vbmi && b >= 2 && b <= 8 && n > 0 && d > 0) {
    decoders[b](payload, scales, n, d, s, mode, weight, out, levels, first_bad);
    return true;
  }
#else
  (void)payload, (void)scales, (void)n, (void)d, (void)s, (void)mode, (void)weight, (void)out, (void)levels,
      (void)first_bad;
#endif
  return false;
}

}  // namespace qsgd::detail::simd
