#pragma once
// Quantizers of spec section 1: the stochastic Q_s with L2 or max-norm bucket
// scaling, and the deterministic top-magnitude quantizer for plain gradient
// descent. Both produce a Quantized vector: one float scale per bucket and one
// signed integer level per coordinate (level 0 is never negative).

#include <Kokkos_Core.hpp>
#include <climits>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include "qsgd/kernels/config.hpp"
#include "qsgd/kernels/counter_rng.hpp"
#include "qsgd/kernels/detail/arith.hpp"
#include "qsgd/kernels/detail/dispatch.hpp"
#include "qsgd/kernels/detail/fixed_simd.hpp"
#include "qsgd/kernels/error.hpp"
#include "qsgd/kernels/profiling.hpp"

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
// probability a*s - l, where a = |v| / scale; x = a*s is passed in. x is
// clamped to s: when |v| is the bucket's maximum, rounding may put it a hair
// above s, and the clamp gives level s with p = 0. Branch-free, so host
// compilers vectorize loops over it. Level 0 is never negative.
KOKKOS_INLINE_FUNCTION std::int32_t level_from_position(float v, float x, float s_f, const StreamKey& key,
                                                        std::uint64_t i) {
  x = x < s_f ? x : s_f;
  std::int32_t l = static_cast<std::int32_t>(x);  // x >= 0: truncation is floor
  const float p = x - static_cast<float>(l);      // exact
  l += uniform01(key, i) < p ? 1 : 0;
  const std::int32_t neg = -static_cast<std::int32_t>(float_bits(v) >> 31);  // 0 or -1
  return (l ^ neg) - neg;
}

KOKKOS_INLINE_FUNCTION float magnitude(float v) { return bits_float(float_bits(v) & 0x7fffffffu); }

KOKKOS_INLINE_FUNCTION std::int32_t stochastic_level(float v, const BucketFactor& b, std::uint32_t,
                                                     const StreamKey& key, std::uint64_t i) {
  if (!(b.scale > 0.0f)) return 0;
  const float a = magnitude(v);
  const float x = b.divide_first ? mul_rn(a / b.scale, b.s_f) : mul_rn(a, b.factor);
  return level_from_position(v, x, b.s_f, key, i);
}

// One bucket on the host, with the bucket-invariant tests hoisted so the
// common loop has no control flow. Same arithmetic as stochastic_level.
// Coordinate i draws with index i + offset (a slice of a longer vector).
KOKKOS_INLINE_FUNCTION void quantize_segment(const float* x, std::int32_t* out, std::uint64_t begin,
                                             std::uint64_t end, const BucketFactor& b, const StreamKey& key,
                                             std::uint64_t offset = 0) {
  if (!(b.scale > 0.0f)) {
    for (std::uint64_t i = begin; i < end; ++i) out[i] = 0;
  } else if (b.divide_first) {
    for (std::uint64_t i = begin; i < end; ++i)
      out[i] = level_from_position(x[i], mul_rn(magnitude(x[i]) / b.scale, b.s_f), b.s_f, key, i + offset);
  } else {
    const float f = b.factor, s_f = b.s_f;
    for (std::uint64_t i = begin; i < end; ++i)
      out[i] = level_from_position(x[i], mul_rn(magnitude(x[i]), f), s_f, key, i + offset);
  }
}

// Value of a level: sign * l * (scale / s). When scale / s is a normal float
// and s * fl(scale / s) is a finite float (always, unless the bucket's scale
// is below s * 2^-126 or within rounding of FLT_MAX) it is one division per
// bucket and one rounded float multiply per coordinate. Otherwise (via_double)
// the product is formed in double and rounded once: tiny buckets are not
// flushed to zero, and a bucket whose scale is near FLT_MAX, where
// fl(scale / s) may round up and s times it overflow, decodes to at most
// its scale instead of infinity. The same operations, hence the same bits,
// on every backend.
struct LevelUnit {
  float unit = 0.0f;
  double unit_d = 0.0;
  bool via_double = false;
  KOKKOS_INLINE_FUNCTION LevelUnit() = default;
  KOKKOS_INLINE_FUNCTION LevelUnit(float scale, std::uint32_t s)
      : unit(scale / static_cast<float>(s)),
        unit_d(static_cast<double>(scale) / static_cast<double>(s)),
        via_double(scale < static_cast<float>(s) * 1.17549435e-38f ||
                   static_cast<double>(unit) * static_cast<double>(s) > 3.4028234663852886e38) {}
  KOKKOS_INLINE_FUNCTION float value(std::int32_t l) const {
    return via_double ? static_cast<float>(mul_rn(static_cast<double>(l), unit_d))
                      : mul_rn(static_cast<float>(l), unit);
  }
};

}  // namespace detail

