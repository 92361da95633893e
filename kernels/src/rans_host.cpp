// Host paths of the rANS codec; see detail/rans_host.hpp.
#include "qsgd/kernels/detail/rans_host.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include "qsgd/kernels/quantize.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDACC__) && \
    !defined(__HIPCC__)
#include <immintrin.h>
#define QSGD_RANS_SIMD 1
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12's AVX-512 headers start masked operations from _mm512_undefined_*(),
// which -Wmaybe-uninitialized reports at every inlined use (a false positive).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#define QSGD_RANS_TARGET __attribute__((target("avx2,avx512f,avx512bw,avx512vl,popcnt,bmi2")))
#endif

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
  if constexpr (M == Sink::add_levels) levels_out[i] += level;
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

// Reads a chunk's four initial states; false when one is out of range.
inline bool chunk_states(const unsigned char* units, std::uint64_t& p, std::uint32_t (&x)[rans_lanes]) {
  for (std::uint32_t k = 0; k < rans_lanes; ++k) {
    x[k] = unit_at(units, p) | (unit_at(units, p + 1) << 16);
    p += 2;
    if (x[k] < rans_low || x[k] >= (rans_low << 16)) return false;
  }
  return true;
}

// Decodes coordinates [i, i1) of the chunk that starts at i0, from states x
// at stream position p (i - i0 a multiple of four, or i = i0), then checks
// the chunk's end: every unit read and every state back at rans_low.
template <Sink M>
bool finish_chunk(const unsigned char* units, std::uint64_t p, std::uint64_t pend, const std::uint64_t* dec,
                  std::uint32_t precision, const float* scales, std::uint64_t i, std::uint64_t i0, std::uint64_t i1,
                  std::uint32_t d, std::uint32_t s, float weight, float* out, std::int32_t* levels_out,
                  const std::uint32_t (&x)[rans_lanes]) {
  const std::uint32_t mask = (1u << precision) - 1;
  const std::int32_t si = static_cast<std::int32_t>(s);
  std::uint32_t x0 = x[0], x1 = x[1], x2 = x[2], x3 = x[3];
  while (i < i1) {
    const std::uint64_t b = i / d;
    const std::uint64_t e = std::min<std::uint64_t>((b + 1) * d, i1);
    const LevelUnit unit(scales[b], s);
    const bool ok = unit.via_double ? decode_segment<M, true>(i, e, i0, x0, x1, x2, x3, dec, mask, precision, units, p,
                                                              pend, si, unit, weight, out, levels_out)
                                    : decode_segment<M, false>(i, e, i0, x0, x1, x2, x3, dec, mask, precision, units,
                                                               p, pend, si, unit, weight, out, levels_out);
    if (!ok) return false;
  }
  return p == pend && x0 == rans_low && x1 == rans_low && x2 == rans_low && x3 == rans_low;
}

template <Sink M>
bool decode_chunk(const unsigned char* units, std::uint64_t p, std::uint64_t pend, const std::uint64_t* dec,
                  std::uint32_t precision, const float* scales, std::uint64_t i0, std::uint64_t i1, std::uint32_t d,
                  std::uint32_t s, float weight, float* out, std::int32_t* levels_out) {
  std::uint32_t x[rans_lanes];
  if (!chunk_states(units, p, x)) return false;
  return finish_chunk<M>(units, p, pend, dec, precision, scales, i0, i0, i1, d, s, weight, out, levels_out, x);
}

// Which table the SIMD decoder reads (none: the scalar decoder only), and
// how many whole chunks its coders run at once.
enum class SimdTable { none, packed, wide };
constexpr int simd_chunks = 8;

#ifdef QSGD_RANS_SIMD

// The SIMD decoder (AVX-512 F, BW, VL): whole chunks in lockstep, one
// chunk's four lanes per 128-bit lane of a vector. Per round of four
// coordinates of a chunk: the four table look-ups (a gather from a packed
// table, or two from the decoder's 64-bit one: simd_lookup), the four
// state updates, the renormalization mask; the units the renormalizing
// lanes take, in lane order, are the next popcount units of
// the chunk's stream: the 16 bytes at the chunk's position go to its
// 128-bit lane, each lane's rank among the renormalizing lanes of its chunk
// comes from two in-lane prefix sums of the mask, and one word permute
// (vpermw) hands every renormalizing lane its unit. The stream position
// then advances once per round, not once per lane: the serial dependency
// that bounds the scalar decoder. Same arithmetic, reads and order as
// decode_chunk for every chunk; rounds run while each chunk has at least 8
// units left (so the 16-byte load stays inside its stream) and its bucket
// is not a double-path one; the scalar code finishes each chunk.

