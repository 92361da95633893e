#pragma once
// Conversions for the uncompressed baselines: IEEE binary16 and bfloat16,
// both round to nearest even, written with integer operations only so that
// every backend produces the same bits.

#include <Kokkos_Core.hpp>
#include <cstdint>

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

}  // namespace qsgd::detail
