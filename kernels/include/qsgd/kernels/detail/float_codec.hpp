#pragma once
// Conversions for the uncompressed baselines: IEEE binary16 and bfloat16,
// both round to nearest even, written with integer operations only so that
// every backend produces the same bits.

#include <Kokkos_Core.hpp>
#include <cstdint>

#include "qsgd/kernels/config.hpp"
#include "qsgd/kernels/detail/arith.hpp"

namespace qsgd::detail {

// float -> binary16, round to nearest even (after F. Giesen's
// float_to_half_fast3_rtne). Values that round beyond 65504 become Inf.
KOKKOS_INLINE_FUNCTION std::uint16_t float_to_half(float x) {
  std::uint32_t f = float_bits(x);
  const std::uint32_t sign = f & 0x80000000u;
  f ^= sign;
  std::uint32_t o;
  if (f >= (127u + 16u) << 23) {  // >= 65536, Inf or NaN
    o = f > (255u << 23) ? 0x7e00u : 0x7c00u;
  } else if (f < 113u << 23) {  // result is subnormal or zero
    const std::uint32_t denorm_magic = ((127u - 15u) + (23u - 10u) + 1u) << 23;
    const float r = add_rn(bits_float(f), bits_float(denorm_magic));
    o = float_bits(r) - denorm_magic;
  } else {
    const std::uint32_t mant_odd = (f >> 13) & 1u;
    f += ((15u - 127u) << 23) + 0xfffu;
    f += mant_odd;
    o = f >> 13;
  }
  return static_cast<std::uint16_t>(o | (sign >> 16));
}

KOKKOS_INLINE_FUNCTION float half_to_float(std::uint16_t h) {
  const std::uint32_t shifted_exp = 0x7c00u << 13;
  std::uint32_t o = (static_cast<std::uint32_t>(h) & 0x7fffu) << 13;
  const std::uint32_t exp = shifted_exp & o;
  o += (127u - 15u) << 23;
  if (exp == shifted_exp) {
    o += (128u - 16u) << 23;
  } else if (exp == 0) {
    o += 1u << 23;
    o = float_bits(add_rn(bits_float(o), -bits_float(113u << 23)));
  }
  return bits_float(o | ((static_cast<std::uint32_t>(h) & 0x8000u) << 16));
}

// float -> bfloat16, round to nearest even; NaN stays NaN.
KOKKOS_INLINE_FUNCTION std::uint16_t float_to_bf16(float x) {
  const std::uint32_t u = float_bits(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
  return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

KOKKOS_INLINE_FUNCTION float bf16_to_float(std::uint16_t b) {
  return bits_float(static_cast<std::uint32_t>(b) << 16);
}

/*
 * encode_float_values / decode_float_values (the uncompressed baselines)
 * Purpose: fp32 copy, or fp16 / bf16 conversion, into a little-endian array.
 * Cost: reads 4n bytes, writes 4n or 2n bytes (and the reverse to decode).
 * Return the first element that is not finite or overflows the format, or
 * no_index. Decoding hands each value to the sink.
 */
template <class ExecSpace, class VView, class WordView>
std::uint64_t encode_float_values(const ExecSpace& exec, CodecKind codec, const VView& v, std::uint64_t n,
                                  const WordView& payload) {
  std::uint64_t bad = ~std::uint64_t(0);
  Kokkos::parallel_reduce(
      codec == CodecKind::fp32 ? "qsgd::encode[fp32]" : codec == CodecKind::fp16 ? "qsgd::encode[fp16]" : "qsgd::encode[bf16]",
      Kokkos::RangePolicy<ExecSpace>(exec, 0, n),
      KOKKOS_LAMBDA(std::uint64_t i, std::uint64_t& first) {
        const float x = v(i);
        bool ok = is_finite_f(x);
        if (codec == CodecKind::fp32) {
          reinterpret_cast<float*>(payload.data())[i] = x;
        } else {
          const std::uint16_t hbits = codec == CodecKind::fp16 ? float_to_half(x) : float_to_bf16(x);
          ok = ok && (hbits & 0x7fffu) < (codec == CodecKind::fp16 ? 0x7c00u : 0x7f80u);
          reinterpret_cast<std::uint16_t*>(payload.data())[i] = hbits;
        }
        if (!ok && i < first) first = i;
      },
      Kokkos::Min<std::uint64_t>(bad));
  return bad;
}

template <class ExecSpace, class WordView, class Sink>
std::uint64_t decode_float_values(const ExecSpace& exec, CodecKind codec, const WordView& payload, std::uint64_t n,
                                  const Sink& sink) {
  std::uint64_t bad = ~std::uint64_t(0);
  Kokkos::parallel_reduce(
      codec == CodecKind::fp32 ? "qsgd::decode[fp32]" : codec == CodecKind::fp16 ? "qsgd::decode[fp16]" : "qsgd::decode[bf16]",
      Kokkos::RangePolicy<ExecSpace>(exec, 0, n),
      KOKKOS_LAMBDA(std::uint64_t i, std::uint64_t& first) {
        float x;
        if (codec == CodecKind::fp32) x = reinterpret_cast<const float*>(payload.data())[i];
        else if (codec == CodecKind::fp16) x = half_to_float(reinterpret_cast<const std::uint16_t*>(payload.data())[i]);
        else x = bf16_to_float(reinterpret_cast<const std::uint16_t*>(payload.data())[i]);
        if (!is_finite_f(x)) {
          if (i < first) first = i;
          return;
        }
        sink.put_value(i, x);
      },
      Kokkos::Min<std::uint64_t>(bad));
  return bad;
}

}  // namespace qsgd::detail