// Packed table: frequency (13 bits), slot - start (12), symbol (7), for
// precision <= 12 and alphabets of at most 128 symbols (s <= 63).
constexpr std::uint32_t simd_max_precision = 12, simd_max_alphabet = 128;
inline std::uint32_t pack_entry(std::uint64_t e) {
  return static_cast<std::uint32_t>(e >> 32) | static_cast<std::uint32_t>(((e >> 16) & 0xFFFu) << 13) |
         static_cast<std::uint32_t>((e & 0x7Fu) << 25);
}

bool simd_supported() {
  static const bool ok = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("popcnt") &&
           __builtin_cpu_supports("bmi2");
  }();
  return ok;
}

// Decodes whole chunks c0 .. c0 + simd_chunks - 1 (framed; streams
// [p_in[k], pend[k])): bad[k] says whether chunk k failed. Four chunks per
// 512-bit vector (chunk c's lanes in 128-bit lane c), two vectors: each
// round is a long dependent chain (gather, multiply, compare, the prefix
// sums and the permute), and two independent ones hide each other's latency
// (one vector decoded at 1.8 ns per coordinate, two at 1.0-1.1, four spill
// registers; on an AMD Zen 5 machine the gather's throughput, about 5 ns
// per 16 look-ups, bounds the round as much as the chain). Rounds run in stretches with no per-round test: as
// many as every chunk's bucket segment holds and its stream has room for (a
// round takes at most four units, and starts with at least eight left).
constexpr std::uint64_t accumulate_prefetch = 2048;  // floats ahead in each chunk's output stream

template <int c>
QSGD_RANS_TARGET inline void deliver_lane(__m512i level, __m512 value, std::uint64_t i, float* out,
                                          std::int32_t* levels_out, Sink mode) {
  if (mode == Sink::values) _mm_storeu_ps(out + i, _mm512_extractf32x4_ps(value, c));
  if (mode == Sink::accumulate) {
    if ((i & 15) == 0) _mm_prefetch(reinterpret_cast<const char*>(out + i + accumulate_prefetch), _MM_HINT_T0);
    _mm_storeu_ps(out + i, _mm_add_ps(_mm_loadu_ps(out + i), _mm512_extractf32x4_ps(value, c)));  // value: weight x value
  }
  if (mode == Sink::levels) _mm_storeu_si128(reinterpret_cast<__m128i*>(levels_out + i), _mm512_extracti32x4_epi32(level, c));
  if (mode == Sink::add_levels) {
    auto* o = reinterpret_cast<__m128i*>(levels_out + i);
    _mm_storeu_si128(o, _mm_add_epi32(_mm_loadu_si128(o), _mm512_extracti32x4_epi32(level, c)));
  }
}

// The table look-up of one round for 16 lanes: the frequency, slot - start
// and symbol of each lane's slot. From the packed table (Wide = false) with
// one 32-bit gather; or, for tables that do not pack (precision above 12
// or more than 128 symbols: 8-bit QSGD, shared-scale sums), from the
// decoder's own 64-bit entries (f << 32 | bias << 16 | symbol) with two
// 8-lane gathers, their halves put back in lane order by two permutes.
struct SimdEntry {
  __m512i f, bias, sym;
};
template <bool Wide>
QSGD_RANS_TARGET inline SimdEntry simd_lookup(__m512i slot, const std::uint32_t* table, const std::uint64_t* dec) {
  if constexpr (!Wide) {
    const __m512i e = _mm512_i32gather_epi32(slot, table, 4);
    return {_mm512_and_si512(e, _mm512_set1_epi32(0x1FFF)),
            _mm512_and_si512(_mm512_srli_epi32(e, 13), _mm512_set1_epi32(0xFFF)), _mm512_srli_epi32(e, 25)};
  } else {
    (void)table;
    const __m512i lo = _mm512_i32gather_epi64(_mm512_castsi512_si256(slot), dec, 8);
    const __m512i hi = _mm512_i32gather_epi64(_mm512_extracti64x4_epi64(slot, 1), dec, 8);
    const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i low32 = _mm512_permutex2var_epi32(lo, even, hi);
    const __m512i high32 = _mm512_permutex2var_epi32(lo, _mm512_add_epi32(even, _mm512_set1_epi32(1)), hi);
    return {high32, _mm512_srli_epi32(low32, 16), _mm512_and_si512(low32, _mm512_set1_epi32(0xFFFF))};
  }
}

