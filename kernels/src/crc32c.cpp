// CRC32C on the host: the SSE4.2 crc32 instruction when the CPU has it,
// chosen once at run time, else a slicing-by-8 table. Both give the same
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
__attribute__((target("sse4.2"))) std::uint32_t crc_hw(std::uint32_t crc, const unsigned char* p, std::size_t len) {
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

crc_fn pick() {
#ifdef QSGD_HAVE_X86_CRC
  __builtin_cpu_init();
  if (__builtin_cpu_supports("sse4.2")) return crc_hw;
#endif
  return crc_sw;
}

}  // namespace

std::uint32_t crc32c_host(std::uint32_t crc, const unsigned char* p, std::size_t len) {
  static const crc_fn fn = pick();
  return fn(crc, p, len);
}

const std::uint32_t* crc32c_table() { return tables().t[0]; }

}  // namespace qsgd::detail