namespace detail {
constexpr int l2_lanes = 32;
// The L2 norm's order, the same on every backend: a bucket is cut into tiles
// of l2_tile coordinates; in a tile, lane l (of 32) sums the squares of the
// tile's coordinates l, l + 32, ... in double, in index order, and the tile's
// sum is its lanes added in lane order; the bucket's sum is its tiles' sums
// added in tile order (a bucket of one tile: that tile's sum). A device
// gives each tile its own team (no thread walks more than 128 coordinates),
// and the host walks the same tiles in one loop.
constexpr std::uint64_t l2_tile = 4096;
constexpr std::uint32_t inf_bits = 0x7f800000u;

// The sum of squares of one tile x[0, len), len <= l2_tile, in the L2 order.
KOKKOS_INLINE_FUNCTION double l2_tile_sum(const float* x, std::uint64_t len) {
  constexpr int lanes = l2_lanes;
  double part[lanes] = {};
  std::uint64_t j = 0;
  for (; j + lanes <= len; j += lanes)
    for (int l = 0; l < lanes; ++l) {
      const double y = x[j + l];
      part[l] = add_rn(part[l], mul_rn(y, y));
    }
  for (int l = 0; j + l < len; ++l) {
    const double y = x[j + l];
    part[l] = add_rn(part[l], mul_rn(y, y));
  }
  double sum = 0.0;
  for (int l = 0; l < lanes; ++l) sum = add_rn(sum, part[l]);
  return sum;
}

// The sum of squares of one bucket x[0, len) in the L2 order: its tiles' sums
// in tile order.
KOKKOS_INLINE_FUNCTION double host_l2_sum(const float* x, std::uint64_t len) {
  double sum = 0.0;
  for (std::uint64_t t = 0; t < len; t += l2_tile)
    sum = add_rn(sum, l2_tile_sum(x + t, len - t < l2_tile ? len - t : l2_tile));
  return sum;
}

// The scale of one bucket x[0, len) on the host (one vectorizable loop per
// norm). Sets `finite` to false, and returns 0, when a coordinate is NaN/Inf.
// Shared by bucket_scales_host and the fused encoder of fixed_simd.cpp.
KOKKOS_INLINE_FUNCTION float host_bucket_scale(const float* x, std::uint64_t len, Norm norm, bool& finite) {
  std::int32_t mx = 0;
  for (std::uint64_t j = 0; j < len; ++j) {
    const std::int32_t m = static_cast<std::int32_t>(float_bits(x[j]) & 0x7fffffffu);
    mx = m > mx ? m : mx;
  }
  finite = static_cast<std::uint32_t>(mx) < inf_bits;
  if (!finite) return 0.0f;
  if (norm != Norm::l2) return bits_float(static_cast<std::uint32_t>(mx));
  return static_cast<float>(Kokkos::Experimental::sqrt(host_l2_sum(x, len)));
}

// bucket_scales, host path (one loop per bucket). Returns the first bad bucket.
template <class ExecSpace, class VView, class SView>
std::uint64_t bucket_scales_host(const ExecSpace& exec, const VView& v, std::uint64_t n, std::uint32_t d,
                                 Norm norm, const SView& scales, std::uint64_t nb) {
  std::uint64_t bad_bucket = no_index;
  Kokkos::parallel_reduce(
        "qsgd::bucket_scales[host]", Kokkos::RangePolicy<ExecSpace>(exec, 0, nb),
        KOKKOS_LAMBDA(std::uint64_t b, std::uint64_t& bad) {
          const std::uint64_t begin = b * d;
          const std::uint64_t len = (begin + d < n ? begin + d : n) - begin;
          bool finite = true;
          scales(b) = host_bucket_scale(v.data() + begin, len, norm, finite);
          if (!finite && b < bad) bad = b;
        },
        Kokkos::Min<std::uint64_t>(bad_bucket));
  return bad_bucket;
}

// The portable (team) paths' element-wise passes give a team at most
// team_tile coordinates: a longer bucket (d = 0 puts the whole vector in
// one) is split over ceil(d / team_tile) teams, so that no team walks
// millions of coordinates while the rest of a GPU idles. Levels and values
// depend on (v_i, scale, key, i) alone and the max is an exact integer max,
// so the split leaves every bit as it was.
constexpr std::uint64_t team_tile = l2_tile;  // the L2 norm's tiles are the team tiles
struct TeamTiles {
  std::uint64_t n, d, per_bucket;
  KOKKOS_INLINE_FUNCTION TeamTiles(std::uint64_t n_, std::uint64_t d_)
      : n(n_), d(d_), per_bucket(d_ == 0 ? 1 : (d_ + team_tile - 1) / team_tile) {}
  int league(std::uint64_t nb) const {
    const std::uint64_t teams = nb * per_bucket;
    if (teams > static_cast<std::uint64_t>(INT_MAX)) throw Error(Errc::invalid_argument, "quantize: too many teams");
    return static_cast<int>(teams);
  }
  // Team t's bucket and its coordinates [begin, end).
  KOKKOS_INLINE_FUNCTION void range(int t, std::uint64_t& b, std::uint64_t& begin, std::uint64_t& end) const {
    b = static_cast<std::uint64_t>(t) / per_bucket;
    const std::uint64_t k = static_cast<std::uint64_t>(t) % per_bucket;
    const std::uint64_t bucket_end = b * d + d < n ? b * d + d : n;
    begin = b * d + k * team_tile;
    end = begin + team_tile < bucket_end ? begin + team_tile : bucket_end;
    if (begin > end) begin = end;
  }
};

// The magnitude bit-pattern maximum of every bucket into mx[0, nb), a team
// per tile (TeamTiles) and an atomic max per tile: for buckets longer than a
// tile.
template <class ExecSpace, class VView, class MView>
void bucket_max_tiled(const ExecSpace& exec, const VView& v, std::uint64_t n, std::uint32_t d, const MView& mx,
                      std::uint64_t nb) {
  using policy_t = Kokkos::TeamPolicy<ExecSpace>;
  using member_t = typename policy_t::member_type;
  Kokkos::parallel_for("qsgd::bucket_scales::zero", Kokkos::RangePolicy<ExecSpace>(exec, 0, nb),
                       KOKKOS_LAMBDA(std::uint64_t b) { mx(b) = 0; });
  const TeamTiles tiles(n, d);
  Kokkos::parallel_for(
      "qsgd::bucket_scales::max", policy_t(exec, tiles.league(nb), Kokkos::AUTO), KOKKOS_LAMBDA(const member_t& m) {
        std::uint64_t b, begin, end;
        tiles.range(m.league_rank(), b, begin, end);
        std::uint32_t tile_max = 0;
        Kokkos::parallel_reduce(
            Kokkos::TeamThreadRange(m, begin, end),
            [&](std::uint64_t i, std::uint32_t& acc) {
              const std::uint32_t a = float_bits(v(i)) & 0x7fffffffu;
              acc = a > acc ? a : acc;
            },
            Kokkos::Max<std::uint32_t>(tile_max));
        Kokkos::single(Kokkos::PerTeam(m), [&]() { (void)Kokkos::atomic_fetch_max(&mx(b), tile_max); });
      });
}

// The L2 order's sum of squares of v[begin, end), at most one tile, by a
// team: its 32 lanes in team scratch (`part`), each in index order, then
// added in lane order by every thread. Call it from the whole team.
template <class Member, class VView>
KOKKOS_INLINE_FUNCTION double team_l2_tile_sum(const Member& m, const VView& v, std::uint64_t begin,
                                               std::uint64_t end, double* part) {
  Kokkos::parallel_for(Kokkos::TeamThreadRange(m, l2_lanes), [&](int lane) {
    double acc = 0.0;
    for (std::uint64_t j = begin + lane; j < end; j += l2_lanes) {
      const double y = static_cast<double>(v(j));
      acc = add_rn(acc, mul_rn(y, y));
    }
    part[lane] = acc;
  });
  m.team_barrier();
  double sum = 0.0;
  for (int lane = 0; lane < l2_lanes; ++lane) sum = add_rn(sum, part[lane]);
  return sum;
}

// bucket_scales, portable path (one team per bucket; the max of a bucket
// longer than a tile from bucket_max_tiled first). Returns the first bad bucket.
// The tiled maxima are kept in the scales' own memory, as bit patterns (a
// float and a uint32 have the same size): bucket b's team reads its maximum,
// then writes its scale over it, so no call allocates (on a GPU an
// allocation per call costs more than the kernel).
template <class ExecSpace, class VView, class SView>
std::uint64_t bucket_scales_team(const ExecSpace& exec, const VView& v, std::uint64_t n, std::uint32_t d,
                                 Norm norm, const SView& scales, std::uint64_t nb) {
  static_assert(sizeof(typename SView::value_type) == sizeof(std::uint32_t) && is_contiguous<SView>(),
                "bucket_scales_team keeps a uint32 maximum in each scale's place");
  constexpr int lanes = l2_lanes;
  std::uint64_t bad_bucket = no_index;
    using policy_t = Kokkos::TeamPolicy<ExecSpace>;
    using member_t = typename policy_t::member_type;
    const bool tiled = d > team_tile;
    const Kokkos::View<std::uint32_t*, typename SView::memory_space, Kokkos::MemoryUnmanaged> tiled_max(
        reinterpret_cast<std::uint32_t*>(scales.data()), nb);
    if (tiled) bucket_max_tiled(exec, v, n, d, tiled_max, nb);
    // Buckets longer than a tile: every tile's sum of squares first, a team
    // per tile (this path's one allocation, n / 4096 doubles, made only for
    // L2 buckets longer than a tile: d = 0 or the deterministic quantizer).
    const TeamTiles tiles(n, d);
    Kokkos::View<double*, typename SView::memory_space> tile_sums;
    if (tiled && norm == Norm::l2) {
      tile_sums = Kokkos::View<double*, typename SView::memory_space>(
          Kokkos::view_alloc(Kokkos::WithoutInitializing, "qsgd::bucket_scales::l2_tiles"), nb * tiles.per_bucket);
      policy_t tp(exec, tiles.league(nb), Kokkos::AUTO);
      tp.set_scratch_size(0, Kokkos::PerTeam(lanes * sizeof(double)));
      Kokkos::parallel_for(
          "qsgd::bucket_scales::l2_tiles", tp, KOKKOS_LAMBDA(const member_t& m) {
            std::uint64_t b, begin, end;
            tiles.range(m.league_rank(), b, begin, end);
            double* part = static_cast<double*>(m.team_scratch(0).get_shmem(lanes * sizeof(double)));
            const double sum = team_l2_tile_sum(m, v, begin, end, part);
            Kokkos::single(Kokkos::PerTeam(m), [&]() { tile_sums(m.league_rank()) = sum; });
          });
    }
    policy_t policy(exec, static_cast<int>(nb), Kokkos::AUTO);
    policy.set_scratch_size(0, Kokkos::PerTeam(lanes * sizeof(double)));
    Kokkos::parallel_reduce(
        "qsgd::bucket_scales", policy,
        KOKKOS_LAMBDA(const member_t& m, std::uint64_t& bad) {
          const std::uint64_t b = static_cast<std::uint64_t>(m.league_rank());
          const std::uint64_t begin = b * d;
          const std::uint64_t len = (begin + d < n ? begin + d : n) - begin;
          std::uint32_t mx = 0;
          if (tiled) {
            mx = tiled_max(b);
            m.team_barrier();  // every thread has read it before the scale overwrites it
          } else {
            Kokkos::parallel_reduce(
                Kokkos::TeamThreadRange(m, len),
                [&](std::uint64_t j, std::uint32_t& acc) {
                  const std::uint32_t a = float_bits(v(begin + j)) & 0x7fffffffu;
                  acc = a > acc ? a : acc;
                },
                Kokkos::Max<std::uint32_t>(mx));
          }
          float scale = bits_float(mx);
          const bool finite = mx < inf_bits;
          if (finite && norm == Norm::l2 && tiled) {
            // The bucket's tiles in tile order: ceil(d / 4096) additions.
            double sum = 0.0;
            const std::uint64_t first = b * tiles.per_bucket, count = (len + team_tile - 1) / team_tile;
            for (std::uint64_t k = 0; k < count; ++k) sum = add_rn(sum, tile_sums(first + k));
            scale = static_cast<float>(Kokkos::Experimental::sqrt(sum));
          } else if (finite && norm == Norm::l2) {
            double* part = static_cast<double*>(m.team_scratch(0).get_shmem(lanes * sizeof(double)));
            scale = static_cast<float>(Kokkos::Experimental::sqrt(team_l2_tile_sum(m, v, begin, begin + len, part)));
          }
          Kokkos::single(Kokkos::PerTeam(m), [&]() {
            scales(b) = finite ? scale : 0.0f;
            if (!finite && b < bad) bad = b;
          });
        },
        Kokkos::Min<std::uint64_t>(bad_bucket));
  return bad_bucket;
}
}  // namespace detail