template <Sink M, bool Wide>
QSGD_RANS_TARGET void simd_group_zmm(const unsigned char* units, const std::uint64_t (&p_in)[simd_chunks],
                                     const std::uint64_t (&pend)[simd_chunks], const std::uint32_t* table,
                                     const std::uint64_t* dec, std::uint32_t precision, const float* scales,
                                     std::uint64_t c0, std::uint32_t chunk, std::uint32_t d, std::uint32_t s,
                                     float weight, float* out, std::int32_t* levels_out, bool (&bad)[simd_chunks]) {
  constexpr int G = simd_chunks, V = G / 4;
  static_assert(G % 4 == 0, "four chunks per vector");
  std::uint64_t p[G];
  alignas(64) std::uint32_t xs[G][rans_lanes];
  bool alive = true;
  for (int k = 0; k < G; ++k) {
    p[k] = p_in[k];
    bad[k] = !chunk_states(units, p[k], xs[k]);
    alive = alive && !bad[k];
  }
  std::uint64_t j = 0;
  if (alive) {
    __m512i x[V];
    std::uint64_t q[G];
    for (int v = 0; v < V; ++v) x[v] = _mm512_load_si512(xs[4 * v]);
    for (int k = 0; k < G; ++k) q[k] = p[k];
    const __m512i slot_mask = _mm512_set1_epi32(static_cast<int>((1u << precision) - 1));
    const __m128i shift = _mm_cvtsi32_si128(static_cast<int>(precision));
    const __m512i low_bound = _mm512_set1_epi32(static_cast<int>(rans_low));
    const __m512i sv = _mm512_set1_epi32(static_cast<int>(s));
    const __m512 wv512 = _mm512_set1_ps(weight);
    const __m512i three = _mm512_set1_epi32(3);
    const __m512i chunk_slot = _mm512_set_epi32(24, 24, 24, 24, 16, 16, 16, 16, 8, 8, 8, 8, 0, 0, 0, 0);
    while (j < chunk) {
      std::uint64_t je = chunk, rounds = ~std::uint64_t(0);
      alignas(64) float ub[G][rans_lanes];
      bool narrow = true;
      for (int k = 0; k < G; ++k) {
        const std::uint64_t base = (c0 + static_cast<std::uint64_t>(k)) * chunk;
        const std::uint64_t b = (base + j) / d;
        je = std::min<std::uint64_t>(je, (b + 1) * d - base);
        const LevelUnit lu(scales[b], s);
        narrow = narrow && !lu.via_double;
        for (std::uint32_t l = 0; l < rans_lanes; ++l) ub[k][l] = lu.unit;
        rounds = std::min<std::uint64_t>(rounds, q[k] + 8 <= pend[k] ? (pend[k] - q[k] - 8) / 4 + 1 : 0);
      }
      rounds = std::min<std::uint64_t>(rounds, (je - j) / rans_lanes);
      if (!narrow || rounds == 0) break;
      __m512 unitv[V];
      __m512i qlow[V];  // q & 3 of each lane's chunk
      for (int v = 0; v < V; ++v) {
        unitv[v] = _mm512_load_ps(ub[4 * v]);
        const auto lo = [&](int c) { return static_cast<int>(q[4 * v + c] & 3); };
        qlow[v] = _mm512_set_epi32(lo(3), lo(3), lo(3), lo(3), lo(2), lo(2), lo(2), lo(2), lo(1), lo(1), lo(1), lo(1),
                                   lo(0), lo(0), lo(0), lo(0));
      }
      for (std::uint64_t r = 0; r < rounds; ++r, j += rans_lanes) {
        for (int v = 0; v < V; ++v) {
          const SimdEntry e = simd_lookup<Wide>(_mm512_and_si512(x[v], slot_mask), table, dec);
          const __m512i st = _mm512_add_epi32(_mm512_mullo_epi32(e.f, _mm512_srl_epi32(x[v], shift)), e.bias);
          const __mmask16 low = _mm512_cmplt_epu32_mask(st, low_bound);
          // The units: the 16 bytes at each chunk's word q / 4 (units q & ~3 ..
          // (q & ~3) + 7, unit 4w + i at 16-bit slot 4w + (3 - i)), the four
          // chunks' in one vector, 8 slots each. Lane l of chunk c takes unit
          // q + rank (rank: the renormalizing lanes below l), at slot
          // 8c + ((q & 3) + rank) ^ 3: ranks by two in-lane prefix sums of
          // the mask, the units moved by one word permute. No table, no
          // mask in a general-purpose register on the state's chain.
          const __m512i raw = _mm512_inserti32x4(
              _mm512_inserti32x4(
                  _mm512_inserti32x4(_mm512_castsi128_si512(_mm_loadu_si128(
                                         reinterpret_cast<const __m128i*>(units + 8 * (q[4 * v] >> 2)))),
                                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(units + 8 * (q[4 * v + 1] >> 2))),
                                     1),
                  _mm_loadu_si128(reinterpret_cast<const __m128i*>(units + 8 * (q[4 * v + 2] >> 2))), 2),
              _mm_loadu_si128(reinterpret_cast<const __m128i*>(units + 8 * (q[4 * v + 3] >> 2))), 3);
          const __m512i ones = _mm512_maskz_set1_epi32(low, 1);
          const __m512i pairs = _mm512_add_epi32(ones, _mm512_bslli_epi128(ones, 4));
          const __m512i upto = _mm512_add_epi32(pairs, _mm512_bslli_epi128(pairs, 8));  // inclusive counts
          const __m512i slot = _mm512_add_epi32(
              _mm512_xor_si512(_mm512_add_epi32(qlow[v], _mm512_sub_epi32(upto, ones)), three), chunk_slot);
          const __m512i taken = _mm512_maskz_permutexvar_epi16(0x55555555u, slot, raw);
          x[v] = _mm512_mask_mov_epi32(st, low, _mm512_or_si512(_mm512_slli_epi32(st, 16), taken));
          qlow[v] = _mm512_and_si512(_mm512_add_epi32(qlow[v], _mm512_shuffle_epi32(upto, _MM_PERM_DDDD)), three);
          for (int c = 0; c < 4; ++c)
            q[4 * v + c] += static_cast<unsigned>(__builtin_popcount((static_cast<unsigned>(low) >> (4 * c)) & 15u));
          if constexpr (M != Sink::validate) {
            const __m512i level = _mm512_sub_epi32(e.sym, sv);
            __m512 value = _mm512_mul_ps(_mm512_cvtepi32_ps(level), unitv[v]);
            if constexpr (M == Sink::accumulate) value = _mm512_mul_ps(value, wv512);
            const std::uint64_t i0 = (c0 + static_cast<std::uint64_t>(4 * v)) * chunk + j;
            deliver_lane<0>(level, value, i0, out, levels_out, M);
            deliver_lane<1>(level, value, i0 + chunk, out, levels_out, M);
            deliver_lane<2>(level, value, i0 + 2 * std::uint64_t(chunk), out, levels_out, M);
            deliver_lane<3>(level, value, i0 + 3 * std::uint64_t(chunk), out, levels_out, M);
          }
          (void)sv, (void)wv512, (void)unitv;
        }
      }
    }
    for (int v = 0; v < V; ++v) _mm512_store_si512(xs[4 * v], x[v]);
    for (int k = 0; k < G; ++k) p[k] = q[k];
  }
  for (int k = 0; k < G; ++k) {
    if (bad[k]) continue;
    const std::uint64_t i0 = (c0 + static_cast<std::uint64_t>(k)) * chunk;
    bad[k] = !finish_chunk<M>(units, p[k], pend[k], dec, precision, scales, i0 + j, i0, i0 + chunk, d, s, weight, out,
                              levels_out, xs[k]);
  }
}

