// Wire codes of spec section 2: Elias omega codewords, the bit streams, the
// 16-bit float conversions, and exact round trips of every codec, with the
// message payload compared bit for bit against a reference encoder written
// from the spec. Label: unit.

#include <cmath>
#include <cstdio>
#include <limits>
#include <set>
#include <sstream>
#include <tuple>

#include "test_util.hpp"

namespace {

using namespace qsgd_test;
using qsgd::CodecKind;
using qsgd::Errc;
using qsgd::Norm;

using HostWords = Kokkos::View<std::uint64_t*, Kokkos::HostSpace>;

std::string codeword_string(const qsgd::detail::Codeword& c) {
  std::string s;
  for (std::uint32_t k = c.len; k-- > 0;) s.push_back(((c.bits >> k) & 1u) ? '1' : '0');
  return s;
}

// ---- 5. Elias omega ------------------------------------------------------------------

// Textbook omega codewords (Elias 1975): "0" ends the code; each group is the
// binary form of the previous group's length minus one. Derived by hand from
// the spec's definition, e.g. 16: binary 10000 (5 bits) -> prepend binary(4) =
// 100 (3 bits) -> prepend binary(2) = 10 -> "10" "100" "10000" "0".
TEST(EliasOmega, SmallIntegersMatchTheTextbookTable) {
  const char* table[] = {nullptr,   "0",        "100",      "110",      "101000",  "101010",
                         "101100",  "101110",   "1110000",  "1110010",  "1110100", "1110110",
                         "1111000", "1111010",  "1111100",  "1111110",  "10100100000"};
  for (std::uint64_t k = 1; k <= 16; ++k) {
    EXPECT_EQ(omega_string(k), table[k]) << "reference omega_string(" << k << ")";
    EXPECT_EQ(codeword_string(qsgd::detail::omega_encode(k)), table[k]) << "omega_encode(" << k << ")";
    EXPECT_EQ(qsgd::detail::omega_length(k), std::string(table[k]).size()) << "omega_length(" << k << ")";
  }
  // A few larger ones from the same definition.
  EXPECT_EQ(codeword_string(qsgd::detail::omega_encode(17)), "10100100010");
  EXPECT_EQ(codeword_string(qsgd::detail::omega_encode(100)), "1011011001000");
  EXPECT_EQ(omega_string(100), "1011011001000");
}

std::vector<std::uint64_t> omega_samples() {
  std::vector<std::uint64_t> ks;
  for (std::uint64_t k = 1; k <= (1u << 20); ++k) ks.push_back(k);
  std::mt19937_64 rng(11);
  for (int j = 0; j < 100000; ++j) {
    const int bits = 1 + static_cast<int>(rng() % 32);  // log-uniform magnitude up to 2^32 - 1
    std::uint64_t k = rng() & ((std::uint64_t(1) << bits) - 1);
    ks.push_back(k == 0 ? 1 : k);
  }
  for (std::uint64_t k : {0xFFFFFFFFull, 0x80000000ull, 0x7FFFFFFFull, 65535ull, 65536ull}) ks.push_back(k);
  return ks;
}

// omega_length == length of omega_encode == length of the spec's codeword,
// and the codeword bits equal the reference string, for 1..2^20 and 10^5
// log-uniform samples up to 2^32 - 1.
TEST(EliasOmega, EncodeAndLengthAgreeWithTheDefinition) {
  for (std::uint64_t k : omega_samples()) {
    const auto cw = qsgd::detail::omega_encode(k);
    ASSERT_EQ(cw.len, qsgd::detail::omega_length(k)) << k;
    ASSERT_EQ(cw.len, omega_len_ref(k)) << k;
    ASSERT_LE(cw.len, 45u) << k;  // bitstream.hpp: at most 45 bits below 2^32
    if (k < (1u << 12) || k % 97 == 0) {
      ASSERT_EQ(codeword_string(cw), omega_string(k)) << k;
    }
  }
}

// Every sample round-trips through BitWriter -> BitReader::omega, written as one
// stream that starts at an unaligned bit (13), so codewords straddle words.
TEST(EliasOmega, RoundTripThroughBitStreams) {
  const auto ks = omega_samples();
  std::uint64_t total = 13;
  for (std::uint64_t k : ks) total += qsgd::detail::omega_length(k);
  HostWords words("words", (total + 63) / 64);
  qsgd::detail::BitWriter<HostWords> wr(words, 13, total);
  for (std::uint64_t k : ks) {
    const auto cw = qsgd::detail::omega_encode(k);
    wr.put(cw.bits, cw.len);
  }
  wr.finish();
  ASSERT_EQ(wr.pos, total);
  qsgd::detail::BitReader<HostWords> rd(words, 13, total);
  for (std::uint64_t k : ks) ASSERT_EQ(rd.omega(0xFFFFFFFFull), k);
  EXPECT_FALSE(rd.overrun);
  EXPECT_EQ(rd.pos, total);
  // Reading on past the end: overrun, 0, and no access beyond the range.
  EXPECT_EQ(rd.omega(0xFFFFFFFFull), 0u);
  EXPECT_TRUE(rd.overrun);
}

// BitReader::omega reports (as 0) a value above its limit, a codeword cut by
// the end of the range, and a length prefix that would not fit 64 bits.
TEST(EliasOmega, ReaderRejectsOutOfLimitTruncatedAndOverlongCodes) {
  HostWords words("w", 4);
  {
    qsgd::detail::BitWriter<HostWords> wr(words, 0, 11);
    const auto cw = qsgd::detail::omega_encode(16);
    wr.put(cw.bits, cw.len);
    wr.finish();
  }
  EXPECT_EQ(qsgd::detail::BitReader<HostWords>(words, 0, 11).omega(16), 16u);
  EXPECT_EQ(qsgd::detail::BitReader<HostWords>(words, 0, 11).omega(15), 0u);
  qsgd::detail::BitReader<HostWords> cut(words, 0, 10);
  EXPECT_EQ(cut.omega(100), 0u);
  EXPECT_TRUE(cut.overrun);
  Kokkos::deep_copy(words, ~std::uint64_t(0));  // all ones: lengths grow until they exceed 62 bits
  qsgd::detail::BitReader<HostWords> ones(words, 0, 256);
  EXPECT_EQ(ones.omega(~std::uint64_t(0)), 0u);
}

// Two writers on adjacent ranges that share a word (the chunk boundary case of
// the Elias encoders) merge their bits; words wholly inside a range are stored.
TEST(BitStream, AdjacentRangesShareWords) {
  HostWords words("w", 4);
  BitString ref;
  std::mt19937_64 rng(12);
  std::vector<std::pair<std::uint64_t, std::uint32_t>> items;
  for (std::uint32_t len : {5u, 64u, 1u, 33u, 7u, 64u, 3u}) {
    const std::uint64_t v = len == 64 ? rng() : rng() & ((std::uint64_t(1) << len) - 1);
    items.push_back({v, len});
    ref.push(v, len);
  }
  const std::uint64_t cut = 5 + 64 + 1;  // first writer: items 0..2
  qsgd::detail::BitWriter<HostWords> a(words, 0, cut), b(words, cut, ref.bits);
  for (std::size_t j = 0; j < items.size(); ++j) (j < 3 ? a : b).put(items[j].first, items[j].second);
  b.finish();
  a.finish();
  for (std::size_t w = 0; w < ref.words.size(); ++w) EXPECT_EQ(words(w), ref.words[w]) << "word " << w;
  qsgd::detail::BitReader<HostWords> rd(words, 0, ref.bits);
  for (auto [v, len] : items) EXPECT_EQ(rd.get(len), v);
}

// ---- 16-bit float conversions --------------------------------------------------------

// Reference: round x to `mant` fraction bits with exponent >= emin (subnormals
// below), nearest, ties to even (nearbyint in the default rounding mode, on an
// exact power-of-two scaling in double); beyond the largest finite value
// (2 - 2^-mant) 2^emax the result is +-Inf.
double round_to_format(float xf, int mant, int emin, int emax) {
  const double x = xf;
  if (x == 0 || !std::isfinite(x)) return x;
  const int e = std::max(std::ilogb(x), emin);
  const double q = std::ldexp(1.0, e - mant);
  const double r = std::nearbyint(x / q) * q;
  const double maxv = std::ldexp(2.0 - std::ldexp(1.0, -mant), emax);
  if (std::fabs(r) > maxv) return std::copysign(INFINITY, x);
  return r;
}
double ref_half(float x) { return round_to_format(x, 10, -14, 15); }
double ref_bf16(float x) { return round_to_format(x, 7, -126, 127); }

double half_value(std::uint16_t h) {  // IEEE binary16 from its fields
  const int sign = h >> 15, exp = (h >> 10) & 31, frac = h & 1023;
  double v = exp == 0 ? std::ldexp(frac, -24) : exp == 31 ? (frac ? NAN : INFINITY) : std::ldexp(1024 + frac, exp - 25);
  return sign ? -v : v;
}

TEST(Float16, KnownValues) {
  using qsgd::detail::float_to_half;
  EXPECT_EQ(float_to_half(1.0f), 0x3C00);
  EXPECT_EQ(float_to_half(-2.0f), 0xC000);
  EXPECT_EQ(float_to_half(65504.0f), 0x7BFF);
  EXPECT_EQ(float_to_half(65519.99f), 0x7BFF);
  EXPECT_EQ(float_to_half(65520.0f), 0x7C00);  // rounds to Inf
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -14)), 0x0400);
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -25)), 0x0000);      // tie -> even (0)
  EXPECT_EQ(float_to_half(std::ldexp(3.0f, -25)), 0x0002);      // tie -> even (2)
  EXPECT_EQ(float_to_half(1.0f + std::ldexp(1.0f, -11)), 0x3C00);  // tie -> even
  EXPECT_EQ(float_to_half(1.0f + std::ldexp(3.0f, -11)), 0x3C02);  // tie -> even
  EXPECT_EQ(float_to_half(1.0f / 3.0f), 0x3555);
  EXPECT_EQ(float_to_half(-0.0f), 0x8000);
  EXPECT_EQ(float_to_half(std::numeric_limits<float>::infinity()), 0x7C00);
  EXPECT_EQ(float_to_half(std::numeric_limits<float>::quiet_NaN()) & 0x7C00, 0x7C00);
  EXPECT_NE(float_to_half(std::numeric_limits<float>::quiet_NaN()) & 0x03FF, 0);
  using qsgd::detail::float_to_bf16;
  EXPECT_EQ(float_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(float_to_bf16(3.14159265f), 0x4049);
  EXPECT_EQ(float_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3F80);  // tie -> even
  EXPECT_EQ(float_to_bf16(1.0f + std::ldexp(3.0f, -8)), 0x3F82);  // tie -> even
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::max()), 0x7F80);
  EXPECT_EQ(float_to_bf16(-0.0f), 0x8000);
  EXPECT_TRUE(std::isnan(qsgd::detail::bf16_to_float(float_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
}

// Every half decodes to its IEEE value and re-encodes to itself; every bf16
// is the top half of its float. Random floats of every magnitude, and the
// midpoints between neighbouring halves (ties), round like the reference.
TEST(Float16, ConversionsMatchTheReferenceRounding) {
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const float f = qsgd::detail::half_to_float(static_cast<std::uint16_t>(h));
    const double want = half_value(static_cast<std::uint16_t>(h));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(f)) << h;
      continue;
    }
    ASSERT_EQ(static_cast<double>(f), want) << h;
    ASSERT_EQ(std::signbit(f), (h & 0x8000) != 0) << h;
    ASSERT_EQ(qsgd::detail::float_to_half(f), h) << h;
    const float b = qsgd::detail::bf16_to_float(static_cast<std::uint16_t>(h));
    ASSERT_EQ(float_bits(b), h << 16);
    if (!std::isnan(b)) {
      ASSERT_EQ(qsgd::detail::float_to_bf16(b), h);
    }
  }
  // Midpoints between consecutive positive finite halves.
  for (std::uint32_t h = 0; h < 0x7BFF; ++h) {
    const float mid = static_cast<float>((half_value(static_cast<std::uint16_t>(h)) + half_value(static_cast<std::uint16_t>(h + 1))) / 2);
    const std::uint16_t even = (h & 1) ? static_cast<std::uint16_t>(h + 1) : static_cast<std::uint16_t>(h);
    ASSERT_EQ(qsgd::detail::float_to_half(mid), even) << "midpoint above half " << h;
    ASSERT_EQ(qsgd::detail::float_to_half(-mid), even | 0x8000) << "midpoint above half " << h;
  }
  std::mt19937_64 rng(13);
  for (int j = 0; j < 1000000; ++j) {
    const float x = bits_float(static_cast<std::uint32_t>(rng()));
    if (!std::isfinite(x)) continue;
    const float h = qsgd::detail::half_to_float(qsgd::detail::float_to_half(x));
    const float b = qsgd::detail::bf16_to_float(qsgd::detail::float_to_bf16(x));
    ASSERT_EQ(float_bits(h), float_bits(static_cast<float>(ref_half(x)))) << "fp16 of " << x;
    ASSERT_EQ(float_bits(b), float_bits(static_cast<float>(ref_bf16(x)))) << "bf16 of " << x;
  }
}

