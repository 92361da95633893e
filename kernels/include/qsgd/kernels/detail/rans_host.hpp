#pragma once
// Host paths of the rANS codec (detail/rans.hpp) for the Serial backend:
// plain loops over raw pointers, the four lanes of a chunk unrolled into
// registers, output written bucket segment by bucket segment; on CPUs with
// AVX-512 (F, BW, VL) and VBMI2, a SIMD encoder and decoder that run eight
// whole chunks in lockstep, four per 512-bit vector, one chunk's four lanes
// per 128-bit lane (rans_host.cpp).
// Same words and the same decoded bits as the portable Kokkos kernels
// (tested). Enabled and disabled with the other host paths (fixed_simd.hpp:
// set_simd_enabled, QSGD_SIMD), on little-endian hosts.

#include <cstdint>

#include "qsgd/kernels/detail/fixed_simd.hpp"
#include "qsgd/kernels/detail/rans.hpp"

namespace qsgd::detail::rans_host {

// True when the host paths are enabled (set_simd_enabled / QSGD_SIMD) on a
// little-endian host.
bool enabled();

// Names the path the host rANS decoder (and encoder: the same choice) uses
// for whole chunks on this CPU: "avx512bw" (the SIMD coders, AVX-512 F, BW
// and VL, for messages of at least eight whole chunks with chunk a multiple
// of four; the decoder also needs d a multiple of four), "scalar", or "off"
// (host paths disabled).
const char* decoder_isa();

// The table the SIMD decoder reads for a message of levels s with a table
// of 2^precision slots: "packed" (32 bits a slot: precision <= 12 and at most
// 128 symbols, s <= 63) or "wide" (the decoder's 64-bit entries as they are:
// 8-bit QSGD, shared-scale sums), on a CPU that runs it; "none" otherwise.
const char* decoder_table(std::uint32_t precision, std::uint32_t s);

// Histogram of the symbols l + s of levels[0, n) into counts[0, 2s + 1)
// (zeroed here); returns the number of levels outside [-s, s] (not counted).
std::uint64_t histogram(const std::int32_t* levels, std::uint64_t n, std::uint32_t s, std::uint64_t* counts);

// encode_rans_chunks on the host (same scratch layout and chunk lengths).
void encode_chunks(const std::int32_t* levels, std::uint64_t n, std::uint32_t s, std::uint32_t chunk,
                   const RansEncSym* enc, std::uint16_t* scratch, std::uint64_t* chunk_units);

// write_rans_chunks on the host: chunk c's units to bit offset offsets[c].
void write_chunks(std::uint64_t nchunks, std::uint32_t chunk, const std::uint64_t* offsets,
                  const std::uint64_t* chunk_units, const std::uint16_t* scratch, std::uint64_t* payload);

// decode_rans on the host for the sinks it implements; returns the first bad
// chunk or no_index. levels_out is used by FixedSink-like mode `levels`.
enum class Sink { values, accumulate, validate, levels, add_levels };  // add_levels: levels_out[i] += level
std::uint64_t decode(const std::uint64_t* offsets, const std::uint64_t* payload, std::uint64_t first_bit,
                     std::uint64_t payload_bits, const std::uint64_t* dec, std::uint32_t precision, const float* scales,
                     std::uint64_t n, std::uint32_t d, std::uint32_t s, std::uint32_t chunk, Sink mode, float weight,
                     float* out, std::int32_t* levels_out);

}  // namespace qsgd::detail::rans_host
