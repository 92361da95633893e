#pragma once
// Arithmetic with a fixed rounding sequence on every backend.
//
// Bit-identical results across Serial, OpenMP and CUDA need every float
// operation rounded once, in the same order. nvcc contracts a*b+c into an FMA
// by default; the _rn intrinsics forbid that on the device. On the host the
// project compiles in ISO mode, where GCC does not contract.

#include <Kokkos_Core.hpp>
#include <cstdint>

namespace qsgd::detail {

KOKKOS_INLINE_FUNCTION float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

KOKKOS_INLINE_FUNCTION float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

KOKKOS_INLINE_FUNCTION float abs_f(float x) { return x < 0.0f ? -x : x; }

// True for finite x. Written with comparisons only (device-safe, no libm).
KOKKOS_INLINE_FUNCTION bool is_finite_f(float x) {
  return x - x == 0.0f;  // NaN - NaN and Inf - Inf are NaN
}

KOKKOS_INLINE_FUNCTION std::uint32_t float_bits(float x) {
  std::uint32_t u;
  static_assert(sizeof(u) == sizeof(x), "float is 32 bits");
  __builtin_memcpy(&u, &x, sizeof(u));
  return u;
}

KOKKOS_INLINE_FUNCTION float bits_float(std::uint32_t u) {
  float x;
  __builtin_memcpy(&x, &u, sizeof(u));
  return x;
}

// Number of bits needed to write v (bit_width(0) = 0).
KOKKOS_INLINE_FUNCTION std::uint32_t bit_width64(std::uint64_t v) {
#if defined(__CUDA_ARCH__)
  return v == 0 ? 0u : 64u - static_cast<std::uint32_t>(__clzll(static_cast<long long>(v)));
#else
  return v == 0 ? 0u : 64u - static_cast<std::uint32_t>(__builtin_clzll(v));
#endif
}

KOKKOS_INLINE_FUNCTION std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) {
  return (a + b - 1) / b;
}

}  // namespace qsgd::detail

namespace qsgd::detail {
KOKKOS_INLINE_FUNCTION double mul_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
KOKKOS_INLINE_FUNCTION double add_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}
}  // namespace qsgd::detail
