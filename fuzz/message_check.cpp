// The decoder contract of message_check.hpp. Compiled once for both message
// harnesses (the Codec's decoders are most of the instrumented code).

#include "message_check.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>

namespace qsgd_fuzz {
namespace {

void compare_bits(const std::vector<float>& a, const std::vector<float>& b, const char* api) {
  QSGD_FUZZ_CHECK(a.size() == b.size() && std::memcmp(a.data(), b.data(), 4 * a.size()) == 0,
                  "message.host-paths-agree", api << ": host paths and portable kernels give different bits");
}

template <class F>
Outcome attempt(Api a, F&& f) {
  Outcome o;
  try {
    o.h = f();
    o.ok = true;
  } catch (const qsgd::Error& e) {
    o.code = e.code();
    o.what = e.what();
  } catch (const std::exception& e) {
    violation("message.error-type", std::string(api_name[a]) + " threw a non-qsgd exception: " + e.what());
  }
  return o;
}

// 1. The size bound and the library's default cap, with the default Expect
//    (n up to qsgd::default_max_n).
void check_size_bound(const std::vector<std::uint64_t>& words, std::size_t bytes) {
  qsgd::MessageHeader h{};
  bool parsed = false;
  try {
    h = qsgd::parse_header(words.data(), bytes);
    parsed = true;
  } catch (const qsgd::Error& e) {
    QSGD_FUZZ_CHECK(e.code() == qsgd::Errc::corrupt_message, "message.error-code", "parse_header threw " << e.what());
  }
  if (parsed) {
    const auto c = static_cast<qsgd::CodecKind>(h.codec);
    QSGD_FUZZ_CHECK(h.n <= documented_max_n(c, bytes), "message.n-bound",
                    "parse_header accepted n = " << h.n << " for a " << bytes << "-byte " << qsgd::to_string(c)
                                                 << " message; the documented bound is " << documented_max_n(c, bytes));
    QSGD_FUZZ_CHECK(h.n <= qsgd::default_max_n, "message.default-limit",
                    "parse_header accepted n = " << h.n << " with the default Expect, above default_max_n = "
                                                 << qsgd::default_max_n);
  }
}

}  // namespace

MessageChecker::MessageChecker() : codec_(qsgd::CodecConfig{}) {}

void MessageChecker::check(const std::vector<std::uint64_t>& words, std::size_t bytes, const qsgd::Expect& expect,
                           bool canonical) {
  check_size_bound(words, bytes);

  // 2. With the receiver's expectations.
  qsgd::MessageHeader hx{};
  bool accepted_header = false;
  try {
    hx = qsgd::parse_header(words.data(), bytes, expect);
    accepted_header = true;
  } catch (const qsgd::Error& e) {
    QSGD_FUZZ_CHECK(e.code() == qsgd::Errc::corrupt_message, "message.error-code", "parse_header threw " << e.what());
  }
  const bool crc_ok = accepted_header && qsgd::message_checksum_host(words.data(), bytes) == hx.checksum;
  const std::uint64_t n = accepted_header ? hx.n : 0;
  const auto codec = static_cast<qsgd::CodecKind>(hx.codec);
  const bool quantized = accepted_header && qsgd::is_quantized(codec);

  Words msg(const_cast<std::uint64_t*>(words.data()), words.size());
  const bool was = qsgd::detail::simd::set_simd_enabled(true);
  const qsgd::MessageHeader* hp = accepted_header ? &hx : nullptr;
  const Decoded host = decode_all(msg, bytes, expect, n, hp);
  qsgd::detail::simd::set_simd_enabled(false);
  const Decoded portable = decode_all(msg, bytes, expect, n, hp);
  qsgd::detail::simd::set_simd_enabled(was);

  for (int a = 0; a < api_count; ++a) {
    const Outcome& o = host.o[a];
    if (o.ok) continue;
    const bool float_levels = (a == api_levels || a == api_add_levels) && accepted_header && crc_ok && !quantized;
    const qsgd::Errc want = float_levels ? qsgd::Errc::invalid_argument : qsgd::Errc::corrupt_message;
    QSGD_FUZZ_CHECK(o.code == want, "message.error-code", api_name[a] << " threw " << o.what);
  }
  QSGD_FUZZ_CHECK(host.o[api_read_header].ok == crc_ok, "message.header-agrees",
                  "read_header " << (host.o[api_read_header].ok ? "accepted" : "rejected")
                                 << " a message whose header parse and host checksum say "
                                 << (crc_ok ? "valid" : "invalid") << ": " << host.o[api_read_header].what);
  const bool ok = host.o[api_validate].ok;
  for (int a : {api_values, api_accumulate, api_levels, api_add_levels}) {
    const bool want = (a == api_levels || a == api_add_levels) && !quantized ? false : ok;
    QSGD_FUZZ_CHECK(host.o[a].ok == want, "message.entry-points-agree",
                    "validate_message " << (ok ? "accepted" : "rejected") << " the message but " << api_name[a]
                                        << (host.o[a].ok ? " accepted it" : " rejected it: " + host.o[a].what));
  }
  if (ok)
    QSGD_FUZZ_CHECK(host.o[api_read_header].ok, "message.entry-points-agree",
                    "validate_message accepted a message read_header rejects");

  // 3. Host paths against the portable kernels.
  for (int a = 0; a < api_count; ++a) {
    QSGD_FUZZ_CHECK(host.o[a].ok == portable.o[a].ok && (host.o[a].ok || host.o[a].code == portable.o[a].code),
                    "message.host-paths-agree",
                    api_name[a] << ": host paths " << (host.o[a].ok ? "accepted" : "rejected: " + host.o[a].what)
                                << ", portable kernels "
                                << (portable.o[a].ok ? "accepted" : "rejected: " + portable.o[a].what));
  }
  if (!ok) return;
  compare_bits(host.values, portable.values, "decode(values)");
  compare_bits(host.acc, portable.acc, "decode_accumulate");
  QSGD_FUZZ_CHECK(host.levels == portable.levels, "message.host-paths-agree",
                  "decode(levels): host paths and portable kernels differ");
  QSGD_FUZZ_CHECK(host.sums == portable.sums, "message.host-paths-agree",
                  "decode_add_levels: host paths and portable kernels differ");

  // 4. Consistency of the accepted message.
  for (std::uint64_t i = 0; i < n; ++i) {
    const float v = host.values[i];
    QSGD_FUZZ_CHECK(std::isfinite(v), "message.values-finite",
                    "decode(values) left element " << i << " as " << v << " (" << qsgd::describe(hx) << ")");
    QSGD_FUZZ_CHECK(
        host.acc[i] == v && (v == 0.0f || qsgd::detail::float_bits(host.acc[i]) == qsgd::detail::float_bits(v)), "message.accumulate-agrees",
        "element " << i << ": decode gives " << v << ", decode_accumulate into 0 with weight 1 gives " << host.acc[i]);
  }
  for (std::size_t g = 0; g < guard_cells; ++g) {
    QSGD_FUZZ_CHECK(qsgd::detail::float_bits(host.values[n + g]) == sentinel_bits && qsgd::detail::float_bits(host.acc[n + g]) == sentinel_bits,
                    "message.writes-in-bounds", "a decoder wrote past n = " << n << " (cell n + " << g << ")");
  }
  if (quantized) {
    const std::uint64_t d = hx.d;
    for (std::uint64_t i = 0; i < n; ++i) {
      const std::int32_t l = host.levels[i];
      QSGD_FUZZ_CHECK(l >= -static_cast<std::int64_t>(hx.s) && l <= static_cast<std::int64_t>(hx.s),
                      "message.levels-in-range", "level " << l << " at element " << i << " with s = " << hx.s);
      // Bit for bit, but for the sign of a zero: a sparse code's skipped
      // coordinates are +0 whatever their bucket's scale (a scale of -0 is
      // valid), coded ones l * (scale / s).
      const float want = qsgd::detail::LevelUnit(host.scales[i / d], hx.s).value(l);
      QSGD_FUZZ_CHECK(l == 0 ? want == host.values[i] : qsgd::detail::float_bits(want) == qsgd::detail::float_bits(host.values[i]),
                      "message.levels-match-values",
                      "element " << i << ": level " << l << " and scale " << host.scales[i / d] << " give " << want
                                 << " but decode(values) gave " << host.values[i] << " (" << qsgd::describe(hx)
                                 << ")");
    }
    for (std::uint64_t i = 0; i < n + guard_cells; ++i) {
      const std::int32_t want = i < n ? host.levels[i] + 1 : sum_sentinel;
      QSGD_FUZZ_CHECK(host.sums[i] == want, "message.add-levels-agrees",
                      "decode_add_levels into 1 gives " << host.sums[i] << " at element " << i << ", expected " << want
                                                        << " (n = " << n << ", " << qsgd::describe(hx) << ")");
    }
    const qsgd::MessageLayout lay = qsgd::layout_of(hx);
    QSGD_FUZZ_CHECK(
        lay.buckets == 0 || std::memcmp(host.scales.data(), words.data() + lay.scales_word, 4 * lay.buckets) == 0,
        "message.scales-copied", "decode(levels) returned other scales than the message holds");
  }
  reencode(hx, host, words, bytes, canonical);
}

Decoded MessageChecker::decode_all(const Words& msg, std::size_t bytes, const qsgd::Expect& expect, std::uint64_t n,
                                   const qsgd::MessageHeader* hx) {
  Decoded r;
  r.o[api_read_header] = attempt(api_read_header, [&] { return codec_.read_header(msg, bytes, expect); });
  r.o[api_validate] = attempt(api_validate, [&] { return codec_.validate_message(msg, bytes, expect); });

  Values out(Kokkos::view_alloc(Kokkos::WithoutInitializing, "fuzz::values"), n + guard_cells);
  for (std::size_t i = 0; i < out.extent(0); ++i) out(i) = qsgd::detail::bits_float(sentinel_bits);
  r.o[api_values] = attempt(api_values, [&] { return codec_.decode(msg, bytes, out, expect); });
  r.values.assign(out.data(), out.data() + out.extent(0));

  Values acc(Kokkos::view_alloc(Kokkos::WithoutInitializing, "fuzz::acc"), n + guard_cells);
  for (std::size_t i = 0; i < acc.extent(0); ++i) acc(i) = i < n ? 0.0f : qsgd::detail::bits_float(sentinel_bits);
  r.o[api_accumulate] =
      attempt(api_accumulate, [&] { return codec_.decode_accumulate(msg, bytes, 1.0f, acc, expect); });
  r.acc.assign(acc.data(), acc.data() + acc.extent(0));

  r.o[api_levels] = attempt(api_levels, [&] { return codec_.decode(msg, bytes, q_, expect); });
  if (r.o[api_levels].ok) {
    r.levels.assign(q_.levels.data(), q_.levels.data() + q_.n);
    r.scales.assign(q_.scales.data(), q_.scales.data() + q_.buckets());
  }

  // Sums: the message's own shape and scales (as the header gives them) are
  // the expected ones, so it is accepted exactly when it is valid.
  Kokkos::View<std::int32_t*, Mem> sums(Kokkos::view_alloc(Kokkos::WithoutInitializing, "fuzz::sums"),
                                        n + guard_cells);
  for (std::size_t i = 0; i < sums.extent(0); ++i) sums(i) = i < n ? 1 : sum_sentinel;
  Values want_scales("fuzz::scales", 0);
  std::uint32_t s = 1, d = 1;
  qsgd::Norm norm = qsgd::Norm::max;
  if (hx != nullptr && qsgd::is_quantized(static_cast<qsgd::CodecKind>(hx->codec))) {
    const qsgd::MessageLayout lay = qsgd::layout_of(*hx);
    want_scales = Values("fuzz::scales", lay.buckets);
    std::memcpy(want_scales.data(), msg.data() + lay.scales_word, 4 * lay.buckets);
    s = hx->s;
    d = hx->d;
    norm = static_cast<qsgd::Norm>(hx->norm);
  }
  r.o[api_add_levels] = attempt(
      api_add_levels, [&] { return codec_.decode_add_levels(msg, bytes, s, d, norm, want_scales, sums, expect); });
  r.sums.assign(sums.data(), sums.data() + sums.extent(0));
  return r;
}

// Encodes what was decoded again; the result must decode to the same bits
// (and be the same bytes when the original was canonical).
void MessageChecker::reencode(const qsgd::MessageHeader& h, const Decoded& dec, const std::vector<std::uint64_t>& words,
                              std::size_t bytes, bool canonical) {
  const auto kind = static_cast<qsgd::CodecKind>(h.codec);
  qsgd::CodecConfig cfg;
  cfg.codec = kind;
  if (qsgd::is_quantized(kind)) {
    cfg.s = h.s;
    cfg.d = h.d;
    cfg.norm = static_cast<qsgd::Norm>(h.norm);
    if (qsgd::is_variable_length(kind)) cfg.chunk = h.chunk;
  }
  const std::uint64_t n = h.n;
  Codec enc(cfg);
  Words out("fuzz::reencoded", qsgd::max_message_bytes(cfg, n) / 8);
  std::size_t size = 0;
  try {
    if (qsgd::is_quantized(kind)) {
      Quant q;
      q.reshape(n, h.d, h.s, cfg.norm, static_cast<qsgd::QuantizerKind>(h.quantizer));
      std::copy(dec.levels.begin(), dec.levels.end(), q.levels.data());
      std::copy(dec.scales.begin(), dec.scales.end(), q.scales.data());
      size = enc.encode(q, out);
    } else {
      Values v("fuzz::decoded", n == 0 ? 1 : n);
      std::copy(dec.values.begin(), dec.values.begin() + static_cast<std::ptrdiff_t>(n), v.data());
      size = enc.encode(v, n, qsgd::RngKey{}, out);
    }
  } catch (const std::exception& e) {
    violation("message.reencode",
              std::string("re-encoding an accepted message failed: ") + e.what() + " (" + qsgd::describe(h) + ")");
  }
  std::vector<std::uint64_t> again(out.data(), out.data() + size / 8);
  if (canonical) {
    QSGD_FUZZ_CHECK(size == bytes && again == words, "message.reencode",
                    "re-encoding an encoder's own message gave other bytes (" << size << " vs " << bytes << "; "
                                                                              << qsgd::describe(h) << ")");
  }
  Words m2(again.data(), again.size());
  Values v2("fuzz::values2", n + 1);
  try {
    enc.decode(m2, size, v2, qsgd::Expect{n});
  } catch (const std::exception& e) {
    violation("message.reencode", std::string("a re-encoded message does not decode: ") + e.what());
  }
  QSGD_FUZZ_CHECK(std::memcmp(v2.data(), dec.values.data(), 4 * n) == 0, "message.reencode",
                  "a re-encoded message decodes to other values (" << qsgd::describe(h) << ")");
}

}  // namespace qsgd_fuzz