// The encoder on the same layout: eight whole chunks, four per 512-bit
// vector, coordinates from last to first four at a time. Per round: the
// four symbols' encoder fields (gathers from struct-of-arrays copies of the
// table), the emit mask, each chunk's emitted units written with one 8-byte
// store (the units of the emitting lanes, in lane order, in the top words
// of the four below the chunk's position: the words under them are written
// later), the states shifted and advanced (a 32 x 32 -> high 32 multiply by
// the reciprocal on even and odd lanes). Same units and final states as
// encode_chunks' scalar loop (tested).
struct SimdEncTables {
  // emit mask of four lanes -> pshufb control putting those lanes' low
  // 16 bits, in lane order, into the top of 16-bit slots 0..3.
  alignas(16) std::uint8_t top[16][16];
  SimdEncTables() {
    for (int m = 0; m < 16; ++m) {
      for (int b = 0; b < 16; ++b) top[m][b] = 0x80;
      int lanes[4], cnt = 0;
      for (int k = 0; k < 4; ++k)
        if (m & (1 << k)) lanes[cnt++] = k;
      for (int r = 0; r < cnt; ++r) {
        const int slot = 4 - cnt + r;
        top[m][2 * slot] = static_cast<std::uint8_t>(4 * lanes[r]);
        top[m][2 * slot + 1] = static_cast<std::uint8_t>(4 * lanes[r] + 1);
      }
    }
  }
};

