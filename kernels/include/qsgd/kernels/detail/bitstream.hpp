#pragma once
// Bit-level writing and reading for the wire codes.
//
// Bit order: MSB first. Stream bit k is bit (63 - k % 64) of 64-bit word
// k / 64. A codeword of `len` bits is held as an integer whose most
// significant of those bits is sent first, which is how Elias codes are
// defined (a prefix code read from its first bit).

#include <Kokkos_Core.hpp>
#include <cstdint>

#include "qsgd/kernels/detail/arith.hpp"

namespace qsgd::detail {

// ---- Elias omega (spec section 2) -----------------------------------------
// omega(k), k >= 1: write "0"; while k > 1, prepend binary(k), k = bits(k)-1.
// Returned as (value, length) with the first bit most significant. For
// k < 2^32 the length is at most 1 + 33 + 6 + 3 + 2 = 45 bits.
struct Codeword {
  std::uint64_t bits;
  std::uint32_t len;
};

KOKKOS_INLINE_FUNCTION Codeword omega_encode(std::uint64_t k) {
  std::uint64_t code = 0;
  std::uint32_t len = 1;  // the terminating 0
  while (k > 1) {
    const std::uint32_t w = bit_width64(k);
    code |= k << len;
    len += w;
    k = w - 1;
  }
  return Codeword{code, len};
}

KOKKOS_INLINE_FUNCTION std::uint32_t omega_length(std::uint64_t k) {
  std::uint32_t len = 1;
  while (k > 1) {
    const std::uint32_t w = bit_width64(k);
    len += w;
    k = w - 1;
  }
  return len;
}

// ---- Writer ---------------------------------------------------------------
// Writes a contiguous bit range [start, end) of a word array. Words entirely
// inside the range are stored plainly; the (at most two) words shared with a
// neighbouring range are merged with an atomic OR and must be zero before any
// writer touches them.
template <class WordView>
struct BitWriter {
  WordView words;
  std::uint64_t start, end, pos;
  std::uint64_t acc = 0;   // pending bits, left-aligned
  std::uint32_t fill = 0;  // number of pending bits in acc

  KOKKOS_INLINE_FUNCTION BitWriter(const WordView& w, std::uint64_t start_, std::uint64_t end_)
      : words(w), start(start_), end(end_), pos(start_), fill(static_cast<std::uint32_t>(start_ & 63)) {}

  KOKKOS_INLINE_FUNCTION void flush_word(std::uint64_t word_index, std::uint64_t value) const {
    const std::uint64_t first_bit = word_index * 64;
    if (first_bit >= start && first_bit + 64 <= end) {
      words(word_index) = value;
    } else {
      Kokkos::atomic_fetch_or(reinterpret_cast<unsigned long long*>(&words(word_index)),
                              static_cast<unsigned long long>(value));
    }
  }

  // Appends the low `len` bits of v (len <= 64, higher bits of v zero).
  KOKKOS_INLINE_FUNCTION void put(std::uint64_t v, std::uint32_t len) {
    if (len == 0) return;
    const std::uint32_t room = 64 - fill;
    if (len < room) {
      acc |= v << (room - len);
      fill += len;
    } else {
      const std::uint32_t rest = len - room;  // bits that go to the next word
      acc |= (rest == 64) ? 0 : (v >> rest);
      flush_word((pos + len - 1 - rest) >> 6, acc);
      acc = rest == 0 ? 0 : (v << (64 - rest));
      fill = rest;
    }
    pos += len;
  }

  // Writes the last partial word, if any.
  KOKKOS_INLINE_FUNCTION void finish() {
    if (fill > 0) flush_word((pos - 1) >> 6, acc);
    fill = 0;
  }
};

// ---- Reader ---------------------------------------------------------------
// Reads the bit range [start, end) of a word array. Reading past `end` sets
// `overrun` and returns zeros; it never touches a word outside the range.
template <class WordView>
struct BitReader {
  WordView words;
  std::uint64_t pos, end;
  bool overrun = false;

  KOKKOS_INLINE_FUNCTION BitReader(const WordView& w, std::uint64_t start, std::uint64_t end_)
      : words(w), pos(start), end(end_) {}

  KOKKOS_INLINE_FUNCTION std::uint64_t remaining() const { return end - pos; }

  // The next `len` bits (1 <= len <= 64) without consuming them. Requires
  // len <= remaining(): no word outside the range is read.
  KOKKOS_INLINE_FUNCTION std::uint64_t peek(std::uint32_t len) const {
    const std::uint64_t w = pos >> 6;
    const std::uint32_t off = static_cast<std::uint32_t>(pos & 63);
    std::uint64_t hi = words(w) << off;
    if (off + len > 64) hi |= words(w + 1) >> (64 - off);
    return hi >> (64 - len);
  }

  // Next `len` bits (1 <= len <= 64) as an integer, first bit most significant.
  KOKKOS_INLINE_FUNCTION std::uint64_t get(std::uint32_t len) {
    if (len > end - pos) {
      overrun = true;
      pos = end;
      return 0;
    }
    const std::uint64_t w = pos >> 6;
    const std::uint32_t off = static_cast<std::uint32_t>(pos & 63);
    std::uint64_t hi = words(w) << off;
    if (off + len > 64) hi |= words(w + 1) >> (64 - off);
    pos += len;
    return len == 64 ? hi : (hi >> (64 - len));
  }

  // Decodes one omega codeword; values above `limit` (or codewords longer
  // than a 64-bit value) are reported as corrupt by returning 0.
  KOKKOS_INLINE_FUNCTION std::uint64_t omega(std::uint64_t limit) {
    std::uint64_t nval = 1;
    for (int guard = 0; guard < 8; ++guard) {
      if (get(1) == 0) return overrun || nval > limit ? 0 : nval;
      if (nval >= 63) return 0;
      // A leading 1 plus nval more bits form the next value.
      const std::uint64_t rest = get(static_cast<std::uint32_t>(nval));
      nval = (std::uint64_t(1) << nval) | rest;
      if (overrun) return 0;
    }
    return 0;
  }
};

}  // namespace qsgd::detail