/*
 * bucket_scales
 * Purpose: the scale of every bucket (L2 or max norm) and the first
 *   non-finite coordinate, if any.
 * Algorithm: max norm: the maximum of the magnitude bit patterns (for
 *   non-negative floats, integer order is float order, and any pattern >=
 *   0x7f800000 is Inf or NaN, so one integer max also detects non-finite
 *   input). L2 norm: per tile of 4096 coordinates, 32 fixed lanes each sum
 *   squares in double in index order and the 32 partials are added in lane
 *   order; the tiles' sums are added in tile order (detail::l2_tile); the
 *   same order on every backend, hence the same bits. Host path: one loop
 *   per bucket (vectorizable); portable path: one team per bucket, and for
 *   buckets longer than a tile one team per tile first.
 * Cost: reads 4n bytes, writes 4n/d bytes.
 * Requirements: v.extent(0) >= n; scales.extent(0) >= ceil(n/d).
 * Returns the index of the first NaN/Inf coordinate, or detail::no_index.
 */
template <class ExecSpace, class VView, class SView>
std::uint64_t bucket_scales(const ExecSpace& exec, const VView& v, std::uint64_t n, std::uint32_t d,
                            Norm norm, const SView& scales) {
  static_assert(detail::is_contiguous<VView>(), "bucket_scales needs a contiguous input View");
  const std::uint64_t nb = n == 0 ? 0 : (n + d - 1) / d;
  if (nb == 0) return detail::no_index;
  std::uint64_t bad_bucket;
  if constexpr (detail::use_host_loops<ExecSpace>())
    bad_bucket = detail::bucket_scales_host(exec, v, n, d, norm, scales, nb);
  else
    bad_bucket = detail::bucket_scales_team(exec, v, n, d, norm, scales, nb);
  if (bad_bucket == detail::no_index) return detail::no_index;
  // Error path only: find the first bad coordinate of that bucket.
  const std::uint64_t begin = bad_bucket * d;
  const std::uint64_t end = begin + d < n ? begin + d : n;
  std::uint64_t first = detail::no_index;
  Kokkos::parallel_reduce(
      "qsgd::bucket_scales::locate", Kokkos::RangePolicy<ExecSpace>(exec, begin, end),
      KOKKOS_LAMBDA(std::uint64_t i, std::uint64_t& f) {
        if (!detail::is_finite_f(v(i)) && i < f) f = i;
      },
      Kokkos::Min<std::uint64_t>(first));
  return first;
}

