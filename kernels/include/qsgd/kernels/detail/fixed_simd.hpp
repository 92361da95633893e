#pragma once
// Host SIMD paths of the fixed-width code (spec section 2) for the Serial
// backend: fused quantize + pack, and unpack + decode(-accumulate), 64
// coordinates per step held in vector registers.
//
// Purpose: the same words and the same accumulated bits as the portable
//   kernels of fixed_width.hpp (encode_fixed_group / decode_fixed_group), at
//   memory speed. Tests compare both paths bit for bit.
// Algorithm (AVX-512 F/BW/VBMI, widths b = 2..8, i.e. s = 1..127): the
//   encoder computes each bucket's scale just before quantizing it, so the
//   input is read from DRAM once (the portable path reads it twice); 16 lanes
//   compute the levels with the same counter-based draws and the same rounded
//   float operations as quantize_segment; 64 codes are narrowed to bytes,
//   merged pairwise into 16-, 32- and 64-bit lanes (the first code most
//   significant), and one byte permutation (vpermb) puts the 8 runs of 8b
//   bits into the b words of the MSB-first stream. Decoding runs the same
//   steps backwards and validates every code before the group touches the
//   output. Groups that span two buckets, the tail group, buckets whose scale
//   needs the slow arithmetic (divide-first or a tiny unit) and widths above 8
//   use the portable per-group code.
// Choice: at run time, once (__builtin_cpu_supports); the environment
//   variable QSGD_SIMD=portable, or set_simd_enabled(false), forces the
//   portable kernels. fixed_isa() names the path in use; benchmarks record it.

#include <cstdint>

#include "qsgd/kernels/config.hpp"
#include "qsgd/kernels/counter_rng.hpp"

namespace qsgd::detail::simd {

enum class FixedSink { values, accumulate, validate, add_levels };

// "avx512-vbmi" or "portable": the path the next call will take.
const char* fixed_isa();

// Enables (default, unless QSGD_SIMD=portable) or disables every host path
// (this SIMD path and rans_host.hpp's); returns the previous setting. Not
// thread-safe against concurrent codec calls.
bool set_simd_enabled(bool on);

// The setting above, whatever the CPU supports.
bool host_paths_enabled();

enum class EncodeStatus { not_applicable, done, bad_input };

// Fused scales + stochastic quantize + fixed-width pack of v[0, n): writes
// the bucket scales (the values bucket_scales gives) and the payload.
// not_applicable: no SIMD path for this width or CPU, nothing written; the
// caller runs the portable kernels. bad_input: a coordinate is NaN/Inf or an
// L2 norm overflows; scales and payload are unspecified, and the caller
// reports the error (compute_scales names the element or bucket).
// Coordinate i draws with index i + index_offset (see quantize()).
// scales_given: scales[] already holds every bucket's scale (each at least
// its bucket's largest magnitude: shared-scale aggregation); they are used as
// they are and v is not checked (bad_input is not returned).
EncodeStatus encode_fixed_stochastic(const float* v, float* scales, std::uint64_t n, std::uint32_t d, std::uint32_t s,
                                     Norm norm, const StreamKey& key, std::uint64_t index_offset,
                                     std::uint64_t* payload, bool scales_given = false);

// Fused scales + stochastic quantize of v[0, n) into signed levels: the
// scales and levels quantize() gives (Q_s, spec section 1), the same 16-lane
// arithmetic as the encoder above, without the packing. not_applicable: no
// SIMD path on this CPU (or disabled), nothing written. bad_input: as for
// encode_fixed_stochastic. Coordinate i draws with index i + index_offset.
EncodeStatus quantize_stochastic(const float* v, float* scales, std::int32_t* levels, std::uint64_t n, std::uint32_t d,
                                 std::uint32_t s, Norm norm, const StreamKey& key, std::uint64_t index_offset);

// Decodes the payload of n coordinates: values (out[i] = value),
// accumulate (out[i] += weight * value), add_levels (levels[i] += level) or
// validate (out and levels unused). Groups with
// an invalid code are skipped, as in the portable kernel; *first_bad receives
// the first coordinate of the first such group, or ~0. Returns false (nothing
// done) when no SIMD path applies.
bool decode_fixed(const std::uint64_t* payload, const float* scales, std::uint64_t n, std::uint32_t d, std::uint32_t s,
                  FixedSink mode, float weight, float* out, std::int32_t* levels, std::uint64_t* first_bad);

}  // namespace qsgd::detail::simd
