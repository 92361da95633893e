#pragma once
// Quantizers of spec section 1: the stochastic Q_s with L2 or max-norm bucket
// scaling, and the deterministic top-magnitude quantizer for plain gradient
// descent. Both produce a Quantized vector: one float scale per bucket and one
// signed integer level per coordinate (level 0 is never negative).

#include <Kokkos_Core.hpp>
#include <cstdint>
#include <limits>
#include <string>

#include "qsgd/kernels/config.hpp"
#include "qsgd/kernels/counter_rng.hpp"
#include "qsgd/kernels/detail/arith.hpp"
#include "qsgd/kernels/error.hpp"

namespace qsgd {

template <class MemSpace>
struct Quantized {
  using memory_space = MemSpace;
  Kokkos::View<float*, MemSpace> scales;         // >= buckets() entries
  Kokkos::View<std::int32_t*, MemSpace> levels;  // >= n entries, each in [-s, s]
  std::uint64_t n = 0;
  std::uint32_t d = 1;  // bucket size in effect (never 0 here)
  std::uint32_t s = 1;
  Norm norm = Norm::max;
  QuantizerKind kind = QuantizerKind::stochastic;

  std::uint64_t buckets() const { return n == 0 ? 0 : (n + d - 1) / d; }

  // Sets the shape; storage grows only, so steady-state calls do not allocate.
  void reshape(std::uint64_t n_, std::uint32_t d_, std::uint32_t s_, Norm norm_, QuantizerKind kind_) {
    n = n_;
    d = d_ == 0 ? 1 : d_;
    s = s_;
    norm = norm_;
    kind = kind_;
    if (levels.extent(0) < n) levels = Kokkos::View<std::int32_t*, MemSpace>(
        Kokkos::view_alloc(Kokkos::WithoutInitializing, "qsgd::levels"), n);
    if (scales.extent(0) < buckets()) scales = Kokkos::View<float*, MemSpace>(
        Kokkos::view_alloc(Kokkos::WithoutInitializing, "qsgd::scales"), buckets());
  }
};

namespace detail {

constexpr std::uint64_t no_index = ~std::uint64_t(0);

// Per-bucket constants of the stochastic quantizer. factor = s / scale turns a
// magnitude into a level position with one rounded multiply; when scale is so
// small that s / scale overflows, |v| / scale is formed first instead.
struct BucketFactor {
  float factor = 0.0f;
  float s_f = 1.0f;
  float scale = 0.0f;
  bool divide_first = false;