[[noreturn]] void throw_non_finite(std::uint64_t index, const char* where);
[[noreturn]] void throw_norm_overflow(std::uint64_t bucket, std::uint32_t d, const char* where);

namespace detail {
// First bucket whose scale is negative, NaN or Inf (a corrupt message), or no_index.
template <class ExecSpace, class ScaleView>
std::uint64_t first_bad_scale(const ExecSpace& exec, const ScaleView& scales, std::uint64_t nb) {
  std::uint64_t bad = no_index;
  Kokkos::parallel_reduce(
      "qsgd::decode::check_scales", Kokkos::RangePolicy<ExecSpace>(exec, 0, nb),
      KOKKOS_LAMBDA(std::uint64_t b, std::uint64_t& first) {
        const float x = scales(b);
        if (!(is_finite_f(x) && x >= 0.0f) && b < first) first = b;
      },
      Kokkos::Min<std::uint64_t>(bad));
  return bad;
}
}  // namespace detail

// bucket_scales for callers that quantize: NaN/Inf input throws
// non_finite_input naming the element; an L2 norm beyond the float range
// (finite input, e.g. two coordinates of 3e38) throws out_of_range naming the
// bucket, rather than producing an Inf scale.
template <class ExecSpace, class VView, class SView>
void compute_scales(const ExecSpace& exec, const VView& v, std::uint64_t n, std::uint32_t d, Norm norm,
                    const SView& scales, const char* where) {
  const std::uint64_t bad = bucket_scales(exec, v, n, d, norm, scales);
  if (bad != detail::no_index) throw_non_finite(bad, where);
  if (norm == Norm::l2) {
    const std::uint64_t nb = n == 0 ? 0 : (n + d - 1) / d;
    const std::uint64_t over = detail::first_bad_scale(exec, scales, nb);
    if (over != detail::no_index) throw_norm_overflow(over, d, where);
  }
}

