#pragma once
// Helpers shared by the qsgd::kernels tests.
//
// Everything runs against Kokkos::DefaultExecutionSpace and its memory space;
// data moves through host mirrors, and every reference computation happens on
// the host in double precision, so the same tests compile for CUDA. Inputs come
// from std::mt19937_64 with fixed seeds (never inside a kernel).

#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include <qsgd/kernels.hpp>

namespace qsgd_test {

using Exec = Kokkos::DefaultExecutionSpace;
using Mem = Exec::memory_space;
using Values = Kokkos::View<float*, Mem>;
using Words = Kokkos::View<std::uint64_t*, Mem>;
using ConstWords = Kokkos::View<const std::uint64_t*, Mem>;
using Quant = qsgd::Quantized<Mem>;
using Codec = qsgd::Codec<Exec>;

// ---- transfers -------------------------------------------------------------

inline Values to_device(const std::vector<float>& h, std::size_t extent = 0) {
  Values v(Kokkos::view_alloc(Kokkos::WithoutInitializing, "test::values"), std::max(extent, h.size()));
  auto m = Kokkos::create_mirror_view(v);
  for (std::size_t i = 0; i < m.extent(0); ++i) m(i) = i < h.size() ? h[i] : 0.0f;
  Kokkos::deep_copy(v, m);
  return v;
}

template <class V>
std::vector<std::remove_const_t<typename V::value_type>> to_host(const V& v, std::size_t n) {
  auto m = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
  return std::vector<std::remove_const_t<typename V::value_type>>(m.data(), m.data() + std::min(n, m.extent(0)));
}

struct HostQuant {
  std::vector<std::int32_t> levels;
  std::vector<float> scales;
  std::uint64_t n = 0;
  std::uint32_t d = 0, s = 0;
  qsgd::Norm norm = qsgd::Norm::none;
  qsgd::QuantizerKind kind = qsgd::QuantizerKind::none;
};

inline HostQuant to_host(const Quant& q) {
  HostQuant h;
  h.levels = to_host(q.levels, q.n);
  h.scales = to_host(q.scales, q.buckets());
  h.n = q.n;
  h.d = q.d;
  h.s = q.s;
  h.norm = q.norm;
  h.kind = q.kind;
  return h;
}

inline std::uint32_t float_bits(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}
inline float bits_float(std::uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

// ---- messages ----------------------------------------------------------------

// A message held in a buffer of exactly ceil(bytes/8) words, so that
// AddressSanitizer flags a read one byte past it. On a host-accessible memory
// space the words are a plain heap array (a Kokkos allocation carries padding
// and a header that would hide small overreads); elsewhere a device View.
class MsgBuf {
 public:
  MsgBuf(const std::uint64_t* words, std::size_t nwords_avail, std::size_t bytes) : bytes_(bytes) {
    const std::size_t nw = (bytes + 7) / 8;
    std::vector<std::uint64_t> tmp(nw, 0);
    std::copy(words, words + std::min(nw, nwords_avail), tmp.begin());
    if constexpr (Kokkos::SpaceAccessibility<Kokkos::HostSpace, Mem>::accessible) {
      host_.reset(new std::uint64_t[nw == 0 ? 1 : nw]);
      std::copy(tmp.begin(), tmp.end(), host_.get());
      view_ = Words(host_.get(), nw);
    } else {
      view_ = Words("test::message", nw);
      auto m = Kokkos::create_mirror_view(view_);
      for (std::size_t i = 0; i < nw; ++i) m(i) = tmp[i];
      Kokkos::deep_copy(view_, m);
    }
  }
  MsgBuf(const std::vector<std::uint64_t>& words, std::size_t bytes) : MsgBuf(words.data(), words.size(), bytes) {}

  ConstWords view() const { return view_; }
  std::size_t bytes() const { return bytes_; }

 private:
  std::unique_ptr<std::uint64_t[]> host_;
  Words view_;
  std::size_t bytes_;
};

struct Encoded {
  std::vector<std::uint64_t> words;  // exactly bytes / 8 words
  std::size_t bytes = 0;
  qsgd::MessageHeader h;
};

inline qsgd::MessageHeader header_of(const std::vector<std::uint64_t>& w) {
  qsgd::MessageHeader h;
  std::memcpy(static_cast<void*>(&h), w.data(), sizeof(h));
  return h;
}
inline void set_header(std::vector<std::uint64_t>& w, const qsgd::MessageHeader& h) {
  std::memcpy(w.data(), &h, sizeof(h));
}

// Recomputes the checksum of a host copy after an edit (checksum: u32
// little-endian at byte 60, over bytes [0, 60) and [64, bytes)).
inline void reseal(std::vector<std::uint64_t>& w, std::size_t bytes) {
  const std::uint32_t c = qsgd::message_checksum_host(w.data(), bytes);
  unsigned char* p = reinterpret_cast<unsigned char*>(w.data()) + qsgd::checksum_offset;
  for (int k = 0; k < 4; ++k) p[k] = static_cast<unsigned char>(c >> (8 * k));
}

inline Encoded take_message(const Words& out, std::size_t bytes) {
  Encoded e;
  e.bytes = bytes;
  e.words = to_host(out, bytes / 8);
  e.h = header_of(e.words);
  return e;
}

inline Encoded encode_values(Codec& codec, const Values& v, std::uint64_t n, const qsgd::RngKey& key) {
  Words out("test::out", codec.max_message_bytes(n) / 8);
  const std::size_t bytes = codec.encode(v, n, key, out);
  return take_message(out, bytes);
}

inline Encoded encode_quantized(Codec& codec, const Quant& q) {
  Words out("test::out", codec.max_message_bytes(q.n) / 8 + 1);
  const std::size_t bytes = codec.encode(q, out);
  return take_message(out, bytes);
}

inline qsgd::CodecConfig config(qsgd::CodecKind c, std::uint32_t s, std::uint32_t d, qsgd::Norm norm,
                                std::uint32_t chunk = 4096) {
  qsgd::CodecConfig cfg;
  cfg.codec = c;
  cfg.s = s;
  cfg.d = d;
  cfg.norm = norm;
  cfg.chunk = chunk;
  return cfg;
}

// ---- inputs ------------------------------------------------------------------

enum class Input { gaussian, heavy, sparse, constant, zero, huge };

inline const char* input_name(Input k) {
  switch (k) {
    case Input::gaussian: return "gaussian";
    case Input::heavy: return "heavy";
    case Input::sparse: return "sparse";
    case Input::constant: return "constant";
    case Input::zero: return "zero";
    case Input::huge: return "huge";
  }
  return "?";
}

// gaussian: N(0,1). heavy: Student-t with 2 degrees of freedom (infinite
// variance). sparse: 90% exact zeros, else N(0,1). constant: every entry 0.7.
// zero: all zeros. huge: N(0,1) with one coordinate (n/3) equal to 1e30.
inline std::vector<float> make_input(Input kind, std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  std::student_t_distribution<double> student(2.0);
  std::bernoulli_distribution keep(0.1);
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    switch (kind) {
      case Input::gaussian: v[i] = static_cast<float>(normal(rng)); break;
      case Input::heavy: v[i] = static_cast<float>(student(rng)); break;
      case Input::sparse: {
        const bool k = keep(rng);
        const double x = normal(rng);
        v[i] = k ? static_cast<float>(x) : 0.0f;
        break;
      }
      case Input::constant: v[i] = 0.7f; break;
      case Input::zero: v[i] = 0.0f; break;
      case Input::huge: v[i] = static_cast<float>(normal(rng)); break;
    }
  }
  if (kind == Input::huge && n > 0) v[n / 3] = 1e30f;
  return v;
}

// ---- the quantizer's exact distribution ----------------------------------------

// Exact scale of each bucket (spec section 1), in long double.
inline std::vector<long double> exact_scales(const std::vector<float>& v, std::uint64_t n, std::uint64_t d,
                                             qsgd::Norm norm) {
  const std::uint64_t nb = n == 0 ? 0 : (n + d - 1) / d;
  std::vector<long double> out(nb, 0.0L);
  for (std::uint64_t i = 0; i < n; ++i) {
    const long double a = std::fabs(static_cast<long double>(v[i]));
    if (norm == qsgd::Norm::max) out[i / d] = std::max(out[i / d], a);
    else out[i / d] += a * a;
  }
  if (norm != qsgd::Norm::max)
    for (auto& x : out) x = std::sqrt(x);
  return out;
}

// Per coordinate: unit = scale/s, x = |v| s / scale (the level position),
// l = floor(x) (l = s, p = 0 when x >= s), p = x - l. Q(v_i) is sign * unit *
// (l + Bernoulli(p)). Computed in double from the scales the library chose.
struct Coord {
  double unit = 0, x = 0, p = 0;
  std::uint32_t l = 0;
  bool neg = false;
};

inline std::vector<Coord> coord_model(const std::vector<float>& v, std::uint64_t n, const std::vector<float>& scales,
                                      std::uint64_t d, std::uint32_t s) {
  std::vector<Coord> m(n);
  for (std::uint64_t i = 0; i < n; ++i) {
    const double scale = scales[i / d];
    Coord& c = m[i];
    c.neg = v[i] < 0.0f;
    if (!(scale > 0.0)) continue;
    c.unit = scale / s;
    c.x = std::fabs(static_cast<double>(v[i])) / scale * s;
    if (c.x >= s) {
      c.l = s;
      c.p = 0.0;
    } else {
      c.l = static_cast<std::uint32_t>(std::floor(c.x));
      c.p = c.x - c.l;
    }
  }
  return m;
}

// How far the library's rounding probability may sit from the exact p of a
// coordinate, in level units. The library forms x_f = fl(|v| * fl(s/scale))
// (two roundings, |x_f - x| <= 2^-23 x) and draws u uniform on multiples of
// 2^-24, so P(u < p_f) - p_f is in [0, 2^-24). The expected level l + P is
// continuous in x, so every expectation that interpolates between levels l and
// l+1 moves by at most (its step) * (2^-23 x + 2^-24). We allow twice that.
inline double prob_slack(const Coord& c) { return std::ldexp(c.x, -22) + std::ldexp(1.0, -23); }

// Bernstein's inequality: for S a sum of independent terms X_j with
// |X_j - E X_j| <= M and sum Var X_j <= V,
//   P(|S - E S| >= t) <= 2 exp(-t^2 / (2 (V + M t / 3))).
// Setting the right side to delta and solving the quadratic for t gives the
// deviation returned here. Unlike a normal approximation it stays valid for
// rare, large jumps (a coordinate rounded up with probability 1e-8), where
// "z standard errors" would not.
inline double bernstein(double V, double M, double delta) {
  const double L = std::log(2.0 / delta);
  const double a = M * L / 3.0;
  return a + std::sqrt(a * a + 2.0 * V * L);
}

// ---- reference codes ----------------------------------------------------------

// Elias omega from the spec's definition: write "0"; while k > 1, prepend the
// binary form of k and set k to (its bit length - 1).
inline std::string omega_string(std::uint64_t k) {
  std::string code = "0";
  while (k > 1) {
    std::string b;
    for (std::uint64_t t = k; t != 0; t >>= 1) b.insert(b.begin(), static_cast<char>('0' + (t & 1)));
    code = b + code;
    k = b.size() - 1;
  }
  return code;
}

inline std::uint32_t omega_len_ref(std::uint64_t k) {
  std::uint32_t len = 1;
  while (k > 1) {
    std::uint32_t w = 0;
    for (std::uint64_t t = k; t != 0; t >>= 1) ++w;
    len += w;
    k = w - 1;
  }
  return len;
}

inline std::uint32_t dense_len_ref(std::uint64_t level) { return omega_len_ref(level + 1) + (level != 0 ? 1 : 0); }

// MSB-first bit string (stream bit k is bit 63 - k%64 of word k/64).
struct BitString {
  std::vector<std::uint64_t> words;
  std::uint64_t bits = 0;
  void push_bit(bool b) {
    if (bits % 64 == 0) words.push_back(0);
    if (b) words.back() |= std::uint64_t(1) << (63 - bits % 64);
    ++bits;
  }
  void push(std::uint64_t v, std::uint32_t len) {
    for (std::uint32_t k = len; k-- > 0;) push_bit(((v >> k) & 1u) != 0);
  }
  void push_string(const std::string& s) {
    for (char ch : s) push_bit(ch == '1');
  }
};

// The payload (and, for the Elias codes, the chunk bit offsets) of a message,
// written straight from the definitions in spec section 2 and codec.hpp.
struct RefPayload {
  BitString payload;
  std::vector<std::uint64_t> offsets;
};

// rANS payload from the definition in detail/rans.hpp, with plain division,
// for the frequency table `table` (16-bit units as sent: P, m, (gap, f)...;
// the encoder's choice of frequencies is checked separately).
inline RefPayload reference_rans_payload(const std::vector<std::int32_t>& levels, std::uint64_t n, std::uint32_t s,
                                         std::uint32_t chunk, const std::vector<std::uint16_t>& table) {
  RefPayload r;
  if (n == 0) return r;
  const std::uint32_t P = table[0], m = table[1];
  std::vector<std::uint32_t> freq(2 * s + 1, 0), start(2 * s + 1, 0);
  std::uint32_t sym = 0, cum = 0;
  for (std::uint32_t k = 0; k < m; ++k) {
    sym = k == 0 ? table[2] : sym + 1 + table[2 + 2 * k];
    freq[sym] = table[3 + 2 * k];
    start[sym] = cum;
    cum += freq[sym];
  }
  std::vector<std::uint16_t> units(table.begin(), table.begin() + 2 + 2 * std::size_t(m));
  while (units.size() % 4 != 0) units.push_back(0);  // the table fills whole words
  for (std::uint64_t i0 = 0; i0 < n; i0 += chunk) {
    const std::uint64_t i1 = std::min<std::uint64_t>(n, i0 + chunk);
    r.offsets.push_back(16 * units.size());
    std::uint64_t x[4] = {1u << 15, 1u << 15, 1u << 15, 1u << 15};
    std::vector<std::uint16_t> emitted;
    for (std::uint64_t i = i1; i-- > i0;) {
      std::uint64_t& xs = x[(i - i0) % 4];
      const std::uint32_t k = static_cast<std::uint32_t>(levels[i] + static_cast<std::int32_t>(s));
      const std::uint64_t f = freq[k];
      if (xs >= ((std::uint64_t(1) << (15 - P)) << 16) * f) {
        emitted.push_back(static_cast<std::uint16_t>(xs & 0xFFFF));
        xs >>= 16;
      }
      xs = (xs / f) * (std::uint64_t(1) << P) + xs % f + start[k];
    }
    for (std::uint64_t xs : x) {
      units.push_back(static_cast<std::uint16_t>(xs & 0xFFFF));
      units.push_back(static_cast<std::uint16_t>(xs >> 16));
    }
    units.insert(units.end(), emitted.rbegin(), emitted.rend());
  }
  for (std::uint16_t u : units) r.payload.push(u, 16);  // MSB-first, like every payload
  return r;
}

inline RefPayload reference_payload(qsgd::CodecKind codec, const std::vector<std::int32_t>& levels, std::uint64_t n,
                                    std::uint32_t s, std::uint32_t chunk,
                                    const std::vector<std::uint16_t>& rans_table = {}) {
  if (codec == qsgd::CodecKind::rans) return reference_rans_payload(levels, n, s, chunk, rans_table);
  RefPayload r;
  auto mag = [](std::int32_t l) { return static_cast<std::uint64_t>(l < 0 ? -static_cast<std::int64_t>(l) : l); };
  if (codec == qsgd::CodecKind::fixed) {
    std::uint32_t lb = 0;
    for (std::uint64_t t = s; t != 0; t >>= 1) ++lb;
    for (std::uint64_t i = 0; i < n; ++i) {
      r.payload.push_bit(levels[i] < 0);
      r.payload.push(mag(levels[i]), lb);
    }
    return r;
  }
  for (std::uint64_t i0 = 0; i0 < n; i0 += chunk) {
    const std::uint64_t i1 = std::min<std::uint64_t>(n, i0 + chunk);
    r.offsets.push_back(r.payload.bits);
    if (codec == qsgd::CodecKind::elias_dense) {
      for (std::uint64_t i = i0; i < i1; ++i) {
        r.payload.push_string(omega_string(mag(levels[i]) + 1));
        if (levels[i] != 0) r.payload.push_bit(levels[i] < 0);
      }
    } else {
      std::uint64_t count = 0;
      for (std::uint64_t i = i0; i < i1; ++i) count += levels[i] != 0;
      r.payload.push_string(omega_string(count + 1));
      std::uint64_t prev_pos = 0;  // position counted from 1; the chunk's first coordinate is 1
      for (std::uint64_t i = i0; i < i1; ++i) {
        if (levels[i] == 0) continue;
        const std::uint64_t pos = i - i0 + 1;
        r.payload.push_string(omega_string(pos - prev_pos));
        r.payload.push_bit(levels[i] < 0);
        r.payload.push_string(omega_string(mag(levels[i])));
        prev_pos = pos;
      }
    }
  }
  return r;
}

// Expects `f` to throw qsgd::Error with `code`; returns its message.
template <class F>
std::string expect_error(qsgd::Errc code, F&& f, const std::string& context = "") {
  try {
    f();
  } catch (const qsgd::Error& e) {
    EXPECT_EQ(static_cast<int>(e.code()), static_cast<int>(code))
        << context << ": got '" << e.what() << "', expected " << qsgd::to_string(code);
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << context << ": threw a non-qsgd exception: " << e.what();
    return e.what();
  }
  ADD_FAILURE() << context << ": did not throw (expected " << qsgd::to_string(code) << ")";
  return "";
}

}  // namespace qsgd_test