// ---- 6. round trips -------------------------------------------------------------------

// Gaussian values with exact zeros, -0.0 and a few larger entries.
std::vector<float> roundtrip_input(std::uint64_t n, std::uint64_t seed) {
  auto v = make_input(Input::gaussian, n, seed);
  for (std::uint64_t i = 0; i < n; i += 7) v[i] = 0.0f;
  for (std::uint64_t i = 3; i < n; i += 31) v[i] = -0.0f;
  for (std::uint64_t i = 5; i < n; i += 101) v[i] *= 40.0f;
  return v;
}

std::vector<float> random_acc(std::uint64_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  std::vector<float> a(n);
  for (auto& x : a) x = u(rng);
  return a;
}

// Checks the header and the sections of a message against the definition
// (message.hpp layout, reference payload from the spec) for a quantized vector.
void check_wire_format(const Encoded& e, const qsgd::CodecConfig& cfg, const HostQuant& r) {
  const qsgd::MessageHeader& h = e.h;
  const std::uint64_t n = r.n;
  EXPECT_EQ(h.magic, qsgd::message_magic);
  EXPECT_EQ(h.version, qsgd::message_version);
  EXPECT_EQ(h.codec, static_cast<std::uint8_t>(cfg.codec));
  EXPECT_EQ(h.norm, static_cast<std::uint8_t>(r.norm));
  EXPECT_EQ(h.n, n);
  EXPECT_EQ(h.d, r.d);
  EXPECT_EQ(h.s, r.s);
  EXPECT_EQ(h.quantizer, static_cast<std::uint8_t>(r.kind));
  for (std::uint8_t x : h.reserved) EXPECT_EQ(x, 0);
  EXPECT_EQ(h.total_bytes, e.bytes);
  EXPECT_EQ(h.checksum, qsgd::message_checksum_host(e.words.data(), e.bytes));
  const bool var = qsgd::is_variable_length(cfg.codec);
  const std::uint64_t nchunks = var ? (n + cfg.chunk - 1) / cfg.chunk : 0;
  EXPECT_EQ(h.chunk, var ? cfg.chunk : 0u);
  EXPECT_EQ(h.nchunks, nchunks);
  const std::uint64_t nb = n == 0 ? 0 : (n + r.d - 1) / r.d;
  const std::uint64_t scales_word = 8 + nchunks, payload_word = scales_word + (nb + 1) / 2;
  std::vector<std::uint16_t> table;
  if (cfg.codec == CodecKind::rans && n > 0) {
    // The encoder's frequency table: 2^P split over exactly the symbols that
    // occur, each at least 1, in increasing order.
    // Unit k of the payload: bits [16k, 16k + 16) of the MSB-first stream.
    auto u = [&](std::size_t k) {
      return static_cast<std::uint16_t>(e.words[payload_word + k / 4] >> (48 - 16 * (k % 4)));
    };
    ASSERT_GE(e.bytes, 8 * (payload_word + 1));
    const std::uint32_t P = u(0), m = u(1);
    ASSERT_GE(P, 1u);
    ASSERT_LE(P, 15u);
    ASSERT_LE(8 * payload_word + 2 * (2 + 2 * std::size_t(m)), e.bytes) << "table of " << m << " symbols";
    for (std::size_t k = 0; k < 2 + 2 * std::size_t(m); ++k) table.push_back(u(k));
    std::vector<std::uint64_t> count(2 * r.s + 1, 0);
    for (std::uint64_t i = 0; i < n; ++i) ++count[static_cast<std::size_t>(r.levels[i] + static_cast<std::int32_t>(r.s))];
    std::uint64_t sym = 0, sum = 0, present = 0;
    for (std::uint64_t c : count) present += c > 0;
    ASSERT_EQ(m, present) << "symbols in the table";
    for (std::uint32_t k = 0; k < m; ++k) {
      sym = k == 0 ? table[2] : sym + 1 + table[2 + 2 * k];
      ASSERT_LT(sym, count.size());
      ASSERT_GT(count[sym], 0u) << "symbol " << sym << " in the table does not occur";
      ASSERT_GE(table[3 + 2 * k], 1u);
      sum += table[3 + 2 * k];
    }
    ASSERT_EQ(sum, std::uint64_t(1) << P);
  }
  const RefPayload ref = reference_payload(cfg.codec, r.levels, n, r.s, cfg.chunk, table);
  ASSERT_EQ(h.payload_bits, ref.payload.bits);
  ASSERT_EQ(e.bytes, 8 * (payload_word + (ref.payload.bits + 63) / 64));
  for (std::uint64_t c = 0; c < nchunks; ++c) ASSERT_EQ(e.words[8 + c], ref.offsets[c]) << "offset of chunk " << c;
  const auto* sc = reinterpret_cast<const unsigned char*>(e.words.data() + scales_word);
  for (std::uint64_t b = 0; b < nb; ++b) {
    std::uint32_t u = 0;
    for (int k = 0; k < 4; ++k) u |= static_cast<std::uint32_t>(sc[4 * b + k]) << (8 * k);  // little-endian
    ASSERT_EQ(u, float_bits(r.scales[b])) << "scale of bucket " << b;
  }
  if (nb % 2 == 1) {
    std::uint32_t pad;
    std::memcpy(&pad, sc + 4 * nb, 4);
    EXPECT_EQ(pad, 0u) << "scale padding";
  }
  for (std::size_t w = 0; w < ref.payload.words.size(); ++w)
    ASSERT_EQ(e.words[payload_word + w], ref.payload.words[w]) << "payload word " << w;
}

// decode(encode(v)) against quantize(v) for one configuration: levels, scales
// and shape exactly; values bitwise equal to dequantize(q); decode_accumulate
// bitwise equal to fl(acc0 + fl(w * value)); the wire format equal to the
// reference; re-encoding the decoded vector gives the same bytes; a decoder
// configured for another codec reads the message from its header alone.
void check_roundtrip(const qsgd::CodecConfig& cfg, const std::vector<float>& v, const qsgd::RngKey& key) {
  const std::uint64_t n = v.size();
  const Values dv = to_device(v, std::max<std::uint64_t>(n, 1));
  Codec codec(cfg);
  const Encoded e = encode_values(codec, dv, n, key);
  ASSERT_LE(e.bytes, codec.max_message_bytes(n));
  Quant qref;
  qsgd::quantize(Exec(), cfg, dv, n, key, qref);
  const HostQuant r = to_host(qref);
  ASSERT_NO_FATAL_FAILURE(check_wire_format(e, cfg, r));

  const MsgBuf buf(e.words, e.bytes);
  Codec other(config(CodecKind::fp32, 1, 1, Norm::none));
  for (Codec* dec : {&codec, &other}) {
    Quant qd;
    const qsgd::MessageHeader h = dec->decode(buf.view(), buf.bytes(), qd);
    EXPECT_EQ(h.total_bytes, e.bytes);
    const HostQuant got = to_host(qd);
    ASSERT_EQ(got.n, n);
    ASSERT_EQ(got.d, r.d);
    ASSERT_EQ(got.s, r.s);
    ASSERT_EQ(got.norm, r.norm);
    ASSERT_EQ(got.kind, qsgd::QuantizerKind::stochastic);
    ASSERT_EQ(got.levels, r.levels);
    ASSERT_EQ(got.scales, r.scales);

    Values out("out", std::max<std::uint64_t>(n, 1));
    dec->decode(buf.view(), buf.bytes(), out);
    const auto vals = to_host(out, n);
    Values deq("deq", std::max<std::uint64_t>(n, 1));
    qsgd::dequantize(Exec(), qref, deq);
    const auto want = to_host(deq, n);
    for (std::uint64_t i = 0; i < n; ++i) ASSERT_EQ(float_bits(vals[i]), float_bits(want[i])) << "value " << i;

    for (float w : {0.37f, -1.5f}) {
      const auto acc0 = random_acc(n, n + 17);
      const Values acc = to_device(acc0, std::max<std::uint64_t>(n, 1));
      dec->decode_accumulate(buf.view(), buf.bytes(), w, acc);
      const auto got_acc = to_host(acc, n);
      for (std::uint64_t i = 0; i < n; ++i) {
        const float prod = w * want[i];
        const float sum = acc0[i] + prod;
        ASSERT_EQ(float_bits(got_acc[i]), float_bits(sum)) << "acc " << i << " w " << w;
      }
    }
    EXPECT_EQ(dec->validate_message(buf.view(), buf.bytes()).checksum, e.h.checksum);
    Codec again(cfg);
    EXPECT_EQ(encode_quantized(again, qd).words, e.words) << "re-encoding the decoded vector";
  }
}

class QuantizedRoundTrip : public ::testing::TestWithParam<CodecKind> {};

TEST_P(QuantizedRoundTrip, GridOfShapes) {
  const CodecKind c = GetParam();
  const std::vector<std::uint32_t> chunks = qsgd::is_variable_length(c) ? std::vector<std::uint32_t>{1, 7, 4096}
                                                                        : std::vector<std::uint32_t>{4096};
  const std::uint32_t s_big = c == CodecKind::rans ? qsgd::rans_max_s : 32768u;
  for (std::uint64_t n : {0ull, 1ull, 2ull, 511ull, 512ull, 513ull, 1000ull}) {
    const auto v = roundtrip_input(n, 20 + n);
    for (std::uint32_t d : {0u, 64u, 512u})
      for (std::uint32_t s : {1u, 7u, 16u, 255u, s_big})
        for (Norm norm : {Norm::l2, Norm::max})
          for (std::uint32_t chunk : chunks) {
            std::ostringstream os;
            os << qsgd::to_string(c) << " n=" << n << " d=" << d << " s=" << s << " " << qsgd::to_string(norm)
               << " chunk=" << chunk;
            SCOPED_TRACE(os.str());
            check_roundtrip(config(c, s, d, norm, chunk), v, qsgd::RngKey{n, s, d, chunk});
            if (HasFatalFailure()) return;
          }
  }
}

INSTANTIATE_TEST_SUITE_P(Codecs, QuantizedRoundTrip,
                         ::testing::Values(CodecKind::fixed, CodecKind::elias_sparse, CodecKind::elias_dense,
                                           CodecKind::rans),
                         [](const ::testing::TestParamInfo<CodecKind>& i) {
                           std::string s = qsgd::to_string(i.param);
                           std::replace(s.begin(), s.end(), '-', '_');
                           return s;
                         });

// ---- rANS ---------------------------------------------------------------------------

// The encoder's division by a multiply (detail/rans.hpp) equals plain division
// for every frequency f of a 15-bit table and states across [1, 2^31): the
// extremes, multiples of f and their neighbours, and random states.
TEST(Rans, ReciprocalDivisionIsExact) {
  std::mt19937_64 rng(11);
  for (std::uint32_t P : {12u, 13u, 14u, 15u})
    for (std::uint32_t f = 1; f <= (1u << P); ++f) {
      const std::uint32_t start = (1u << P) - f;  // the largest start f allows
      const qsgd::detail::RansEncSym e = qsgd::detail::rans_enc_sym(start, f, P);
      const std::uint64_t xmax = std::uint64_t(e.x_max);  // states below it are coded
      std::vector<std::uint64_t> xs = {1, 2, f, f + 1u, 1u << 15, xmax - 1, xmax / 2, (xmax / f) * f,
                                       (xmax / f) * f - 1};
      for (int k = 0; k < 8; ++k) xs.push_back(1 + rng() % (xmax - 1));
      for (std::uint64_t x : xs) {
        if (x == 0 || x >= xmax) continue;
        const std::uint64_t want = (x / f) * (std::uint64_t(1) << P) + x % f + start;
        ASSERT_EQ(qsgd::detail::rans_advance(static_cast<std::uint32_t>(x), e), want) << "f=" << f << " x=" << x;
      }
    }
}

