#pragma once
// Where decoded coordinates go. A decoder calls put(i, level, unit) for each
// coded coordinate, zero(i) for coordinates a sparse code skips, and
// put_value(i, x) for the float baselines. Three sinks: signed levels (for
// tests and re-encoding), values, and the fused weighted accumulation that the
// exchange strategies use. writes_zeros: whether zero(i) writes anything.

#include <Kokkos_Core.hpp>
#include <cstdint>

#include "qsgd/kernels/detail/arith.hpp"
#include "qsgd/kernels/quantize.hpp"

namespace qsgd::detail {

template <class LevelsView>
struct LevelSink {
  static constexpr bool writes_zeros = true;
  LevelsView levels;
  KOKKOS_INLINE_FUNCTION void put(std::uint64_t i, std::int32_t l, const LevelUnit&) const { levels(i) = l; }
  KOKKOS_INLINE_FUNCTION void zero(std::uint64_t i) const { levels(i) = 0; }
  KOKKOS_INLINE_FUNCTION void put_value(std::uint64_t, float) const {}
};

// levels(i) <- levels(i) + level: sums of levels quantized against shared
// scales (shared-scale aggregation). Uncoded coordinates are level 0: no-op.
template <class LevelsView>
struct LevelAddSink {
  static constexpr bool writes_zeros = false;
  LevelsView levels;
  KOKKOS_INLINE_FUNCTION void put(std::uint64_t i, std::int32_t l, const LevelUnit&) const { levels(i) += l; }
  KOKKOS_INLINE_FUNCTION void zero(std::uint64_t) const {}
  KOKKOS_INLINE_FUNCTION void put_value(std::uint64_t, float) const {}
};

template <class OutView>
struct ValueSink {
  static constexpr bool writes_zeros = true;
  OutView out;
  KOKKOS_INLINE_FUNCTION void put(std::uint64_t i, std::int32_t l, const LevelUnit& unit) const {
    out(i) = unit.value(l);
  }
  KOKKOS_INLINE_FUNCTION void zero(std::uint64_t i) const { out(i) = 0.0f; }
  KOKKOS_INLINE_FUNCTION void put_value(std::uint64_t i, float x) const { out(i) = x; }
};

// acc(i) <- acc(i) + weight * value(i), each operation rounded once.
template <class AccView>
struct AccumulateSink {
  static constexpr bool writes_zeros = false;
  AccView acc;
  float weight;
  KOKKOS_INLINE_FUNCTION void put(std::uint64_t i, std::int32_t l, const LevelUnit& unit) const {
    acc(i) = add_rn(acc(i), mul_rn(weight, unit.value(l)));
  }
  KOKKOS_INLINE_FUNCTION void zero(std::uint64_t) const {}
  KOKKOS_INLINE_FUNCTION void put_value(std::uint64_t i, float x) const {
    acc(i) = add_rn(acc(i), mul_rn(weight, x));
  }
};

// Discards everything: decoding with it only validates.
struct NullSink {
  static constexpr bool writes_zeros = false;
  KOKKOS_INLINE_FUNCTION void put(std::uint64_t, std::int32_t, const LevelUnit&) const {}
  KOKKOS_INLINE_FUNCTION void zero(std::uint64_t) const {}
  KOKKOS_INLINE_FUNCTION void put_value(std::uint64_t, float) const {}
};

// A sink whose zeros were all written beforehand (zero_all): its zero()
// does nothing, so a sparse decoder's thread only puts the non-zeros.
template <class Sink>
struct ZerosWritten {
  static constexpr bool writes_zeros = false;
  Sink sink;
  KOKKOS_INLINE_FUNCTION void put(std::uint64_t i, std::int32_t l, const LevelUnit& unit) const {
    sink.put(i, l, unit);
  }
  KOKKOS_INLINE_FUNCTION void zero(std::uint64_t) const {}
  KOKKOS_INLINE_FUNCTION void put_value(std::uint64_t i, float x) const { sink.put_value(i, x); }
};

// sink.zero(i) for every coordinate, a thread per coordinate.
template <class ExecSpace, class Sink>
void zero_all(const ExecSpace& exec, std::uint64_t n, const Sink& sink) {
  Kokkos::parallel_for(
      "qsgd::decode::zeros", Kokkos::RangePolicy<ExecSpace>(exec, 0, n),
      KOKKOS_LAMBDA(std::uint64_t i) { sink.zero(i); });
}

}  // namespace qsgd::detail