const SimdEncTables& simd_enc_tables() {
  static const SimdEncTables t;
  return t;
}

template <int c>
QSGD_RANS_TARGET inline void emit_lane(__m512i x, unsigned emit, std::uint16_t*& p, const SimdEncTables& t) {
  const unsigned m = (emit >> (4 * c)) & 15u;
  const __m128i w = _mm_shuffle_epi8(_mm512_extracti32x4_epi32(x, c),
                                     _mm_load_si128(reinterpret_cast<const __m128i*>(t.top[m])));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(p - 4), w);
  p -= __builtin_popcount(m);
}

// A field of the symbols' encoder entries: gathered from memory, or, for
// alphabets of at most 64 symbols (s <= 31), looked up in four registers
// that hold the whole column (two two-register permutes and a blend: the
// gathers were most of the encoder's time).
struct EncColumn {
  __m512i block[4];
};

QSGD_RANS_TARGET inline __m512i enc_field(const EncColumn& c, __m512i sym, __mmask16 upper) {
  const __m512i lo = _mm512_permutex2var_epi32(c.block[0], sym, c.block[1]);
  const __m512i hi = _mm512_permutex2var_epi32(c.block[2], sym, c.block[3]);
  return _mm512_mask_blend_epi32(upper, lo, hi);
}

// Levels ahead (below) of the SIMD encoder's position in each chunk that it
// asks for.
constexpr std::uint64_t encode_prefetch = 512;