// Frequency tables: 2^P shared by exactly the symbols that occur, each at
// least 1, for skewed, flat and adversarial counts (every symbol of the
// largest alphabet once but one); the parser accepts what the builder
// writes and fills every slot.
TEST(Rans, TablesNormalizeToAPowerOfTwo) {
  std::mt19937_64 rng(12);
  std::vector<std::vector<std::uint64_t>> cases;
  cases.push_back({0, 0, 1000, 0, 0});
  cases.push_back(std::vector<std::uint64_t>(33, 7));
  std::vector<std::uint64_t> skew(33);
  for (std::size_t k = 0; k < skew.size(); ++k) skew[k] = std::uint64_t(1) << (k % 30);
  cases.push_back(skew);
  std::vector<std::uint64_t> wide(2 * qsgd::rans_max_s + 1, 1);
  wide[qsgd::rans_max_s] = std::uint64_t(1) << 33;
  cases.push_back(wide);
  std::vector<std::uint64_t> random(511);
  for (auto& c : random) c = rng() % 5 == 0 ? 0 : rng() % 100000;
  cases.push_back(random);
  for (const auto& counts : cases) {
    std::uint64_t n = 0, present = 0;
    for (std::uint64_t c : counts) n += c, present += c > 0;
    SCOPED_TRACE("alphabet " + std::to_string(counts.size()) + " present " + std::to_string(present));
    const auto t = qsgd::detail::rans_build_table(counts.data(), static_cast<std::uint32_t>(counts.size()), n);
    ASSERT_EQ(t.units.size(), (2 + 2 * present + 3) / 4 * 4);
    ASSERT_EQ(t.units[1], present);
    std::vector<std::uint64_t> dec;
    std::uint32_t P = 0;
    std::string why;
    ASSERT_EQ(qsgd::detail::rans_parse_table(t.units.data(), t.units.size(), static_cast<std::uint32_t>(counts.size()),
                                             dec, P, why),
              t.units.size())
        << why;
    ASSERT_EQ(P, t.precision);
    ASSERT_EQ(dec.size(), std::size_t(1) << P);
    std::vector<std::uint64_t> slots(counts.size(), 0);
    for (std::uint64_t e : dec) ++slots[e & 0xFFFF];
    for (std::size_t k = 0; k < counts.size(); ++k) {
      if (counts[k] == 0) {
        ASSERT_EQ(slots[k], 0u) << "absent symbol " << k;
      } else {
        ASSERT_GE(slots[k], 1u) << "present symbol " << k;
      }
    }
  }
}

// The normalization rule (floor of count x 2^P / n, at least 1; the deficit
// to the most frequent symbol, an excess taken from the largest frequencies
// first) pinned on small cases worked out by hand: the table is part of the
// wire format, so a change here changes every message.
TEST(Rans, NormalizationRuleIsPinned) {
  struct Case {
    std::vector<std::uint64_t> counts;
    std::vector<std::uint16_t> freqs;  // of the present symbols, in symbol order (P = 12: 4096)
  };
  const std::vector<Case> cases = {
      // 4 symbols, n = 10: floors 1228, 2048, 409, 409 (sum 4094): the deficit 2 goes to the most frequent.
      {{3, 0, 5, 1, 1}, {1228, 2050, 409, 409}},
      // one symbol: all of 2^12.
      {{0, 7, 0}, {4096}},
      // 1 + 1 + 10^6: the rare ones floor to 0 and are raised to 1; floor(10^6 x 4096 / 1000002) = 4095,
      // sum 4097: the excess 1 is taken from the largest.
      {{1, 1000000, 1}, {1, 4094, 1}},
  };
  for (const Case& cs : cases) {
    std::uint64_t n = 0;
    for (std::uint64_t c : cs.counts) n += c;
    const auto t = qsgd::detail::rans_build_table(cs.counts.data(), static_cast<std::uint32_t>(cs.counts.size()), n);
    ASSERT_EQ(t.precision, 12u);
    std::vector<std::uint16_t> got;
    for (std::size_t k = 0; k < t.units[1]; ++k) got.push_back(t.units[3 + 2 * k]);
    EXPECT_EQ(got, cs.freqs) << "n = " << n;
  }
}

// The rans codec's message is within 2% of its floor (the empirical entropy
// of the signed levels plus the fp32 scales) on Gaussian input at s = 16 and
// s = 7 (d = 512, max norm), and within 3% at s = sqrt(n) (L2, one bucket);
// n = 2^20, chunk 4096: the table, chunk offsets and final states included.
TEST(Rans, CodesNearTheEntropyFloor) {
  const std::uint64_t n = std::uint64_t(1) << 20;
  const Values v = to_device(make_input(Input::gaussian, n, 13));
  struct Case {
    std::uint32_t s, d;
    Norm norm;
    double tolerance;
  };
  for (const Case& cs : {Case{16, 512, Norm::max, 0.02}, Case{7, 512, Norm::max, 0.02}, Case{1024, 0, Norm::l2, 0.03}}) {
    SCOPED_TRACE("s=" + std::to_string(cs.s));
    Codec codec(config(CodecKind::rans, cs.s, cs.d, cs.norm, 4096));
    const Encoded e = encode_values(codec, v, n, qsgd::RngKey{5, 6, 7, 8});
    const HostQuant q = to_host(codec.last_quantized());
    std::vector<double> count(2 * cs.s + 1, 0.0);
    for (std::int32_t l : q.levels) count[static_cast<std::size_t>(l + static_cast<std::int32_t>(cs.s))] += 1.0;
    double h = 0.0;
    for (double c : count)
      if (c > 0) h -= c / double(n) * std::log2(c / double(n));
    const double floor_bits = h + 32.0 * double(q.scales.size()) / double(n);
    const double bits = 8.0 * double(e.bytes) / double(n);
    std::printf("[   INFO   ] rans s=%u: %.4f bits/dim, floor %.4f, overhead %+.2f%%\n", cs.s, bits, floor_bits,
                100.0 * (bits / floor_bits - 1.0));
    EXPECT_LE(bits, floor_bits * (1.0 + cs.tolerance));
  }
}

// ---- host SIMD path of the fixed-width code ------------------------------------------

// Which host paths this CPU and build must take, asked of the CPU here and
// not of the library: the host-against-portable tests below fail where a
// path exists but the run did not take it (QSGD_SIMD=portable, a build
// without it) and report a skip where the CPU truly lacks it, instead of
// passing on two runs of the portable kernels.
struct CpuPaths {
  bool host = std::is_same<Exec::memory_space, Kokkos::HostSpace>::value;  // the codec runs on the host
  bool avx512 = false;       // F, BW, DQ, VL: the Elias dense encoder
  bool avx512_vbmi = false;  // and VBMI: the fixed-width code
  bool rans_simd = false;    // AVX2, AVX-512 F/BW/VL, POPCNT, BMI2: the rANS SIMD decoder
};

CpuPaths cpu_paths() {
  CpuPaths p;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  p.avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  p.avx512_vbmi = p.avx512 && __builtin_cpu_supports("avx512vbmi");
  p.rans_simd = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("avx512f") &&
                __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                __builtin_cpu_supports("popcnt") && __builtin_cpu_supports("bmi2");
#endif
  return p;
}

// Runs f with the host SIMD paths on or off, restoring the setting after.
template <class F>
auto with_simd(bool on, F&& f) {
  struct Restore {
    bool prev;
    ~Restore() { qsgd::detail::simd::set_simd_enabled(prev); }
  } r{qsgd::detail::simd::set_simd_enabled(on)};
  return f();
}

// Input with an all-zero bucket-sized stretch, a stretch of subnormal values
// (their buckets take the divide-first and tiny-unit arithmetic) and the
// round-trip input elsewhere.
std::vector<float> simd_input(std::uint64_t n, std::uint64_t seed) {
  auto v = roundtrip_input(n, seed);
  for (std::uint64_t i = n / 3; i < std::min<std::uint64_t>(n, n / 3 + 700); ++i) v[i] = 0.0f;
  for (std::uint64_t i = 2 * n / 3; i < std::min<std::uint64_t>(n, 2 * n / 3 + 700); ++i) v[i] *= 1e-41f;
  return v;
}

// What one codec configuration produces, for comparing the host paths with
// the portable kernels: the message words, the decoded values and levels,
// decode_accumulate's result, and (rans) the error of the message with the
// first state of chunk 0 zeroed, re-sealed (a state below 2^15: always corrupt).
struct CodecRun {
  std::vector<std::uint64_t> words;
  std::vector<float> values, acc;
  std::vector<std::int32_t> levels;
  std::string corrupt_error;
  // rans: the message with one payload unit in the middle of the payload
  // flipped and re-sealed: decode's error, or its values when (as rANS
  // allows) the corruption decodes to other symbols without breaking a check.
  std::string flipped_error;
  std::vector<float> flipped_values;
};

CodecRun run_codec(const qsgd::CodecConfig& cfg, const Values& v, std::uint64_t n, const qsgd::RngKey& key,
                   float weight) {
  CodecRun r;
  Codec codec(cfg);
  const Encoded e = encode_values(codec, v, n, key);
  const MsgBuf buf(e.words, e.bytes);
  Values vals("vals", n);
  codec.decode(buf.view(), buf.bytes(), vals);
  const Values acc = to_device(random_acc(n, n + 3));
  codec.decode_accumulate(buf.view(), buf.bytes(), weight, acc);
  Quant q;
  codec.decode(buf.view(), buf.bytes(), q);
  codec.validate_message(buf.view(), buf.bytes());
  r.words = e.words;
  r.values = to_host(vals, n);
  r.acc = to_host(acc, n);
  r.levels = to_host(q).levels;
  if (qsgd::is_quantized(cfg.codec)) {
    // accumulate_levels on the message's levels: the bits of decode_accumulate
    // (what an allgather rank adds for its own message without decoding it).
    const Values acc2 = to_device(random_acc(n, n + 3));
    qsgd::accumulate_levels(Exec(), q, weight, acc2);
    const std::vector<float> a2 = to_host(acc2, n);
    for (std::uint64_t i = 0; i < n; ++i)
      if (float_bits(a2[i]) != float_bits(r.acc[i])) {
        ADD_FAILURE() << "accumulate_levels differs from decode_accumulate at " << i << ": " << a2[i] << " vs "
                      << r.acc[i];
        break;
      }
  }
  if (cfg.codec == CodecKind::rans && n > 0) {
    std::vector<std::uint64_t> w = e.words;
    const std::uint64_t nb = (n + e.h.d - 1) / e.h.d;
    const std::uint64_t payload_word = 8 + e.h.nchunks + (nb + 1) / 2;
    const std::uint64_t unit = w[8] / 16;  // chunk 0's first unit: lane 0's state, low half first
    for (std::uint64_t k : {unit, unit + 1}) w[payload_word + k / 4] &= ~(std::uint64_t(0xFFFF) << (48 - 16 * (k % 4)));
    reinterpret_cast<qsgd::MessageHeader*>(w.data())->checksum = qsgd::message_checksum_host(w.data(), e.bytes);
    const MsgBuf bad(w, e.bytes);
    try {
      codec.validate_message(bad.view(), bad.bytes());
    } catch (const qsgd::Error& x) {
      r.corrupt_error = x.what();
    }
    EXPECT_FALSE(r.corrupt_error.empty()) << "a zero rANS state was accepted";
    std::vector<std::uint64_t> f = e.words;
    const std::uint64_t first_payload = 8 + e.h.nchunks + (nb + 1) / 2;
    const std::uint64_t mid = first_payload + (f.size() - first_payload) / 2;
    f[mid] ^= std::uint64_t(0x0040) << 16;  // one bit of one unit
    reinterpret_cast<qsgd::MessageHeader*>(f.data())->checksum = qsgd::message_checksum_host(f.data(), e.bytes);
    const MsgBuf flipped(f, e.bytes);
    Values fv("flipped", n);
    try {
      codec.decode(flipped.view(), flipped.bytes(), fv);
      r.flipped_values = to_host(fv, n);
    } catch (const qsgd::Error& x) {
      r.flipped_error = x.what();
    }
  }
  return r;
}

