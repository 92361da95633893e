#pragma once
// PowerSGD's kernels (comm/src/powersgd.cpp), in their host and device
// shapes: the same sums in the same order, so the same bits, on every
// backend (docs/parallelism.md, "PowerSGD"; tested on the host against each
// other: comm.serial.PowerSgdKernels.*).

#include <Kokkos_Core.hpp>
#include <cstdint>
#include <type_traits>

#include "qsgd/kernels/detail/arith.hpp"

namespace qsgd::comm::detail {

// Both products accumulate each sum in double, in increasing order of the
// summed index, each product and sum rounded once. Which work item computes
// which sums is free (it changes no bit); the host walks below keep many
// independent sums in registers, so a core is bound by its floating-point
// ports rather than by the latency of one chain of additions.
constexpr std::uint32_t psgd_lanes = 8;  // columns of P or Q per register group

// Every product and sum below is rounded once, in the written order, on
// every backend (nvcc would contract a*b+c into an FMA): the factors are on
// the wire, and a CUDA rank and a host rank must send the same bits.
using qsgd::detail::add_rn;
using qsgd::detail::mul_rn;
KOKKOS_INLINE_FUNCTION double sq(float x) { return mul_rn(double(x), double(x)); }

// ---- the host walks: W columns of P or Q (1..psgd_lanes) a compile-time
// count, so the sums stay in registers --------------------------------------

// Calls f(std::integral_constant<std::uint32_t, W>{}) for w in 1..psgd_lanes.
template <class F>
KOKKOS_INLINE_FUNCTION void psgd_with_lanes(std::uint32_t w, const F& f) {
  switch (w) {
    case 1: f(std::integral_constant<std::uint32_t, 1>{}); return;
    case 2: f(std::integral_constant<std::uint32_t, 2>{}); return;
    case 3: f(std::integral_constant<std::uint32_t, 3>{}); return;
    case 4: f(std::integral_constant<std::uint32_t, 4>{}); return;
    case 5: f(std::integral_constant<std::uint32_t, 5>{}); return;
    case 6: f(std::integral_constant<std::uint32_t, 6>{}); return;
    case 7: f(std::integral_constant<std::uint32_t, 7>{}); return;
    default: f(std::integral_constant<std::uint32_t, 8>{}); return;
  }
}

// p[a][c0 + k] = sum_b m[a][b] q[b][c0 + k] for RB rows from a0 and k < W:
// RB x W sums, each row read once.
template <std::uint64_t RB, std::uint32_t W>
KOKKOS_INLINE_FUNCTION void psgd_project_block(const float* m, std::uint64_t cols, const float* q, std::uint32_t r,
                                               float* p) {
  double sum[RB][W] = {};
  for (std::uint64_t b = 0; b < cols; ++b) {
    double qv[W];
    for (std::uint32_t k = 0; k < W; ++k) qv[k] = q[b * r + k];
    for (std::uint64_t i = 0; i < RB; ++i) {
      const double mv = m[i * cols + b];
      for (std::uint32_t k = 0; k < W; ++k) sum[i][k] = add_rn(sum[i][k], mul_rn(mv, qv[k]));
    }
  }
  for (std::uint64_t i = 0; i < RB; ++i)
    for (std::uint32_t k = 0; k < W; ++k) p[i * r + k] = static_cast<float>(sum[i][k]);
}

// p[a][c] = sum_b m[a][b] q[b][c]: M (at m_off, rows x cols) times Q (cols x r),
// parallel over blocks of psgd_row_block rows (the last rows one at a time),
// each block's rows read once per group of psgd_lanes columns of P.
constexpr std::uint64_t psgd_row_block = 8;

template <class E, class M, class V>
void psgd_project_rows(const E& exec, const M& m, std::uint64_t m_off, std::uint64_t rows, std::uint64_t cols, const V& q,
                  std::uint64_t q_off, std::uint32_t r, const V& p, std::uint64_t p_off) {
  const std::uint64_t blocks = rows / psgd_row_block, items = blocks + rows % psgd_row_block;
  const float* mp = m.data() + m_off;
  const float* qp = q.data() + q_off;
  float* pp = p.data() + p_off;
  Kokkos::parallel_for(
      "qsgd::comm::powersgd::project", Kokkos::RangePolicy<E>(exec, 0, items), KOKKOS_LAMBDA(std::uint64_t t) {
        const bool block = t < blocks;
        const std::uint64_t a0 = block ? t * psgd_row_block : blocks * psgd_row_block + (t - blocks);
        for (std::uint32_t c0 = 0; c0 < r; c0 += psgd_lanes)
          psgd_with_lanes(r - c0, [&](auto w) {
            if (block)
              psgd_project_block<psgd_row_block, decltype(w)::value>(mp + a0 * cols, cols, qp + c0, r, pp + a0 * r + c0);
            else
              psgd_project_block<1, decltype(w)::value>(mp + a0 * cols, cols, qp + c0, r, pp + a0 * r + c0);
          });
      });
}

// q[b0 + j][c0 + k] = sum_a m[a][b0 + j] p[a][c0 + k] for j < nb <= psgd_tile,
// k < W: the sums in a local array (in L1) while M's rows are walked in
// order, nb contiguous floats of each.
constexpr std::uint64_t psgd_tile = 512;

template <std::uint32_t W>
KOKKOS_INLINE_FUNCTION void psgd_back_block(const float* m, std::uint64_t rows, std::uint64_t cols, std::uint64_t nb,
                                            const float* p, std::uint32_t r, float* q) {
  double sum[psgd_tile][W];
  for (std::uint64_t j = 0; j < nb; ++j)
    for (std::uint32_t k = 0; k < W; ++k) sum[j][k] = 0;
  for (std::uint64_t a = 0; a < rows; ++a) {
    double pv[W];
    for (std::uint32_t k = 0; k < W; ++k) pv[k] = p[a * r + k];
    const float* row = m + a * cols;
    for (std::uint64_t j = 0; j < nb; ++j) {
      const double mv = row[j];
      for (std::uint32_t k = 0; k < W; ++k) sum[j][k] = add_rn(sum[j][k], mul_rn(mv, pv[k]));
    }
  }
  for (std::uint64_t j = 0; j < nb; ++j)
    for (std::uint32_t k = 0; k < W; ++k) q[j * r + k] = static_cast<float>(sum[j][k]);
}

// The columns of a work item of psgd_back_tiles: psgd_tile on one thread;
// with more, fewer (a multiple of 16, a 64-byte line of floats) where that
// gives each thread four tiles.
inline std::uint64_t psgd_back_tile(std::uint64_t cols, std::uint64_t threads) {
  const std::uint64_t want = threads > 1 ? threads * 4 : 1, each = (cols + want - 1) / want;
  const std::uint64_t lines = (each + 15) / 16 * 16;
  return lines < 16 ? 16 : lines > psgd_tile ? psgd_tile : lines;
}

// q[b][c] = sum_a m[a][b] p[a][c]: M^T (cols x rows) times P (rows x r).
// Parallel over single columns b would walk M by a row's stride per
// element; instead each work item takes a tile of columns (psgd_back_tile)
// and walks M's rows in order, reading the tile's contiguous floats of each.
template <class E, class M, class V>
void psgd_back_tiles(const E& exec, const M& m, std::uint64_t m_off, std::uint64_t rows, std::uint64_t cols, const V& p,
               std::uint64_t p_off, std::uint32_t r, const V& q, std::uint64_t q_off) {
  const std::uint64_t tile = psgd_back_tile(cols, static_cast<std::uint64_t>(exec.concurrency()));
  const std::uint64_t tiles = (cols + tile - 1) / tile;
  const float* mp = m.data() + m_off;
  const float* pp = p.data() + p_off;
  float* qp = q.data() + q_off;
  Kokkos::parallel_for(
      "qsgd::comm::powersgd::back", Kokkos::RangePolicy<E>(exec, 0, tiles), KOKKOS_LAMBDA(std::uint64_t t) {
        const std::uint64_t b0 = t * tile, nb = cols - b0 < tile ? cols - b0 : tile;
        for (std::uint32_t c0 = 0; c0 < r; c0 += psgd_lanes)
          psgd_with_lanes(r - c0, [&](auto w) {
            psgd_back_block<decltype(w)::value>(mp + b0, rows, cols, nb, pp + c0, r, qp + b0 * r + c0);
          });
      });
}

// out[a][b] = sum_c p[a][c] q[b][c] (c in increasing order, from 0.0) for one
// row a, R = r terms a compile-time count.
template <std::uint32_t R>
KOKKOS_INLINE_FUNCTION void psgd_expand_row(const float* pa, const float* q, std::uint64_t cols, float* out) {
  double pv[R];
  for (std::uint32_t c = 0; c < R; ++c) pv[c] = pa[c];
  for (std::uint64_t b = 0; b < cols; ++b) {
    double sum = 0;
    for (std::uint32_t c = 0; c < R; ++c) sum = add_rn(sum, mul_rn(pv[c], double(q[b * R + c])));
    out[b] = static_cast<float>(sum);
  }
}

// Orthonormal columns of P (rows x r) by modified Gram-Schmidt with one
// reorthogonalization ("twice is enough"), in one sequential pass: the same
// bits on every rank and backend. A column left with less than psgd_dependent
// of its norm lies (numerically) in the span of the ones before it (a
// gradient of rank below r) and becomes 0 instead of a normalized rounding
// error.
constexpr double psgd_dependent = 1e-5;

template <class E, class V>
void psgd_orthonormalize_serial(const E& exec, const V& p, std::uint64_t p_off, std::uint64_t rows, std::uint32_t r) {
  Kokkos::parallel_for(
      "qsgd::comm::powersgd::orthonormalize", Kokkos::RangePolicy<E>(exec, 0, 1), KOKKOS_LAMBDA(int) {
        for (std::uint32_t c = 0; c < r; ++c) {
          double before = 0;
          for (std::uint64_t a = 0; a < rows; ++a) before = add_rn(before, sq(p(p_off + a * r + c)));
          for (int pass = 0; pass < 2; ++pass)
            for (std::uint32_t k = 0; k < c; ++k) {
              double dot = 0;
              for (std::uint64_t a = 0; a < rows; ++a)
                dot = add_rn(dot, mul_rn(double(p(p_off + a * r + k)), double(p(p_off + a * r + c))));
              for (std::uint64_t a = 0; a < rows; ++a)
                p(p_off + a * r + c) =
                    static_cast<float>(add_rn(double(p(p_off + a * r + c)), -mul_rn(dot, double(p(p_off + a * r + k)))));
            }
          double norm2 = 0;
          for (std::uint64_t a = 0; a < rows; ++a) norm2 = add_rn(norm2, sq(p(p_off + a * r + c)));
          const bool keep = norm2 > 0 && norm2 > psgd_dependent * psgd_dependent * before;
          const double inv = keep ? 1.0 / Kokkos::Experimental::sqrt(norm2) : 0.0;
          for (std::uint64_t a = 0; a < rows; ++a)
            p(p_off + a * r + c) = static_cast<float>(mul_rn(double(p(p_off + a * r + c)), inv));
        }
      });
}

// ---- the device shapes: a thread per output element; a team per matrix ------

// Where element (i, j, t) of an operand sits: off + i*di + j*dj + t*dt.
struct Strided {
  std::uint64_t off, di, dj, dt;
  KOKKOS_INLINE_FUNCTION std::uint64_t at(std::uint64_t i, std::uint64_t j, std::uint64_t t) const {
    return off + i * di + j * dj + t * dt;
  }
};

// out(o.at(i, j, 0)) = sum over t < len of x(xs.at(i, j, t)) y(ys.at(i, j, t)),
// t in increasing order, in double with each product and sum rounded once,
// for every i < n1 and j < n2: a thread per output element (j fastest).
template <class E, class X, class Y, class O>
void psgd_dots(const E& exec, const char* label, std::uint64_t n1, std::uint64_t n2, std::uint64_t len, const X& x,
               Strided xs, const Y& y, Strided ys, const O& out, Strided os) {
  Kokkos::parallel_for(label, Kokkos::RangePolicy<E>(exec, 0, n1 * n2), KOKKOS_LAMBDA(std::uint64_t e) {
    const std::uint64_t i = e / n2, j = e % n2;
    double sum = 0;
    for (std::uint64_t t = 0; t < len; ++t) sum = add_rn(sum, mul_rn(double(x(xs.at(i, j, t))), double(y(ys.at(i, j, t)))));
    out(os.at(i, j, 0)) = static_cast<float>(sum);
  });
}

// psgd_project with a thread per element (a, c) of P: the sum over b in
// increasing order, as psgd_project_rows's lane c of row a computes it.
template <class E, class M, class V>
void psgd_project_elements(const E& exec, const M& m, std::uint64_t m_off, std::uint64_t rows, std::uint64_t cols,
                           const V& q, std::uint64_t q_off, std::uint32_t r, const V& p, std::uint64_t p_off) {
  psgd_dots(exec, "qsgd::comm::powersgd::project", rows, r, cols, m, Strided{m_off, cols, 0, 1}, q,
            Strided{q_off, 0, 1, r}, p, Strided{p_off, r, 1, 0});
}

// psgd_back with a thread per element (b, c) of Q: the sum over a in
// increasing order; adjacent threads read adjacent columns of M's row.
template <class E, class M, class V>
void psgd_back_elements(const E& exec, const M& m, std::uint64_t m_off, std::uint64_t rows, std::uint64_t cols,
                        const V& p, std::uint64_t p_off, std::uint32_t r, const V& q, std::uint64_t q_off) {
  psgd_dots(exec, "qsgd::comm::powersgd::back", r, cols, rows, m, Strided{m_off, 0, 1, cols}, p,
            Strided{p_off, 1, 0, r}, q, Strided{q_off, 1, r, 0});
}

// out = P Q^T with a thread per element (a, b) of out: the sum over c in
// increasing order.
template <class E, class V>
void psgd_expand_elements(const E& exec, const V& p, std::uint64_t p_off, const V& q, std::uint64_t q_off,
                          std::uint64_t rows, std::uint64_t cols, std::uint32_t r, const V& out, std::uint64_t o_off) {
  psgd_dots(exec, "qsgd::comm::powersgd::expand", rows, cols, r, p, Strided{p_off, r, 0, 1}, q, Strided{q_off, 0, r, 1},
            out, Strided{o_off, cols, 1, 0});
}

// out = P Q^T (rows x cols): parallel over rows, the sums of one row
// independent of each other; r > psgd_lanes takes the element kernel.
template <class E, class V>
void psgd_expand_rows(const E& exec, const V& p, std::uint64_t p_off, const V& q, std::uint64_t q_off, std::uint64_t rows,
                      std::uint64_t cols, std::uint32_t r, const V& out, std::uint64_t o_off) {
  if (r > psgd_lanes) {
    psgd_expand_elements(exec, p, p_off, q, q_off, rows, cols, r, out, o_off);
    return;
  }
  const float* pp = p.data() + p_off;
  const float* qp = q.data() + q_off;
  float* op = out.data() + o_off;
  Kokkos::parallel_for(
      "qsgd::comm::powersgd::expand", Kokkos::RangePolicy<E>(exec, 0, rows), KOKKOS_LAMBDA(std::uint64_t a) {
        psgd_with_lanes(r, [&](auto w) { psgd_expand_row<decltype(w)::value>(pp + a * r, qp, cols, op + a * cols); });
      });
}

// psgd_orthonormalize_serial with a team: the dots and norms stay one
// sequential sum each (their order is the definition), computed by one lane
// and broadcast; the updates and the scaling, element-wise, run over the
// team's lanes.
template <class E, class V>
void psgd_orthonormalize_team(const E& exec, const V& p, std::uint64_t p_off, std::uint64_t rows, std::uint32_t r) {
  using Policy = Kokkos::TeamPolicy<E>;
  Kokkos::parallel_for(
      "qsgd::comm::powersgd::orthonormalize", Policy(exec, 1, Kokkos::AUTO),
      KOKKOS_LAMBDA(const typename Policy::member_type& m) {
        // sum over a of p[a][k] p[a][c] in increasing a, by one lane, for
        // all (k = c: the squared norm, the same products as sq).
        const auto dot = [&](std::uint32_t k, std::uint32_t c) {
          double v = 0;
          m.team_barrier();
          Kokkos::single(
              Kokkos::PerTeam(m),
              [&](double& out) {
                double acc = 0;
                for (std::uint64_t a = 0; a < rows; ++a)
                  acc = add_rn(acc, mul_rn(double(p(p_off + a * r + k)), double(p(p_off + a * r + c))));
                out = acc;
              },
              v);
          return v;
        };
        for (std::uint32_t c = 0; c < r; ++c) {
          const double before = dot(c, c);
          for (int pass = 0; pass < 2; ++pass)
            for (std::uint32_t k = 0; k < c; ++k) {
              const double d = dot(k, c);
              Kokkos::parallel_for(Kokkos::TeamThreadRange(m, rows), [&](std::uint64_t a) {
                p(p_off + a * r + c) =
                    static_cast<float>(add_rn(double(p(p_off + a * r + c)), -mul_rn(d, double(p(p_off + a * r + k)))));
              });
            }
          const double norm2 = dot(c, c);
          const bool keep = norm2 > 0 && norm2 > psgd_dependent * psgd_dependent * before;
          const double inv = keep ? 1.0 / Kokkos::Experimental::sqrt(norm2) : 0.0;
          Kokkos::parallel_for(Kokkos::TeamThreadRange(m, rows), [&](std::uint64_t a) {
            p(p_off + a * r + c) = static_cast<float>(mul_rn(double(p(p_off + a * r + c)), inv));
          });
          m.team_barrier();
        }
      });
}

// The shape per backend: the host's walks for spaces the host can access,
// the element and team kernels otherwise.
template <class E>
constexpr bool psgd_host_shape() {
  return Kokkos::SpaceAccessibility<E, Kokkos::HostSpace>::accessible;
}

// psgd_project, psgd_back, psgd_expand, psgd_orthonormalize: the shape of the space.
template <class E, class... A>
void psgd_project(const E& exec, const A&... args) {
  if constexpr (psgd_host_shape<E>()) psgd_project_rows(exec, args...); else psgd_project_elements(exec, args...);
}
template <class E, class... A>
void psgd_back(const E& exec, const A&... args) {
  if constexpr (psgd_host_shape<E>()) psgd_back_tiles(exec, args...); else psgd_back_elements(exec, args...);
}
template <class E, class... A>
void psgd_expand(const E& exec, const A&... args) {
  if constexpr (psgd_host_shape<E>()) psgd_expand_rows(exec, args...); else psgd_expand_elements(exec, args...);
}
template <class E, class... A>
void psgd_orthonormalize(const E& exec, const A&... args) {
  if constexpr (psgd_host_shape<E>()) psgd_orthonormalize_serial(exec, args...); else psgd_orthonormalize_team(exec, args...);
}

}  // namespace qsgd::comm::detail
