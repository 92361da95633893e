#pragma once
// Message checksum: a CRC32C tree.
//
// Purpose: detect corruption of a whole message with CRC32C strength while
//   checking blocks in parallel.
// Algorithm: the message is cut into blocks: block 0 is the header's first
//   60 bytes (the checksum field excluded), then blocks of 64 KiB starting at
//   byte 64. Each block gets its own CRC32C (Castagnoli, reflected, init and
//   final xor 0xFFFFFFFF); the checksum is the CRC32C of the concatenated block
//   CRCs (4 bytes each, little-endian).
// Parallel decomposition: on the host one block per work item (the crc32
//   instruction, below). In device memory (a GPU) one team per block, each
//   thread the CRC of a 1 KiB run from a zero register; the runs are joined by
//   the zero-shift identity crc(A B) = shift(crc(A), |B|) ^ crc0(B), where
//   shift(c, L) = c * x^(8L) mod P is computed by carry-less multiplication
//   (square-and-multiply in GF(2)[x]). Each run's term is shifted by the bytes
//   that follow it and the terms are XORed, an order-free reduction: the
//   value is the sequential CRC32C bit for bit. The combine over the block
//   CRCs is the same identity, one work item per block.
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

// The table-driven register update, on any backend.
template <class TableView>
KOKKOS_INLINE_FUNCTION std::uint32_t crc32c_update_table(std::uint32_t crc, const unsigned char* p, std::size_t len,
                                                         const TableView& table) {
  for (std::size_t i = 0; i < len; ++i) crc = table((crc ^ p[i]) & 0xFFu) ^ (crc >> 8);
  return crc;
}

template <class TableView>
KOKKOS_INLINE_FUNCTION std::uint32_t crc32c_update(std::uint32_t crc, const unsigned char* p, std::size_t len,
                                                   const TableView& table) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  return crc32c_update_table(crc, p, len, table);
#else
  (void)table;
  return crc32c_host(crc, p, len);
#endif
}

inline std::uint32_t crc32c_bytes_host(const unsigned char* p, std::size_t len) {
  return ~crc32c_host(0xFFFFFFFFu, p, len);
}

// GF(2) arithmetic modulo the reflected polynomial: a * b mod P, where bit 31
// is x^0 (the reflected CRC register's order).
constexpr std::uint32_t crc32c_poly = 0x82F63B78u;
KOKKOS_INLINE_FUNCTION std::uint32_t crc32c_multmodp(std::uint32_t a, std::uint32_t b) {
  std::uint32_t p = 0;
  for (std::uint32_t m = 1u << 31; m != 0; m >>= 1) {
    if (a & m) p ^= b;
    b = (b & 1u) ? (b >> 1) ^ crc32c_poly : b >> 1;
  }
  return p;
}

// The register after feeding `len` zero bytes to register c: c * x^(8 len) mod P.
KOKKOS_INLINE_FUNCTION std::uint32_t crc32c_shift(std::uint32_t c, std::uint64_t len) {
  std::uint32_t sq = 1u << 23;  // x^8 (one byte; degree below 32, nothing to reduce)
  for (; len != 0; len >>= 1) {
    if (len & 1u) c = crc32c_multmodp(sq, c);
    sq = crc32c_multmodp(sq, sq);
  }
  return c;
}

// A block CRC as the 4 little-endian bytes the combine feeds.
struct Le32 {
  unsigned char b[4];
  KOKKOS_INLINE_FUNCTION explicit Le32(std::uint32_t v)
      : b{static_cast<unsigned char>(v), static_cast<unsigned char>(v >> 8), static_cast<unsigned char>(v >> 16),
          static_cast<unsigned char>(v >> 24)} {}
};

// XOR as a Kokkos reducer (the join of the zero-shift terms).
struct CrcXor {
  using reducer = CrcXor;
  using value_type = std::uint32_t;
  using result_view_type = Kokkos::View<value_type, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;
  value_type* ref;
  KOKKOS_INLINE_FUNCTION explicit CrcXor(value_type& v) : ref(&v) {}
  KOKKOS_INLINE_FUNCTION void join(value_type& dst, const value_type& src) const { dst ^= src; }
  KOKKOS_INLINE_FUNCTION void join(volatile value_type& dst, const volatile value_type& src) const { dst ^= src; }
  KOKKOS_INLINE_FUNCTION void init(value_type& v) const { v = 0; }
  KOKKOS_INLINE_FUNCTION value_type& reference() const { return *ref; }
  result_view_type view() const { return result_view_type(ref); }
  KOKKOS_INLINE_FUNCTION bool references_scalar() const { return true; }
};

