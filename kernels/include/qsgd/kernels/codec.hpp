#pragma once
// qsgd::Codec: quantize + encode into the versioned message format, and
// decode / decode-and-accumulate any message, in one Kokkos execution space.
//
// A Codec owns its scratch (levels, chunk lengths, checksum blocks), grown on
// demand and then reused, so steady-state calls do not allocate device
// memory (the rans codec builds and parses its frequency table on the host,
// small vectors of O(2s + 1) entries per message). Messages are
// arrays of 64-bit words in the execution space's memory.

#include <Kokkos_Core.hpp>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "qsgd/kernels/config.hpp"
#include "qsgd/kernels/crc32c.hpp"
#include "qsgd/kernels/detail/elias.hpp"
#include "qsgd/kernels/detail/elias_host.hpp"
#include "qsgd/kernels/detail/fixed_simd.hpp"
#include "qsgd/kernels/detail/fixed_width.hpp"
#include "qsgd/kernels/detail/float_codec.hpp"
#include "qsgd/kernels/detail/rans.hpp"
#include "qsgd/kernels/detail/rans_host.hpp"
#include "qsgd/kernels/detail/rans_table.hpp"
#include "qsgd/kernels/detail/sinks.hpp"
#include "qsgd/kernels/error.hpp"
#include "qsgd/kernels/message.hpp"
#include "qsgd/kernels/profiling.hpp"
#include "qsgd/kernels/quantize.hpp"

namespace qsgd {

namespace detail {
[[noreturn]] void throw_corrupt(const MessageHeader& h, const std::string& what);
[[noreturn]] void throw_out_of_range(CodecKind codec, std::uint64_t index, float value);

}  // namespace detail

template <class ExecSpace = Kokkos::DefaultExecutionSpace>
class Codec {
 public:
  using execution_space = ExecSpace;
  using memory_space = typename ExecSpace::memory_space;
  using words_view = Kokkos::View<std::uint64_t*, memory_space>;
  using const_words_view = Kokkos::View<const std::uint64_t*, memory_space>;
  using values_view = Kokkos::View<float*, memory_space>;
  using const_values_view = Kokkos::View<const float*, memory_space>;
  using quantized_type = Quantized<memory_space>;

  explicit Codec(const CodecConfig& cfg, const ExecSpace& exec = ExecSpace()) : cfg_(cfg), exec_(exec) {
    validate(cfg_);
    auto host_table = Kokkos::View<const std::uint32_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(
        detail::crc32c_table(), 256);
    crc_table_ = Kokkos::View<std::uint32_t*, memory_space>("qsgd::crc32c_table", 256);
    Kokkos::deep_copy(crc_table_, host_table);
    // The Elias tables are built only where they are used: the omega
    // table for an Elias sparse encoder, the dense encoding table at the
    // first dense encode of each s, the dense decoding table at the first
    // Elias dense decode of each s (a Codec decodes every codec's messages).
    if (cfg_.codec == CodecKind::elias_sparse) {
      omega_table_ = Kokkos::View<std::uint64_t*, memory_space>("qsgd::omega_table", detail::omega_table_size);
      detail::fill_omega_table(exec_, omega_table_);
    }
  }

  // Move-only: the scratch buffers and the dense table (rebuilt for each
  // message's s) are Kokkos views, which a copy would share.
  Codec(const Codec&) = delete;
  Codec& operator=(const Codec&) = delete;
  Codec(Codec&&) = default;
  Codec& operator=(Codec&&) = default;

  const CodecConfig& config() const { return cfg_; }
  const ExecSpace& exec() const { return exec_; }
  std::size_t max_message_bytes(std::uint64_t n) const { return qsgd::max_message_bytes(cfg_, n); }

  // The quantized vector of the last encode(v, ...) (quantized codecs).
  const quantized_type& last_quantized() const { return q_; }

  // ---- encoding -----------------------------------------------------------

  // Quantizes v[0, n) stochastically with `key` (quantized codecs) or converts
  // it (float codecs), encodes it into `out`, and returns the message size in
  // bytes. NaN/Inf input, or a value a 16-bit format cannot hold, throws and
  // leaves `out` unspecified. index_offset: coordinate i draws with index
  // i + index_offset, so that a slice starting at a multiple of the bucket
  // size encodes exactly the levels of the whole vector's quantization.
  std::size_t encode(const const_values_view& v, std::uint64_t n, const RngKey& key, const words_view& out,
                     std::uint64_t index_offset = 0) {
    prof::Scope range("qsgd/encode");
    if (n > v.extent(0)) throw Error(Errc::invalid_argument, "encode: n exceeds the input extent");
    if (!is_quantized(cfg_.codec)) return encode_floats(v, n, out);
    if (cfg_.codec == CodecKind::fixed) return encode_fixed_fused(v, n, key, out, index_offset, false);
    quantize(exec_, cfg_, v, n, key, q_, index_offset);
    return encode(q_, out);
  }