namespace detail {
template <class ExecSpace, class VView, class SView, class LView>
void quantize_levels_host(const ExecSpace& exec, const VView& v, std::uint64_t n, std::uint32_t d, std::uint32_t s,
                          const StreamKey& sk, const SView& scales, const LView& levels, std::uint64_t nb,
                          std::uint64_t offset = 0) {
    Kokkos::parallel_for(
        "qsgd::quantize[stochastic,host]", Kokkos::RangePolicy<ExecSpace>(exec, 0, nb),
        KOKKOS_LAMBDA(std::uint64_t b) {
          const std::uint64_t begin = b * d;
          const std::uint64_t end = begin + d < n ? begin + d : n;
          const BucketFactor bf(scales(b), s);
          quantize_segment(v.data(), levels.data(), begin, end, bf, sk, offset);
        });
}

template <class ExecSpace, class VView, class SView, class LView>
void quantize_levels_team(const ExecSpace& exec, const VView& v, std::uint64_t n, std::uint32_t d, std::uint32_t s,
                          const StreamKey& sk, const SView& scales, const LView& levels, std::uint64_t nb,
                          std::uint64_t offset = 0) {
    using policy_t = Kokkos::TeamPolicy<ExecSpace>;
    using member_t = typename policy_t::member_type;
    const TeamTiles tiles(n, d);
    Kokkos::parallel_for(
        "qsgd::quantize[stochastic]", policy_t(exec, tiles.league(nb), Kokkos::AUTO),
        KOKKOS_LAMBDA(const member_t& m) {
          std::uint64_t b, begin, end;
          tiles.range(m.league_rank(), b, begin, end);
          const BucketFactor bf(scales(b), s);
          Kokkos::parallel_for(Kokkos::TeamThreadRange(m, begin, end), [&](std::uint64_t i) {
            levels(i) = stochastic_level(v(i), bf, s, sk, i + offset);
          });
        });
}

// Asks for the cache line at p ahead of its use (host code only; a no-op in
// device code). On the Intel Xeon machine of
// results/reference/kernels-prefetch, streaming loops wait on DRAM without it
// (docs/kernels.md, "Prefetching").
KOKKOS_INLINE_FUNCTION void prefetch_host(const void* p) {
#if !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_prefetch(p);
#else
  (void)p;
#endif
}

// Buckets ahead of the one being quantized whose input the fused host loops
// (quantize_fused_host, the fixed-width SIMD encoder) ask for.
constexpr std::uint64_t quantize_prefetch_buckets = 2;

// Asks for the input of bucket b + quantize_prefetch_buckets of x[0, n).
KOKKOS_INLINE_FUNCTION void prefetch_bucket_ahead(const float* x, std::uint64_t b, std::uint64_t d, std::uint64_t n) {
  const std::uint64_t a0 = (b + quantize_prefetch_buckets) * d;
  for (std::uint64_t j = a0; j < a0 + d && j < n; j += 16) prefetch_host(x + j);
}

// Scales and levels of q (shape set) from v in one pass on the host: each
// bucket's scale (host_bucket_scale, as bucket_scales computes it) and then
// its levels (quantize_segment) while the bucket is in cache, the input of
// a later bucket prefetched meanwhile. The same scales and levels as
// compute_scales + quantize_levels. Returns false, leaving q unspecified,
// at a NaN/Inf coordinate or an L2 norm beyond the float range: the caller
// then runs compute_scales, which names it.
template <class ExecSpace, class VView, class MemSpace>
bool quantize_fused_host(const ExecSpace& exec, const VView& v, const Quantized<MemSpace>& q, Norm norm,
                         const RngKey& key, std::uint64_t offset) {
  static_assert(is_contiguous<VView>(), "quantize needs a contiguous input View");
  const StreamKey sk = make_stream_key(key);
  const float* x = v.data();
  float* scales = q.scales.data();
  std::int32_t* levels = q.levels.data();
  const std::uint64_t n = q.n, nb = q.buckets();
  const std::uint32_t d = q.d, s = q.s;
  std::uint64_t bad_bucket = no_index;
  Kokkos::parallel_reduce(
      "qsgd::quantize[stochastic,fused host]", Kokkos::RangePolicy<ExecSpace>(exec, 0, nb),
      KOKKOS_LAMBDA(std::uint64_t b, std::uint64_t& bad) {
        prefetch_bucket_ahead(x, b, d, n);
        const std::uint64_t begin = b * d;
        const std::uint64_t end = begin + d < n ? begin + d : n;
        bool finite = true;
        const float sc = host_bucket_scale(x + begin, end - begin, norm, finite);
        if (!finite || !is_finite_f(sc)) {
          if (b < bad) bad = b;
          return;
        }
        scales[b] = sc;
        quantize_segment(x, levels, begin, end, BucketFactor(sc, s), sk, offset);
      },
      Kokkos::Min<std::uint64_t>(bad_bucket));
  return bad_bucket == no_index;
}

// The levels of q (shape and scales set) from v with `key`: the host loop or
// one team per bucket.
template <class ExecSpace, class VView, class MemSpace>
void quantize_levels(const ExecSpace& exec, const VView& v, const Quantized<MemSpace>& q, const RngKey& key,
                     std::uint64_t index_offset) {
  const StreamKey sk = make_stream_key(key);
  if constexpr (use_host_loops<ExecSpace>()) {
    static_assert(is_contiguous<VView>(), "quantize needs a contiguous input View");
    quantize_levels_host(exec, v, q.n, q.d, q.s, sk, q.scales, q.levels, q.buckets(), index_offset);
  } else {
    quantize_levels_team(exec, v, q.n, q.d, q.s, sk, q.scales, q.levels, q.buckets(), index_offset);
  }
}

// q.scales[0, buckets) = scales[0, buckets), q's shape already set (given
// scales: quantize_with_scales, Codec::encode_with_scales).
template <class ExecSpace, class SView, class MemSpace>
void take_scales(const ExecSpace& exec, const Quantized<MemSpace>& q, const SView& scales, const char* what) {
  const std::uint64_t nb = q.buckets();
  if (scales.extent(0) < nb) throw Error(Errc::invalid_argument, std::string(what) + ": fewer scales than buckets");
  Kokkos::deep_copy(exec, Kokkos::subview(q.scales, Kokkos::make_pair<std::uint64_t>(0, nb)),
                    Kokkos::subview(scales, Kokkos::make_pair<std::uint64_t>(0, nb)));
}

}  // namespace detail