template <bool InRegisters>
QSGD_RANS_TARGET void simd_encode_group(const std::int32_t* levels, std::uint64_t c0, std::uint32_t chunk,
                                        std::uint32_t s, const std::uint32_t* x_max, const std::uint32_t* rcp,
                                        const std::uint32_t* bias, const std::uint32_t* cmpl_shift,
                                        std::uint16_t* scratch_units, std::uint64_t cap, std::uint64_t* chunk_units) {
  EncColumn cols[4];
  if constexpr (InRegisters) {  // columns padded to 64 entries by the caller
    const std::uint32_t* src[4] = {x_max, rcp, bias, cmpl_shift};
    for (int f = 0; f < 4; ++f)
      for (int b = 0; b < 4; ++b) cols[f].block[b] = _mm512_loadu_si512(src[f] + 16 * b);
  }
  const __m512i bit5 = _mm512_set1_epi32(32);
  constexpr int G = simd_chunks, V = G / 4;
  const SimdEncTables& t = simd_enc_tables();
  std::uint16_t* p[G];
  for (int k = 0; k < G; ++k) p[k] = scratch_units + (c0 + static_cast<std::uint64_t>(k) + 1) * cap;
  __m512i x[V];
  for (int v = 0; v < V; ++v) x[v] = _mm512_set1_epi32(static_cast<int>(rans_low));
  const __m512i sv = _mm512_set1_epi32(static_cast<int>(s));
  const __m512i low16 = _mm512_set1_epi32(0xFFFF);
  for (std::uint64_t i = chunk; i > 0; i -= rans_lanes) {
    // G streams read backwards, which the hardware prefetcher of the
    // reference machine follows poorly: one request per stream and line.
    if ((i & 15) == 0 && i >= encode_prefetch + rans_lanes)
      for (int k = 0; k < G; ++k)
        _mm_prefetch(reinterpret_cast<const char*>(levels + (c0 + static_cast<std::uint64_t>(k)) * chunk + i -
                                                   rans_lanes - encode_prefetch),
                     _MM_HINT_T0);
    for (int v = 0; v < V; ++v) {
      const std::int32_t* l = levels + (c0 + static_cast<std::uint64_t>(4 * v)) * chunk + i - rans_lanes;
      const __m512i lv = _mm512_inserti32x4(
          _mm512_inserti32x4(
              _mm512_inserti32x4(_mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(l))),
                                 _mm_loadu_si128(reinterpret_cast<const __m128i*>(l + chunk)), 1),
              _mm_loadu_si128(reinterpret_cast<const __m128i*>(l + 2 * std::uint64_t(chunk))), 2),
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(l + 3 * std::uint64_t(chunk))), 3);
      const __m512i sym = _mm512_add_epi32(lv, sv);
      __m512i xm, rc, bi, cs;
      if constexpr (InRegisters) {
        const __mmask16 upper = _mm512_test_epi32_mask(sym, bit5);
        xm = enc_field(cols[0], sym, upper);
        rc = enc_field(cols[1], sym, upper);
        bi = enc_field(cols[2], sym, upper);
        cs = enc_field(cols[3], sym, upper);
      } else {
        xm = _mm512_i32gather_epi32(sym, x_max, 4);
        rc = _mm512_i32gather_epi32(sym, rcp, 4);
        bi = _mm512_i32gather_epi32(sym, bias, 4);
        cs = _mm512_i32gather_epi32(sym, cmpl_shift, 4);
      }
      const __mmask16 emit = _mm512_cmpge_epu32_mask(x[v], xm);
      emit_lane<0>(x[v], emit, p[4 * v], t);
      emit_lane<1>(x[v], emit, p[4 * v + 1], t);
      emit_lane<2>(x[v], emit, p[4 * v + 2], t);
      emit_lane<3>(x[v], emit, p[4 * v + 3], t);
      const __m512i xs = _mm512_mask_srli_epi32(x[v], emit, x[v], 16);
      const __m512i even = _mm512_srli_epi64(_mm512_mul_epu32(xs, rc), 32);
      const __m512i odd = _mm512_mul_epu32(_mm512_srli_epi64(xs, 32), _mm512_srli_epi64(rc, 32));
      const __m512i hi = _mm512_mask_blend_epi32(static_cast<__mmask16>(0xAAAA), even, odd);
      const __m512i q = _mm512_srlv_epi32(hi, _mm512_srli_epi32(cs, 16));
      x[v] = _mm512_add_epi32(_mm512_add_epi32(xs, bi), _mm512_mullo_epi32(q, _mm512_and_si512(cs, low16)));
    }
  }
  alignas(64) std::uint32_t xs[G][rans_lanes];
  for (int v = 0; v < V; ++v) _mm512_store_si512(xs[4 * v], x[v]);
  for (int k = 0; k < G; ++k) {
    std::uint16_t* q = p[k];
    for (std::uint32_t lane = rans_lanes; lane-- > 0;) {
      *--q = static_cast<std::uint16_t>(xs[k][lane] >> 16);
      *--q = static_cast<std::uint16_t>(xs[k][lane] & 0xFFFFu);
    }
    const std::uint16_t* region_end = scratch_units + (c0 + static_cast<std::uint64_t>(k) + 1) * cap;
    chunk_units[c0 + static_cast<std::uint64_t>(k)] = static_cast<std::uint64_t>(region_end - q);
  }
}

#endif  // QSGD_RANS_SIMD