  // encode() against given bucket scales: scales[b] replaces bucket b's own
  // scale (quantize_with_scales; each must be at least the bucket's largest
  // magnitude), the draws are encode()'s. The message carries these scales.
  // Shared-scale aggregation quantizes every rank against the same scales.
  std::size_t encode_with_scales(const const_values_view& v, std::uint64_t n,
                                 const Kokkos::View<const float*, memory_space>& scales, const RngKey& key,
                                 const words_view& out, std::uint64_t index_offset = 0) {
    prof::Scope range("qsgd/encode");
    if (n > v.extent(0)) throw Error(Errc::invalid_argument, "encode_with_scales: n exceeds the input extent");
    if (!is_quantized(cfg_.codec))
      throw Error(Errc::invalid_argument, "encode_with_scales: codec " + to_string(cfg_.codec) + " is not quantized");
    if (cfg_.codec != CodecKind::fixed) {
      quantize_with_scales(exec_, cfg_, v, n, scales, key, q_, index_offset);
      return encode(q_, out);
    }
    q_.reshape(n, static_cast<std::uint32_t>(effective_bucket(cfg_, n)), cfg_.s, cfg_.norm, QuantizerKind::stochastic);
    detail::take_scales(exec_, q_, scales, "encode_with_scales");
    return encode_fixed_fused(v, n, key, out, index_offset, true);  // its reshape keeps q_'s shape and scales
  }

  std::size_t encode(const const_values_view& v, const RngKey& key, const words_view& out) {
    return encode(v, v.extent(0), key, out);
  }

  // Encodes an already quantized vector (stochastic or deterministic) with
  // this codec's wire code (must be a quantized codec).
  std::size_t encode(const quantized_type& q, const words_view& out) {
    prof::Scope range("qsgd/encode");
    if (!is_quantized(cfg_.codec))
      throw Error(Errc::invalid_argument, "encode: codec " + to_string(cfg_.codec) + " does not take quantized input");
    CodecConfig c = cfg_;
    c.s = q.s;
    c.d = q.d;
    c.norm = q.norm;
    validate(c);
    MessageHeader h = make_header(c, q.n, q.kind);
    h.d = q.d;
    const std::uint64_t n = q.n;
    const auto levels = q.levels;
    if (cfg_.codec == CodecKind::fixed) {
      const MessageLayout lay = finish_layout(h, out);
      copy_scales_from(lay, out, q);
      detail::encode_fixed(exec_, detail::StoredSource<decltype(levels)>{levels}, n, q.d, q.s, payload_of(lay, out));
      return seal(h, out);
    }
    if (cfg_.codec == CodecKind::rans) return encode_rans(q, h, out);
    // Variable-length: the payload size is known only after the scan, so the
    // offsets go first (their position does not depend on payload size).
    const std::uint64_t nchunks = h.nchunks;
    grow(chunk_len_, nchunks, "qsgd::chunk_len");
    h.payload_bits = 0;
    MessageLayout lay = layout_of(h);
    const std::uint64_t cap = out.extent(0);
    if (lay.payload_word > cap) throw Error(Errc::buffer_too_small, "encode: output buffer too small");
    auto offsets = Kokkos::subview(out, Kokkos::make_pair(lay.offsets_word, lay.offsets_word + nchunks));
    const detail::OmegaTable<decltype(omega_table_)> om{omega_table_};
    const bool sparse = cfg_.codec == CodecKind::elias_sparse;
    if (!sparse && c.s != dense_enc_s_) {
      const std::uint32_t ts = std::min(c.s, detail::dense_encode_max_s);
      if (dense_enc_.extent(0) < 2 * std::size_t(ts) + 2)
        dense_enc_ = Kokkos::View<std::uint64_t*, memory_space>("qsgd::elias_dense_encode_table", 2 * ts + 2);
      detail::fill_dense_encode_table(exec_, dense_enc_, c.s);
      dense_enc_s_ = c.s;
    }
    const detail::DenseCodewords<decltype(dense_enc_)> dc{
        dense_enc_, static_cast<std::int64_t>(std::min(c.s, detail::dense_encode_max_s)),
        4 * detail::dense_encode_max_len(c.s) <= 63};
    bool host_path = false;  // the dense host SIMD path (detail/elias_host.hpp) for small s
    if constexpr (host_simd) {
      if (!sparse && n > 0 &&
          detail::simd::elias_dense_lengths(levels.data(), n, h.chunk, c.s, chunk_len_.data())) {
        host_path = true;
        h.payload_bits = detail::scan_chunk_lengths(exec_, chunk_len_, offsets, nchunks);
      }
    }
    if (!host_path)
      h.payload_bits = sparse ? detail::plan_elias<true>(exec_, levels, n, h.chunk, offsets, chunk_len_, om)
                              : detail::plan_elias<false>(exec_, levels, n, h.chunk, offsets, chunk_len_, dc);
    lay = layout_of(h);
    if (lay.total_words > cap)
      throw Error(Errc::buffer_too_small, "encode: output buffer holds " + std::to_string(cap * 8) +
                                              " bytes, message needs " + std::to_string(lay.total_words * 8));
    h.total_bytes = lay.total_words * 8;
    auto payload = Kokkos::subview(out, Kokkos::make_pair(lay.payload_word, lay.total_words));
    if (host_path) {
      if (detail::simd::elias_dense_write(levels.data(), n, c.s, payload.data()) != h.payload_bits)
        throw std::logic_error("encode: the Elias dense host path wrote other bits than it planned");
    } else if (sparse)
      detail::write_elias<true>(exec_, levels, n, h.chunk, offsets, chunk_len_, payload, om);
    else
      detail::write_elias<false>(exec_, levels, n, h.chunk, offsets, chunk_len_, payload, dc);
    copy_scales_from(lay, out, q);
    return seal(h, out);
  }

