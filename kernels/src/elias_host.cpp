// Host SIMD path of the Elias dense encoder; see detail/elias_host.hpp.
#include "qsgd/kernels/detail/elias_host.hpp"

#include <Kokkos_Core.hpp>
#include <array>

#include "qsgd/kernels/detail/elias.hpp"
#include "qsgd/kernels/detail/fixed_simd.hpp"

#include "host_x86.hpp"
#ifdef QSGD_HAVE_AVX512_PATH
#define QSGD_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl")))
#endif

namespace qsgd::detail::simd {
namespace {

bool cpu_has_avx512() {
#ifdef QSGD_HAVE_AVX512_PATH
  static const bool yes = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  }();
  return yes;
#else
  return false;
#endif
}

bool applies(std::uint32_t s) { return host_paths_enabled() && cpu_has_avx512() && s <= elias_dense_simd_max_s; }

#ifdef QSGD_HAVE_AVX512_PATH

// Levels ahead of the length and write passes that they ask for: on the
// Intel Xeon machine of results/reference/kernels-prefetch the hardware
// prefetcher alone leaves the write pass waiting on DRAM
// (encode_only/elias-dense 1.55 GB/s without, 6.52 with it at n = 2^24;
// docs/kernels.md, "Prefetching").
constexpr std::uint64_t level_prefetch = 2048;

// Entry a (|l| = a <= s): the codeword without its sign bit's value, shifted
// into place (bits << 8), and its length (low 8 bits); level 0 is "0".
// Entries above s are never read (the caller checks |l| <= s first).
std::array<std::uint32_t, 32> magnitude_table(std::uint32_t s) {
  std::array<std::uint32_t, 32> t{};
  t[0] = 1;
  for (std::uint32_t a = 1; a < 32 && a <= s; ++a) {
    const Codeword c = omega_encode(std::uint64_t(a) + 1);
    t[a] = static_cast<std::uint32_t>((c.bits << 1) << 8) | (c.len + 1);
  }
  return t;
}

// One codeword from the table, or from dense_codeword above it: (bits, len).
struct Scalar {
  const std::array<std::uint32_t, 32>& t;
  std::uint32_t s;
  void get(std::int32_t l, std::uint64_t& bits, std::uint32_t& len) const {
    const std::uint32_t a = l < 0 ? 0u - static_cast<std::uint32_t>(l) : static_cast<std::uint32_t>(l);
    if (a <= s) {
      bits = (t[a] >> 8) | (l < 0 ? 1u : 0u);
      len = t[a] & 0xff;
    } else {
      const std::uint64_t e = dense_codeword(l);
      bits = e >> 6;
      len = static_cast<std::uint32_t>(e & 63);
    }
  }
};

// One MSB-first bit stream over the whole payload (one thread: no word is
// shared). put stores the current word every time instead of branching on
// a full word; 1 <= len <= 63.
struct Stream {
  std::uint64_t* out;
  std::uint64_t w = 0, acc = 0;
  std::uint32_t fill = 0;
  // A run given left-aligned (top: its first bit is bit 63).
  void put_top(std::uint64_t top, std::uint32_t len) {
    const std::uint32_t total = fill + len;
    acc |= top >> fill;
    out[w] = acc;
    const std::uint64_t carry = top << ((64 - fill) & 63);  // the bits past the word (used when total >= 64)
    w += total >> 6;
    acc = total >= 64 ? carry : acc;
    fill = total & 63;
  }
  void put(std::uint64_t v, std::uint32_t len) { put_top(v << (64 - len), len); }
  std::uint64_t bits() const { return 64 * w + fill; }
  void finish() const {
    if (fill > 0) out[w] = acc;
  }
};

// The 16 codewords of levels[i, i + 16) and their lengths (32-bit lanes);
// false when a level is above the table.
QSGD_AVX512 inline bool codewords16(const std::int32_t* levels, __m512i tab_lo, __m512i tab_hi, __m512i smax,
                                    __m512i& bits, __m512i& len) {
  const __m512i l = _mm512_loadu_si512(levels);
  const __m512i a = _mm512_abs_epi32(l);  // |INT32_MIN| stays 2^31: above the table
  if (_mm512_cmpgt_epu32_mask(a, smax) != 0) return false;
  const __m512i e = _mm512_permutex2var_epi32(tab_lo, a, tab_hi);
  bits = _mm512_or_si512(_mm512_srli_epi32(e, 8), _mm512_srli_epi32(l, 31));
  len = _mm512_and_si512(e, _mm512_set1_epi32(0xff));
  return true;
}

QSGD_AVX512 void lengths_avx512(const std::int32_t* levels, std::uint64_t n, std::uint32_t chunk, std::uint32_t s,
                                std::uint64_t* chunk_len) {
  const auto t = magnitude_table(s);
  const Scalar sc{t, s};
  const __m512i tab_lo = _mm512_loadu_si512(t.data()), tab_hi = _mm512_loadu_si512(t.data() + 16);
  const __m512i smax = _mm512_set1_epi32(static_cast<int>(s));
  const std::uint64_t nchunks = (n + chunk - 1) / chunk;
  for (std::uint64_t c = 0; c < nchunks; ++c) {
    const std::uint64_t i0 = c * chunk, i1 = i0 + chunk < n ? i0 + chunk : n;
    std::uint64_t i = i0;
    __m512i sum = _mm512_setzero_si512();
    for (; i + 16 <= i1; i += 16) {
      __m512i bits, len;
      _mm_prefetch(reinterpret_cast<const char*>(levels + i + level_prefetch), _MM_HINT_T0);
      if (!codewords16(levels + i, tab_lo, tab_hi, smax, bits, len)) break;
      sum = _mm512_add_epi32(sum, len);
    }
    std::uint64_t total = static_cast<std::uint32_t>(_mm512_reduce_add_epi32(sum));
    for (; i < i1; ++i) {
      std::uint64_t b;
      std::uint32_t l;
      sc.get(levels[i], b, l);
      total += l;
    }
    chunk_len[c] = total;
  }
}

QSGD_AVX512 std::uint64_t write_avx512(const std::int32_t* levels, std::uint64_t n, std::uint32_t s,
                                       std::uint64_t* payload) {
  const auto t = magnitude_table(s);
  const Scalar sc{t, s};
  const __m512i tab_lo = _mm512_loadu_si512(t.data()), tab_hi = _mm512_loadu_si512(t.data() + 16);
  const __m512i smax = _mm512_set1_epi32(static_cast<int>(s));
  const __m512i lo32 = _mm512_set1_epi64(0xffffffff);
  const __m512i even = _mm512_setr_epi64(0, 2, 4, 6, 0, 0, 0, 0), odd = _mm512_setr_epi64(1, 3, 5, 7, 0, 0, 0, 0);
  const __m256i sixty4 = _mm256_set1_epi64x(64);
  Stream st{payload};
  alignas(32) std::uint64_t qb[4], qn[4];
  std::uint64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512i bits, len;
    _mm_prefetch(reinterpret_cast<const char*>(levels + i + level_prefetch), _MM_HINT_T0);
    if (!codewords16(levels + i, tab_lo, tab_hi, smax, bits, len)) {
      for (std::uint64_t k = i; k < i + 16; ++k) {
        std::uint64_t b;
        std::uint32_t l;
        sc.get(levels[k], b, l);
        st.put(b, l);
      }
      continue;
    }
    // Pairs (2k, 2k + 1) in 64-bit lanes, the first coordinate (low half) most significant.
    const __m512i pb = _mm512_or_si512(_mm512_sllv_epi64(_mm512_and_si512(bits, lo32), _mm512_srli_epi64(len, 32)),
                                       _mm512_srli_epi64(bits, 32));
    const __m512i pn = _mm512_add_epi64(_mm512_and_si512(len, lo32), _mm512_srli_epi64(len, 32));
    // Quads from pairs (2m, 2m + 1): four runs of at most 4 x 13 bits.
    const __m256i be = _mm512_castsi512_si256(_mm512_permutexvar_epi64(even, pb));
    const __m256i bo = _mm512_castsi512_si256(_mm512_permutexvar_epi64(odd, pb));
    const __m256i ne = _mm512_castsi512_si256(_mm512_permutexvar_epi64(even, pn));
    const __m256i no = _mm512_castsi512_si256(_mm512_permutexvar_epi64(odd, pn));
    const __m256i qlen = _mm256_add_epi64(ne, no);
    const __m256i qrun = _mm256_or_si256(_mm256_sllv_epi64(be, no), bo);
    _mm256_store_si256(reinterpret_cast<__m256i*>(qb), _mm256_sllv_epi64(qrun, _mm256_sub_epi64(sixty4, qlen)));
    _mm256_store_si256(reinterpret_cast<__m256i*>(qn), qlen);
    for (int k = 0; k < 4; ++k) st.put_top(qb[k], static_cast<std::uint32_t>(qn[k]));
  }
  for (; i < n; ++i) {
    std::uint64_t b;
    std::uint32_t l;
    sc.get(levels[i], b, l);
    st.put(b, l);
  }
  st.finish();
  return st.bits();
}

#endif  // QSGD_HAVE_AVX512_PATH

}  // namespace

const char* elias_dense_isa() { return applies(0) ? "avx512" : "portable"; }

bool elias_dense_lengths(const std::int32_t* levels, std::uint64_t n, std::uint32_t chunk, std::uint32_t s,
                         std::uint64_t* chunk_len) {
#ifdef QSGD_HAVE_AVX512_PATH
  if (applies(s) && chunk > 0) {
    lengths_avx512(levels, n, chunk, s, chunk_len);
    return true;
  }
#else
  (void)levels, (void)n, (void)chunk, (void)s, (void)chunk_len;
#endif
  return false;
}

std::uint64_t elias_dense_write(const std::int32_t* levels, std::uint64_t n, std::uint32_t s, std::uint64_t* payload) {
#ifdef QSGD_HAVE_AVX512_PATH
  if (applies(s)) return write_avx512(levels, n, s, payload);
#else
  (void)levels, (void)n, (void)s, (void)payload;
#endif
  return ~std::uint64_t(0);
}

}  // namespace qsgd::detail::simd