/*
 * quantize (stochastic Q_s)
 * Purpose: q = Q_s(v) with bucket scaling, keyed random rounding.
 * Algorithm: bucket_scales, then one team per bucket; each coordinate
 *   computes its level independently (detail::stochastic_level). Host
 *   loops fuse both per bucket (detail::quantize_fused_host; on a CPU with
 *   AVX-512, detail::simd::quantize_stochastic): same bits.
 * Cost: reads 8n bytes (two passes over v; 4n on the host), writes 4n +
 *   4n/d bytes.
 * Requirements: cfg validated; v finite (else qsgd::Error non_finite_input,
 *   naming the first bad index, and q is left unspecified).
 * index_offset: coordinate i draws with index i + index_offset, so a slice
 *   v[a, a + n) of a longer vector, quantized with offset a, gets the levels
 *   of the whole vector's quantization when a is a multiple of the bucket
 *   size (its buckets are then the whole vector's buckets).
 */
template <class ExecSpace, class VView, class MemSpace>
void quantize(const ExecSpace& exec, const CodecConfig& cfg, const VView& v, std::uint64_t n,
              const RngKey& key, Quantized<MemSpace>& q, std::uint64_t index_offset = 0) {
  if (n > v.extent(0)) throw Error(Errc::invalid_argument, "quantize: n exceeds the input extent");
  prof::Scope range("qsgd/quantize");
  const std::uint32_t d = static_cast<std::uint32_t>(effective_bucket(cfg, n));
  q.reshape(n, d, cfg.s, cfg.norm, QuantizerKind::stochastic);
  if constexpr (detail::use_host_loops<ExecSpace>()) {
    if constexpr (std::is_same<MemSpace, Kokkos::HostSpace>::value) {
      // The AVX-512 path where the CPU has it (bad input falls through to
      // compute_scales, which names it).
      exec.fence();
      if (detail::simd::quantize_stochastic(v.data(), q.scales.data(), q.levels.data(), n, d, cfg.s, cfg.norm,
                                            make_stream_key(key), index_offset) == detail::simd::EncodeStatus::done)
        return;
    }
    if (detail::quantize_fused_host(exec, v, q, cfg.norm, key, index_offset)) return;
  }
  compute_scales(exec, v, n, d, cfg.norm, q.scales, "quantize");
  detail::quantize_levels(exec, v, q, key, index_offset);
}