  // ---- decoding -----------------------------------------------------------

  // Checks header, checksum and every codeword without writing anything.
  MessageHeader validate_message(const const_words_view& msg, std::size_t bytes, const Expect& expect = {}) {
    return run_decode(msg, bytes, expect, detail::NullSink{});
  }

  // Message -> signed levels and scales (quantized codecs only).
  MessageHeader decode(const const_words_view& msg, std::size_t bytes, quantized_type& q, const Expect& expect = {}) {
    const MessageHeader h = read_header(msg, bytes, expect);
    if (!is_quantized(static_cast<CodecKind>(h.codec)))
      throw Error(Errc::invalid_argument, "decode: message holds a float codec; decode to values instead");
    try {
      q.reshape(h.n, h.d, h.s, static_cast<Norm>(h.norm), static_cast<QuantizerKind>(h.quantizer));
    } catch (const std::exception& e) {
      throw Error(Errc::invalid_argument, "decode: cannot allocate " + std::to_string(h.n) + " levels (" + e.what() +
                                              "); set Expect::max_n to what this receiver can hold");
    }
    const MessageLayout lay = layout_of(h);
    Kokkos::View<const float*, memory_space, Kokkos::MemoryUnmanaged> sc(
        reinterpret_cast<const float*>(msg.data() + lay.scales_word), lay.buckets);
    Kokkos::deep_copy(exec_, Kokkos::subview(q.scales, Kokkos::make_pair<std::uint64_t>(0, lay.buckets)), sc);
    const auto levels = q.levels;
    return decode_body(msg, h, detail::LevelSink<decltype(levels)>{levels});
  }

  // Message -> values: out[i] = decoded value (any codec).
  MessageHeader decode(const const_words_view& msg, std::size_t bytes, const values_view& out,
                       const Expect& expect = {}) {
    const MessageHeader h = read_header(msg, bytes, expect);
    if (out.extent(0) < h.n) throw Error(Errc::buffer_too_small, "decode: output shorter than the message's n");
    return decode_body(msg, h, detail::ValueSink<values_view>{out});
  }

  // acc[i] += weight * decoded value (any codec). The checksum and header are
  // verified before acc is touched. A message with a valid checksum whose
  // codewords are malformed (only a faulty or forged encoder makes one) is
  // reported after acc may have been partly updated; call validate_message()
  // first where all-or-nothing matters.
  MessageHeader decode_accumulate(const const_words_view& msg, std::size_t bytes, float weight,
                                  const values_view& acc, const Expect& expect = {}) {
    const MessageHeader h = read_header(msg, bytes, expect);
    if (acc.extent(0) < h.n) throw Error(Errc::buffer_too_small, "decode_accumulate: accumulator shorter than n");
    return decode_body(msg, h, detail::AccumulateSink<values_view>{acc, weight});
  }

