#pragma once
// Message checksum: a CRC32C tree.
//
// Purpose: detect corruption of a whole message with CRC32C strength while
//   checking blocks in parallel.
// Algorithm: the message is cut into blocks: block 0 is the header's first
//   60 bytes (the checksum field excluded), then blocks of 64 KiB starting at
//   byte 64. Each block gets its own CRC32C (Castagnoli, reflected, init and
//   final xor 0xFFFFFFFF); the checksum is the CRC32C of the concatenated block
//   CRCs (4 bytes each, little-endian). One block per thread.
// Cost: reads the message once; the final combine reads 4 bytes per 64 KiB.
// Requirements: the message is a whole number of 64-bit words.
//   On the host the SSE4.2 crc32 instruction is used when the CPU has it
//   (chosen at run time; four interleaved runs combined by zero-shift
//   tables on long inputs, three to four times one stream's speed); elsewhere a
//   256-entry table held in a View.

#include <Kokkos_Core.hpp>
#include <cstddef>
#include <cstdint>

#include "qsgd/kernels/message.hpp"

namespace qsgd {

constexpr std::size_t checksum_block_bytes = 64 * 1024;

namespace detail {
// Host paths (src/crc32c.cpp): hardware when available, else slicing table.
std::uint32_t crc32c_host(std::uint32_t crc, const unsigned char* p, std::size_t len);
// The table path alone (tests compare the hardware path against it).
std::uint32_t crc32c_host_portable(std::uint32_t crc, const unsigned char* p, std::size_t len);
// Names the host path in use (benchmarks record it).
const char* crc32c_host_isa();
const std::uint32_t* crc32c_table();  // 256 entries, reflected polynomial 0x82F63B78

template <class TableView>
KOKKOS_INLINE_FUNCTION std::uint32_t crc32c_update(std::uint32_t crc, const unsigned char* p, std::size_t len,
                                                   const TableView& table) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  for (std::size_t i = 0; i < len; ++i) crc = table((crc ^ p[i]) & 0xFFu) ^ (crc >> 8);
  return crc;
#else
  (void)table;
  return crc32c_host(crc, p, len);
#endif
}

inline std::uint32_t crc32c_bytes_host(const unsigned char* p, std::size_t len) {
  return ~crc32c_host(0xFFFFFFFFu, p, len);
}
}  // namespace detail

// Checksum of a message held in `words` (total_bytes long), computed in the
// execution space. `block_crcs` is scratch of at least checksum_blocks() entries.
inline std::size_t checksum_blocks(std::size_t total_bytes) {
  return 1 + (total_bytes > header_bytes ? (total_bytes - header_bytes + checksum_block_bytes - 1) / checksum_block_bytes : 0);
}

// Bytes [begin, begin + len) of checksum block b: block 0 is the header up
// to its checksum field, then the rest of the message in blocks of
// checksum_block_bytes (the last one shorter).
KOKKOS_INLINE_FUNCTION void checksum_block_range(std::size_t b, std::size_t total_bytes, std::size_t& begin,
                                                 std::size_t& len) {
  if (b == 0) {
    begin = 0;
    len = checksum_offset;
  } else {
    begin = header_bytes + (b - 1) * checksum_block_bytes;
    len = total_bytes - begin < checksum_block_bytes ? total_bytes - begin : checksum_block_bytes;
  }
}

template <class ExecSpace, class WordView, class ScratchView, class TableView>
std::uint32_t message_checksum(const ExecSpace& exec, const WordView& words, std::size_t total_bytes,
                               const ScratchView& block_crcs, const TableView& table) {
  const std::size_t nblocks = checksum_blocks(total_bytes);
  Kokkos::parallel_for(
      "qsgd::checksum[crc32c-tree]", Kokkos::RangePolicy<ExecSpace>(exec, 0, nblocks),
      KOKKOS_LAMBDA(std::size_t b) {
        const unsigned char* base = reinterpret_cast<const unsigned char*>(words.data());
        std::size_t begin, len;
        checksum_block_range(b, total_bytes, begin, len);
        block_crcs(b) = ~detail::crc32c_update(0xFFFFFFFFu, base + begin, len, table);
      });
  std::uint32_t result = 0;
  Kokkos::parallel_reduce(
      "qsgd::checksum[combine]", Kokkos::RangePolicy<ExecSpace>(exec, 0, 1),
      KOKKOS_LAMBDA(int, std::uint32_t& out) {
        std::uint32_t crc = 0xFFFFFFFFu;
        for (std::size_t b = 0; b < nblocks; ++b) {
          const std::uint32_t v = block_crcs(b);
          const unsigned char le[4] = {static_cast<unsigned char>(v), static_cast<unsigned char>(v >> 8),
                                       static_cast<unsigned char>(v >> 16), static_cast<unsigned char>(v >> 24)};
          crc = detail::crc32c_update(crc, le, 4, table);
        }
        out = ~crc;
      },
      result);
  return result;
}

// The same checksum computed sequentially on host memory (reference, tests).
std::uint32_t message_checksum_host(const void* data, std::size_t total_bytes);

}  // namespace qsgd
