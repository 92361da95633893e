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

QSGD_AVX512 inline __m512i lowbias32_v(__m512i x) {
  x = _mm512_xor_si512(x, _mm512_srli_epi32(x, 16));
  x = _mm512_mullo_epi32(x, _mm512_set1_epi32(0x7feb352d));
  x = _mm512_xor_si512(x, _mm512_srli_epi32(x, 15));
  x = _mm512_mullo_epi32(x, _mm512_set1_epi32(static_cast<int>(0x846ca68bu)));
  return _mm512_xor_si512(x, _mm512_srli_epi32(x, 16));
}

// Codes (1 sign bit, lb level bits) of the 16 coordinates v[i, i + 16), all in
// one bucket with factor f, drawing with indices draw, draw + 1, ...: the
// arithmetic of quantize_segment, lane by lane.
template <int lb>
QSGD_AVX512 inline __m512i codes16(const float* v, std::uint64_t i, std::uint64_t draw, __m512 f, __m512 s_f,
                                   std::uint32_t k0, std::uint32_t hi_key) {
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512 x = _mm512_loadu_ps(v + i);
  const __m512 a = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7fffffff)));
  const __m512 pos = _mm512_min_ps(_mm512_mul_ps(a, f), s_f);
  __m512i l = _mm512_cvttps_epi32(pos);
  const __m512 p = _mm512_sub_ps(pos, _mm512_cvtepi32_ps(l));
  const __m512i idx = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(static_cast<std::uint32_t>(draw))), lane);
  __m512i r = lowbias32_v(_mm512_xor_si512(idx, _mm512_set1_epi32(static_cast<int>(k0))));
  r = lowbias32_v(_mm512_xor_si512(r, _mm512_set1_epi32(static_cast<int>(hi_key))));
  const __m512 u = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(r, 8)), _mm512_set1_ps(1.0f / 16777216.0f));
  l = _mm512_mask_add_epi32(l, _mm512_cmp_ps_mask(u, p, _CMP_LT_OQ), l, _mm512_set1_epi32(1));
  // Sign bit only where the level is non-zero (level 0 is never negative).
  const __mmask16 neg = _mm512_movepi32_mask(_mm512_castps_si512(x)) & _mm512_test_epi32_mask(l, l);
  return _mm512_mask_or_epi32(l, neg, l, _mm512_set1_epi32(1 << lb));
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

// 64 byte codes (code j in byte j) -> b words of the stream.
template <int b>
QSGD_AVX512 inline void pack64(__m512i bytes, const __m512i pack_idx, std::uint64_t* out, bool room) {
  const __m512i y = _mm512_or_si512(_mm512_slli_epi16(_mm512_and_si512(bytes, _mm512_set1_epi16(0x00ff)), b),
                                    _mm512_srli_epi16(bytes, 8));
  const __m512i z = _mm512_or_si512(_mm512_slli_epi32(_mm512_and_si512(y, _mm512_set1_epi32(0xffff)), 2 * b),
                                    _mm512_srli_epi32(y, 16));
  const __m512i o = _mm512_or_si512(
      _mm512_slli_epi64(_mm512_and_si512(z, _mm512_set1_epi64(0xffffffffll)), 4 * b), _mm512_srli_epi64(z, 32));
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
  const std::uint64_t groups = ceil_div(n, fixed_group);
  const std::uint64_t nb = ceil_div(n, d);
  const std::uint64_t words = ceil_div(n * static_cast<std::uint64_t>(b), 64);
  std::uint64_t next_scale = scales_given ? nb : 0;  // buckets below it have their scale
  std::uint64_t cur = no_index;
  BucketFactor bf;
  for (std::uint64_t g = 0; g < groups; ++g) {
    const std::uint64_t i0 = g * fixed_group;
    const std::uint64_t last = (i0 + fixed_group < n ? i0 + fixed_group : n) - 1;
    for (; next_scale <= last / d; ++next_scale) {
      prefetch_bucket_ahead(v, next_scale, d, n);
      const std::uint64_t begin = next_scale * d;
      bool finite = true;
      const float sc = host_bucket_scale(v + begin, (begin + d < n ? begin + d : n) - begin, norm, finite);
      if (!finite || !is_finite_f(sc)) return false;
      scales[next_scale] = sc;
    }
    const std::uint64_t bk = i0 / d;
    const std::uint64_t gi0 = i0 + offset;  // index of the first draw
    if (i0 + fixed_group > n || last / d != bk || (gi0 >> 32) != ((gi0 + fixed_group - 1) >> 32)) {
      encode_group_portable(v, scales, g, n, d, s, key, offset, payload, nb, words);
      continue;
    }
    if (bk != cur) {
      bf = BucketFactor(scales[bk], s);
      cur = bk;
    }
    std::uint64_t* out = payload + g * static_cast<std::uint64_t>(b);
    const bool room = g * b + 8 <= words;
    if (!(bf.scale > 0.0f)) {  // all levels 0: all codes 0
      store_group<b>(out, _mm512_setzero_si512(), room);
      continue;
    }
    if (bf.divide_first) {
      encode_group_portable(v, scales, g, n, d, s, key, offset, payload, nb, words);
      continue;
    }
    const __m512 f = _mm512_set1_ps(bf.factor), s_f = _mm512_set1_ps(bf.s_f);
    const std::uint32_t hi_key = key.k1 ^ (static_cast<std::uint32_t>(gi0 >> 32) * 0x9E3779B9u);
    const __m128i c0 = _mm512_cvtepi32_epi8(codes16<lb>(v, i0, gi0, f, s_f, key.k0, hi_key));
    const __m128i c1 = _mm512_cvtepi32_epi8(codes16<lb>(v, i0 + 16, gi0 + 16, f, s_f, key.k0, hi_key));
    const __m128i c2 = _mm512_cvtepi32_epi8(codes16<lb>(v, i0 + 32, gi0 + 32, f, s_f, key.k0, hi_key));
    const __m128i c3 = _mm512_cvtepi32_epi8(codes16<lb>(v, i0 + 48, gi0 + 48, f, s_f, key.k0, hi_key));
    const __m512i bytes = _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_inserti128_si256(_mm256_castsi128_si256(c0), c1, 1)),
        _mm256_inserti128_si256(_mm256_castsi128_si256(c2), c3, 1), 1);
    pack64<b>(bytes, pack_idx, out, room);
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