  // acc[i] += level i of msg, a quantized message whose levels must have
  // been quantized with s levels, bucket size d and `norm` against `scales`
  // (its buckets' scales equal scales[0, buckets) bit for bit): summing the
  // levels of shared-scale aggregation. A message that differs throws
  // Error(corrupt_message) naming what differs, before acc is touched.
  MessageHeader decode_add_levels(const const_words_view& msg, std::size_t bytes, std::uint32_t s, std::uint32_t d,
                                  Norm norm, const Kokkos::View<const float*, memory_space>& scales,
                                  const Kokkos::View<std::int32_t*, memory_space>& acc, const Expect& expect = {}) {
    const MessageHeader h = read_header(msg, bytes, expect);
    if (!is_quantized(static_cast<CodecKind>(h.codec)))
      throw Error(Errc::invalid_argument, "decode_add_levels: message holds a float codec");
    if (h.s != s || h.d != d || h.norm != static_cast<std::uint8_t>(norm))
      throw Error(Errc::corrupt_message, "levels quantized with s " + std::to_string(h.s) + ", d " +
                                             std::to_string(h.d) + ", norm " + to_string(static_cast<Norm>(h.norm)) +
                                             "; expected s " + std::to_string(s) + ", d " + std::to_string(d) +
                                             ", norm " + to_string(norm));
    if (acc.extent(0) < h.n) throw Error(Errc::buffer_too_small, "decode_add_levels: accumulator shorter than n");
    const MessageLayout lay = layout_of(h);
    if (scales.extent(0) < lay.buckets)
      throw Error(Errc::invalid_argument, "decode_add_levels: fewer expected scales than the message's buckets");
    Kokkos::View<const float*, memory_space, Kokkos::MemoryUnmanaged> sc(
        reinterpret_cast<const float*>(msg.data() + lay.scales_word), lay.buckets);
    std::uint64_t differ = 0;
    Kokkos::parallel_reduce(
        "qsgd::decode_add_levels[scales]", Kokkos::RangePolicy<ExecSpace>(exec_, 0, lay.buckets),
        KOKKOS_LAMBDA(std::uint64_t b, std::uint64_t & c) { c += sc(b) != scales(b) ? 1 : 0; }, differ);
    if (differ != 0)
      throw Error(Errc::corrupt_message, std::to_string(differ) + " of its " + std::to_string(lay.buckets) +
                                             " bucket scales differ from the agreed ones");
    return decode_body(msg, h, detail::LevelAddSink<Kokkos::View<std::int32_t*, memory_space>>{acc});
  }

  // Header checks plus checksum, no decoding.
  MessageHeader read_header(const const_words_view& msg, std::size_t bytes, const Expect& expect = {}) {
    if (bytes > msg.extent(0) * 8) throw Error(Errc::invalid_argument, "decode: byte count exceeds the buffer");
    if (bytes < header_bytes)
      throw Error(Errc::corrupt_message, "message of " + std::to_string(bytes) + " bytes is shorter than its header");
    MessageHeader raw;
    Kokkos::View<std::uint64_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged> hv(
        reinterpret_cast<std::uint64_t*>(&raw), header_bytes / 8);
    Kokkos::deep_copy(exec_, hv, Kokkos::subview(msg, Kokkos::make_pair<std::size_t>(0, header_bytes / 8)));
    exec_.fence();
    const MessageHeader h = parse_header(&raw, bytes, expect);
    grow(crc_blocks_, checksum_blocks(bytes), "qsgd::crc_blocks");
    prof::Scope range("qsgd/checksum");
    const std::uint32_t sum = message_checksum(exec_, msg, bytes, crc_blocks_, crc_table_);
    if (sum != h.checksum)
      detail::throw_corrupt(h, "checksum mismatch (stored " + std::to_string(h.checksum) + ", computed " +
                                   std::to_string(sum) + ")");
    return h;
  }

 private:
  template <class View>
  static void grow(View& v, std::size_t n, const char* label) {
    if (v.extent(0) < n) v = View(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(label)), n);
  }

  MessageLayout finish_layout(MessageHeader& h, const words_view& out) const {
    const MessageLayout lay = layout_of(h);
    if (lay.total_words > out.extent(0))
      throw Error(Errc::buffer_too_small, "encode: output buffer holds " + std::to_string(out.extent(0) * 8) +
                                              " bytes, message needs " + std::to_string(lay.total_words * 8));
    h.total_bytes = lay.total_words * 8;
    return lay;
  }

  static words_view payload_of(const MessageLayout& lay, const words_view& out) {
    return Kokkos::subview(out, Kokkos::make_pair(lay.payload_word, lay.payload_word + lay.payload_words));
  }

  void copy_scales_from(const MessageLayout& lay, const words_view& out, const quantized_type& q) {
    if (lay.buckets == 0) return;
    // Zero the padding word first: the scale section is a whole number of words.
    Kokkos::deep_copy(exec_, Kokkos::subview(out, lay.payload_word - 1), std::uint64_t(0));
    Kokkos::View<float*, memory_space, Kokkos::MemoryUnmanaged> dst(
        reinterpret_cast<float*>(out.data() + lay.scales_word), lay.buckets);
    Kokkos::deep_copy(exec_, dst, Kokkos::subview(q.scales, Kokkos::make_pair<std::uint64_t>(0, lay.buckets)));
  }

  // Writes the header, then the checksum over everything; returns the size.
  std::size_t seal(MessageHeader& h, const words_view& out) {
    h.checksum = 0;
    Kokkos::View<std::uint64_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged> hv(
        reinterpret_cast<std::uint64_t*>(&h), header_bytes / 8);
    Kokkos::deep_copy(exec_, Kokkos::subview(out, Kokkos::make_pair<std::size_t>(0, header_bytes / 8)), hv);
    grow(crc_blocks_, checksum_blocks(h.total_bytes), "qsgd::crc_blocks");
    prof::Scope range("qsgd/checksum");
    h.checksum = message_checksum(exec_, out, h.total_bytes, crc_blocks_, crc_table_);
    Kokkos::deep_copy(exec_, Kokkos::subview(out, header_bytes / 8 - 1), hv(header_bytes / 8 - 1));
    exec_.fence();
    return h.total_bytes;
  }

