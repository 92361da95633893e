// CRC32C on the host: the SSE4.2 crc32 instruction when the CPU has it (four
// interleaved runs on long inputs), chosen once at run time, else a
// slicing-by-8 table. Both give the same
// value as the device path's byte table.
#include "qsgd/kernels/crc32c.hpp"

#include <array>
#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>
#define QSGD_HAVE_X86_CRC 1
#endif

namespace qsgd::detail {
namespace {

constexpr std::uint32_t poly = 0x82F63B78u;

struct Tables {
  std::uint32_t t[8][256];
  Tables() {
    for (std::uint32_t i = 0; i < 256; ++i) {
      std::uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c >> 1) ^ ((c & 1u) ? poly : 0u);
      t[0][i] = c;
    }
    for (std::uint32_t i = 0; i < 256; ++i)
      for (int s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xFFu];
  }
};

const Tables& tables() {
  static const Tables tab;
  return tab;
}

std::uint32_t crc_sw(std::uint32_t crc, const unsigned char* p, std::size_t len) {
  const auto& t = tables().t;
  while (len >= 8) {
    std::uint64_t w;
    std::memcpy(&w, p, 8);
    w ^= crc;
    crc = t[7][w & 0xFF] ^ t[6][(w >> 8) & 0xFF] ^ t[5][(w >> 16) & 0xFF] ^ t[4][(w >> 24) & 0xFF] ^
          t[3][(w >> 32) & 0xFF] ^ t[2][(w >> 40) & 0xFF] ^ t[1][(w >> 48) & 0xFF] ^ t[0][w >> 56];
    p += 8;
    len -= 8;
  }
  while (len--) crc = t[0][(crc ^ *p++) & 0xFFu] ^ (crc >> 8);
  return crc;
}

#ifdef QSGD_HAVE_X86_CRC
// One crc32 instruction has a latency of about 3 cycles and a throughput of
// one per cycle, so a single stream runs at a third of the unit's speed. Long
// inputs are cut into four equal runs A, B, C, D processed side by side: the
// CRC register is linear in (register, data), so with runs of length L
//   crc(A B) = shift(crc(A), L) ^ crc0(B), and so on for C and D,
// where crc0 starts from a zero register and shift(c, L) is the register
// after feeding L zero bytes from c. shift is linear in c: four 256-entry
// tables per run length give it in four look-ups. The value is the plain
// sequential CRC32C, bit for bit.
struct ShiftTable {
  std::uint32_t t[4][256];
};

__attribute__((target("sse4.2"))) std::uint32_t zeros_hw(std::uint32_t c, std::size_t len) {
  std::uint64_t x = c;
  for (std::size_t i = 0; i < len / 8; ++i) x = _mm_crc32_u64(x, 0);
  return static_cast<std::uint32_t>(x);
}

ShiftTable make_shift(std::size_t len) {
  std::uint32_t basis[32];
  for (int i = 0; i < 32; ++i) basis[i] = zeros_hw(std::uint32_t(1) << i, len);
  ShiftTable st;
  for (int k = 0; k < 4; ++k)
    for (std::uint32_t b = 0; b < 256; ++b) {
      std::uint32_t v = 0;
      for (int i = 0; i < 8; ++i)
        if (b & (1u << i)) v ^= basis[8 * k + i];
      st.t[k][b] = v;
    }
  return st;
}

inline std::uint32_t shift(const ShiftTable& st, std::uint32_t c) {
  return st.t[0][c & 0xFF] ^ st.t[1][(c >> 8) & 0xFF] ^ st.t[2][(c >> 16) & 0xFF] ^ st.t[3][c >> 24];
}

// Run lengths: 4 x 16 KiB is exactly one 64 KiB block of the message
// checksum; shorter runs serve the last, partial block.
constexpr std::size_t run_lengths[3] = {16384, 1024, 128};  // bytes per run, multiples of 64

const ShiftTable& shift_table(int r) {
  static const ShiftTable tabs[3] = {make_shift(run_lengths[0]), make_shift(run_lengths[1]),
                                     make_shift(run_lengths[2])};
  return tabs[r];
}

__attribute__((target("sse4.2"))) std::uint32_t crc_hw(std::uint32_t crc, const unsigned char* p, std::size_t len) {
  for (int r = 0; r < 3; ++r) {
    const std::size_t run = run_lengths[r];
    if (len < 4 * run) continue;
    const ShiftTable& st = shift_table(r);
    while (len >= 4 * run) {
      std::uint64_t a = crc, b = 0, c = 0, e = 0;
      for (std::size_t i = 0; i < run; i += 64) {
        // Four strided streams defeat part of the hardware prefetch: ask for
        // the lines 1 KiB ahead of each run (measured best of 512, 1024, 2048).
        __builtin_prefetch(p + i + 1024);
        __builtin_prefetch(p + run + i + 1024);
        __builtin_prefetch(p + 2 * run + i + 1024);
        __builtin_prefetch(p + 3 * run + i + 1024);
        for (std::size_t j = i; j < i + 64; j += 8) {
          std::uint64_t wa, wb, wc, we;
          std::memcpy(&wa, p + j, 8);
          std::memcpy(&wb, p + run + j, 8);
          std::memcpy(&wc, p + 2 * run + j, 8);
          std::memcpy(&we, p + 3 * run + j, 8);
          a = _mm_crc32_u64(a, wa);
          b = _mm_crc32_u64(b, wb);
          c = _mm_crc32_u64(c, wc);
          e = _mm_crc32_u64(e, we);
        }
      }
      std::uint32_t x = shift(st, static_cast<std::uint32_t>(a)) ^ static_cast<std::uint32_t>(b);
      x = shift(st, x) ^ static_cast<std::uint32_t>(c);
      crc = shift(st, x) ^ static_cast<std::uint32_t>(e);
      p += 4 * run;
      len -= 4 * run;
    }
  }
  std::uint64_t c = crc;
  while (len >= 8) {
    std::uint64_t w;
    std::memcpy(&w, p, 8);
    c = _mm_crc32_u64(c, w);
    p += 8;
    len -= 8;
  }
  std::uint32_t c32 = static_cast<std::uint32_t>(c);
  while (len--) c32 = _mm_crc32_u8(c32, *p++);
  return c32;
}
#endif

using crc_fn = std::uint32_t (*)(std::uint32_t, const unsigned char*, std::size_t);

struct Choice {
  crc_fn fn;
  const char* name;
};

Choice pick() {
#ifdef QSGD_HAVE_X86_CRC
  __builtin_cpu_init();
  if (__builtin_cpu_supports("sse4.2")) return {crc_hw, "sse4.2-crc32, 4 interleaved runs"};
#endif
  return {crc_sw, "slicing-by-8 tables"};
}

const Choice& choice() {
  static const Choice c = pick();
  return c;
}

}  // namespace

std::uint32_t crc32c_host(std::uint32_t crc, const unsigned char* p, std::size_t len) {
  return choice().fn(crc, p, len);
}

const char* crc32c_host_isa() { return choice().name; }

std::uint32_t crc32c_host_portable(std::uint32_t crc, const unsigned char* p, std::size_t len) {
  return crc_sw(crc, p, len);
}

const std::uint32_t* crc32c_table() { return tables().t[0]; }

}  // namespace qsgd::detail
