// Structure-aware message harness: every codec's decode and
// decode-accumulate on messages the library's own encoder wrote, then
// mutated field by field and re-sealed with a valid checksum
// (message_recipe.hpp has the input layout, message_check.hpp the contract).
// It also checks the encoder: the host paths and the portable kernels write
// the same bytes, a message fits max_message_bytes, and bad input is refused
// with qsgd::Error.

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cstdint>
#include <limits>

#include <qsgd/kernels.hpp>

#include "message_check.hpp"
#include "message_recipe.hpp"

namespace {

using namespace qsgd_fuzz;

constexpr std::uint64_t interesting_u64[] = {
    0, 1, 2, 3, 7, 8, 15, 16, 31, 32, 63, 64, 65, 127, 128, 255, 256, 4095, 4096, 65535, 65536, 65537,
    std::uint64_t(1) << 24, (std::uint64_t(1) << 31) - 1, std::uint64_t(1) << 31, (std::uint64_t(1) << 32) - 1,
    std::uint64_t(1) << 32, (std::uint64_t(1) << 32) + 1, std::uint64_t(1) << 40, (std::uint64_t(1) << 40) + 1,
    std::uint64_t(1) << 63, ~std::uint64_t(0)};

const float interesting_f32[] = {0.0f,
                                 -0.0f,
                                 1.0f,
                                 -1.0f,
                                 0.5f,
                                 1.0f / 3.0f,
                                 65504.0f,
                                 1e-38f,
                                 3e38f,
                                 std::numeric_limits<float>::min(),
                                 std::numeric_limits<float>::denorm_min(),
                                 std::numeric_limits<float>::max(),
                                 -std::numeric_limits<float>::max(),
                                 std::numeric_limits<float>::infinity(),
                                 -std::numeric_limits<float>::infinity(),
                                 std::numeric_limits<float>::quiet_NaN()};

// A new value for a field: small steps from the current one, boundary
// values, or raw bits.
std::uint64_t mutate(std::uint64_t cur, std::uint64_t value) {
  const std::uint64_t arg = value >> 8;
  switch (value & 7) {
    case 0: return cur + (arg & 0xff) + 1;
    case 1: return cur - (arg & 0xff) - 1;
    case 2: return interesting_u64[arg % (sizeof interesting_u64 / sizeof interesting_u64[0])];
    case 3: return arg;
    case 4: return cur ^ (std::uint64_t(1) << (arg & 63));
    case 5: return cur * 2;
    case 6: return cur / 2;
    default: return 0;
  }
}

template <class T>
T get(const std::vector<std::uint64_t>& w, std::size_t byte) {
  T v;
  std::memcpy(&v, reinterpret_cast<const unsigned char*>(w.data()) + byte, sizeof v);
  return v;
}
template <class T>
void put(std::vector<std::uint64_t>& w, std::size_t byte, T v) {
  std::memcpy(reinterpret_cast<unsigned char*>(w.data()) + byte, &v, sizeof v);
}

// Applies one mutation; `bytes` follows the buffer's size.
void apply(const Mutation& m, std::vector<std::uint64_t>& w, std::size_t& bytes) {
  const bool has_header = bytes >= qsgd::header_bytes;
  qsgd::MessageHeader h{};
  if (has_header) std::memcpy(static_cast<void*>(&h), w.data(), sizeof h);
  // layout_of needs d >= 1 (parse_header checks it before using it).
  const qsgd::MessageLayout lay = h.d > 0 ? qsgd::layout_of(h) : qsgd::MessageLayout{};
  switch (m.op % 10) {
    case 0: {  // a 64-bit header field: n, payload bits, total bytes
      if (!has_header) return;
      const std::size_t at[] = {8, 32, 40};
      const std::size_t f = at[m.where % 3];
      put(w, f, mutate(get<std::uint64_t>(w, f), m.value));
      return;
    }
    case 1: {  // a 32-bit header field: d, s, chunk, number of chunks
      if (!has_header) return;
      const std::size_t f = 16 + 4 * (m.where % 4);
      put(w, f, static_cast<std::uint32_t>(mutate(get<std::uint32_t>(w, f), m.value)));
      return;
    }
    case 2: {  // a byte field: codec, norm, quantizer, version, reserved
      if (!has_header) return;
      const std::size_t at[] = {6, 7, 48, 4, 5};
      const std::size_t f = m.where % 6 == 5 ? 49 + m.where / 6 % 11 : at[m.where % 6 % 5];
      put(w, f, static_cast<std::uint8_t>(m.value));
      return;
    }
    case 3:  // any byte
      if (bytes > 0) put(w, m.where % bytes, static_cast<std::uint8_t>(m.value));
      return;
    case 4:  // any bit
      if (bytes > 0) {
        const std::size_t bit = m.where % (bytes * 8);
        put(w, bit / 8, static_cast<std::uint8_t>(get<std::uint8_t>(w, bit / 8) ^ (1u << (bit % 8))));
      }
      return;
    case 5:  // a word after the header: offsets, scales, payload
      if (w.size() > 8) {
        const std::size_t i = 8 + m.where % (w.size() - 8);
        w[i] = mutate(w[i], m.value);
      }
      return;
    case 6:  // a bucket's scale
      // Overflow-safe: a mutated header's layout can hold any 64-bit values.
      if (has_header && lay.buckets > 0 && lay.scales_word <= w.size() &&
          lay.buckets <= 2 * (w.size() - lay.scales_word)) {
        const std::size_t b = m.where % lay.buckets;
        const std::size_t k = m.value % (sizeof interesting_f32 / sizeof interesting_f32[0] + 1);
        const float f = k < sizeof interesting_f32 / sizeof interesting_f32[0]
                            ? interesting_f32[k]
                            : qsgd::detail::bits_float(static_cast<std::uint32_t>(m.value >> 8));
        put(w, lay.scales_word * 8 + 4 * b, f);
      }
      return;
    case 7: {  // grow or shrink the buffer by whole words (the header's size field stays)
      const auto delta = static_cast<std::int8_t>(m.value);
      const std::size_t words = w.size();
      const std::size_t next = delta < 0 ? words - std::min<std::size_t>(words, std::size_t(-delta)) : words + delta;
      w.resize(next, m.value >> 8);
      bytes = next * 8;
      return;
    }
    case 8: {  // a new n with the fields that follow from it made consistent
      if (!has_header) return;
      h.n = mutate(h.n, m.value) % (std::uint64_t(1) << 17);
      const auto c = static_cast<qsgd::CodecKind>(h.codec);
      if (qsgd::is_variable_length(c) && h.chunk > 0)
        h.nchunks = static_cast<std::uint32_t>((h.n + h.chunk - 1) / h.chunk);
      if (c == qsgd::CodecKind::fixed && h.s > 0)
        h.payload_bits = h.n * (1 + (64 - static_cast<std::uint64_t>(__builtin_clzll(h.s))));
      else if (!qsgd::is_quantized(c))
        h.payload_bits = h.n * (c == qsgd::CodecKind::fp32 ? 32 : 16);
      else if (m.where & 1)
        h.payload_bits = mutate(h.payload_bits, m.where >> 1);
      if (h.d == 0) return;
      h.total_bytes = qsgd::layout_of(h).total_words * 8;
      if (h.total_bytes > (std::uint64_t(1) << 21)) return;
      std::memcpy(w.data(), &h, sizeof h);
      w.resize(h.total_bytes / 8, m.value >> 32);
      bytes = h.total_bytes;
      return;
    }
    default:  // a chunk offset
      if (has_header && h.nchunks > 0 && qsgd::is_variable_length(static_cast<qsgd::CodecKind>(h.codec)) &&
          lay.offsets_word + h.nchunks <= w.size()) {
        const std::size_t i = lay.offsets_word + m.where % h.nchunks;
        w[i] = mutate(w[i], m.value);
      }
      return;
  }
}

void reseal(std::vector<std::uint64_t>& w, std::size_t bytes) {
  if (bytes < qsgd::header_bytes || bytes % 8 != 0) return;
  put(w, qsgd::checksum_offset, qsgd::message_checksum_host(w.data(), bytes));
}

// Encodes v with the recipe's configuration; false when the encoder
// (rightly) refuses the input.
bool encode(const MessageRecipe& r, const std::vector<float>& v, std::vector<std::uint64_t>& words,
            std::size_t& bytes) {
  const qsgd::CodecConfig cfg = r.config();
  const std::uint64_t n = v.size();
  Codec codec(cfg);
  Values in("fuzz::input", n == 0 ? 1 : n);
  std::copy(v.begin(), v.end(), in.data());
  const std::size_t cap = codec.max_message_bytes(n);
  const bool deterministic = (r.flags & MessageRecipe::deterministic) && qsgd::is_quantized(cfg.codec);
  const qsgd::RngKey key{r.seed, r.step, 0, 0};
  std::vector<std::uint64_t> first;
  for (bool host : {true, false}) {
    const bool was = qsgd::detail::simd::set_simd_enabled(host);
    Words out("fuzz::message", cap / 8);
    std::size_t size = 0;
    try {
      if (deterministic) {
        Quant q;
        qsgd::quantize_deterministic(Exec(), in, n, q);
        size = codec.encode(q, out);
      } else {
        size = codec.encode(in, n, key, out);
      }
    } catch (const qsgd::Error& e) {
      qsgd::detail::simd::set_simd_enabled(was);
      QSGD_FUZZ_CHECK(e.code() == qsgd::Errc::non_finite_input || e.code() == qsgd::Errc::out_of_range,
                      "encode.error-code", "encode refused its input with " << e.what());
      return false;
    } catch (const std::exception& e) {
      violation("encode.error-type", std::string("encode threw a non-qsgd exception: ") + e.what());
    }
    qsgd::detail::simd::set_simd_enabled(was);
    QSGD_FUZZ_CHECK(size <= cap && size % 8 == 0, "encode.size",
                    "encode wrote " << size << " bytes; max_message_bytes says " << cap);
    std::vector<std::uint64_t> got(out.data(), out.data() + size / 8);
    if (host) {
      first = std::move(got);
      bytes = size;
    } else {
      QSGD_FUZZ_CHECK(got == first, "encode.host-paths-agree",
                      "the host paths and the portable kernels encode different bytes ("
                          << qsgd::to_string(cfg.codec) << ", n " << n << ", s " << cfg.s << ")");
    }
  }
  words = std::move(first);
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  init_kokkos();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static MessageChecker checker;
  ByteReader in(data, size);
  const MessageRecipe r = MessageRecipe::read(in);
  std::vector<std::uint64_t> words;
  std::size_t bytes = 0;
  if (!encode(r, r.make_values(), words, bytes)) return 0;
  qsgd::Expect expect;
  if (r.flags & MessageRecipe::expect_n)
    expect.n = r.size();
  else
    expect.max_n = receiver_max_n;
  checker.check(words, bytes, expect, true);
  if (r.mutations.empty()) return 0;
  for (const Mutation& m : r.mutations) apply(m, words, bytes);
  if (!(r.flags & MessageRecipe::no_reseal)) reseal(words, bytes);
  checker.check(words, bytes, expect, false);
  return 0;
}