  // The fixed-width code's fused path: scales (computed here, or already in
  // q_.scales when scales_given), then quantize while packing (levels never
  // stored).
  std::size_t encode_fixed_fused(const const_values_view& v, std::uint64_t n, const RngKey& key, const words_view& out,
                                 std::uint64_t index_offset, bool scales_given) {
    const std::uint32_t d = static_cast<std::uint32_t>(effective_bucket(cfg_, n));
    q_.reshape(n, d, cfg_.s, cfg_.norm, QuantizerKind::stochastic);
    if (out.extent(0) * 8 < header_bytes) throw Error(Errc::buffer_too_small, "encode: no room for a header");
    MessageHeader h = make_header(cfg_, n, QuantizerKind::stochastic);
    h.d = d;
    const MessageLayout lay = finish_layout(h, out);
    const StreamKey sk = make_stream_key(key);
    const words_view payload = payload_of(lay, out);
    auto status = detail::simd::EncodeStatus::not_applicable;
    if constexpr (host_simd) {
      // Scales computed bucket by bucket inside the encoder (one read of v).
      exec_.fence();
      status = detail::simd::encode_fixed_stochastic(v.data(), q_.scales.data(), n, d, cfg_.s, cfg_.norm, sk,
                                                     index_offset, payload.data(), scales_given);
    }
    if (status != detail::simd::EncodeStatus::done) {
      if (!scales_given) compute_scales(exec_, v, n, d, cfg_.norm, q_.scales, "encode");  // throws on bad input
      using VV = const_values_view;
      using SV = Kokkos::View<float*, memory_space>;
      detail::encode_fixed(exec_, detail::StochasticSource<VV, SV>{v, q_.scales, cfg_.s, sk, index_offset}, n, d,
                           cfg_.s, payload);
    }
    copy_scales_from(lay, out, q_);
    return seal(h, out);
  }

  std::size_t encode_floats(const const_values_view& v, std::uint64_t n, const words_view& out) {
    MessageHeader h = make_header(cfg_, n, QuantizerKind::none);
    const MessageLayout lay = finish_layout(h, out);
    const CodecKind codec = cfg_.codec;
    const auto payload = payload_of(lay, out);
    if (lay.payload_words > 0) Kokkos::deep_copy(exec_, Kokkos::subview(payload, lay.payload_words - 1), std::uint64_t(0));
    const std::uint64_t bad = detail::encode_float_values(exec_, codec, v, n, payload);
    if (bad != detail::no_index) {
      float x;
      Kokkos::deep_copy(exec_, x, Kokkos::subview(v, bad));
      exec_.fence();
      if (!detail::is_finite_f(x)) throw_non_finite(bad, "encode");
      detail::throw_out_of_range(codec, bad, x);
    }
    return seal(h, out);
  }

  template <class Sink>
  MessageHeader run_decode(const const_words_view& msg, std::size_t bytes, const Expect& expect, const Sink& sink) {
    const MessageHeader h = read_header(msg, bytes, expect);
    return decode_body(msg, h, sink);
  }