void expect_same_bits(const CodecRun& a, const CodecRun& b) {
  ASSERT_EQ(a.words, b.words) << "message words";
  ASSERT_EQ(a.values.size(), b.values.size());
  for (std::size_t i = 0; i < a.values.size(); ++i)
    ASSERT_EQ(float_bits(a.values[i]), float_bits(b.values[i])) << "value " << i;
  for (std::size_t i = 0; i < a.acc.size(); ++i) ASSERT_EQ(float_bits(a.acc[i]), float_bits(b.acc[i])) << "acc " << i;
  ASSERT_EQ(a.levels, b.levels) << "levels";
  ASSERT_EQ(a.corrupt_error, b.corrupt_error) << "error of the corrupted message";
  ASSERT_EQ(a.flipped_error, b.flipped_error) << "error of the message with a flipped payload bit";
  ASSERT_EQ(a.flipped_values.size(), b.flipped_values.size());
  for (std::size_t i = 0; i < a.flipped_values.size(); ++i)
    ASSERT_EQ(float_bits(a.flipped_values[i]), float_bits(b.flipped_values[i])) << "flipped-bit value " << i;
}

// The host SIMD kernels (fused quantize + pack, unpack + decode) give the
// same message words and the same decoded and accumulated bits as the
// portable kernels, for every width the SIMD path takes (b = 2..8) and its
// neighbours (b = 9 falls back), groups that span buckets, tail groups, zero
// and subnormal buckets. Which path ran is printed: on a CPU without the
// SIMD instructions both runs take the portable kernels, and the line says so.
TEST(FixedSimd, MatchesThePortableKernelsBitForBit) {
  const CpuPaths cpu = cpu_paths();
  if (!cpu.host) GTEST_SKIP() << "the codec runs on the device: no host path to compare";
  if (!cpu.avx512_vbmi) GTEST_SKIP() << "this CPU lacks AVX-512 F/BW/DQ/VL/VBMI: no host SIMD path of the fixed-width code";
  const std::string isa = with_simd(true, [] { return std::string(qsgd::detail::simd::fixed_isa()); });
  std::printf("[   INFO   ] host SIMD path of the fixed-width code on this CPU: %s\n", isa.c_str());
  RecordProperty("fixed_isa", isa);
  ASSERT_EQ(isa, "avx512-vbmi") << "the CPU has the fixed-width SIMD path but the run does not take it "
                                   "(QSGD_SIMD=portable, or a build without QSGD_HAVE_AVX512_PATH)";
  for (std::uint64_t n : {64ull, 65ull, 200ull, 512ull, 513ull, 4113ull, 70000ull})
    for (std::uint32_t d : {0u, 1u, 64u, 100u, 512u, 5000u})
      for (std::uint32_t s : {1u, 2u, 3u, 7u, 15u, 16u, 100u, 127u, 128u})
        for (Norm norm : {Norm::l2, Norm::max}) {
          std::ostringstream os;
          os << "n=" << n << " d=" << d << " s=" << s << " " << qsgd::to_string(norm);
          SCOPED_TRACE(os.str());
          const Values v = to_device(simd_input(n, n + s + d));
          const auto cfg = config(CodecKind::fixed, s, d, norm);
          const qsgd::RngKey key{n, s, d, 5};
          const auto run = [&] { return run_codec(cfg, v, n, key, -0.3f); };
          expect_same_bits(with_simd(true, run), with_simd(false, run));
          if (HasFatalFailure()) return;
        }
}

// The fixed-width SIMD encoder where a run of draws crosses a 2^32 block of
// indices (its lock-step groups of 64 and 128 coordinates fall back to the
// portable code there): an encode of a slice with index offsets just below
// 2^32 gives the same message words with the SIMD path on and off, and
// -0.0 inputs and subnormal (divide-first) buckets are among its values.
TEST(FixedSimd, IndexOffsetsAcrossA2To32BlockMatchThePortableKernels) {
  const std::uint64_t n = 4113;
  auto hv = simd_input(n, 77);
  for (std::uint64_t i = 0; i < n; i += 7) hv[i] = -0.0f;
  const Values v = to_device(hv);
  for (std::uint32_t d : {64u, 512u})
    for (std::uint64_t offset : {(1ull << 32) - 64, (1ull << 32) - 100, (1ull << 32) - 128, (1ull << 32) - 1000}) {
      SCOPED_TRACE("d=" + std::to_string(d) + " offset=" + std::to_string(offset));
      const auto cfg = config(CodecKind::fixed, 16, d, Norm::max);
      const qsgd::RngKey key{n, 16, d, 9};
      const auto run = [&] {
        Codec codec(cfg);
        Words out("out", codec.max_message_bytes(n) / 8);
        const std::size_t bytes = codec.encode(v, n, key, out, offset);
        return take_message(out, bytes).words;
      };
      ASSERT_EQ(with_simd(true, run), with_simd(false, run));
    }
}

// The portable rANS histogram (a team per 16384 coordinates counting in
// team scratch, one atomic per bin per team; global atomics for alphabets
// over 4096 bins) gives the counts and the out-of-range number of a plain
// loop: n around the team tile, levels up to 3 past [-s, s], s on both sides
// of the scratch limit.
TEST(RansHistogram, TeamCountsEqualAPlainCount) {
  for (std::uint32_t s : {1u, 16u, 255u, 2047u, 2048u})
    for (std::uint64_t n : {0ull, 1ull, 16383ull, 16384ull, 16385ull, 70001ull}) {
      SCOPED_TRACE("s=" + std::to_string(s) + " n=" + std::to_string(n));
      const std::uint64_t alphabet = 2 * std::uint64_t(s) + 1;
      Kokkos::View<std::int32_t*, Kokkos::HostSpace> lh("lh", n);
      std::vector<std::uint64_t> want(alphabet, 0);
      std::uint64_t want_bad = 0;
      std::uint64_t x = 88172645463325252ull ^ (n * 31 + s);
      for (std::uint64_t i = 0; i < n; ++i) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        const std::int64_t span = 2 * static_cast<std::int64_t>(s) + 7;
        const auto l = static_cast<std::int32_t>(static_cast<std::int64_t>(x % static_cast<std::uint64_t>(span)) -
                                                 static_cast<std::int64_t>(s) - 3);
        lh(i) = l;
        if (l < -static_cast<std::int32_t>(s) || l > static_cast<std::int32_t>(s))
          ++want_bad;
        else
          ++want[static_cast<std::uint64_t>(l + static_cast<std::int32_t>(s))];
      }
      Kokkos::View<std::int32_t*, Mem> lv("lv", n);
      Kokkos::deep_copy(lv, lh);
      Kokkos::View<std::uint64_t*, Mem> counts("counts", alphabet);
      const std::uint64_t bad = qsgd::detail::rans_histogram(Exec(), lv, n, s, counts);
      auto ch = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), counts);
      EXPECT_EQ(bad, want_bad);
      for (std::uint64_t k = 0; k < alphabet; ++k) ASSERT_EQ(ch(k), want[k]) << "bin " << k;
    }
}

// One shape of the rans codec: its input and key, and the message, decoded,
// accumulated and level bits with the host paths on and off compared.
struct RansShape {
  qsgd::CodecConfig cfg;
  Values v;
  qsgd::RngKey key;
};
RansShape rans_host_against_portable(std::uint64_t n, std::uint32_t d, std::uint32_t chunk, std::uint32_t s) {
  std::ostringstream os;
  os << "n=" << n << " d=" << d << " chunk=" << chunk << " s=" << s;
  SCOPED_TRACE(os.str());
  RansShape c{config(CodecKind::rans, s, d, Norm::max, chunk), to_device(simd_input(n, n + d + chunk + s)),
              qsgd::RngKey{n, s, d, chunk}};
  const auto run = [&] { return run_codec(c.cfg, c.v, n, c.key, 0.7f); };
  expect_same_bits(with_simd(true, run), with_simd(false, run));
  return c;
}

// The host paths of the rans codec (histogram, chunk encoder and writer,
// decoder; detail/rans_host.hpp) give the same message words and the same
// decoded, accumulated and level bits as the portable kernels, on shapes with
// bucket and chunk sizes that are and are not multiples of the four lanes;
// and a corrupted chunk is reported alike by both.
TEST(RansHost, MatchesThePortableKernelsBitForBit) {
  if (!cpu_paths().host) GTEST_SKIP() << "the codec runs on the device: no host path to compare";
  ASSERT_TRUE(with_simd(true, [] { return qsgd::detail::rans_host::enabled(); }))
      << "the rans host paths (scalar on every little-endian host CPU) are off (QSGD_SIMD=portable?)";
  std::printf("[   INFO   ] rans host paths: %s\n", with_simd(true, [] { return qsgd::detail::rans_host::enabled(); })
                                                      ? "on"
                                                      : "off (both runs take the portable kernels)");
  for (std::uint64_t n : {1ull, 7ull, 64ull, 513ull, 4113ull, 70001ull})
    for (std::uint32_t d : {0u, 3u, 64u, 100u, 512u})
      for (std::uint32_t chunk : {1u, 6u, 64u, 4096u})
        for (std::uint32_t s : {1u, 16u, 255u}) {
          rans_host_against_portable(n, d, chunk, s);
          if (HasFatalFailure()) return;
        }
}

// The SIMD decoder on tables that do not pack into 32 bits (more than 128
// symbols or precision above 12: 8-bit QSGD, shared-scale sums) reads the
// decoder's 64-bit entries; same bits as the portable kernels. The shapes
// where the SIMD decoder runs reach precisions 13, 14 and 15 (checked: the
// distinct levels of each message give its precision); buckets that are not
// a multiple of four take the scalar decoder, also compared.
TEST(RansHost, WideTablesMatchThePortableKernelsBitForBit) {
  std::set<std::uint32_t> wide_precisions;
  for (std::uint32_t s : {64u, 127u, 4000u})
    for (std::uint64_t n : {70001ull, 262147ull})
      for (std::uint32_t d : {0u, 100u, 512u})
        for (std::uint32_t chunk : {64u, 4096u}) {
          const RansShape c = rans_host_against_portable(n, d, chunk, s);
          if (HasFatalFailure()) return;
          Quant q;
          qsgd::quantize(Exec(), c.cfg, c.v, n, c.key, q);
          auto lv = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), q.levels);
          std::set<std::int32_t> present(lv.data(), lv.data() + n);
          const std::uint32_t precision = qsgd::detail::rans_precision_for(static_cast<std::uint32_t>(present.size()));
          const std::string table = with_simd(true, [&] { return std::string(qsgd::detail::rans_host::decoder_table(precision, s)); });
          // Counted only where the SIMD decoder runs: buckets and chunks whole
          // rounds of four, at least one group of eight whole chunks.
          const std::uint64_t bucket = d == 0 ? n : d;
          if (table == "wide" && bucket % 4 == 0 && chunk % 4 == 0 && n / chunk >= 8) wide_precisions.insert(precision);
        }
  const std::string isa = with_simd(true, [] { return std::string(qsgd::detail::rans_host::decoder_isa()); });
  const CpuPaths cpu = cpu_paths();
  if (!cpu.host) GTEST_SKIP() << "the codec runs on the device: no host path to compare";
  if (!cpu.rans_simd)
    GTEST_SKIP() << "this CPU lacks the rANS SIMD decoder's instructions: only the scalar host paths were compared";
  ASSERT_EQ(isa, "avx512bw") << "the CPU has the rANS SIMD decoder but the run does not take it "
                                "(QSGD_SIMD=portable, or a build without QSGD_RANS_SIMD)";
  EXPECT_EQ(wide_precisions, (std::set<std::uint32_t>{13, 14, 15}));
}

