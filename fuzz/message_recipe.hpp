#pragma once
// Input layout of the structure-aware message harness: a codec
// configuration, a vector to encode with the library's own encoder, then
// mutations of the encoded message (header fields, chunk offsets, scales,
// payload words, its size). The mutated message is re-sealed with a valid
// checksum, so that mutations reach the header validation and the decoders
// instead of stopping at the CRC. The seed generator writes recipes without
// mutations; libFuzzer adds them.
//
//   u8 codec (mod 7)   u8 flags   u16 n (mod max_n + 1)   u8 s class   u32 s
//   u32 d (mod n + 2; 0 = one bucket)   u32 chunk   u64 seed   u32 step
//   i8 exponent   values (by value mode, see make_values)
//   u8 mutation count (mod 17)   per mutation: u8 op   u32 where   u64 value

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include <qsgd/kernels/config.hpp>

#include "common.hpp"

namespace qsgd_fuzz {

struct Mutation {
  std::uint8_t op = 0;
  std::uint32_t where = 0;
  std::uint64_t value = 0;
};

struct MessageRecipe {
  static constexpr std::uint32_t max_n = 2048;
  enum Flags : std::uint8_t {
    norm_l2 = 1,          // else max
    deterministic = 2,    // quantize_deterministic + encode(q), else the stochastic encode
    expect_n = 4,         // the receiver knows n (the exchanges), else Expect::max_n
    no_reseal = 8,        // keep the mutated checksum (the CRC rejects nearly all of these)
    value_mode = 16 | 32  // 0 int8, 1 sparse int8, 2 raw f32, 3 int16
  };

  std::uint8_t codec = 3;
  std::uint8_t flags = 0;
  std::uint16_t n = 0;
  std::uint8_t s_class = 0;
  std::uint32_t s = 16, d = 0, chunk = 64;
  std::uint64_t seed = 1;
  std::uint32_t step = 0;
  std::int8_t exponent = 0;
  std::vector<std::uint8_t> value_bytes;  // as many as the value mode reads for n coordinates
  std::vector<Mutation> mutations;

  static std::size_t bytes_per_value(std::uint8_t flags) {
    switch ((flags & value_mode) >> 4) {
      case 0:
      case 1: return 1;
      case 2: return 4;
      default: return 2;
    }
  }

  qsgd::CodecConfig config() const {
    qsgd::CodecConfig c;
    c.codec = static_cast<qsgd::CodecKind>(codec % 7);
    c.norm = flags & norm_l2 ? qsgd::Norm::l2 : qsgd::Norm::max;
    const std::uint32_t limit = c.codec == qsgd::CodecKind::rans ? qsgd::rans_max_s : qsgd::max_levels;
    const std::uint32_t span[4] = {8, 256, 65536, limit};
    c.s = 1 + s % std::min(span[s_class % 4], limit);
    c.d = d % (std::uint32_t(n) + 2);
    c.chunk = 1 + chunk % qsgd::max_chunk;
    return c;
  }

  std::uint64_t size() const { return n % (max_n + 1); }

  // The vector to encode: small integers times 2^exponent (dense or mostly
  // zero), 16-bit integers, or raw floats (NaN, Inf, subnormals included,
  // which the encoder must reject or handle).
  std::vector<float> make_values() const {
    const std::uint64_t count = size();
    std::vector<float> v(count, 0.0f);
    const std::size_t w = bytes_per_value(flags);
    const float scale = std::ldexp(1.0f, exponent);
    for (std::uint64_t i = 0; i < count; ++i) {
      const std::size_t at = i * w;
      std::uint8_t b[4] = {0, 0, 0, 0};
      for (std::size_t k = 0; k < w; ++k) b[k] = at + k < value_bytes.size() ? value_bytes[at + k] : 0;
      switch ((flags & value_mode) >> 4) {
        case 0: v[i] = static_cast<float>(static_cast<std::int8_t>(b[0])) * scale; break;
        case 1: v[i] = b[0] < 192 ? 0.0f : static_cast<float>(int(b[0]) - 224) * scale; break;
        case 2: std::memcpy(&v[i], b, 4); break;
        default: v[i] = static_cast<float>(static_cast<std::int16_t>(b[0] | (b[1] << 8))) * scale; break;
      }
    }
    return v;
  }

  static MessageRecipe read(ByteReader& in) {
    MessageRecipe r;
    r.codec = in.u8();
    r.flags = in.u8();
    r.n = in.u16();
    r.s_class = in.u8();
    r.s = in.u32();
    r.d = in.u32();
    r.chunk = in.u32();
    r.seed = in.u64();
    r.step = in.u32();
    r.exponent = static_cast<std::int8_t>(in.u8());
    const std::size_t want = r.size() * bytes_per_value(r.flags);
    const std::size_t take = std::min(want, in.left());
    r.value_bytes.assign(in.here(), in.here() + take);
    in.skip(want);
    const unsigned count = in.u8() % 17;
    for (unsigned k = 0; k < count && in.left() > 0; ++k) {
      Mutation m;
      m.op = in.u8();
      m.where = in.u32();
      m.value = in.u64();
      r.mutations.push_back(m);
    }
    return r;
  }

  void write(ByteWriter& out) const {
    out.u8(codec);
    out.u8(flags);
    out.u16(n);
    out.u8(s_class);
    out.u32(s);
    out.u32(d);
    out.u32(chunk);
    out.u64(seed);
    out.u32(step);
    out.u8(static_cast<std::uint8_t>(exponent));
    out.bytes(value_bytes.data(), value_bytes.size());
    out.u8(static_cast<std::uint8_t>(mutations.size()));
    for (const Mutation& m : mutations) {
      out.u8(m.op);
      out.u32(m.where);
      out.u64(m.value);
    }
  }
};

}  // namespace qsgd_fuzz