  template <class Sink>
  MessageHeader decode_body(const const_words_view& msg, const MessageHeader& h, const Sink& sink) {
    prof::Scope range("qsgd/decode");
    const MessageLayout lay = layout_of(h);
    const CodecKind codec = static_cast<CodecKind>(h.codec);
    const std::uint64_t n = h.n;
    auto payload = Kokkos::subview(msg, Kokkos::make_pair(lay.payload_word, lay.payload_word + lay.payload_words));
    if (!is_quantized(codec)) {
      const std::uint64_t bad = detail::decode_float_values(exec_, codec, payload, n, sink);
      if (bad != detail::no_index) detail::throw_corrupt(h, "non-finite value at element " + std::to_string(bad));
      return h;
    }
    Kokkos::View<const float*, memory_space, Kokkos::MemoryUnmanaged> scales(
        reinterpret_cast<const float*>(msg.data() + lay.scales_word), lay.buckets);
    const std::uint64_t bad_scale = detail::first_bad_scale(exec_, scales, lay.buckets);
    if (bad_scale != detail::no_index)
      detail::throw_corrupt(h, "scale of bucket " + std::to_string(bad_scale) + " is negative or not finite");
    std::uint64_t bad;
    if (codec == CodecKind::fixed) {
      if (!decode_fixed_simd(payload, scales, n, h.d, h.s, sink, bad))
        bad = detail::decode_fixed(exec_, payload, scales, n, h.d, h.s, sink);
      if (bad != detail::no_index) detail::throw_corrupt(h, "invalid fixed-width code at element " + std::to_string(bad));
      return h;
    }
    Kokkos::View<const std::uint64_t*, memory_space, Kokkos::MemoryUnmanaged> offsets(msg.data() + lay.offsets_word,
                                                                                     h.nchunks);
    if (codec == CodecKind::rans) {
      if (n == 0) return h;
      // The table: parsed and checked on the host (at most 2 + 2(2s+1) units
      // plus padding).
      const std::uint32_t alphabet = 2 * h.s + 1;
      const std::uint64_t avail_words = std::min<std::uint64_t>(
          lay.payload_words, detail::ceil_div(detail::rans_table_units_max(alphabet), 4));
      std::vector<std::uint64_t> head_words(avail_words);
      Kokkos::deep_copy(exec_,
                        Kokkos::View<std::uint64_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(head_words.data(),
                                                                                                avail_words),
                        Kokkos::subview(payload, Kokkos::make_pair(std::uint64_t(0), avail_words)));
      exec_.fence();
      std::vector<std::uint16_t> head(4 * avail_words);
      for (std::size_t k = 0; k < head.size(); ++k)
        head[k] = static_cast<std::uint16_t>(head_words[k / 4] >> (48 - 16 * (k % 4)));
      const std::uint64_t avail = std::min<std::uint64_t>(head.size(), h.payload_bits / 16);
      std::uint32_t precision = 0;
      std::string why;
      const std::uint64_t table_units = detail::rans_parse_table(head.data(), avail, alphabet, rans_dec_host_, precision, why);
      if (table_units == 0) detail::throw_corrupt(h, why);
      grow(rans_dec_, rans_dec_host_.size(), "qsgd::rans_dec");
      Kokkos::deep_copy(exec_, Kokkos::subview(rans_dec_, Kokkos::make_pair<std::size_t>(0, rans_dec_host_.size())),
                        Kokkos::View<const std::uint64_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(
                            rans_dec_host_.data(), rans_dec_host_.size()));
      if (!decode_rans_host(offsets, payload, 16 * table_units, h, precision, scales, sink, bad)) {
        if constexpr (detail::use_device_shapes<ExecSpace>())  // four vector lanes per chunk on a device
          bad = detail::decode_rans_lanes(exec_, offsets, payload, 16 * table_units, h.payload_bits, rans_dec_,
                                          precision, scales, n, h.d, h.s, h.chunk, sink);
        else
          bad = detail::decode_rans(exec_, offsets, payload, 16 * table_units, h.payload_bits, rans_dec_, precision,
                                    scales, n, h.d, h.s, h.chunk, sink);
      }
      if (bad != detail::no_index) detail::throw_corrupt(h, "invalid rANS chunk " + std::to_string(bad));
      return h;
    }
    if (codec == CodecKind::elias_dense && h.s != dense_table_s_) {  // built for the message's s
      if (dense_table_.extent(0) == 0)
        dense_table_ = Kokkos::View<std::uint32_t*, memory_space>("qsgd::elias_dense_table", detail::dense_table_size);
      detail::fill_dense_table(exec_, dense_table_, h.s);
      dense_table_s_ = h.s;
    }
    bad = codec == CodecKind::elias_sparse
              ? detail::decode_elias<true>(exec_, offsets, payload, h.payload_bits, scales, n, h.d, h.s, h.chunk,
                                           dense_table_, sink)
              : detail::decode_elias<false>(exec_, offsets, payload, h.payload_bits, scales, n, h.d, h.s, h.chunk,
                                            dense_table_, sink);
    if (bad != detail::no_index) detail::throw_corrupt(h, "invalid code in chunk " + std::to_string(bad));
    return h;
  }