// The host SIMD path of the Elias dense encoder (detail/elias_host.hpp)
// writes the same message words as the portable passes, for every s it takes
// (1..31) and s = 32 (which falls back), chunks of 1 to 4096 coordinates and
// tails that are not a multiple of its 16 lanes; a Quantized built by hand
// with levels above s (outside its table) too. The decoded bits follow from
// the same words; run_codec checks them on both settings.
TEST(EliasDenseHost, MatchesThePortableKernelsBitForBit) {
  const CpuPaths cpu = cpu_paths();
  if (!cpu.host) GTEST_SKIP() << "the codec runs on the device: no host path to compare";
  if (!cpu.avx512) GTEST_SKIP() << "this CPU lacks AVX-512 F/BW/DQ/VL: no host SIMD path of the Elias dense encoder";
  const std::string isa = with_simd(true, [] { return std::string(qsgd::detail::simd::elias_dense_isa()); });
  std::printf("[   INFO   ] host SIMD path of the Elias dense encoder on this CPU: %s\n", isa.c_str());
  RecordProperty("elias_dense_isa", isa);
  ASSERT_EQ(isa, "avx512") << "the CPU has the Elias dense SIMD path but the run does not take it "
                              "(QSGD_SIMD=portable, or a build without QSGD_HAVE_AVX512_PATH)";
  for (std::uint64_t n : {1ull, 15ull, 16ull, 17ull, 513ull, 4113ull, 70001ull})
    for (std::uint32_t chunk : {1u, 7u, 64u, 4096u})
      for (std::uint32_t s : {1u, 2u, 7u, 16u, 31u, 32u}) {
        std::ostringstream os;
        os << "n=" << n << " chunk=" << chunk << " s=" << s;
        SCOPED_TRACE(os.str());
        const Values v = to_device(simd_input(n, n + chunk + s));
        const auto cfg = config(CodecKind::elias_dense, s, 512, Norm::max, chunk);
        const qsgd::RngKey key{n, s, 512, chunk};
        const auto run = [&] { return run_codec(cfg, v, n, key, 0.7f); };
        expect_same_bits(with_simd(true, run), with_simd(false, run));
        if (HasFatalFailure()) return;
        // Levels above s, among them the most negative int32: the scalar
        // codewords inside a SIMD step and in the tail.
        Quant q;
        qsgd::quantize(Exec(), cfg, v, n, key, q);
        auto lv = Kokkos::create_mirror_view(q.levels);
        Kokkos::deep_copy(lv, q.levels);
        for (std::uint64_t i = 0; i < n; i += 37) lv(i) = i % 2 ? static_cast<std::int32_t>(s + 1 + i) : -40;
        lv(n - 1) = std::numeric_limits<std::int32_t>::min();
        Kokkos::deep_copy(q.levels, lv);
        const auto enc = [&] {
          Codec codec(cfg);
          return encode_quantized(codec, q).words;
        };
        ASSERT_EQ(with_simd(true, enc), with_simd(false, enc)) << "levels above s";
      }
}

// A finite gradient whose bucket scale is FLT_MAX (max norm) decodes to
// finite values, its largest coordinate to FLT_MAX exactly, on every
// quantized codec and both host-path settings. fl(FLT_MAX / s) rounds up for
// s = 25, 31, 127, 1001 (not for powers of two), so one float multiply,
// s * fl(FLT_MAX / s), would give infinity (LevelUnit::via_double).
// ---- shared scales (shared-scale aggregation) -----------------------------------------

// Three inputs of n coordinates quantized against shared scales: bucket b's
// is the largest max norm of the three inputs' bucket b, times 1.25 on every
// other bucket (a scale above every rank's own maximum). For each quantized
// codec, with the host paths on and off:
// - encode_with_scales writes the words of quantize_with_scales + encode(q)
//   (the fused fixed-width path included), also for a bucket-aligned slice
//   with its offset;
// - decode_add_levels adds the levels decode() gives, message after message;
// - a message quantized against other scales, or with another s, is refused
//   as corrupt and the accumulator keeps its values.
TEST(SharedScales, EncodeWithScalesAndDecodeAddLevels) {
  const std::uint64_t n = 5000;
  const std::uint32_t d = 256;
  const std::uint64_t nb = (n + d - 1) / d;
  std::vector<Values> in;
  std::vector<float> shared(nb, 0.0f);
  for (int r = 0; r < 3; ++r) {
    std::vector<float> v = simd_input(n, 40 + r);
    for (std::uint64_t b = 0; b < nb; ++b)
      for (std::uint64_t i = b * d; i < std::min(n, (b + 1) * d); ++i) shared[b] = std::max(shared[b], std::fabs(v[i]));
    in.push_back(to_device(v));
  }
  for (std::uint64_t b = 1; b < nb; b += 2) shared[b] *= 1.25f;
  const Values scales = to_device(shared);
  for (CodecKind c : {CodecKind::fixed, CodecKind::elias_dense, CodecKind::elias_sparse, CodecKind::rans})
    for (bool simd : {true, false}) {
      SCOPED_TRACE(qsgd::to_string(c) + (simd ? " host paths" : " portable"));
      with_simd(simd, [&] {
        const qsgd::CodecConfig cfg = config(c, 16, d, Norm::max);
        Codec codec(cfg);
        std::vector<Encoded> msgs;
        std::vector<std::int32_t> want(n, 0);
        for (int r = 0; r < 3; ++r) {
          const qsgd::RngKey key{7, 3, static_cast<std::uint32_t>(r), 1};
          Words out("out", codec.max_message_bytes(n) / 8);
          msgs.push_back(take_message(out, codec.encode_with_scales(in[r], n, scales, key, out)));
          Quant q;
          qsgd::quantize_with_scales(Exec(), cfg, in[r], n, scales, key, q);
          EXPECT_EQ(msgs.back().words, encode_quantized(codec, q).words) << "rank " << r;
          const HostQuant h = to_host(q);
          EXPECT_EQ(h.scales, shared) << "rank " << r;
          for (std::uint64_t i = 0; i < n; ++i) want[i] += h.levels[i];
          // A bucket-aligned slice with its offset: the whole vector's levels there.
          const std::uint64_t lo = 3 * d, len = 5 * d + 17;
          Words part("part", codec.max_message_bytes(len) / 8);
          const Encoded piece = take_message(
              part, codec.encode_with_scales(Kokkos::subview(in[r], Kokkos::make_pair(lo, lo + len)), len,
                                             Kokkos::subview(scales, Kokkos::make_pair<std::uint64_t>(3, nb)), key,
                                             part, lo));
          Quant pq;
          codec.decode(MsgBuf(piece.words, piece.bytes).view(), piece.bytes, pq);
          const auto pl = to_host(pq).levels;
          for (std::uint64_t i = 0; i < len; ++i) ASSERT_EQ(pl[i], h.levels[lo + i]) << "slice level " << i;
        }
        Kokkos::View<std::int32_t*, Mem> acc("acc", n);
        for (const Encoded& m : msgs)
          codec.decode_add_levels(MsgBuf(m.words, m.bytes).view(), m.bytes, 16, d, Norm::max, scales, acc);
        EXPECT_EQ(to_host(acc, n), want);
        // Refusals: own scales (quantized against other scales), another s.
        const auto before = to_host(acc, n);
        const Encoded own = encode_values(codec, in[0], n, qsgd::RngKey{7, 3, 0, 1});
        for (std::uint32_t s_want : {16u, 15u}) {
          const Encoded& m = s_want == 16 ? own : msgs[0];
          try {
            codec.decode_add_levels(MsgBuf(m.words, m.bytes).view(), m.bytes, s_want, d, Norm::max, scales, acc);
            ADD_FAILURE() << "accepted a message " << (s_want == 16 ? "with its own scales" : "of another s");
          } catch (const qsgd::Error& e) {
            EXPECT_EQ(e.code(), Errc::corrupt_message) << e.what();
            EXPECT_NE(std::string(e.what()).find(s_want == 16 ? "bucket scales differ" : "expected s 15"),
                      std::string::npos)
                << e.what();
          }
        }
        EXPECT_EQ(to_host(acc, n), before) << "a refused message changed the accumulator";
      });
    }
}

TEST(QuantizedRoundTrip, ScaleAtFloatMaxDecodesToFiniteValues) {
  constexpr float fmax = std::numeric_limits<float>::max();
  for (CodecKind c : {CodecKind::fixed, CodecKind::elias_sparse, CodecKind::elias_dense, CodecKind::rans})
    for (std::uint32_t s : {25u, 31u, 127u, 1001u})
      for (std::uint32_t d : {0u, 64u})
        for (bool simd : {true, false}) {
          const std::uint64_t n = 640;  // ten chunks of 64: the rANS host decoder's chunk groups see these buckets
          std::ostringstream os;
          os << qsgd::to_string(c) << " s=" << s << " d=" << d << (simd ? " host paths" : " portable");
          SCOPED_TRACE(os.str());
          std::vector<float> h(n, 0.0f);
          for (std::uint64_t i = 0; i < n; ++i) h[i] = static_cast<float>(static_cast<int>(i % 7) - 3);
          for (std::uint64_t i = 0; i < n; i += 64) h[i] = (i / 64) % 2 ? -fmax : fmax;  // every bucket's max
          const Values v = to_device(h);
          const auto cfg = config(c, s, d, Norm::max, 64);
          const qsgd::RngKey key{n, s, d, 11};
          const CodecRun r = with_simd(simd, [&] { return run_codec(cfg, v, n, key, 1.0f); });
          for (std::uint64_t i = 0; i < n; ++i) {
            ASSERT_TRUE(std::isfinite(r.values[i])) << "value " << i << " = " << r.values[i];
            ASSERT_TRUE(std::isfinite(r.acc[i])) << "accumulated " << i << " = " << r.acc[i];
            ASSERT_LE(std::fabs(r.values[i]), fmax) << i;
          }
          for (std::uint64_t i = 0; i < n; i += 64) {
            ASSERT_EQ(std::abs(r.levels[i]), static_cast<std::int32_t>(s)) << "level of the bucket maximum " << i;
            ASSERT_EQ(r.values[i], h[i]) << "the bucket maximum " << i << " decodes to +-FLT_MAX exactly";
          }
        }
}

// Invalid codes (a level above s, a negative zero) in a payload: both paths
// skip the same groups, report the same first bad coordinate and leave the
// accumulator with the same bits. The payloads bypass the checksum (the
// kernels are called directly), as a faulty or forged encoder's would.
TEST(FixedSimd, InvalidCodesAreReportedLikeThePortableKernel) {
  using qsgd::detail::simd::FixedSink;
  std::mt19937_64 rng(7);
  for (std::uint32_t s : {1u, 5u, 7u, 16u, 100u})
    for (std::uint64_t n : {64ull, 1000ull, 4096ull}) {
      const std::uint32_t d = 128;
      const std::uint32_t b = qsgd::detail::fixed_level_bits(s) + 1;
      const std::uint64_t words = (n * b + 63) / 64, nb = (n + d - 1) / d;
      std::vector<float> scales(nb);
      for (auto& x : scales) x = 0.5f + static_cast<float>(rng() % 100) / 10.0f;
      for (int trial = 0; trial < 20; ++trial) {
        SCOPED_TRACE("s=" + std::to_string(s) + " n=" + std::to_string(n) + " trial " + std::to_string(trial));
        std::vector<std::uint64_t> payload(words);
        for (auto& w : payload) w = rng();
        const auto acc0 = random_acc(n, trial);
        std::vector<float> acc_simd = acc0, acc_port = acc0;
        std::uint64_t bad_simd = 0;
        const bool ran = with_simd(true, [&] {
          return qsgd::detail::simd::decode_fixed(payload.data(), scales.data(), n, d, s, FixedSink::accumulate, 0.7f,
                                                  acc_simd.data(), nullptr, &bad_simd);
        });
        using HostUnmanaged = Kokkos::View<float*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;
        const std::uint64_t bad_port = qsgd::detail::decode_fixed(
            Kokkos::Serial(), Kokkos::View<const std::uint64_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(payload.data(), words),
            Kokkos::View<const float*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(scales.data(), nb), n, d, s,
            qsgd::detail::AccumulateSink<HostUnmanaged>{HostUnmanaged(acc_port.data(), n), 0.7f});
        if (!ran) {
          EXPECT_STREQ(qsgd::detail::simd::fixed_isa(), "portable");
          continue;
        }
        ASSERT_EQ(bad_simd, bad_port);
        for (std::uint64_t i = 0; i < n; ++i) ASSERT_EQ(float_bits(acc_simd[i]), float_bits(acc_port[i])) << i;
      }
    }
}