  KOKKOS_INLINE_FUNCTION BucketFactor() = default;
  KOKKOS_INLINE_FUNCTION BucketFactor(float scale_, std::uint32_t s) : s_f(static_cast<float>(s)), scale(scale_) {
    if (scale > 0.0f) {
      factor = s_f / scale;
      divide_first = !is_finite_f(factor);
    }
  }
};

// Q_s of one coordinate (spec section 1): level l = floor(a*s), rounded up with
// probability a*s - l, where a = |v| / scale. Returns the signed level.
KOKKOS_INLINE_FUNCTION std::int32_t stochastic_level(float v, const BucketFactor& b, std::uint32_t s,
                                                     const StreamKey& key, std::uint64_t i) {
  if (!(b.scale > 0.0f)) return 0;
  const float a = abs_f(v);
  const float x = b.divide_first ? mul_rn(a / b.scale, b.s_f) : mul_rn(a, b.factor);
  std::uint32_t l;
  float p;
  if (x >= b.s_f) {  // a == 1 up to rounding: level s exactly
    l = s;
    p = 0.0f;
  } else {
    l = static_cast<std::uint32_t>(x);  // x >= 0: truncation is floor
    p = x - static_cast<float>(l);      // exact
  }
  if (uniform01(key, i) < p) ++l;
  return (v < 0.0f && l != 0) ? -static_cast<std::int32_t>(l) : static_cast<std::int32_t>(l);
}

// Value of a level: sign * l * (scale / s), one division per bucket and one
// rounded multiply per coordinate, identical on every backend.
KOKKOS_INLINE_FUNCTION float bucket_unit(float scale, std::uint32_t s) {
  return scale / static_cast<float>(s);
}

}  // namespace detail

/*
 * bucket_scales
 * Purpose: the scale of every bucket (L2 or max norm) and the first
 *   non-finite coordinate, if any.
 * Algorithm: one team per bucket. Max norm: a team max-reduction
 *   (order-free). L2 norm: 32 fixed lanes each sum squares in double in index
 *   order, then one thread adds the 32 partials in lane order, so the result
 *   is the same bits whatever the team size or backend.
 * Cost: reads 4n bytes, writes 4n/d bytes.
 * Requirements: v.extent(0) >= n; scales.extent(0) >= ceil(n/d).
 * Returns the index of the first NaN/Inf coordinate, or detail::no_index.
 */
template <class ExecSpace, class VView, class SView>
std::uint64_t bucket_scales(const ExecSpace& exec, const VView& v, std::uint64_t n, std::uint32_t d,
                            Norm norm, const SView& scales) {
  using Kokkos::Experimental::sqrt;
  const std::uint64_t nb = n == 0 ? 0 : (n + d - 1) / d;
  std::uint64_t first_bad = detail::no_index;
  if (nb == 0) return first_bad;
  using policy_t = Kokkos::TeamPolicy<ExecSpace>;
  using member_t = typename policy_t::member_type;
  constexpr int lanes = 32;
  policy_t policy(exec, static_cast<int>(nb), Kokkos::AUTO);
  policy.set_scratch_size(0, Kokkos::PerTeam(lanes * sizeof(double)));
  Kokkos::parallel_reduce(
      "qsgd::bucket_scales", policy,
      KOKKOS_LAMBDA(const member_t& m, std::uint64_t& bad) {
        const std::uint64_t b = static_cast<std::uint64_t>(m.league_rank());
        const std::uint64_t begin = b * d;
        const std::uint64_t end = begin + d < n ? begin + d : n;
        const std::uint64_t len = end - begin;
        std::uint64_t team_bad = detail::no_index;
        Kokkos::parallel_reduce(
            Kokkos::TeamThreadRange(m, len),
            [&](std::uint64_t j, std::uint64_t& tb) {
              if (!detail::is_finite_f(v(begin + j)) && begin + j < tb) tb = begin + j;
            },
            Kokkos::Min<std::uint64_t>(team_bad));
        float scale = 0.0f;
        if (norm == Norm::max) {
          float mx = 0.0f;
          Kokkos::parallel_reduce(
              Kokkos::TeamThreadRange(m, len),
              [&](std::uint64_t j, float& acc) {
                const float a = detail::abs_f(v(begin + j));
                if (a > acc) acc = a;
              },
              Kokkos::Max<float>(mx));
          scale = mx;
        } else {
          double* part = static_cast<double*>(m.team_scratch(0).get_shmem(lanes * sizeof(double)));
          Kokkos::parallel_for(Kokkos::TeamThreadRange(m, lanes), [&](int lane) {
            double acc = 0.0;
            for (std::uint64_t j = lane; j < len; j += lanes) {
              const double x = static_cast<double>(v(begin + j));
              acc = detail::add_rn(acc, detail::mul_rn(x, x));
            }
            part[lane] = acc;
          });
          m.team_barrier();
          double sum = 0.0;
          for (int lane = 0; lane < lanes; ++lane) sum = detail::add_rn(sum, part[lane]);
          scale = static_cast<float>(sqrt(sum));
        }
        Kokkos::single(Kokkos::PerTeam(m), [&]() {
          scales(b) = team_bad == detail::no_index ? scale : 0.0f;
          if (team_bad < bad) bad = team_bad;
        });
      },
      Kokkos::Min<std::uint64_t>(first_bad));
  return first_bad;
}

[[noreturn]] void throw_non_finite(std::uint64_t index, const char* where);

/*
 * quantize (stochastic Q_s)
 * Purpose: q = Q_s(v) with bucket scaling, keyed random rounding.
 * Algorithm: bucket_scales, then one team per bucket; each coordinate
 *   computes its level independently (detail::stochastic_level).
 * Cost: reads 8n bytes (two passes over v), writes 4n + 4n/d bytes.
 * Requirements: cfg validated; v finite (else qsgd::Error non_finite_input,
 *   naming the first bad index, and q is left unspecified).
 */
template <class ExecSpace, class VView, class MemSpace>
void quantize(const ExecSpace& exec, const CodecConfig& cfg, const VView& v, std::uint64_t n,
              const RngKey& key, Quantized<MemSpace>& q) {
  if (n > v.extent(0)) throw Error(Errc::invalid_argument, "quantize: n exceeds the input extent");
  const std::uint32_t d = static_cast<std::uint32_t>(effective_bucket(cfg, n));
  q.reshape(n, d, cfg.s, cfg.norm, QuantizerKind::stochastic);
  const auto scales = q.scales;
  const auto levels = q.levels;
  const std::uint64_t bad = bucket_scales(exec, v, n, d, cfg.norm, scales);
  if (bad != detail::no_index) throw_non_finite(bad, "quantize");
  const StreamKey sk = make_stream_key(key);
  const std::uint32_t s = cfg.s;
  using policy_t = Kokkos::TeamPolicy<ExecSpace>;
  using member_t = typename policy_t::member_type;
  Kokkos::parallel_for(
      "qsgd::quantize[stochastic]", policy_t(exec, static_cast<int>(q.buckets()), Kokkos::AUTO),
      KOKKOS_LAMBDA(const member_t& m) {
        const std::uint64_t begin = static_cast<std::uint64_t>(m.league_rank()) * d;
        const std::uint64_t end = begin + d < n ? begin + d : n;
        const detail::BucketFactor bf(scales(m.league_rank()), s);
        Kokkos::parallel_for(Kokkos::TeamThreadRange(m, begin, end), [&](std::uint64_t i) {
          levels(i) = detail::stochastic_level(v(i), bf, s, sk, i);
        });
      });
}

/*
 * dequantize
 * Purpose: out[i] = scale(bucket(i)) * level[i] / s.
 * Cost: reads 4n + 4n/d bytes, writes 4n bytes.
 */
template <class ExecSpace, class MemSpace, class OutView>
void dequantize(const ExecSpace& exec, const Quantized<MemSpace>& q, const OutView& out) {
  if (out.extent(0) < q.n) throw Error(Errc::buffer_too_small, "dequantize: output shorter than n");
  const auto scales = q.scales;
  const auto levels = q.levels;
  const std::uint64_t n = q.n;
  const std::uint32_t d = q.d, s = q.s;
  using policy_t = Kokkos::TeamPolicy<ExecSpace>;
  using member_t = typename policy_t::member_type;
  Kokkos::parallel_for(
      "qsgd::dequantize", policy_t(exec, static_cast<int>(q.buckets()), Kokkos::AUTO),
      KOKKOS_LAMBDA(const member_t& m) {
        const std::uint64_t begin = static_cast<std::uint64_t>(m.league_rank()) * d;
        const std::uint64_t end = begin + d < n ? begin + d : n;
        const float unit = detail::bucket_unit(scales(m.league_rank()), s);
        Kokkos::parallel_for(Kokkos::TeamThreadRange(m, begin, end), [&](std::uint64_t i) {
          out(i) = detail::mul_rn(static_cast<float>(levels(i)), unit);
        });
      });
}

/*
 * quantize_deterministic (spec section 1, for plain gradient descent)
 * Purpose: keep the smallest set I of largest-magnitude coordinates whose
 *   magnitudes sum to at least ||v||_2; Q(v)_i = ||v||_2 sign(v_i) on I, else 0.
 *   Ties in magnitude are broken by lower index first.
 * Algorithm: the threshold t* = largest float t with sum_{|v_i| >= t} |v_i|
 *   >= ||v||_2 is found by bisection over float bit patterns (<= 32 parallel
 *   reductions); coordinates above t* are all kept, and of those equal to t*
 *   the first m (by index, one parallel scan) complete the sum.
 * Cost: about 34 passes over v; meant for gradient-descent experiments, not
 *   for the hot path.
 * Output: one bucket (d = n), s = 1, levels in {-1, 0, 1}, norm l2.
 */
template <class ExecSpace, class VView, class MemSpace>
void quantize_deterministic(const ExecSpace& exec, const VView& v, std::uint64_t n, Quantized<MemSpace>& q) {
  if (n > v.extent(0)) throw Error(Errc::invalid_argument, "quantize_deterministic: n exceeds the input extent");
  if (n > 0xFFFFFFFFull) throw Error(Errc::invalid_argument, "quantize_deterministic: n must fit 32 bits");
  q.reshape(n, static_cast<std::uint32_t>(n == 0 ? 1 : n), 1, Norm::l2, QuantizerKind::deterministic);
  if (n == 0) return;
  const auto scales = q.scales;
  const auto levels = q.levels;
  const std::uint64_t bad = bucket_scales(exec, v, n, static_cast<std::uint32_t>(n), Norm::l2, scales);
  if (bad != detail::no_index) throw_non_finite(bad, "quantize_deterministic");
  float norm_f;
  Kokkos::deep_copy(exec, norm_f, Kokkos::subview(scales, 0));
  exec.fence();
  const double norm = norm_f;
  using range_t = Kokkos::RangePolicy<ExecSpace>;
  auto mass_at_least = [&](std::uint32_t tbits) {
    const float t = detail::bits_float(tbits);
    double sum = 0.0;
    Kokkos::parallel_reduce(
        "qsgd::quantize[deterministic]::mass", range_t(exec, 0, n),
        KOKKOS_LAMBDA(std::uint64_t i, double& acc) {
          const float a = detail::abs_f(v(i));
          if (a >= t) acc += a;
        },
        sum);
    return sum;
  };
  // Non-negative floats order like their bit patterns. lo satisfies the
  // predicate (t = 0 takes every coordinate, whose mass >= ||v||_2).
  std::uint32_t lo = 0, hi = detail::float_bits(std::numeric_limits<float>::max());
  if (norm > 0.0) {
    while (lo < hi) {
      const std::uint32_t mid = lo + (hi - lo + 1) / 2;
      if (mass_at_least(mid) >= norm) lo = mid; else hi = mid - 1;
    }
  }
  const float t = detail::bits_float(lo);
  // Mass strictly above t, then the number of ties at t needed to reach norm.
  double above = 0.0;
  Kokkos::parallel_reduce(
      "qsgd::quantize[deterministic]::above", range_t(exec, 0, n),
      KOKKOS_LAMBDA(std::uint64_t i, double& acc) {
        const float a = detail::abs_f(v(i));
        if (a > t) acc += a;
      },
      above);
  std::uint64_t ties_needed = 0;
  if (norm > 0.0 && above < norm && t > 0.0f) {
    double need = (norm - above) / static_cast<double>(t);
    ties_needed = static_cast<std::uint64_t>(need);
    if (static_cast<double>(ties_needed) < need) ++ties_needed;
  }
  const bool zero = !(norm > 0.0);
  Kokkos::parallel_scan(
      "qsgd::quantize[deterministic]::select", range_t(exec, 0, n),
      KOKKOS_LAMBDA(std::uint64_t i, std::uint64_t& tie_rank, bool final) {
        const float x = v(i);
        const float a = detail::abs_f(x);
        const bool tie = !zero && a == t;
        if (final) {
          const bool keep = !zero && (a > t || (tie && tie_rank < ties_needed));
          levels(i) = keep ? (x < 0.0f ? -1 : 1) : 0;
        }
        if (tie) ++tie_rank;
      });
}

}  // namespace qsgd