template <Sink M>
std::uint64_t decode_all(const std::uint64_t* offsets, const std::uint64_t* payload, std::uint64_t first_bit,
                         std::uint64_t payload_bits, const std::uint64_t* dec, SimdTable simd,
                         const std::uint32_t* table32, std::uint32_t precision,
                         const float* scales, std::uint64_t n, std::uint32_t d, std::uint32_t s, std::uint32_t chunk,
                         float weight, float* out, std::int32_t* levels_out) {
  const std::uint64_t nchunks = ceil_div(n, chunk);
  const auto* units = reinterpret_cast<const unsigned char*>(payload);
  std::uint64_t first_bad = no_index;
  // Chunk c's stream [start, end) in bits, and whether its framing is sound.
  const auto framed_at = [&](std::uint64_t c, std::uint64_t& start, std::uint64_t& end) {
    start = offsets[c];
    end = c + 1 < nchunks ? offsets[c + 1] : payload_bits;
    return !((c == 0 && start != first_bit) || start > end || end > payload_bits || (start & 15) || (end & 15) ||
             end - start < 16 * std::uint64_t(rans_state_units));
  };
  std::uint64_t c = 0;
  (void)simd, (void)table32;  // used by the SIMD decoder only
#ifdef QSGD_RANS_SIMD
  // Whole chunks in groups of simd_chunks on the SIMD decoder, when the CPU
  // has the instructions (simd not none), and buckets and chunks are whole
  // rounds of four coordinates.
  if (simd != SimdTable::none && d % rans_lanes == 0 && chunk % rans_lanes == 0) {
    constexpr int G = simd_chunks;
    const std::uint64_t whole = n / chunk;
    for (; c + G <= whole; c += G) {
      std::uint64_t p[G], pend[G];
      bool framed = true;
      for (int k = 0; k < G; ++k) {
        std::uint64_t start, end;
        framed = framed_at(c + static_cast<std::uint64_t>(k), start, end) && framed;
        p[k] = start >> 4;
        pend[k] = end >> 4;
      }
      if (!framed) break;  // the chunk-by-chunk loop below reports it
      bool bad[G];
      if (simd == SimdTable::packed)
        simd_group_zmm<M, false>(units, p, pend, table32, dec, precision, scales, c, chunk, d, s, weight, out,
                                 levels_out, bad);
      else
        simd_group_zmm<M, true>(units, p, pend, table32, dec, precision, scales, c, chunk, d, s, weight, out,
                                levels_out, bad);
      for (int k = 0; k < G; ++k)
        if (bad[k]) first_bad = std::min(first_bad, c + static_cast<std::uint64_t>(k));
    }
  }
#endif
  for (; c < nchunks; ++c) {
    const std::uint64_t i0 = c * chunk;
    const std::uint64_t i1 = std::min<std::uint64_t>(i0 + chunk, n);
    std::uint64_t start, end;
    const bool framed = framed_at(c, start, end);
    if (!framed || !decode_chunk<M>(units, start >> 4, end >> 4, dec, precision, scales, i0, i1, d, s, weight, out,
                                    levels_out))
      first_bad = std::min(first_bad, c);
  }
  return first_bad;
}

struct Scratch {
  std::vector<std::uint64_t> hist;  // 4 sub-histograms: consecutive equal symbols do not wait on one counter
  std::vector<std::uint32_t> table32;  // the SIMD decoder's packed table
  std::vector<std::uint32_t> enc_soa;  // the SIMD encoder's tables: x_max, rcp, bias, cmpl | shift << 16
};

Scratch& scratch() {
  static thread_local Scratch s;
  return s;
}

}  // namespace

bool enabled() { return little_endian && simd::host_paths_enabled(); }

const char* decoder_isa() {
  if (!enabled()) return "off";
#ifdef QSGD_RANS_SIMD
  if (simd_supported()) return "avx512bw";
#endif
  return "scalar";
}

namespace {
SimdTable simd_table(std::uint32_t precision, std::uint32_t s) {
  if (!enabled()) return SimdTable::none;
#ifdef QSGD_RANS_SIMD
  if (!simd_supported()) return SimdTable::none;
  return precision <= simd_max_precision && 2 * std::uint64_t(s) + 1 <= simd_max_alphabet ? SimdTable::packed
                                                                                           : SimdTable::wide;
#else
  (void)precision, (void)s;
  return SimdTable::none;
#endif
}
}  // namespace

const char* decoder_table(std::uint32_t precision, std::uint32_t s) {
  switch (simd_table(precision, s)) {
    case SimdTable::packed: return "packed";
    case SimdTable::wide: return "wide";
    case SimdTable::none: break;
  }
  return "none";
}