// The Elias dense decoder's work item takes three chunks side by side in
// segments of 256 coordinates on the host, and one chunk in segments of 32
// on a GPU (dense_group_for, dense_segment_for): both shapes give the same
// sums and report the same first bad chunk, on valid messages and on
// payloads with flipped bits, levels beyond a byte (s = 300) included. Run
// here on the host with both shapes.
TEST(EliasDenseShapes, OneChunkInShortSegmentsEqualsThreeInLongOnes) {
  using HostU = Kokkos::View<float*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;
  using CW = Kokkos::View<const std::uint64_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;
  using CF = Kokkos::View<const float*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;
  std::mt19937_64 rng(41);
  for (std::uint32_t s : {1u, 16u, 100u, 300u})
    for (std::uint64_t n : {std::uint64_t(1), std::uint64_t(4095), std::uint64_t(3 * 4096 + 5), std::uint64_t(50001)}) {
      SCOPED_TRACE("s=" + std::to_string(s) + " n=" + std::to_string(n));
      qsgd::Codec<Kokkos::DefaultHostExecutionSpace> codec(config(CodecKind::elias_dense, s, 512, Norm::max));
      const std::vector<float> x = make_input(Input::gaussian, n, n);
      Kokkos::View<float*, Kokkos::HostSpace> hx("x", n);
      for (std::uint64_t i = 0; i < n; ++i) hx(i) = x[i];
      Kokkos::View<std::uint64_t*, Kokkos::HostSpace> out("out", codec.max_message_bytes(n) / 8 + 1);
      codec.encode(hx, n, qsgd::RngKey{3, 1, 0, 0}, out);
      const qsgd::MessageHeader h = *reinterpret_cast<const qsgd::MessageHeader*>(out.data());
      const qsgd::MessageLayout lay = qsgd::layout_of(h);
      Kokkos::View<std::uint32_t*, Kokkos::HostSpace> tab("tab", qsgd::detail::dense_table_size);
      qsgd::detail::fill_dense_table(Kokkos::DefaultHostExecutionSpace(), tab, s);
      for (int trial = 0; trial < 6; ++trial) {
        std::vector<std::uint64_t> words(out.data(), out.data() + lay.total_words);
        if (trial > 0 && lay.payload_words > 0)  // flip a few payload bits
          for (int k = 0; k < trial; ++k) words[lay.payload_word + rng() % lay.payload_words] ^= 1ull << (rng() % 64);
        const CW offsets(words.data() + lay.offsets_word, h.nchunks);
        const CW payload(words.data() + lay.payload_word, lay.payload_words);
        const CF scales(reinterpret_cast<const float*>(words.data() + lay.scales_word), lay.buckets);
        std::vector<float> a1 = random_acc(n, 5), a3 = a1;
        const auto run = [&](auto g, auto segment, std::vector<float>& acc) {
          return qsgd::detail::decode_elias_dense_grouped<decltype(g)::value, decltype(segment)::value>(
              Kokkos::DefaultHostExecutionSpace(), offsets, payload, h.payload_bits, scales, n, h.d, h.s, h.chunk, tab,
              qsgd::detail::AccumulateSink<HostU>{HostU(acc.data(), n), 0.5f});
        };
        using qsgd::detail::dense_segment;
        using qsgd::detail::dense_segment_device;
        const std::uint64_t bad1 =
            run(std::integral_constant<int, 1>{}, std::integral_constant<std::uint64_t, dense_segment_device>{}, a1);
        const std::uint64_t bad3 =
            run(std::integral_constant<int, 3>{}, std::integral_constant<std::uint64_t, dense_segment>{}, a3);
        ASSERT_EQ(bad1, bad3) << "trial " << trial;
        if (trial == 0) {
          ASSERT_EQ(bad1, qsgd::detail::no_index);
        }
        if (bad1 == qsgd::detail::no_index) {
          for (std::uint64_t i = 0; i < n; ++i) {
            ASSERT_EQ(float_bits(a1[i]), float_bits(a3[i])) << "trial " << trial << " i " << i;
          }
        }
      }
    }
}

// The sparse Elias decoder's GPU shape for sinks that write zeros (levels,
// values): every zero written first in one pass (zero_all), then a chunk's
// thread puts only its non-zeros (ZerosWritten). Run here on the host
// against the chunk walk that writes each skipped coordinate itself: the
// same first bad chunk, and on intact messages the same levels and values,
// with no coordinate left unwritten.
TEST(EliasSparseZeros, ZeroPassThenNonZerosEqualsTheChunkWalk) {
  using Host = Kokkos::DefaultHostExecutionSpace;
  using HostI = Kokkos::View<std::int32_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;
  using HostU = Kokkos::View<float*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;
  using CW = Kokkos::View<const std::uint64_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;
  using CF = Kokkos::View<const float*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;
  std::mt19937_64 rng(43);
  constexpr std::int32_t unset = std::numeric_limits<std::int32_t>::min();
  for (std::uint32_t s : {1u, 4u, 300u})
    for (std::uint64_t n : {std::uint64_t(1), std::uint64_t(4095), std::uint64_t(3 * 4096 + 5), std::uint64_t(50001)}) {
      SCOPED_TRACE("s=" + std::to_string(s) + " n=" + std::to_string(n));
      Codec codec(config(CodecKind::elias_sparse, s, 512, Norm::l2));
      const Encoded e =
          encode_values(codec, to_device(make_input(Input::gaussian, n, n + s)), n, qsgd::RngKey{5, 2, 0, 0});
      const qsgd::MessageHeader& h = e.h;
      const qsgd::MessageLayout lay = qsgd::layout_of(h);
      for (int trial = 0; trial < 4; ++trial) {
        std::vector<std::uint64_t> words = e.words;
        if (trial > 0 && lay.payload_words > 0)  // flip a few payload bits
          for (int k = 0; k < trial; ++k) words[lay.payload_word + rng() % lay.payload_words] ^= 1ull << (rng() % 64);
        const CW offsets(words.data() + lay.offsets_word, h.nchunks);
        const CW payload(words.data() + lay.payload_word, lay.payload_words);
        const CF scales(reinterpret_cast<const float*>(words.data() + lay.scales_word), lay.buckets);
        std::vector<std::int32_t> lw(n, unset), lz(n, unset);
        std::vector<float> vw(n, std::numeric_limits<float>::quiet_NaN()), vz = vw;
        const auto walk = [&](const auto& sink) {
          return qsgd::detail::decode_elias_sparse(Host(), offsets, payload, h.payload_bits, scales, n, h.d, h.s,
                                                   h.chunk, sink);
        };
        const auto zeros_first = [&](const auto& sink) {
          qsgd::detail::zero_all(Host(), n, sink);
          return walk(qsgd::detail::ZerosWritten<std::decay_t<decltype(sink)>>{sink});
        };
        const std::uint64_t bad = walk(qsgd::detail::LevelSink<HostI>{HostI(lw.data(), n)});
        ASSERT_EQ(bad, zeros_first(qsgd::detail::LevelSink<HostI>{HostI(lz.data(), n)})) << "trial " << trial;
        ASSERT_EQ(bad, walk(qsgd::detail::ValueSink<HostU>{HostU(vw.data(), n)})) << "trial " << trial;
        ASSERT_EQ(bad, zeros_first(qsgd::detail::ValueSink<HostU>{HostU(vz.data(), n)})) << "trial " << trial;
        if (trial == 0) {
          ASSERT_EQ(bad, qsgd::detail::no_index);
        }
        if (bad != qsgd::detail::no_index) continue;  // a corrupt message's output is unspecified
        std::uint64_t zeros = 0;
        for (std::uint64_t i = 0; i < n; ++i) {
          ASSERT_NE(lw[i], unset) << "i " << i;
          ASSERT_EQ(lw[i], lz[i]) << "trial " << trial << " i " << i;
          ASSERT_EQ(float_bits(vw[i]), float_bits(vz[i])) << "trial " << trial << " i " << i;
          zeros += lw[i] == 0;
        }
        if (n > 1000) {
          EXPECT_GT(zeros, 0u);
        }
      }
    }
}

// The fixed-width code's GPU shape (a team per 64-coordinate group,
// detail/fixed_width.hpp: encode_fixed_teams, decode_fixed_teams) writes the
// same words as the per-group kernels from quantized levels and while
// quantizing, and decodes the same values, accumulations and first bad
// group, on messages with invalid codes too. On the host a team has one
// lane, so this checks the decomposition's arithmetic; the device runs it
// with 64 (the gpu-labelled backend test compares device and host bits).
TEST(FixedTeams, MatchTheGroupKernelsBitForBit) {
  using Host = Kokkos::DefaultHostExecutionSpace;
  using HW = Kokkos::View<std::uint64_t*, Kokkos::HostSpace>;
  using HI = Kokkos::View<std::int32_t*, Kokkos::HostSpace>;
  using HF = Kokkos::View<float*, Kokkos::HostSpace>;
  using HostU = Kokkos::View<float*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;
  using HostI = Kokkos::View<std::int32_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;
  using CW = Kokkos::View<const std::uint64_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;
  using CF = Kokkos::View<const float*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;
  std::mt19937_64 rng(77);
  for (std::uint32_t s : {1u, 7u, 16u, 255u, 70000u})
    for (std::uint64_t n : {1ull, 63ull, 64ull, 65ull, 1000ull, 4097ull})
      for (std::uint32_t d : {7u, 512u}) {
        SCOPED_TRACE("s=" + std::to_string(s) + " n=" + std::to_string(n) + " d=" + std::to_string(d));
        const std::uint32_t b = qsgd::detail::fixed_level_bits(s) + 1;
        const std::uint64_t nw = (n * b + 63) / 64;
        const std::vector<float> x = roundtrip_input(n, n + s + d);
        HF v("v", n), scales("scales", (n + d - 1) / d);
        for (std::uint64_t i = 0; i < n; ++i) v(i) = x[i];
        qsgd::compute_scales(Host(), v, n, d, Norm::max, scales, "test");
        const qsgd::StreamKey sk = qsgd::make_stream_key(qsgd::RngKey{n, s, d, 5});
        const qsgd::detail::StochasticSource<HF, HF> fused{v, scales, s, sk, 3};
        HI lv("lv", n);
        for (std::uint64_t i = 0; i < n; ++i)
          lv(i) = static_cast<std::int32_t>(rng() % (2 * std::uint64_t(s) + 1)) - static_cast<std::int32_t>(s);
        const qsgd::detail::StoredSource<HI> stored{lv};
        const auto encode_both = [&](const auto& src, const char* what) {
          HW groups("groups", nw), teams("teams", nw);
          qsgd::detail::encode_fixed_groups(Host(), src, n, d, s, groups);
          qsgd::detail::encode_fixed_teams(Host(), src, n, d, s, teams);
          for (std::uint64_t k = 0; k < nw; ++k) EXPECT_EQ(groups(k), teams(k)) << what << " word " << k;
          return std::vector<std::uint64_t>(groups.data(), groups.data() + nw);
        };
        encode_both(fused, "quantizing");
        const std::vector<std::uint64_t> words = encode_both(stored, "stored levels");
        if (HasFailure()) return;
        for (int trial = 0; trial < 5; ++trial) {
          std::vector<std::uint64_t> w = words;
          for (int k = 0; k < 2 * trial; ++k) w[rng() % nw] ^= std::uint64_t(1) << (rng() % 64);  // may make codes invalid
          const CW payload(w.data(), nw);
          const CF sc(scales.data(), scales.extent(0));
          std::vector<float> ag = random_acc(n, 9), at = ag;
          std::vector<std::int32_t> lg(n, -7), lt(n, -7);
          const std::uint64_t bad_acc_g = qsgd::detail::decode_fixed_groups(
              Host(), payload, sc, n, d, s, qsgd::detail::AccumulateSink<HostU>{HostU(ag.data(), n), 0.5f});
          const std::uint64_t bad_acc_t = qsgd::detail::decode_fixed_teams(
              Host(), payload, sc, n, d, s, qsgd::detail::AccumulateSink<HostU>{HostU(at.data(), n), 0.5f});
          const std::uint64_t bad_lv_g = qsgd::detail::decode_fixed_groups(
              Host(), payload, sc, n, d, s, qsgd::detail::LevelSink<const HostI>{HostI(lg.data(), n)});
          const std::uint64_t bad_lv_t = qsgd::detail::decode_fixed_teams(
              Host(), payload, sc, n, d, s, qsgd::detail::LevelSink<const HostI>{HostI(lt.data(), n)});
          ASSERT_EQ(bad_acc_g, bad_acc_t) << "trial " << trial;
          ASSERT_EQ(bad_lv_g, bad_lv_t) << "trial " << trial;
          if (trial == 0) {
            ASSERT_EQ(bad_acc_g, qsgd::detail::no_index);
            for (std::uint64_t i = 0; i < n; ++i) ASSERT_EQ(lg[i], lv(i)) << "i " << i;
          }
          for (std::uint64_t i = 0; i < n; ++i) {
            ASSERT_EQ(float_bits(ag[i]), float_bits(at[i])) << "trial " << trial << " i " << i;
            ASSERT_EQ(lg[i], lt[i]) << "trial " << trial << " i " << i;
          }
        }
      }
}