constexpr std::size_t checksum_run_bytes = 1024;  // bytes per thread in the team path
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

// The team path (see the top of this file): one team per block, one thread
// per 1 KiB run, any execution space. message_checksum takes it for device
// memory; tests call it on the host too.
template <class ExecSpace, class WordView, class ScratchView, class TableView>
std::uint32_t message_checksum_teams(const ExecSpace& exec, const WordView& words, std::size_t total_bytes,
                                     const ScratchView& block_crcs, const TableView& table) {
  const std::size_t nblocks = checksum_blocks(total_bytes);
  constexpr std::size_t runs_per_block = checksum_block_bytes / detail::checksum_run_bytes;
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  using Member = typename Policy::member_type;
  // A thread per run on a GPU (64 per full block); a host team is one thread.
  constexpr bool host = Kokkos::SpaceAccessibility<ExecSpace, Kokkos::HostSpace>::accessible;
  const int team = host ? 1 : static_cast<int>(runs_per_block);
  Kokkos::parallel_for(
      "qsgd::checksum[crc32c-teams]", Policy(exec, static_cast<int>(nblocks), team),
      KOKKOS_LAMBDA(const Member& m) {
        const std::size_t b = static_cast<std::size_t>(m.league_rank());
        const unsigned char* base = reinterpret_cast<const unsigned char*>(words.data());
        std::size_t begin, len;
        checksum_block_range(b, total_bytes, begin, len);
        const std::size_t runs = (len + detail::checksum_run_bytes - 1) / detail::checksum_run_bytes;
        std::uint32_t reg = 0;
        Kokkos::parallel_reduce(
            Kokkos::TeamThreadRange(m, runs),
            [&](std::size_t r, std::uint32_t& acc) {
              const std::size_t lo = r * detail::checksum_run_bytes;
              const std::size_t n = len - lo < detail::checksum_run_bytes ? len - lo : detail::checksum_run_bytes;
              acc ^= detail::crc32c_shift(detail::crc32c_update_table(0u, base + begin + lo, n, table), len - lo - n);
            },
            detail::CrcXor(reg));
        Kokkos::single(Kokkos::PerTeam(m), [&]() { block_crcs(b) = ~(reg ^ detail::crc32c_shift(0xFFFFFFFFu, len)); });
      });
  std::uint32_t terms = 0;
  Kokkos::parallel_reduce(
      "qsgd::checksum[combine-teams]", Kokkos::RangePolicy<ExecSpace>(exec, 0, nblocks),
      KOKKOS_LAMBDA(std::size_t b, std::uint32_t& acc) {
        const detail::Le32 le(block_crcs(b));
        acc ^= detail::crc32c_shift(detail::crc32c_update_table(0u, le.b, 4, table), 4 * (nblocks - 1 - b));
      },
      detail::CrcXor(terms));
  return ~(terms ^ detail::crc32c_shift(0xFFFFFFFFu, 4 * nblocks));
}

template <class ExecSpace, class WordView, class ScratchView, class TableView>
std::uint32_t message_checksum(const ExecSpace& exec, const WordView& words, std::size_t total_bytes,
                               const ScratchView& block_crcs, const TableView& table) {
  if constexpr (!Kokkos::SpaceAccessibility<Kokkos::HostSpace, typename WordView::memory_space>::accessible ||
                !Kokkos::SpaceAccessibility<Kokkos::HostSpace, typename ScratchView::memory_space>::accessible) {
    return message_checksum_teams(exec, words, total_bytes, block_crcs, table);
  } else {
    // Host memory: one block per work item, each through the crc32
    // instruction's four interleaved runs (src/crc32c.cpp).
    const std::size_t nblocks = checksum_blocks(total_bytes);
    Kokkos::parallel_for(
        "qsgd::checksum[crc32c-tree]", Kokkos::RangePolicy<ExecSpace>(exec, 0, nblocks),
        KOKKOS_LAMBDA(std::size_t b) {
          const unsigned char* base = reinterpret_cast<const unsigned char*>(words.data());
          std::size_t begin, len;
          checksum_block_range(b, total_bytes, begin, len);
          block_crcs(b) = ~detail::crc32c_update(0xFFFFFFFFu, base + begin, len, table);
        });
    Kokkos::fence();
    std::uint32_t crc = 0xFFFFFFFFu;
    for (std::size_t b = 0; b < nblocks; ++b) {
      const detail::Le32 le(block_crcs(b));
      crc = detail::crc32c_update(crc, le.b, 4, table);
    }
    return ~crc;
  }
}

// The same checksum computed sequentially on host memory (reference, tests).
std::uint32_t message_checksum_host(const void* data, std::size_t total_bytes);

}  // namespace qsgd