constexpr std::uint64_t histogram_prefetch = 1024;  // levels ahead

std::uint64_t histogram(const std::int32_t* levels, std::uint64_t n, std::uint32_t s, std::uint64_t* counts) {
  const std::uint64_t alphabet = 2 * std::uint64_t(s) + 1;
  std::vector<std::uint64_t>& h = scratch().hist;
  if (h.size() < 4 * alphabet) h.resize(4 * alphabet);
  std::fill(h.begin(), h.begin() + static_cast<std::ptrdiff_t>(4 * alphabet), 0);
  std::uint64_t bad = 0;
  const std::uint32_t top = 2 * s;
  std::uint64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    if ((i & 15) == 0) __builtin_prefetch(levels + i + histogram_prefetch);
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
  std::uint64_t c = 0;
#ifdef QSGD_RANS_SIMD
  // Whole chunks in groups of simd_chunks on the SIMD encoder.
  const std::uint64_t alphabet = 2 * std::uint64_t(s) + 1;
  if (simd_supported() && chunk % rans_lanes == 0 && n / chunk >= static_cast<std::uint64_t>(simd_chunks)) {
    // Four columns; of 64 entries (zero-padded) when they fit in registers.
    const bool in_registers = alphabet <= 64;
    const std::uint64_t stride = in_registers ? 64 : alphabet;
    std::vector<std::uint32_t>& soa = scratch().enc_soa;
    soa.assign(4 * stride, 0);
    for (std::uint64_t k = 0; k < alphabet; ++k) {
      soa[k] = enc[k].x_max;
      soa[stride + k] = enc[k].rcp;
      soa[2 * stride + k] = enc[k].bias;
      soa[3 * stride + k] = std::uint32_t(enc[k].cmpl) | (std::uint32_t(enc[k].shift) << 16);
    }
    const std::uint64_t whole = n / chunk;
    for (; c + simd_chunks <= whole; c += simd_chunks)
      (in_registers ? simd_encode_group<true> : simd_encode_group<false>)(
          levels, c, chunk, s, soa.data(), soa.data() + stride, soa.data() + 2 * stride, soa.data() + 3 * stride,
          scratch_units, cap, chunk_units);
  }
#endif
  for (; c < nchunks; ++c) {
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
  const std::uint32_t* table32 = nullptr;
  // The SIMD decoder runs when the message has at least one group of whole
  // chunks. The packed table costs a pass over its 2^precision slots; a
  // table that does not pack is read as it is, eight bytes a slot.
  const SimdTable simd =
      n / chunk >= static_cast<std::uint64_t>(simd_chunks) ? simd_table(precision, s) : SimdTable::none;
#ifdef QSGD_RANS_SIMD
  if (simd == SimdTable::packed) {
    const std::uint64_t slots = std::uint64_t(1) << precision;
    std::vector<std::uint32_t>& t = scratch().table32;
    t.resize(slots);
    for (std::uint64_t k = 0; k < slots; ++k) t[k] = pack_entry(dec[k]);
    table32 = t.data();
  }
#endif
  switch (mode) {
    case Sink::values:
      return decode_all<Sink::values>(offsets, payload, first_bit, payload_bits, dec, simd, table32, precision, scales,
                                      n, d, s, chunk, weight, out, levels_out);
    case Sink::accumulate:
      return decode_all<Sink::accumulate>(offsets, payload, first_bit, payload_bits, dec, simd, table32, precision,
                                          scales, n, d, s, chunk, weight, out, levels_out);
    case Sink::levels:
      return decode_all<Sink::levels>(offsets, payload, first_bit, payload_bits, dec, simd, table32, precision, scales,
                                      n, d, s, chunk, weight, out, levels_out);
    case Sink::add_levels:
      return decode_all<Sink::add_levels>(offsets, payload, first_bit, payload_bits, dec, simd, table32, precision,
                                          scales, n, d, s, chunk, weight, out, levels_out);
    case Sink::validate: break;
  }
  return decode_all<Sink::validate>(offsets, payload, first_bit, payload_bits, dec, simd, table32, precision, scales,
                                    n, d, s, chunk, weight, out, levels_out);
}

}  // namespace qsgd::detail::rans_host