// The GPU shape of the rANS decoder (decode_rans_lanes: four vector lanes
// per chunk, reads placed by a popcount of the lanes that renormalize), run
// on the host where a team has one thread running the lanes in turn, against
// the thread-per-chunk decoder: the same levels and accumulated values, the
// same coordinates handed to the sink and the same first bad chunk, on
// intact messages and on messages with flipped payload bits, shifted chunk
// offsets and a shortened payload (no checksum in the way: the kernels are
// called directly). Chunks and buckets that are and are not multiples of
// four lanes, and tables of 12 to 15 bits.
TEST(RansLanes, MatchTheChunkDecoderBitForBit) {
  using Host = Kokkos::DefaultHostExecutionSpace;
  using HostU = Kokkos::View<float*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;
  using HostI = Kokkos::View<std::int32_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;
  using CW = Kokkos::View<const std::uint64_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;
  using CF = Kokkos::View<const float*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;
  std::mt19937_64 rng(2026);
  int corrupt_seen = 0, intact_seen = 0;
  for (std::uint32_t s : {1u, 16u, 127u, 4000u})
    for (std::uint64_t n : {1ull, 6ull, 513ull, 4113ull, 20001ull})
      for (std::uint32_t d : {3u, 64u, 512u})
        for (std::uint32_t chunk : {1u, 6u, 64u, 4096u}) {
          std::ostringstream os;
          os << "s=" << s << " n=" << n << " d=" << d << " chunk=" << chunk;
          SCOPED_TRACE(os.str());
          const auto cfg = config(CodecKind::rans, s, d, Norm::max, chunk);
          Codec codec(cfg);
          const Encoded e = encode_values(codec, to_device(roundtrip_input(n, n + s + d + chunk)), n,
                                          qsgd::RngKey{n, s, d, chunk});
          for (int trial = 0; trial < 6; ++trial) {
            std::vector<std::uint64_t> w = e.words;
            qsgd::MessageHeader h = e.h;
            const qsgd::MessageLayout lay = qsgd::layout_of(h);
            std::uint64_t* payload_words = w.data() + lay.payload_word;
            std::vector<std::uint16_t> units(4 * lay.payload_words);
            for (std::size_t k = 0; k < units.size(); ++k)
              units[k] = static_cast<std::uint16_t>(payload_words[k / 4] >> (48 - 16 * (k % 4)));
            std::vector<std::uint64_t> dec;
            std::uint32_t precision = 0;
            std::string why;
            const std::uint64_t table_units = qsgd::detail::rans_parse_table(
                units.data(), std::min<std::uint64_t>(units.size(), h.payload_bits / 16), 2 * s + 1, dec, precision, why);
            ASSERT_GT(table_units, 0u) << why;
            std::uint64_t* offsets = w.data() + lay.offsets_word;
            if (trial == 1 || trial == 2)  // bits flipped after the table
              for (int k = 0; k < trial; ++k) {
                const std::uint64_t first = 16 * table_units, bits = h.payload_bits - first;
                const std::uint64_t bit = first + rng() % bits;
                payload_words[bit / 64] ^= std::uint64_t(1) << (63 - bit % 64);
              }
            if (trial == 3 && h.nchunks > 1) offsets[rng() % (h.nchunks - 1) + 1] += 16;
            if (trial == 4 && h.nchunks > 1) offsets[rng() % (h.nchunks - 1) + 1] -= 16;
            if (trial == 5) h.payload_bits -= 16;
            const CW payload(payload_words, lay.payload_words);
            const CW off(offsets, h.nchunks);
            const CF sc(reinterpret_cast<const float*>(w.data() + lay.scales_word), lay.buckets);
            const CW dv(dec.data(), dec.size());
            std::vector<std::int32_t> lc(n, std::numeric_limits<std::int32_t>::min()), ll = lc;
            std::vector<float> ac = random_acc(n, 11), al = ac;
            const auto run = [&](auto kernel, std::vector<std::int32_t>& lv, std::vector<float>& acc) {
              const std::uint64_t a = kernel(qsgd::detail::LevelSink<const HostI>{HostI(lv.data(), n)});
              const std::uint64_t b = kernel(qsgd::detail::AccumulateSink<HostU>{HostU(acc.data(), n), 0.5f});
              EXPECT_EQ(a, b) << "the two sinks saw different first bad chunks";
              return a;
            };
            const std::uint64_t bad_chunk = run(
                [&](const auto& sink) {
                  return qsgd::detail::decode_rans(Host(), off, payload, 16 * table_units, h.payload_bits, dv,
                                                   precision, sc, n, d, s, chunk, sink);
                },
                lc, ac);
            const std::uint64_t bad_lanes = run(
                [&](const auto& sink) {
                  return qsgd::detail::decode_rans_lanes(Host(), off, payload, 16 * table_units, h.payload_bits, dv,
                                                         precision, sc, n, d, s, chunk, sink);
                },
                ll, al);
            ASSERT_EQ(bad_chunk, bad_lanes) << "trial " << trial;
            if (trial == 0) {
              ASSERT_EQ(bad_chunk, qsgd::detail::no_index);
              ++intact_seen;
            } else if (bad_chunk != qsgd::detail::no_index) {
              ++corrupt_seen;
            }
            for (std::uint64_t i = 0; i < n; ++i) {
              ASSERT_EQ(lc[i], ll[i]) << "trial " << trial << " i " << i;
              ASSERT_EQ(float_bits(ac[i]), float_bits(al[i])) << "trial " << trial << " i " << i;
            }
          }
        }
  EXPECT_GT(intact_seen, 0);
  EXPECT_GT(corrupt_seen, 100) << "too few corrupted messages were detected for the comparison to mean much";
}

// The GPU shape of the rANS encoder (encode_rans_chunks_lanes), run on the
// host, against the thread-per-chunk encoder: the same chunk lengths and the
// same units in every chunk's data (the scratch below a chunk's data is not
// compared: the serial encoder leaves values there). Levels skewed towards
// zero and spread over the whole alphabet, so lanes emit in every pattern;
// chunks of 1 to 4096 coordinates, tails of 1 to 3 lanes.
TEST(RansLanes, EncoderMatchesTheChunkEncoderBitForBit) {
  using Host = Kokkos::DefaultHostExecutionSpace;
  std::mt19937_64 rng(4242);
  for (std::uint32_t s : {1u, 16u, 127u, 4000u})
    for (std::uint64_t n : {1ull, 7ull, 513ull, 20003ull})
      for (std::uint32_t chunk : {1u, 6u, 64u, 4096u}) {
        std::ostringstream os;
        os << "s=" << s << " n=" << n << " chunk=" << chunk;
        SCOPED_TRACE(os.str());
        Kokkos::View<std::int32_t*, Kokkos::HostSpace> lv("lv", n);
        std::vector<std::uint64_t> counts(2 * s + 1, 0);
        for (std::uint64_t i = 0; i < n; ++i) {
          const std::uint64_t r = rng();
          const std::int32_t mag = static_cast<std::int32_t>(r % 4 == 0 ? (r >> 8) % (s + 1) : (r >> 8) % 2);
          lv(i) = (r >> 40) & 1 ? -mag : mag;
          ++counts[static_cast<std::size_t>(lv(i) + static_cast<std::int32_t>(s))];
        }
        const qsgd::detail::RansTableHost t = qsgd::detail::rans_build_table(counts.data(), 2 * s + 1, n);
        const Kokkos::View<const qsgd::detail::RansEncSym*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged> enc(
            t.enc.data(), t.enc.size());
        const std::uint64_t nchunks = (n + chunk - 1) / chunk, cap = chunk + qsgd::detail::rans_state_units;
        Kokkos::View<std::uint16_t*, Kokkos::HostSpace> sc("sc", nchunks * cap), sl("sl", nchunks * cap);
        Kokkos::View<std::uint64_t*, Kokkos::HostSpace> lc("lc", nchunks), ll("ll", nchunks);
        qsgd::detail::encode_rans_chunks(Host(), lv, n, s, chunk, enc, sc, lc);
        qsgd::detail::encode_rans_chunks_lanes(Host(), lv, n, s, chunk, enc, sl, ll);
        for (std::uint64_t c = 0; c < nchunks; ++c) {
          ASSERT_EQ(lc(c), ll(c)) << "chunk " << c << " length";
          ASSERT_GE(lc(c), qsgd::detail::rans_state_units);
          for (std::uint64_t k = (c + 1) * cap - lc(c); k < (c + 1) * cap; ++k)
            ASSERT_EQ(sc(k), sl(k)) << "chunk " << c << " unit " << k - ((c + 1) * cap - lc(c));
        }
      }
}

// The Elias encoder's GPU shape (plan_elias_teams, write_elias_teams: a team
// per chunk, elias_parts parts) against the thread-per-chunk kernels, run
// here on the host, where one thread walks a chunk's parts in order: the same
// chunk lengths, offsets and payload words for both codes. Both payloads
// start filled with ones, so a shared word that nobody zeroed shows. Then
// the team kernel alone rewrites a payload that already holds the right
// bits, one chunk at a time, in increasing and in decreasing order: a chunk
// that zeroed a word it shares with a neighbour chunk (whose team may run
// before or after it on a device) would erase the neighbour's bits.
TEST(EliasTeams, PlanAndWriteMatchTheChunkKernelsBitForBit) {
  using Host = Kokkos::DefaultHostExecutionSpace;
  using W = Kokkos::View<std::uint64_t*, Kokkos::HostSpace>;
  std::mt19937_64 rng(77);
  W omt("omega", qsgd::detail::omega_table_size);
  qsgd::detail::fill_omega_table(Host(), omt);
  const qsgd::detail::OmegaTable<W> om{omt};
  for (std::uint32_t s : {1u, 16u, 4095u, 70000u}) {
    const std::uint32_t ts = std::min(s, qsgd::detail::dense_encode_max_s);
    W dtab("dense", 2 * ts + 2);
    qsgd::detail::fill_dense_encode_table(Host(), dtab, s);
    const qsgd::detail::DenseCodewords<W> dc{dtab, ts, 4 * qsgd::detail::dense_encode_max_len(s) <= 63};
    for (std::uint64_t n : {1ull, 7ull, 100ull, 4113ull, 9001ull})
      for (std::uint32_t chunk : {1u, 6u, 64u, 4096u, 5000u})
        for (int density : {0, 1, 2}) {  // all zero; one non-zero in 50; every coordinate drawn
          std::ostringstream os;
          os << "s=" << s << " n=" << n << " chunk=" << chunk << " density=" << density;
          SCOPED_TRACE(os.str());
          Kokkos::View<std::int32_t*, Kokkos::HostSpace> lv("lv", n);
          for (std::uint64_t i = 0; i < n; ++i) {
            const std::uint64_t r = rng();
            const bool drawn = density == 2 || (density == 1 && r % 50 == 0);
            const auto mag = static_cast<std::int32_t>((r >> 8) % 4 == 0 ? (r >> 12) % (s + 1) : 1 + (r >> 12) % 2);
            lv(i) = !drawn ? 0 : (r >> 40) & 1 ? -std::min<std::int32_t>(mag, s) : std::min<std::int32_t>(mag, s);
          }
          const std::uint64_t nchunks = (n + chunk - 1) / chunk;
          for (bool sparse : {true, false}) {
            W off_c("off_c", nchunks), off_t("off_t", nchunks), len_c("len_c", nchunks), len_t("len_t", nchunks);
            const std::uint64_t bits_c =
                sparse ? qsgd::detail::plan_elias_chunks<true>(Host(), lv, n, chunk, off_c, len_c, om)
                       : qsgd::detail::plan_elias_chunks<false>(Host(), lv, n, chunk, off_c, len_c, dc);
            const std::uint64_t bits_t =
                sparse ? qsgd::detail::plan_elias_teams<true>(Host(), lv, n, chunk, off_t, len_t, om)
                       : qsgd::detail::plan_elias_teams<false>(Host(), lv, n, chunk, off_t, len_t, dc);
            ASSERT_EQ(bits_c, bits_t) << (sparse ? "sparse" : "dense");
            for (std::uint64_t c = 0; c < nchunks; ++c) {
              ASSERT_EQ(len_c(c), len_t(c)) << "chunk " << c;
              ASSERT_EQ(off_c(c), off_t(c)) << "chunk " << c;
            }
            const std::uint64_t words = (bits_c + 63) / 64;
            W pc("pc", words), pt("pt", words);
            Kokkos::deep_copy(pc, ~std::uint64_t(0));
            Kokkos::deep_copy(pt, ~std::uint64_t(0));
            if (sparse) {
              qsgd::detail::write_elias_chunks<true>(Host(), lv, n, chunk, off_c, len_c, pc, om);
              qsgd::detail::write_elias_teams<true>(Host(), lv, n, chunk, off_t, len_t, pt, om);
            } else {
              qsgd::detail::write_elias_chunks<false>(Host(), lv, n, chunk, off_c, len_c, pc, dc);
              qsgd::detail::write_elias_teams<false>(Host(), lv, n, chunk, off_t, len_t, pt, dc);
            }
            for (std::uint64_t w = 0; w < words; ++w)
              ASSERT_EQ(pc(w), pt(w)) << (sparse ? "sparse" : "dense") << " word " << w;
            for (bool up : {true, false}) {
              Kokkos::deep_copy(pt, pc);
              for (std::uint64_t k = 0; k < nchunks; ++k) {
                const std::uint64_t c = up ? k : nchunks - 1 - k;
                if (sparse)
                  qsgd::detail::write_elias_team_chunks<true>(Host(), lv, n, chunk, off_t, len_t, pt, om, c, c + 1);
                else
                  qsgd::detail::write_elias_team_chunks<false>(Host(), lv, n, chunk, off_t, len_t, pt, dc, c, c + 1);
              }
              for (std::uint64_t w = 0; w < words; ++w)
                ASSERT_EQ(pc(w), pt(w)) << (sparse ? "sparse" : "dense") << (up ? " up" : " down") << " word " << w;
            }
          }
        }
  }
}