/*
 * quantize_with_scales
 * Purpose: Q_s of v[0, n) against given bucket scales: scales[b] replaces the
 *   scale of bucket b (shared-scale aggregation, where ranks quantize against
 *   the largest scale of any rank). q.norm records cfg.norm.
 * Requirements: scales[b] at least the max norm of bucket b (a coordinate
 *   above its scale is clamped to level s, which biases it); v finite (not
 *   checked here: the scales were computed from it).
 * Draws: the same stream as quantize() (key, coordinate index + index_offset).
 */
template <class ExecSpace, class VView, class SView, class MemSpace>
void quantize_with_scales(const ExecSpace& exec, const CodecConfig& cfg, const VView& v, std::uint64_t n,
                          const SView& scales, const RngKey& key, Quantized<MemSpace>& q,
                          std::uint64_t index_offset = 0) {
  if (n > v.extent(0)) throw Error(Errc::invalid_argument, "quantize_with_scales: n exceeds the input extent");
  prof::Scope range("qsgd/quantize");
  const std::uint32_t d = static_cast<std::uint32_t>(effective_bucket(cfg, n));
  q.reshape(n, d, cfg.s, cfg.norm, QuantizerKind::stochastic);
  detail::take_scales(exec, q, scales, "quantize_with_scales");
  detail::quantize_levels(exec, v, q, key, index_offset);
}

namespace detail {
// f(i, level, unit) for every coordinate i < q.n of a quantized vector, one
// team per bucket (unit: the bucket's LevelUnit). Shared by dequantize and
// accumulate_levels (codec.hpp).
template <class ExecSpace, class MemSpace, class F>
void for_each_level(const ExecSpace& exec, const Quantized<MemSpace>& q, const char* label, const F& f) {
  const auto scales = q.scales;
  const auto levels = q.levels;
  const std::uint64_t n = q.n;
  const std::uint32_t d = q.d, s = q.s;
  using policy_t = Kokkos::TeamPolicy<ExecSpace>;
  using member_t = typename policy_t::member_type;
  const TeamTiles tiles(n, d);
  Kokkos::parallel_for(
      label, policy_t(exec, tiles.league(q.buckets()), Kokkos::AUTO), KOKKOS_LAMBDA(const member_t& m) {
        std::uint64_t b, begin, end;
        tiles.range(m.league_rank(), b, begin, end);
        const LevelUnit unit(scales(b), s);
        Kokkos::parallel_for(Kokkos::TeamThreadRange(m, begin, end), [&](std::uint64_t i) { f(i, levels(i), unit); });
      });
}
}  // namespace detail

/*
 * dequantize
 * Purpose: out[i] = scale(bucket(i)) * level[i] / s.
 * Cost: reads 4n + 4n/d bytes, writes 4n bytes.
 */
template <class ExecSpace, class MemSpace, class OutView>
void dequantize(const ExecSpace& exec, const Quantized<MemSpace>& q, const OutView& out) {
  if (out.extent(0) < q.n) throw Error(Errc::buffer_too_small, "dequantize: output shorter than n");
  detail::for_each_level(exec, q, "qsgd::dequantize",
                         KOKKOS_LAMBDA(std::uint64_t i, std::int32_t l, const detail::LevelUnit& unit) {
                           out(i) = unit.value(l);
                         });
}

