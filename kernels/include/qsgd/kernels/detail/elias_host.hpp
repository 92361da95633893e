#pragma once
// Host SIMD path of the Elias dense encoder (spec section 2) for the Serial
// backend: the code lengths of every chunk and the payload, 16 coordinates
// per step in AVX-512 registers.
//
// Purpose: the same chunk lengths and the same payload words as the portable
//   passes of elias.hpp (plan_elias<false> / write_elias<false>), with fewer
//   instructions per coordinate. Tests compare both paths bit for bit.
// Algorithm (AVX-512 F/BW/DQ/VL, s <= 31): a 32-entry register table indexed
//   by |l| (vpermi2d) gives each coordinate's codeword, omega(|l| + 1) then
//   the sign bit, and its length; lengths are summed per chunk. Writing, the
//   16 codewords of a step (at most 13 bits each) are joined pairwise in
//   registers into four runs of at most 52 bits, first coordinate most
//   significant, and appended to one bit stream: on one thread the chunks'
//   bit ranges follow each other, so the whole payload is one stream and no
//   word is shared. A step holding a level above the table (|l| > s, only
//   from a Quantized built by hand) and the last n % 16 coordinates use the
//   scalar codewords of elias.hpp.
// Choice: at run time with the other host paths (fixed_simd.hpp:
//   set_simd_enabled, QSGD_SIMD=portable); elias_dense_isa() names the path.

#include <cstdint>

namespace qsgd::detail::simd {

// The largest s the SIMD path encodes (a 32-entry table of |l|).
constexpr std::uint32_t elias_dense_simd_max_s = 31;

// "avx512" or "portable": the path the next call with a small s takes.
const char* elias_dense_isa();

// Bits of each chunk of levels[0, n) in the dense code, into chunk_len[c]
// for c < ceil(n / chunk). False (nothing written) when the path does not
// apply (CPU, host paths disabled, s > elias_dense_simd_max_s).
bool elias_dense_lengths(const std::int32_t* levels, std::uint64_t n, std::uint32_t chunk, std::uint32_t s,
                         std::uint64_t* chunk_len);

// The dense code of levels[0, n) as one MSB-first bit stream from bit 0 of
// payload (whose words it overwrites, the last one zero-padded). Returns
// the bits written, or ~0 (nothing written) when the path does not apply.
std::uint64_t elias_dense_write(const std::int32_t* levels, std::uint64_t n, std::uint32_t s, std::uint64_t* payload);

}  // namespace qsgd::detail::simd