// One large vector (n = 2^20, several checksum blocks, 256 chunks) per codec.
TEST(QuantizedRoundTripLarge, OneMillionCoordinates) {
  const std::uint64_t n = 1u << 20;
  const auto v = roundtrip_input(n, 99);
  for (CodecKind c : {CodecKind::fixed, CodecKind::elias_sparse, CodecKind::elias_dense, CodecKind::rans}) {
    SCOPED_TRACE(qsgd::to_string(c));
    check_roundtrip(config(c, 16, 512, Norm::max, 4096), v, qsgd::RngKey{1, 2, 3, 4});
  }
}

// A deterministic-quantized vector (quantize_deterministic) encodes and decodes
// exactly with every quantized codec, and keeps its quantizer kind.
TEST(QuantizedRoundTripDeterministic, KindAndLevelsSurvive) {
  for (std::uint64_t n : {1ull, 100ull, 1000ull}) {
    const auto v = roundtrip_input(n, 30 + n);
    Quant q;
    qsgd::quantize_deterministic(Exec(), to_device(v), n, q);
    const HostQuant r = to_host(q);
    for (CodecKind c : {CodecKind::fixed, CodecKind::elias_sparse, CodecKind::elias_dense, CodecKind::rans}) {
      SCOPED_TRACE(qsgd::to_string(c) + " n=" + std::to_string(n));
      const auto cfg = config(c, 16, 64, Norm::max, 64);  // s, d and norm come from q
      Codec codec(cfg);
      const Encoded e = encode_quantized(codec, q);
      auto cfg_q = cfg;
      cfg_q.s = r.s;
      cfg_q.d = r.d;
      cfg_q.norm = r.norm;
      check_wire_format(e, cfg_q, r);
      const MsgBuf buf(e.words, e.bytes);
      Quant qd;
      codec.decode(buf.view(), buf.bytes(), qd);
      const HostQuant got = to_host(qd);
      EXPECT_EQ(got.kind, qsgd::QuantizerKind::deterministic);
      EXPECT_EQ(got.levels, r.levels);
      EXPECT_EQ(got.scales, r.scales);
      EXPECT_EQ(got.d, r.d);
      EXPECT_EQ(got.s, 1u);
    }
  }
}

// Float baselines: fp32 is exact (bit for bit, -0.0 and subnormals included);
// fp16 and bf16 decode to the reference rounding of each input, which is
// within half a unit in the last place. decode_accumulate likewise.
TEST(FloatRoundTrip, BaselinesMatchReferenceRounding) {
  for (std::uint64_t n : {0ull, 1ull, 2ull, 511ull, 512ull, 513ull, 1000ull, 100000ull})
    for (CodecKind c : {CodecKind::fp32, CodecKind::fp16, CodecKind::bf16}) {
      SCOPED_TRACE(qsgd::to_string(c) + " n=" + std::to_string(n));
      std::mt19937_64 rng(40 + n);
      // Magnitudes [1, 2) * 2^e: up to 2^15 for fp16 and 2^127 for bf16/fp32
      // stay below the overflow thresholds (65520, and bf16's rounding to 2^128).
      const int lo = c == CodecKind::fp16 ? -28 : -140, hi = c == CodecKind::fp16 ? 14 : 126;
      std::uniform_int_distribution<int> ex(lo, hi);
      std::uniform_real_distribution<float> mant(1.0f, 2.0f);
      std::vector<float> v(n);
      for (auto& x : v) x = (rng() & 1 ? -1.0f : 1.0f) * std::ldexp(mant(rng), ex(rng));
      for (std::uint64_t i = 0; i < n; i += 13) v[i] = (i % 2) ? -0.0f : 0.0f;
      if (n > 2) v[1] = c == CodecKind::fp16 ? 65504.0f : (c == CodecKind::bf16 ? 3.0e38f : std::numeric_limits<float>::max());
      if (n > 2) v[2] = std::numeric_limits<float>::denorm_min();
      Codec codec(config(c, 16, 64, Norm::max));
      const Encoded e = encode_values(codec, to_device(v, std::max<std::uint64_t>(n, 1)), n, qsgd::RngKey{});
      EXPECT_EQ(e.h.codec, static_cast<std::uint8_t>(c));
      EXPECT_EQ(e.h.d, 1u);
      EXPECT_EQ(e.h.s, 0u);
      EXPECT_EQ(e.h.norm, 0u);
      EXPECT_EQ(e.h.quantizer, 0u);
      EXPECT_EQ(e.h.chunk, 0u);
      EXPECT_EQ(e.h.nchunks, 0u);
      const std::uint64_t bits = c == CodecKind::fp32 ? 32 : 16;
      EXPECT_EQ(e.h.payload_bits, n * bits);
      EXPECT_EQ(e.bytes, 64 + 8 * ((n * bits + 63) / 64));
      EXPECT_EQ(e.h.checksum, qsgd::message_checksum_host(e.words.data(), e.bytes));
      const MsgBuf buf(e.words, e.bytes);
      Values out("out", std::max<std::uint64_t>(n, 1));
      codec.decode(buf.view(), buf.bytes(), out);
      const auto got = to_host(out, n);
      std::vector<float> want(n);
      for (std::uint64_t i = 0; i < n; ++i) {
        want[i] = c == CodecKind::fp32 ? v[i] : static_cast<float>(c == CodecKind::fp16 ? ref_half(v[i]) : ref_bf16(v[i]));
        ASSERT_EQ(float_bits(got[i]), float_bits(want[i])) << "element " << i << " = " << v[i];
        if (c != CodecKind::fp32) {
          const int mantbits = c == CodecKind::fp16 ? 10 : 7, emin = c == CodecKind::fp16 ? -14 : -126;
          const double ulp = v[i] == 0 ? 0 : std::ldexp(1.0, std::max(std::ilogb(v[i]), emin) - mantbits);
          ASSERT_LE(std::fabs(static_cast<double>(got[i]) - v[i]), ulp / 2) << "element " << i;
        }
      }
      const auto acc0 = random_acc(n, 5);
      const Values acc = to_device(acc0, std::max<std::uint64_t>(n, 1));
      codec.decode_accumulate(buf.view(), buf.bytes(), 0.25f, acc);
      const auto got_acc = to_host(acc, n);
      for (std::uint64_t i = 0; i < n; ++i) {
        const float prod = 0.25f * want[i];
        const float sum = acc0[i] + prod;
        ASSERT_EQ(float_bits(got_acc[i]), float_bits(sum)) << "acc " << i;
      }
      // A float message cannot be decoded into levels.
      Quant q;
      expect_error(Errc::invalid_argument, [&] { codec.decode(buf.view(), buf.bytes(), q); });
      expect_error(Errc::invalid_argument, [&] { codec.encode(q, Words("o", 64)); });
    }
}

// Spec section 2: "a vector with all |v_i| equal costs 4 bits in the dense
// code" at s = sqrt(n), L2, one bucket: x = s |v| / ||v|| = 1 exactly, level 1
// with certainty, omega(2) + sign = 4 bits, whatever the key.
TEST(CodeLength, EqualMagnitudesCostFourBitsInTheDenseCode) {
  const std::uint64_t n = 4096;
  std::vector<float> v(n);
  std::mt19937_64 rng(50);
  for (auto& x : v) x = (rng() & 1) ? 1.0f : -1.0f;
  Codec codec(config(CodecKind::elias_dense, 64, 0, Norm::l2));
  for (std::uint64_t step = 0; step < 5; ++step) {
    const Encoded e = encode_values(codec, to_device(v), n, qsgd::RngKey{1, step});
    EXPECT_EQ(e.h.payload_bits, 4 * n);
  }
}

// Output buffers: a too-small `out` is qsgd::Error buffer_too_small and nothing
// is written past its extent. The buffer here is a subview of a larger View
// whose tail holds a canary, so a write past the subview is detected without
// corrupting the heap. Also too-short decode outputs and accumulators.
TEST(Buffers, TooSmallOutputIsAnErrorAndNothingIsWrittenPastIt) {
  const std::uint64_t n = 5000;
  const auto v = roundtrip_input(n, 60);
  const Values dv = to_device(v);
  const std::uint64_t canary = 0xC0FFEE1234567890ull;
  for (CodecKind c : {CodecKind::fp32, CodecKind::fp16, CodecKind::bf16, CodecKind::fixed, CodecKind::elias_sparse,
                      CodecKind::elias_dense}) {
    Codec codec(config(c, 16, 512, Norm::max, 512));
    const Encoded e = encode_values(codec, dv, n, qsgd::RngKey{7});
    const std::uint64_t need = e.bytes / 8;
    const std::uint64_t payload_word = 8 + e.h.nchunks + (qsgd::is_quantized(c) ? (((n + 511) / 512) + 1) / 2 : 0);
    for (std::uint64_t cap : {need - 1, payload_word + 1, std::uint64_t(8)}) {
      SCOPED_TRACE(qsgd::to_string(c) + " capacity " + std::to_string(cap) + " of " + std::to_string(need) + " words");
      Words big("big", need + 64);
      Kokkos::deep_copy(big, canary);
      Words out = Kokkos::subview(big, Kokkos::make_pair<std::uint64_t>(0, cap));
      expect_error(Errc::buffer_too_small, [&] { codec.encode(dv, n, qsgd::RngKey{7}, out); });
      const auto h = to_host(big, need + 64);
      std::uint64_t first_bad = ~std::uint64_t(0);
      for (std::uint64_t w = cap; w < need + 64; ++w)
        if (h[w] != canary) {
          first_bad = w;
          break;
        }
      EXPECT_EQ(first_bad, ~std::uint64_t(0)) << "encode wrote word " << first_bad << " past the " << cap
                                              << "-word output buffer";
    }
    const MsgBuf buf(e.words, e.bytes);
    Values short_out("short", n - 1);
    expect_error(Errc::buffer_too_small, [&] { codec.decode(buf.view(), buf.bytes(), short_out); });
    expect_error(Errc::buffer_too_small, [&] { codec.decode_accumulate(buf.view(), buf.bytes(), 1.0f, short_out); });
  }
  Quant q;
  Values small("small", 3);
  expect_error(Errc::buffer_too_small, [&] {
    qsgd::quantize(Exec(), config(CodecKind::fixed, 4, 0, Norm::l2), dv, n, qsgd::RngKey{}, q);
    qsgd::dequantize(Exec(), q, small);
  });
}

}  // namespace