namespace detail {
// Terms per block of fixed_order_sum.
constexpr std::uint64_t sum_block = 1024;

/*
 * fixed_order_sum
 * Purpose: sum_{i < n} term(i) in double, in an order fixed by n alone, so the
 *   bits of the result do not depend on the backend, the thread count or how
 *   work is mapped to threads (a Kokkos parallel_reduce combines partial sums
 *   in an unspecified order).
 * Algorithm: blocks of sum_block consecutive terms are summed in index order
 *   (one block per parallel iteration); the block sums are then summed the
 *   same way, block by block, until one value remains. Every addition is
 *   add_rn (rounded, never fused).
 * Cost: one pass over the terms plus about n / (sum_block - 1) additions;
 *   `work` holds every level's partial sums (about n / (sum_block - 1)
 *   doubles) and is reallocated only when too small.
 */
template <class ExecSpace, class Term>
double fixed_order_sum(const ExecSpace& exec, std::uint64_t n, const Term& term,
                       Kokkos::View<double*, typename ExecSpace::memory_space>& work) {
  if (n == 0) return 0.0;
  using range_t = Kokkos::RangePolicy<ExecSpace>;
  constexpr std::uint64_t B = sum_block;
  // Every level's partial sums, one region after another.
  std::uint64_t total = 0;
  for (std::uint64_t m = n;;) {
    m = (m + B - 1) / B;
    total += m;
    if (m == 1) break;
  }
  if (work.extent(0) < total)
    work = Kokkos::View<double*, typename ExecSpace::memory_space>(
        Kokkos::view_alloc(Kokkos::WithoutInitializing, "qsgd::fixed_order_sum"), total);
  const auto w = work;
  std::uint64_t m = (n + B - 1) / B;
  Kokkos::parallel_for(
      "qsgd::fixed_order_sum::terms", range_t(exec, 0, m), KOKKOS_LAMBDA(std::uint64_t b) {
        const std::uint64_t end = (b + 1) * B < n ? (b + 1) * B : n;
        double acc = 0.0;
        for (std::uint64_t i = b * B; i < end; ++i) acc = add_rn(acc, term(i));
        w(b) = acc;
      });
  std::uint64_t in = 0;  // start of the current level's region
  while (m > 1) {
    const std::uint64_t len = m, out = in + len, next = (len + B - 1) / B, from = in;
    Kokkos::parallel_for(
        "qsgd::fixed_order_sum::blocks", range_t(exec, 0, next), KOKKOS_LAMBDA(std::uint64_t b) {
          const std::uint64_t end = (b + 1) * B < len ? (b + 1) * B : len;
          double acc = 0.0;
          for (std::uint64_t i = b * B; i < end; ++i) acc = add_rn(acc, w(from + i));
          w(out + b) = acc;
        });
    in = out;
    m = next;
  }
  double result = 0.0;
  Kokkos::deep_copy(exec, result, Kokkos::subview(w, in));
  exec.fence();
  return result;
}
// |v_i| when it is >= t (> t when strict), else 0: a term of the
// deterministic quantizer's masses (a named functor: it is captured by the
// kernels of fixed_order_sum on every backend).
template <class VView>
struct MassTerm {
  VView v;
  float t;
  bool strict;
  KOKKOS_INLINE_FUNCTION double operator()(std::uint64_t i) const {
    const float a = abs_f(v(i));
    return (strict ? a > t : a >= t) ? static_cast<double>(a) : 0.0;
  }
};
}  // namespace detail

/*
 * quantize_deterministic (spec section 1, for plain gradient descent)
 * Purpose: keep the smallest set I of largest-magnitude coordinates whose
 *   magnitudes sum to at least ||v||_2; Q(v)_i = ||v||_2 sign(v_i) on I, else 0.
 *   Ties in magnitude are broken by lower index first.
 * Algorithm: the threshold t* = largest float t with sum_{|v_i| >= t} |v_i|
 *   >= ||v||_2 is found by bisection over float bit patterns (<= 32 passes);
 *   coordinates above t* are all kept, and of those equal to t* the first m
 *   (by index, one parallel scan) complete the sum. Every mass is a
 *   detail::fixed_order_sum, so the kept set is the same on every backend and
 *   thread count (an unordered parallel reduction could flip a comparison
 *   with ||v||_2 in the last bit).
 * Cost: about 34 passes over v; meant for gradient-descent experiments, not
 *   for the hot path.
 * Output: one bucket (d = n), s = 1, levels in {-1, 0, 1}, norm l2.
 */
template <class ExecSpace, class VView, class MemSpace>
void quantize_deterministic(const ExecSpace& exec, const VView& v, std::uint64_t n, Quantized<MemSpace>& q) {
  if (n > v.extent(0)) throw Error(Errc::invalid_argument, "quantize_deterministic: n exceeds the input extent");
  prof::Scope range("qsgd/quantize");
  if (n > 0xFFFFFFFFull) throw Error(Errc::invalid_argument, "quantize_deterministic: n must fit 32 bits");
  q.reshape(n, static_cast<std::uint32_t>(n == 0 ? 1 : n), 1, Norm::l2, QuantizerKind::deterministic);
  if (n == 0) return;
  const auto scales = q.scales;
  const auto levels = q.levels;
  compute_scales(exec, v, n, static_cast<std::uint32_t>(n), Norm::l2, scales, "quantize_deterministic");
  float norm_f;
  Kokkos::deep_copy(exec, norm_f, Kokkos::subview(scales, 0));
  exec.fence();
  const double norm = norm_f;
  using range_t = Kokkos::RangePolicy<ExecSpace>;
  Kokkos::View<double*, typename ExecSpace::memory_space> work;
  // Mass of the coordinates with |v_i| >= t (or > t when strict).
  auto mass = [&](float t, bool strict) {
    return detail::fixed_order_sum(exec, n, detail::MassTerm<VView>{v, t, strict}, work);
  };
  auto mass_at_least = [&](std::uint32_t tbits) { return mass(detail::bits_float(tbits), false); };
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
  const double above = mass(t, true);
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