  // rans: histogram of the symbols, the normalized table (host), every chunk
  // coded into its scratch region, the chunk offsets by a scan, then the table
  // and the chunks copied into the payload.
  std::size_t encode_rans(const quantized_type& q, MessageHeader& h, const words_view& out) {
    const std::uint64_t n = q.n;
    const std::uint32_t s = q.s;
    const std::uint32_t alphabet = 2 * s + 1;
    const std::uint64_t nchunks = h.nchunks;
    const std::uint32_t chunk = h.chunk;
    h.payload_bits = 0;
    MessageLayout lay = layout_of(h);
    const std::uint64_t cap = out.extent(0);
    if (lay.payload_word > cap) throw Error(Errc::buffer_too_small, "encode: output buffer too small");
    std::vector<std::uint16_t> table_units;
    std::uint64_t chunk_units_total = 0;
    if (n > 0) {
      grow(rans_counts_, alphabet, "qsgd::rans_counts");
      const auto counts = Kokkos::subview(rans_counts_, Kokkos::make_pair(std::uint64_t(0), std::uint64_t(alphabet)));
      Kokkos::deep_copy(exec_, counts, std::uint64_t(0));
      const auto levels = q.levels;
      std::uint64_t out_of_range = 0;
      bool host = false;
      if constexpr (host_simd) {
        host = detail::rans_host::enabled();
        exec_.fence();
      }
      if (host) {
        out_of_range = detail::rans_host::histogram(levels.data(), n, s, counts.data());
      } else {
        out_of_range = detail::rans_histogram(exec_, levels, n, s, counts);
      }
      if (out_of_range > 0)
        throw Error(Errc::invalid_argument, "encode: " + std::to_string(out_of_range) + " levels outside [-s, s]");
      auto counts_h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), counts);
      detail::RansTableHost t = detail::rans_build_table(counts_h.data(), alphabet, n);
      grow(rans_enc_, alphabet, "qsgd::rans_enc");
      Kokkos::deep_copy(exec_, Kokkos::subview(rans_enc_, Kokkos::make_pair(std::uint64_t(0), std::uint64_t(alphabet))),
                        Kokkos::View<const detail::RansEncSym*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(
                            t.enc.data(), alphabet));
      table_units = std::move(t.units);
      const std::uint64_t region = std::uint64_t(chunk) + detail::rans_state_units;
      grow(rans_scratch_, nchunks * region, "qsgd::rans_scratch");
      grow(chunk_len_, nchunks, "qsgd::chunk_len");
      if (host)
        detail::rans_host::encode_chunks(levels.data(), n, s, chunk, rans_enc_.data(), rans_scratch_.data(),
                                         chunk_len_.data());
      else if constexpr (detail::use_device_shapes<ExecSpace>())  // four vector lanes per chunk on a device
        detail::encode_rans_chunks_lanes(exec_, levels, n, s, chunk, rans_enc_, rans_scratch_, chunk_len_);
      else
        detail::encode_rans_chunks(exec_, levels, n, s, chunk, rans_enc_, rans_scratch_, chunk_len_);
      auto offsets = Kokkos::subview(out, Kokkos::make_pair(lay.offsets_word, lay.offsets_word + nchunks));
      chunk_units_total = detail::rans_offsets(exec_, chunk_len_, nchunks, table_units.size(), offsets);
    }
    h.payload_bits = 16 * (table_units.size() + chunk_units_total);
    lay = layout_of(h);
    if (lay.total_words > cap)
      throw Error(Errc::buffer_too_small, "encode: output buffer holds " + std::to_string(cap * 8) +
                                              " bytes, message needs " + std::to_string(lay.total_words * 8));
    h.total_bytes = lay.total_words * 8;
    if (n > 0) {
      // The table fills whole words (padded); the chunks follow it.
      const words_view payload = payload_of(lay, out);
      std::vector<std::uint64_t> table_words(table_units.size() / 4, 0);
      for (std::size_t k = 0; k < table_units.size(); ++k)
        table_words[k / 4] |= static_cast<std::uint64_t>(table_units[k]) << (48 - 16 * (k % 4));
      Kokkos::deep_copy(exec_, Kokkos::subview(payload, Kokkos::make_pair<std::size_t>(0, table_words.size())),
                        Kokkos::View<const std::uint64_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(
                            table_words.data(), table_words.size()));
      const auto offsets = Kokkos::subview(out, Kokkos::make_pair(lay.offsets_word, lay.offsets_word + nchunks));
      if constexpr (host_simd) {
        if (detail::rans_host::enabled()) {
          exec_.fence();
          detail::rans_host::write_chunks(nchunks, chunk, offsets.data(), chunk_len_.data(), rans_scratch_.data(),
                                          payload.data());
        } else {
          detail::write_rans_chunks(exec_, nchunks, chunk, offsets, chunk_len_, rans_scratch_, payload);
        }
      } else {
        detail::write_rans_chunks(exec_, nchunks, chunk, offsets, chunk_len_, rans_scratch_, payload);
      }
      exec_.fence();  // table_words is host memory the copy above may still read
    }
    copy_scales_from(lay, out, q);
    return seal(h, out);
  }

  // The host SIMD paths (detail/fixed_simd.hpp) serve the Serial backend.
  static constexpr bool host_simd =
      detail::use_host_loops<ExecSpace>() && std::is_same<memory_space, Kokkos::HostSpace>::value;

  // decode_fixed through the host SIMD path for the sinks it implements;
  // false when it does not apply (the caller runs the portable kernel).
  template <class PayloadView, class ScaleView, class Sink>
  bool decode_fixed_simd(const PayloadView& payload, const ScaleView& scales, std::uint64_t n, std::uint32_t d,
                         std::uint32_t s, const Sink& sink, std::uint64_t& bad) {
    if constexpr (host_simd) {
      using detail::simd::FixedSink;
      exec_.fence();
      if constexpr (std::is_same<Sink, detail::AccumulateSink<values_view>>::value)
        return detail::simd::decode_fixed(payload.data(), scales.data(), n, d, s, FixedSink::accumulate, sink.weight,
                                          sink.acc.data(), nullptr, &bad);
      else if constexpr (std::is_same<Sink, detail::ValueSink<values_view>>::value)
        return detail::simd::decode_fixed(payload.data(), scales.data(), n, d, s, FixedSink::values, 0.0f,
                                          sink.out.data(), nullptr, &bad);
      else if constexpr (std::is_same<Sink, detail::NullSink>::value)
        return detail::simd::decode_fixed(payload.data(), scales.data(), n, d, s, FixedSink::validate, 0.0f, nullptr,
                                          nullptr, &bad);
      else if constexpr (std::is_same<Sink, detail::LevelAddSink<Kokkos::View<std::int32_t*, memory_space>>>::value)
        return detail::simd::decode_fixed(payload.data(), scales.data(), n, d, s, FixedSink::add_levels, 0.0f,
                                          nullptr, sink.levels.data(), &bad);
    }
    (void)payload, (void)scales, (void)n, (void)d, (void)s, (void)sink, (void)bad;
    return false;
  }

  // decode_rans through the host path for the sinks it implements; false
  // when it does not apply (the caller runs the portable kernel).
  template <class OffView, class PayloadView, class ScaleView, class Sink>
  bool decode_rans_host(const OffView& offsets, const PayloadView& payload, std::uint64_t first_bit,
                        const MessageHeader& h, std::uint32_t precision, const ScaleView& scales, const Sink& sink,
                        std::uint64_t& bad) {
    if constexpr (host_simd) {
      if (!detail::rans_host::enabled()) return false;
      using M = detail::rans_host::Sink;
      M mode;
      float weight = 0.0f;
      float* out = nullptr;
      std::int32_t* levels_out = nullptr;
      if constexpr (std::is_same<Sink, detail::AccumulateSink<values_view>>::value) {
        mode = M::accumulate;
        weight = sink.weight;
        out = sink.acc.data();
      } else if constexpr (std::is_same<Sink, detail::ValueSink<values_view>>::value) {
        mode = M::values;
        out = sink.out.data();
      } else if constexpr (std::is_same<Sink, detail::NullSink>::value) {
        mode = M::validate;
      } else if constexpr (std::is_same<Sink, detail::LevelSink<decltype(quantized_type::levels)>>::value) {
        mode = M::levels;
        levels_out = sink.levels.data();
      } else if constexpr (std::is_same<Sink, detail::LevelAddSink<decltype(quantized_type::levels)>>::value) {
        mode = M::add_levels;
        levels_out = sink.levels.data();
      } else {
        return false;
      }
      exec_.fence();
      bad = detail::rans_host::decode(offsets.data(), payload.data(), first_bit, h.payload_bits, rans_dec_.data(),
                                      precision, scales.data(), h.n, h.d, h.s, h.chunk, mode, weight, out, levels_out);
      return true;
    }
    (void)offsets, (void)payload, (void)first_bit, (void)h, (void)precision, (void)scales, (void)sink, (void)bad;
    return false;
  }

  CodecConfig cfg_;
  ExecSpace exec_;
  quantized_type q_;
  Kokkos::View<std::uint64_t*, memory_space> chunk_len_;
  Kokkos::View<std::uint32_t*, memory_space> crc_blocks_;
  Kokkos::View<std::uint32_t*, memory_space> crc_table_;
  Kokkos::View<std::uint64_t*, memory_space> omega_table_;
  Kokkos::View<std::uint32_t*, memory_space> dense_table_;  // Elias dense decoding, detail/elias.hpp
  std::uint32_t dense_table_s_ = 0;                          // the s dense_table_ was built for (0: none yet)
  Kokkos::View<std::uint64_t*, memory_space> dense_enc_;     // Elias dense encoding, detail/elias.hpp
  std::uint32_t dense_enc_s_ = 0;                            // the s dense_enc_ was built for (0: none yet)
  Kokkos::View<std::uint64_t*, memory_space> rans_counts_;
  Kokkos::View<detail::RansEncSym*, memory_space> rans_enc_;
  Kokkos::View<std::uint64_t*, memory_space> rans_dec_;
  Kokkos::View<std::uint16_t*, memory_space> rans_scratch_;
  std::vector<std::uint64_t> rans_dec_host_;
};

/*
 * accumulate_levels
 * Purpose: acc[i] += weight * value of q's level i, for i < q.n, with the
 *   float operations of decode_accumulate (detail::AccumulateSink: the
 *   product and the sum each rounded once): the bits of decoding a message
 *   that holds q, without decoding it. A rank adds its own contribution so
 *   (comm/src/allgather.cpp).
 * Cost: reads 4n + 4n/d bytes, reads and writes 4n bytes.
 */
template <class ExecSpace, class MemSpace, class AccView>
void accumulate_levels(const ExecSpace& exec, const Quantized<MemSpace>& q, float weight, const AccView& acc) {
  if (acc.extent(0) < q.n) throw Error(Errc::buffer_too_small, "accumulate_levels: accumulator shorter than n");
  const detail::AccumulateSink<AccView> sink{acc, weight};
  detail::for_each_level(exec, q, "qsgd::accumulate_levels",
                         KOKKOS_LAMBDA(std::uint64_t i, std::int32_t l, const detail::LevelUnit& unit) {
                           sink.put(i, l, unit);
                         });
}

}  // namespace qsgd
