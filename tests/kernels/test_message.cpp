// The message format as untrusted input (spec section 2: "truncated,
// oversized or corrupted input yields a clear error and never reads or writes
// out of bounds"), and the CRC32C checksum. Label: unit. The `asan` preset runs
// this file under AddressSanitizer and UBSan; every message here lives in a
// buffer of exactly its size (MsgBuf) so that an overread is reported.
//
// Corruptions of header fields, chunk offsets, scales and payload are re-sealed
// with a recomputed valid checksum (message_checksum_host), so that the
// structural validation is exercised, not only the CRC. Where a corruption can
// leave a message that is still well-formed (say, d one larger with the same
// bucket count), the decoder may accept it; it must then produce levels within
// [-s, s] and finite values, and validate_message and every decode entry point
// must agree on accepting or rejecting it.

#include <functional>
#include <type_traits>
#include <set>
#include <sstream>

#include <cstdio>

#include "child_rss.hpp"
#include "test_util.hpp"

namespace {

using namespace qsgd_test;
using qsgd::CodecKind;
using qsgd::Errc;
using qsgd::Norm;

const CodecKind kAllCodecs[] = {CodecKind::fp32,  CodecKind::fp16,         CodecKind::bf16,
                                CodecKind::fixed, CodecKind::elias_sparse, CodecKind::elias_dense,
                                CodecKind::rans};

struct Sample {
  qsgd::CodecConfig cfg;
  Encoded e;
  std::string name;
};

// n = 300 with d = 64 (5 buckets: an odd count, so the scale section has a
// padding half-word) and chunk = 64 (5 chunks, the last one short).
Sample make_sample(CodecKind c, std::uint64_t n = 300, std::uint32_t s = 16) {
  Sample smp;
  smp.cfg = config(c, s, 64, Norm::max, 64);
  auto v = make_input(Input::gaussian, n, 70);
  for (std::uint64_t i = 0; i < n; i += 3) v[i] = 0.0f;
  Codec codec(smp.cfg);
  smp.e = encode_values(codec, to_device(v, std::max<std::uint64_t>(n, 1)), n, qsgd::RngKey{1, 2, 3, 4});
  smp.name = qsgd::to_string(c) + " n=" + std::to_string(n);
  return smp;
}

std::vector<Sample> all_samples(std::uint64_t n = 300) {
  std::vector<Sample> out;
  for (CodecKind c : kAllCodecs) out.push_back(make_sample(c, n));
  return out;
}

enum class Api { read_header, validate, decode_values, decode_levels, decode_accumulate };
const Api kApis[] = {Api::read_header, Api::validate, Api::decode_values, Api::decode_levels, Api::decode_accumulate};
const char* api_name(Api a) {
  switch (a) {
    case Api::read_header: return "read_header";
    case Api::validate: return "validate_message";
    case Api::decode_values: return "decode(values)";
    case Api::decode_levels: return "decode(levels)";
    case Api::decode_accumulate: return "decode_accumulate";
  }
  return "?";
}

enum class Outcome { accepted, corrupt };

// Runs one decoder entry point on `words` (its first `bytes` bytes, in a buffer
// of exactly that size). A qsgd::Error other than corrupt_message, or any other
// exception, is a test failure. An accepted message must decode to levels in
// [-s, s] and finite values; `capacity` sizes the outputs.
Outcome attempt(Api api, const std::vector<std::uint64_t>& words, std::size_t bytes, std::uint64_t capacity,
                const std::string& context) {
  const MsgBuf buf(words, bytes);
  Codec codec(config(CodecKind::elias_dense, 16, 64, Norm::max));  // decoders read everything from the header
  try {
    switch (api) {
      case Api::read_header: codec.read_header(buf.view(), buf.bytes()); break;
      case Api::validate: codec.validate_message(buf.view(), buf.bytes()); break;
      case Api::decode_values: {
        Values out("out", capacity);
        const qsgd::MessageHeader h = codec.decode(buf.view(), buf.bytes(), out);
        for (float x : to_host(out, h.n)) {
          EXPECT_TRUE(std::isfinite(x)) << context << ": accepted message decodes to " << x;
          if (!std::isfinite(x)) break;
        }
        break;
      }
      case Api::decode_levels: {
        const qsgd::MessageHeader h = codec.read_header(buf.view(), buf.bytes());
        if (!qsgd::is_quantized(static_cast<CodecKind>(h.codec))) {
          // Levels of a float message are an argument error by design; check
          // the message the way validate_message does instead.
          codec.validate_message(buf.view(), buf.bytes());
          break;
        }
        Quant q;
        codec.decode(buf.view(), buf.bytes(), q);
        const HostQuant hq = to_host(q);
        for (std::int32_t l : hq.levels) {
          EXPECT_LE(std::abs(static_cast<std::int64_t>(l)), static_cast<std::int64_t>(h.s))
              << context << ": accepted message has a level beyond s";
          if (std::abs(static_cast<std::int64_t>(l)) > h.s) break;
        }
        for (float sc : hq.scales) EXPECT_TRUE(std::isfinite(sc) && sc >= 0.0f) << context << ": scale " << sc;
        break;
      }
      case Api::decode_accumulate: {
        const Values acc = to_device(std::vector<float>(capacity, 1.0f));
        codec.decode_accumulate(buf.view(), buf.bytes(), 0.5f, acc);
        break;
      }
    }
  } catch (const qsgd::Error& e) {
    EXPECT_EQ(static_cast<int>(e.code()), static_cast<int>(Errc::corrupt_message))
        << context << " [" << api_name(api) << "]: " << e.what();
    return Outcome::corrupt;
  } catch (const std::exception& e) {
    ADD_FAILURE() << context << " [" << api_name(api) << "]: non-qsgd exception: " << e.what();
    return Outcome::corrupt;
  }
  return Outcome::accepted;
}

// Every entry point must reject the message. read_header checks only the
// header and the checksum (codec.hpp), so a corrupt body behind a valid header
// and checksum (`body` = true) is left to the decoding entry points.
void expect_rejected(const std::vector<std::uint64_t>& words, std::size_t bytes, std::uint64_t capacity,
                     const std::string& context, bool body = false) {
  for (Api api : kApis) {
    if (body && api == Api::read_header) continue;
    EXPECT_EQ(attempt(api, words, bytes, capacity, context), Outcome::corrupt)
        << context << ": " << api_name(api) << " accepted a corrupt message";
  }
}

// Rejected or accepted, consistently across entry points, and valid if accepted.
Outcome expect_consistent(const std::vector<std::uint64_t>& words, std::size_t bytes, std::uint64_t capacity,
                          const std::string& context) {
  const Outcome v = attempt(Api::validate, words, bytes, capacity, context);
  for (Api api : {Api::decode_values, Api::decode_levels, Api::decode_accumulate})
    EXPECT_EQ(attempt(api, words, bytes, capacity, context), v)
        << context << ": " << api_name(api) << " disagrees with validate_message";
  return v;
}

// ---- valid messages ------------------------------------------------------------------

TEST(UntrustedInput, ValidMessagesAreAccepted) {
  for (const Sample& smp : all_samples()) {
    SCOPED_TRACE(smp.name);
    EXPECT_EQ(smp.e.h.checksum, qsgd::message_checksum_host(smp.e.words.data(), smp.e.bytes));
    for (Api api : kApis) EXPECT_EQ(attempt(api, smp.e.words, smp.e.bytes, 400, smp.name), Outcome::accepted) << api_name(api);
  }
}

// ---- truncation and extension ------------------------------------------------------------

// Every prefix of a valid message (each byte count 0 .. size-1, multiples of 8
// or not) and the message with 8 or 16 extra bytes is rejected by every entry
// point; the empty-vector message (64 bytes, n = 0) is valid on its own.
TEST(UntrustedInput, TruncatedAndExtendedMessagesAreRejected) {
  for (const Sample& smp : all_samples()) {
    SCOPED_TRACE(smp.name);
    for (std::size_t bytes = 0; bytes < smp.e.bytes; ++bytes) {
      expect_rejected(smp.e.words, bytes, 400, smp.name + " truncated to " + std::to_string(bytes) + " bytes");
      if (HasFailure()) return;
    }
    for (std::size_t extra : {8u, 16u}) {
      std::vector<std::uint64_t> w = smp.e.words;
      w.resize(w.size() + extra / 8, 0);
      expect_rejected(w, smp.e.bytes + extra, 400, smp.name + " extended");
    }
  }
  for (CodecKind c : kAllCodecs) {
    const Sample empty = make_sample(c, 0);
    EXPECT_EQ(empty.e.bytes, 64u);
    EXPECT_EQ(attempt(Api::validate, empty.e.words, empty.e.bytes, 1, empty.name), Outcome::accepted);
  }
}

// The byte count may not exceed the buffer (a caller error, invalid_argument).
TEST(UntrustedInput, ByteCountBeyondTheBufferIsAnArgumentError) {
  const Sample smp = make_sample(CodecKind::elias_dense);
  const MsgBuf buf(smp.e.words, smp.e.bytes - 8);
  Codec codec(smp.cfg);
  expect_error(Errc::invalid_argument, [&] { codec.read_header(buf.view(), smp.e.bytes); });
}

// ---- bit flips (checksum) ------------------------------------------------------------------

// Any single flipped bit anywhere (header, checksum, offsets, scales, payload,
// padding) is caught: exhaustively for every bit of a small message (n = 40)
// of every codec, and for multiple flips (2..8 bits) at random positions. CRC32C
// detects every single-bit error; the multi-bit trials use a fixed seed.
// decode_accumulate leaves the accumulator untouched when it rejects.
TEST(UntrustedInput, BitFlipsAreCaughtByTheChecksum) {
  for (const Sample& smp : all_samples(40)) {
    SCOPED_TRACE(smp.name);
    const std::size_t nbits = smp.e.bytes * 8;
    for (std::size_t b = 0; b < nbits; ++b) {
      std::vector<std::uint64_t> w = smp.e.words;
      w[b / 64] ^= std::uint64_t(1) << (b % 64);
      for (Api api : {Api::validate, Api::decode_values}) {
        ASSERT_EQ(attempt(api, w, smp.e.bytes, 64, smp.name + " bit " + std::to_string(b)), Outcome::corrupt)
            << "flip of bit " << b << " accepted by " << api_name(api);
      }
    }
  }
  std::mt19937_64 rng(80);
  for (const Sample& smp : all_samples(3000)) {
    SCOPED_TRACE(smp.name);
    const std::size_t nbits = smp.e.bytes * 8;
    for (int trial = 0; trial < 200; ++trial) {
      std::vector<std::uint64_t> w = smp.e.words;
      const int flips = 1 + trial % 8;
      std::set<std::size_t> at;
      while (static_cast<int>(at.size()) < flips) at.insert(rng() % nbits);
      for (std::size_t b : at) w[b / 64] ^= std::uint64_t(1) << (b % 64);
      std::ostringstream ctx;
      ctx << smp.name << " trial " << trial << " flips";
      for (std::size_t b : at) ctx << " " << b;
      ASSERT_EQ(attempt(Api::validate, w, smp.e.bytes, 3000, ctx.str()), Outcome::corrupt) << ctx.str();
      // The accumulator is untouched by a rejected message.
      const MsgBuf buf(w, smp.e.bytes);
      Codec codec(smp.cfg);
      const std::vector<float> acc0(3000, 2.5f);
      const Values acc = to_device(acc0);
      expect_error(Errc::corrupt_message, [&] { codec.decode_accumulate(buf.view(), buf.bytes(), 1.0f, acc); }, ctx.str());
      ASSERT_EQ(to_host(acc, 3000), acc0) << ctx.str();
    }
  }
}

// ---- header fields with a valid checksum ------------------------------------------------------

struct FieldEdit {
  std::string name;
  bool must_reject;                                       // else: reject or accept a valid message
  bool (*applies)(const qsgd::MessageHeader&);             // null: every codec
  void (*edit)(qsgd::MessageHeader&);
};

bool quantized(const qsgd::MessageHeader& h) { return qsgd::is_quantized(static_cast<CodecKind>(h.codec)); }
bool floats(const qsgd::MessageHeader& h) { return !quantized(h); }
bool variable(const qsgd::MessageHeader& h) { return qsgd::is_variable_length(static_cast<CodecKind>(h.codec)); }
bool fixed_size(const qsgd::MessageHeader& h) { return !variable(h); }

const std::vector<FieldEdit>& field_edits() {
  static const std::vector<FieldEdit> edits = {
      {"magic+1", true, nullptr, [](qsgd::MessageHeader& h) { h.magic += 1; }},
      {"magic=0", true, nullptr, [](qsgd::MessageHeader& h) { h.magic = 0; }},
      {"version=0", true, nullptr, [](qsgd::MessageHeader& h) { h.version = 0; }},
      {"version=2", true, nullptr, [](qsgd::MessageHeader& h) { h.version = 2; }},
      {"version=0xffff", true, nullptr, [](qsgd::MessageHeader& h) { h.version = 0xffff; }},
      {"codec=7", true, nullptr, [](qsgd::MessageHeader& h) { h.codec = 7; }},
      {"codec=255", true, nullptr, [](qsgd::MessageHeader& h) { h.codec = 255; }},
      {"codec:dense<->sparse", false, variable,
       [](qsgd::MessageHeader& h) { h.codec = h.codec == 4 ? 5 : 4; }},
      {"codec:quantized->fixed/dense", false, quantized,
       [](qsgd::MessageHeader& h) { h.codec = h.codec == 3 ? 5 : 3; }},
      {"codec:quantized->fp32", true, quantized, [](qsgd::MessageHeader& h) { h.codec = 0; }},
      {"codec:float->fixed", true, floats, [](qsgd::MessageHeader& h) { h.codec = 3; }},
      {"codec:fp16<->bf16/fp32", false, floats, [](qsgd::MessageHeader& h) { h.codec = h.codec == 1 ? 2 : 1; }},
      {"norm=3", true, nullptr, [](qsgd::MessageHeader& h) { h.norm = 3; }},
      {"norm=255", true, nullptr, [](qsgd::MessageHeader& h) { h.norm = 255; }},
      {"norm=none", true, quantized, [](qsgd::MessageHeader& h) { h.norm = 0; }},
      {"norm:max->l2", false, quantized, [](qsgd::MessageHeader& h) { h.norm = 1; }},
      {"norm=l2 on float", true, floats, [](qsgd::MessageHeader& h) { h.norm = 1; }},
      {"n+1", false, nullptr, [](qsgd::MessageHeader& h) { h.n += 1; }},
      {"n-1", false, nullptr, [](qsgd::MessageHeader& h) { h.n -= 1; }},
      {"n+64", false, nullptr, [](qsgd::MessageHeader& h) { h.n += 64; }},
      {"n=0", true, nullptr, [](qsgd::MessageHeader& h) { h.n = 0; }},
      {"n=2^60", true, nullptr, [](qsgd::MessageHeader& h) { h.n = std::uint64_t(1) << 60; }},
      {"n=2^40+1", true, nullptr, [](qsgd::MessageHeader& h) { h.n = (std::uint64_t(1) << 40) + 1; }},
      {"n=2^64-1", true, nullptr, [](qsgd::MessageHeader& h) { h.n = ~std::uint64_t(0); }},
      {"d=0", true, quantized, [](qsgd::MessageHeader& h) { h.d = 0; }},
      {"d+1", false, quantized, [](qsgd::MessageHeader& h) { h.d += 1; }},
      {"d-3", false, quantized, [](qsgd::MessageHeader& h) { h.d -= 3; }},
      {"d=1", true, quantized, [](qsgd::MessageHeader& h) { h.d = 1; }},
      {"d=2^32-1", true, quantized, [](qsgd::MessageHeader& h) { h.d = 0xFFFFFFFFu; }},
      {"d=2 on float", true, floats, [](qsgd::MessageHeader& h) { h.d = 2; }},
      {"s=0", true, quantized, [](qsgd::MessageHeader& h) { h.s = 0; }},
      {"s-1", false, quantized, [](qsgd::MessageHeader& h) { h.s -= 1; }},
      {"s+1", false, quantized, [](qsgd::MessageHeader& h) { h.s += 1; }},
      {"s=1", false, quantized, [](qsgd::MessageHeader& h) { h.s = 1; }},
      {"s=2^24", false, quantized, [](qsgd::MessageHeader& h) { h.s = qsgd::max_levels; }},
      {"s=2^24+1", true, quantized, [](qsgd::MessageHeader& h) { h.s = qsgd::max_levels + 1; }},
      {"s=2^32-1", true, quantized, [](qsgd::MessageHeader& h) { h.s = 0xFFFFFFFFu; }},
      {"s=16 on float", true, floats, [](qsgd::MessageHeader& h) { h.s = 16; }},
      {"chunk=0", true, variable, [](qsgd::MessageHeader& h) { h.chunk = 0; }},
      {"chunk+1", false, variable, [](qsgd::MessageHeader& h) { h.chunk += 1; }},
      {"chunk-1", false, variable, [](qsgd::MessageHeader& h) { h.chunk -= 1; }},
      {"chunk=2^32-1", true, variable, [](qsgd::MessageHeader& h) { h.chunk = 0xFFFFFFFFu; }},
      {"chunk=1", true, variable, [](qsgd::MessageHeader& h) { h.chunk = 1; }},
      {"chunk=64 on fixed-size", true, fixed_size, [](qsgd::MessageHeader& h) { h.chunk = 64; }},
      {"nchunks+1", true, variable, [](qsgd::MessageHeader& h) { h.nchunks += 1; }},
      {"nchunks-1", true, variable, [](qsgd::MessageHeader& h) { h.nchunks -= 1; }},
      {"nchunks=0", true, nullptr, [](qsgd::MessageHeader& h) { h.nchunks = h.nchunks == 0 ? 1 : 0; }},
      {"nchunks=2^32-1", true, nullptr, [](qsgd::MessageHeader& h) { h.nchunks = 0xFFFFFFFFu; }},
      {"payload_bits+1", false, nullptr, [](qsgd::MessageHeader& h) { h.payload_bits += 1; }},
      {"payload_bits-1", false, nullptr, [](qsgd::MessageHeader& h) { h.payload_bits -= 1; }},
      {"payload_bits+64", true, nullptr, [](qsgd::MessageHeader& h) { h.payload_bits += 64; }},
      {"payload_bits=0", true, nullptr, [](qsgd::MessageHeader& h) { h.payload_bits = 0; }},
      {"payload_bits=2^63", true, nullptr, [](qsgd::MessageHeader& h) { h.payload_bits = std::uint64_t(1) << 63; }},
      {"payload_bits=2^64-1", true, nullptr, [](qsgd::MessageHeader& h) { h.payload_bits = ~std::uint64_t(0); }},
      {"total_bytes+8", true, nullptr, [](qsgd::MessageHeader& h) { h.total_bytes += 8; }},
      {"total_bytes-8", true, nullptr, [](qsgd::MessageHeader& h) { h.total_bytes -= 8; }},
      {"total_bytes+1", true, nullptr, [](qsgd::MessageHeader& h) { h.total_bytes += 1; }},
      {"total_bytes=0", true, nullptr, [](qsgd::MessageHeader& h) { h.total_bytes = 0; }},
      {"total_bytes=2^64-8", true, nullptr, [](qsgd::MessageHeader& h) { h.total_bytes = ~std::uint64_t(7); }},
      {"quantizer=3", true, nullptr, [](qsgd::MessageHeader& h) { h.quantizer = 3; }},
      {"quantizer=255", true, nullptr, [](qsgd::MessageHeader& h) { h.quantizer = 255; }},
      {"quantizer=none", true, quantized, [](qsgd::MessageHeader& h) { h.quantizer = 0; }},
      {"quantizer:stochastic->deterministic", false, quantized, [](qsgd::MessageHeader& h) { h.quantizer = 2; }},
      {"quantizer=1 on float", true, floats, [](qsgd::MessageHeader& h) { h.quantizer = 1; }},
  };
  return edits;
}

// Every header field corrupted on a host copy, checksum recomputed.
TEST(UntrustedInput, CorruptHeaderFieldsWithValidChecksum) {
  int accepted = 0, tolerant = 0;  // edits that may leave a well-formed message, and how many did
  for (const Sample& smp : all_samples()) {
    for (const FieldEdit& fe : field_edits()) {
      if (fe.applies && !fe.applies(smp.e.h)) continue;
      const std::string ctx = smp.name + " " + fe.name;
      std::vector<std::uint64_t> w = smp.e.words;
      qsgd::MessageHeader h = smp.e.h;
      fe.edit(h);
      set_header(w, h);
      reseal(w, smp.e.bytes);
      if (fe.must_reject) {
        expect_rejected(w, smp.e.bytes, 400, ctx);
      } else {
        ++tolerant;
        accepted += expect_consistent(w, smp.e.bytes, 400, ctx) == Outcome::accepted;
      }
    }
    // Each reserved byte.
    for (int k = 0; k < 11; ++k) {
      std::vector<std::uint64_t> w = smp.e.words;
      qsgd::MessageHeader h = smp.e.h;
      h.reserved[k] = static_cast<std::uint8_t>(1u << (k % 8));
      set_header(w, h);
      reseal(w, smp.e.bytes);
      expect_rejected(w, smp.e.bytes, 400, smp.name + " reserved[" + std::to_string(k) + "]");
    }
  }
  RecordProperty("tolerant_edits", tolerant);
  RecordProperty("tolerant_edits_accepted", accepted);
}

// Words of a forged message: `h` (its total size set from its layout),
// every bucket scale 1, a zero payload, a valid checksum: only the header's
// fields are forged.
std::vector<std::uint64_t> forge(qsgd::MessageHeader& h) {
  const qsgd::MessageLayout lay = qsgd::layout_of(h);
  h.total_bytes = lay.total_words * 8;
  std::vector<std::uint64_t> w(lay.total_words, 0);
  set_header(w, h);
  for (std::uint64_t b = 0; b < lay.buckets; ++b) {
    const float one = 1.0f;
    std::memcpy(reinterpret_cast<unsigned char*>(w.data() + lay.scales_word) + 4 * b, &one, 4);
  }
  reseal(w, h.total_bytes);
  return w;
}

// The header of a forged message claiming n = 2^32 coordinates with
// d = 2^32 - 1 (2 buckets), max norm, s = 16, stochastic quantizer: the
// shape the tests below give a huge n.
qsgd::MessageHeader huge_header(CodecKind c, std::uint32_t chunk, std::uint32_t nchunks, std::uint64_t payload_bits) {
  qsgd::MessageHeader h;
  h.codec = static_cast<std::uint8_t>(c);
  h.norm = static_cast<std::uint8_t>(Norm::max);
  h.n = std::uint64_t(1) << 32;
  h.d = 0xFFFFFFFFu;
  h.s = 16;
  h.chunk = chunk;
  h.nchunks = nchunks;
  h.payload_bits = payload_bits;
  h.quantizer = static_cast<std::uint8_t>(qsgd::QuantizerKind::stochastic);
  return h;
}

// A receiver that raised its cap on n to 2^32 (Expect::max_n).
qsgd::Expect raised_cap() {
  qsgd::Expect e;
  e.max_n = std::uint64_t(1) << 32;
  return e;
}

// A forged elias-dense message with a valid checksum that claims n = 2^32
// (a receiver that raised Expect::max_n to 2^32, so the size limit lets it
// through) with
// d = 2^32 - 1 and chunk = max_chunk (2 buckets, 65536 chunks: 512 KiB of
// offsets) and an empty payload. It is corrupt (the dense code needs at least
// one bit per coordinate): the payload-floor check must say so, and every
// entry point must fail with a qsgd::Error: corrupt_message, or
// buffer_too_small where the caller's output is shorter than the claimed n.
// decode(levels) must not size its output from the unchecked n first
// (16 GiB of levels).
TEST(UntrustedInput, ForgedHugeNWithEmptyPayloadIsCorrupt) {
  const qsgd::Expect big = raised_cap();
  qsgd::MessageHeader h = huge_header(CodecKind::elias_dense, qsgd::max_chunk,
                                      static_cast<std::uint32_t>((std::uint64_t(1) << 32) / qsgd::max_chunk), 0);
  const auto w = forge(h);
  ASSERT_EQ(h.total_bytes, 64u + 8u + 8u * 65536u);  // header, 2 scales, offsets
  const MsgBuf buf(w, h.total_bytes);
  Codec codec(config(CodecKind::elias_dense, 16, 64, Norm::max));
  const std::string why =
      expect_error(Errc::corrupt_message, [&] { codec.validate_message(buf.view(), buf.bytes(), big); }, "validate_message");
  EXPECT_NE(why.find("too short for 4294967296 elements"), std::string::npos) << why;
  Values out("out", 1000);
  for (int k = 0; k < 2; ++k) {
    try {
      if (k == 0) codec.decode(buf.view(), buf.bytes(), out, big);
      else codec.decode_accumulate(buf.view(), buf.bytes(), 1.0f, out, big);
      ADD_FAILURE() << "accepted";
    } catch (const qsgd::Error& e) {
      EXPECT_TRUE(e.code() == Errc::corrupt_message || e.code() == Errc::buffer_too_small) << e.what();
    }
  }
  Quant q;
  expect_error(Errc::corrupt_message, [&] { codec.decode(buf.view(), buf.bytes(), q, big); }, "decode(levels)");
}

// A 96-byte elias-sparse message with a valid checksum: n = 2^32,
// d = chunk = 2^32 - 1 (2 buckets, 2 chunks), two payload bits (one empty
// chunk count each). Without a bound on the chunk, every header check passed
// and decoding allocated 2^32 levels (16 GiB) and looped 2^32 times; the
// chunk limit (2^16) rejects it at the header, whatever the receiver's cap on n.
TEST(UntrustedInput, SparseMessageCannotClaimBillionsOfZeros) {
  qsgd::MessageHeader h = huge_header(CodecKind::elias_sparse, 0xFFFFFFFFu, 2, 2);
  const auto w = forge(h);
  ASSERT_EQ(h.total_bytes, 96u);
  const MsgBuf buf(w, h.total_bytes);
  Codec codec(config(CodecKind::elias_sparse, 16, 64, Norm::max));
  const std::string why =
      expect_error(Errc::corrupt_message, [&] { codec.validate_message(buf.view(), buf.bytes(), raised_cap()); },
                   "validate_message");
  EXPECT_NE(why.find("chunk size 4294967295 is outside 1..65536"), std::string::npos) << why;
  const qsgd::Expect big = raised_cap();  // the chunk bound must refuse it whatever the cap
  Quant q;
  expect_error(Errc::corrupt_message, [&] { codec.decode(buf.view(), buf.bytes(), q, big); }, "decode(levels)");
  EXPECT_EQ(q.levels.extent(0), 0u);  // nothing was sized from the forged n
  // Peak memory, measured: validating and decoding it (levels, values,
  // accumulate) in a child grows the child's peak resident set by under
  // 100 MB (the 16 GiB of levels it once sized would show as gigabytes).
  // Host backends only: a process may not use CUDA (or another device
  // runtime) in a child forked after initializing it.
  if constexpr (!std::is_same<Exec::memory_space, Kokkos::HostSpace>::value) {
    std::printf("[   INFO   ] peak-RSS check not run: it forks, which the device backend does not allow\n");
  } else {
    const auto [code, grew_mib] = qsgd_test::in_child([&] {
      Quant lv;
      Values out("out", 1000);
      int refused = 0;
      for (int k = 0; k < 4; ++k) {
        try {
          if (k == 0) codec.validate_message(buf.view(), buf.bytes(), big);
          if (k == 1) codec.decode(buf.view(), buf.bytes(), lv, big);
          if (k == 2) codec.decode(buf.view(), buf.bytes(), out, big);
          if (k == 3) codec.decode_accumulate(buf.view(), buf.bytes(), 1.0f, out, big);
        } catch (const qsgd::Error& e) {
          // Refused as corrupt (the header's chunk size), or, for the fixed
          // output, as too small for the claimed n: never decoded.
          refused += e.code() == Errc::corrupt_message || (k >= 2 && e.code() == Errc::buffer_too_small);
        }
      }
      return refused == 4 && lv.levels.extent(0) == 0;
    });
    EXPECT_EQ(code, 0) << "the forged message was not refused by all four calls, or levels were sized from it";
    EXPECT_LT(grew_mib, 100.0);
  }
}

// A well-formed elias-sparse message of 532,552 bytes that claims n = 2^32
// in 65,536 empty chunks of max_chunk coordinates (one '0' bit each: a count
// of zero; chunk k's payload starts at bit k). A receiver that raises
// Expect::max_n to 2^32 gets a valid message (decoding it to levels would
// size 2^32 of them, 16 GiB); with the library's default cap every entry
// point refuses it at the header, before anything is sized from n.
TEST(UntrustedInput, DefaultLimitRefusesAValidMessageOfBillionsOfZeros) {
  const auto nchunks = static_cast<std::uint32_t>((std::uint64_t(1) << 32) / qsgd::max_chunk);
  qsgd::MessageHeader h = huge_header(CodecKind::elias_sparse, qsgd::max_chunk, nchunks, nchunks);
  auto w = forge(h);
  const qsgd::MessageLayout lay = qsgd::layout_of(h);
  for (std::uint64_t k = 0; k < h.nchunks; ++k) w[lay.offsets_word + k] = k;
  reseal(w, h.total_bytes);
  ASSERT_EQ(h.total_bytes, 532552u);
  const MsgBuf buf(w, h.total_bytes);
  Codec codec(config(CodecKind::elias_sparse, 16, 64, Norm::max));
  EXPECT_NO_THROW(codec.validate_message(buf.view(), buf.bytes(), raised_cap())) << "the forged message should be well formed";
  EXPECT_EQ(qsgd::Expect{}.max_n, qsgd::default_max_n);
  const std::string why =
      expect_error(Errc::corrupt_message, [&] { codec.validate_message(buf.view(), buf.bytes()); }, "validate_message");
  EXPECT_NE(why.find("n = 4294967296 exceeds the receiver's limit 67108864"), std::string::npos) << why;
  Quant q;
  expect_error(Errc::corrupt_message, [&] { codec.decode(buf.view(), buf.bytes(), q); }, "decode(levels)");
  EXPECT_EQ(q.levels.extent(0), 0u);  // nothing was sized from the forged n
  Values out("out", 1000);
  expect_error(Errc::corrupt_message, [&] { codec.decode(buf.view(), buf.bytes(), out); }, "decode(values)");
  expect_error(Errc::corrupt_message, [&] { codec.decode_accumulate(buf.view(), buf.bytes(), 1.0f, out); },
               "decode_accumulate");
  // An exact n set by the receiver replaces the cap: the exchanges decode
  // tensors of any size they expect.
  qsgd::Expect exact;
  exact.n = h.n;
  EXPECT_NO_THROW(qsgd::parse_header(w.data(), h.total_bytes, exact));
}

// Receiver expectations: a message for another n, or above a receiver's limit.
TEST(UntrustedInput, ExpectationsOnNAreEnforced) {
  const Sample smp = make_sample(CodecKind::elias_sparse);
  const MsgBuf buf(smp.e.words, smp.e.bytes);
  Codec codec(smp.cfg);
  qsgd::Expect exact;
  exact.n = 300;
  EXPECT_NO_THROW(codec.validate_message(buf.view(), buf.bytes(), exact));
  exact.n = 299;
  expect_error(Errc::corrupt_message, [&] { codec.validate_message(buf.view(), buf.bytes(), exact); });
  qsgd::Expect limit;
  limit.max_n = 299;
  expect_error(Errc::corrupt_message, [&] { codec.validate_message(buf.view(), buf.bytes(), limit); });
  Values out("out", 300);
  expect_error(Errc::corrupt_message, [&] { codec.decode(buf.view(), buf.bytes(), out, limit); });
}

// ---- chunk offsets, scales, payload with a valid checksum ------------------------------------------

TEST(UntrustedInput, CorruptChunkOffsets) {
  for (CodecKind c : {CodecKind::elias_sparse, CodecKind::elias_dense}) {
    const Sample smp = make_sample(c);
    const std::uint64_t nch = smp.e.h.nchunks, pb = smp.e.h.payload_bits;
    ASSERT_EQ(nch, 5u);
    struct Edit {
      std::string name;
      bool must;
      std::function<void(std::uint64_t*)> f;
    };
    const std::vector<Edit> edits = {
        {"offset[0]=1", true, [](std::uint64_t* o) { o[0] = 1; }},
        {"offset[2]>offset[3]", true, [](std::uint64_t* o) { o[2] = o[3] + 1; }},
        {"offset[3]<offset[2]", true, [](std::uint64_t* o) { o[3] = o[2] - 1; }},
        {"offset[last]=payload+1", true, [&](std::uint64_t* o) { o[nch - 1] = pb + 1; }},
        {"offset[last]=2^63", true, [&](std::uint64_t* o) { o[nch - 1] = std::uint64_t(1) << 63; }},
        {"offset[1]=2^64-1", true, [](std::uint64_t* o) { o[1] = ~std::uint64_t(0); }},
        {"all offsets 0", true, [&](std::uint64_t* o) { for (std::uint64_t k = 0; k < nch; ++k) o[k] = 0; }},
        {"all offsets = payload_bits", true, [&](std::uint64_t* o) { for (std::uint64_t k = 1; k < nch; ++k) o[k] = pb; }},
        {"offset[2]+1", false, [](std::uint64_t* o) { o[2] += 1; }},
        {"offset[2]-1", false, [](std::uint64_t* o) { o[2] -= 1; }},
        {"offset[1]<->offset[2] swapped", true, [](std::uint64_t* o) { std::swap(o[1], o[2]); }},
    };
    for (const Edit& ed : edits) {
      std::vector<std::uint64_t> w = smp.e.words;
      ed.f(w.data() + 8);
      reseal(w, smp.e.bytes);
      const std::string ctx = smp.name + " " + ed.name;
      if (ed.must) expect_rejected(w, smp.e.bytes, 400, ctx, true);
      else expect_consistent(w, smp.e.bytes, 400, ctx);
    }
  }
}

// A negative, NaN or infinite scale is rejected; -0.0, 0 and a huge finite
// scale are valid values of the field.
TEST(UntrustedInput, CorruptScales) {
  for (CodecKind c : {CodecKind::fixed, CodecKind::elias_sparse, CodecKind::elias_dense}) {
    const Sample smp = make_sample(c);
    const std::uint64_t scales_word = 8 + smp.e.h.nchunks;
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    for (std::uint64_t b : {0ull, 2ull, 4ull}) {
      for (float x : {-1.0f, -std::numeric_limits<float>::denorm_min(), nan, -nan, inf, -inf, -0.0f, 0.0f, 3e38f}) {
        std::vector<std::uint64_t> w = smp.e.words;
        auto* sc = reinterpret_cast<unsigned char*>(w.data() + scales_word) + 4 * b;
        const std::uint32_t u = float_bits(x);
        for (int k = 0; k < 4; ++k) sc[k] = static_cast<unsigned char>(u >> (8 * k));
        reseal(w, smp.e.bytes);
        std::ostringstream ctx;
        ctx << smp.name << " scale[" << b << "] = " << x;
        const bool bad = !(std::isfinite(x) && x >= 0.0f);
        if (bad) expect_rejected(w, smp.e.bytes, 400, ctx.str(), true);
        else EXPECT_EQ(expect_consistent(w, smp.e.bytes, 400, ctx.str()), Outcome::accepted) << ctx.str();
      }
    }
    // The scale padding (bucket 5 of 5, an odd count) is not read as a scale.
    std::vector<std::uint64_t> w = smp.e.words;
    w[scales_word + 2] |= std::uint64_t(float_bits(-1.0f)) << 32;
    reseal(w, smp.e.bytes);
    expect_consistent(w, smp.e.bytes, 400, smp.name + " scale padding");
  }
}

// Random payload bit flips (1 to 4 per trial), re-sealed: the decoder either
// rejects the message or accepts levels within [-s, s]; never crashes, and all
// entry points agree. Checked for every quantized codec, at s = 16 and at
// s = 7 (where the fixed code has unused level patterns 8..15) and for the
// float codecs (a flip can make an Inf or NaN, which must be rejected).
TEST(UntrustedInput, CorruptPayloadWithValidChecksum) {
  std::mt19937_64 rng(90);
  for (std::uint32_t s : {16u, 7u}) {
    for (CodecKind c : kAllCodecs) {
      if (s == 7 && !qsgd::is_quantized(c)) continue;
      const Sample smp = make_sample(c, 300, s);
      const std::uint64_t nb = qsgd::is_quantized(c) ? (300 + 63) / 64 : 0;
      const std::uint64_t payload_word = 8 + smp.e.h.nchunks + (nb + 1) / 2;
      const std::uint64_t pbits = smp.e.h.payload_bits;
      int rejected = 0;
      for (int trial = 0; trial < 150; ++trial) {
        std::vector<std::uint64_t> w = smp.e.words;
        const int flips = 1 + trial % 4;
        std::ostringstream ctx;
        ctx << smp.name << " s=" << s << " payload flips";
        for (int f = 0; f < flips; ++f) {
          const std::uint64_t b = rng() % pbits;
          w[payload_word + b / 64] ^= std::uint64_t(1) << (63 - b % 64);
          ctx << " " << b;
        }
        reseal(w, smp.e.bytes);
        rejected += expect_consistent(w, smp.e.bytes, 400, ctx.str()) == Outcome::corrupt;
        if (HasFailure()) return;
      }
      RecordProperty(qsgd::to_string(c) + "_s" + std::to_string(s) + "_rejected_of_150", rejected);
    }
  }
  // Float payloads holding Inf or NaN are rejected.
  for (CodecKind c : {CodecKind::fp32, CodecKind::fp16, CodecKind::bf16}) {
    const Sample smp = make_sample(c);
    for (std::uint32_t pattern : c == CodecKind::fp32 ? std::vector<std::uint32_t>{0x7F800000u, 0xFF800000u, 0x7FC00000u}
                                 : c == CodecKind::fp16 ? std::vector<std::uint32_t>{0x7C00u, 0xFC00u, 0x7E00u}
                                                        : std::vector<std::uint32_t>{0x7F80u, 0xFF80u, 0x7FC0u}) {
      std::vector<std::uint64_t> w = smp.e.words;
      unsigned char* p = reinterpret_cast<unsigned char*>(w.data() + 8);
      const std::size_t width = c == CodecKind::fp32 ? 4 : 2, at = 123;
      for (std::size_t k = 0; k < width; ++k) p[at * width + k] = static_cast<unsigned char>(pattern >> (8 * k));
      reseal(w, smp.e.bytes);
      expect_rejected(w, smp.e.bytes, 400, smp.name + " non-finite payload", true);
      Codec codec(smp.cfg);
      const MsgBuf buf(w, smp.e.bytes);
      Values out("out", 300);
      const std::string what = expect_error(Errc::corrupt_message, [&] { codec.decode(buf.view(), buf.bytes(), out); });
      EXPECT_NE(what.find("element 123"), std::string::npos) << what;
    }
  }
}

// Dense Elias levels above the header's s are corrupt, also where the table
// decoder (several short codewords per look-up, detail/elias.hpp) reads them.
// The table holds magnitudes up to 31 whatever s is, so only its per-entry
// bound against s stands between such a level and the output. Messages of
// s = 16 relabelled with a smaller s and resealed: a Gaussian one (levels up
// to 16 everywhere), and one whose single non-zero level (16, at the start of
// a bucket and a chunk, 12 bits with its sign) is read by a table look-up.
TEST(UntrustedInput, EliasDenseLevelsAboveSAreCorrupt) {
  std::vector<Sample> samples = {make_sample(CodecKind::elias_dense, 300, 16),
                                 make_sample(CodecKind::elias_dense, 5000, 16)};
  Sample one;
  one.cfg = config(CodecKind::elias_dense, 16, 64, Norm::max, 64);
  std::vector<float> v(128, 0.0f);
  v[64] = -2.5f;
  Codec codec(one.cfg);
  one.e = encode_values(codec, to_device(v, v.size()), v.size(), qsgd::RngKey{1, 2, 3, 4});
  one.name = "one level";
  samples.push_back(one);
  for (const Sample& smp : samples) {
    const std::uint64_t n = smp.e.h.n;
    for (std::uint32_t s : {15u, 7u, 3u, 1u}) {
      std::vector<std::uint64_t> w = smp.e.words;
      reinterpret_cast<qsgd::MessageHeader*>(w.data())->s = s;
      reseal(w, smp.e.bytes);
      expect_rejected(w, smp.e.bytes, n + 100, "elias-dense " + smp.name + " relabelled s=" + std::to_string(s),
                      true);
    }
  }
}

// rANS structure forged behind a valid checksum: each frequency-table fault
// and each chunk fault is a corrupt message from every decoding entry point,
// and the error names the table or the chunk.
TEST(UntrustedInput, ForgedRansTablesAndChunksAreCorrupt) {
  const Sample smp = make_sample(CodecKind::rans);  // s = 16: 33 symbols; chunk 64: 5 chunks
  const std::uint64_t nb = (300 + 63) / 64;
  const std::uint64_t payload_word = 8 + smp.e.h.nchunks + (nb + 1) / 2;
  // Unit k of the payload: bits [16k, 16k + 16) of the MSB-first stream.
  auto get = [&](const std::vector<std::uint64_t>& w, std::size_t k) {
    return static_cast<std::uint16_t>(w[payload_word + k / 4] >> (48 - 16 * (k % 4)));
  };
  auto set = [&](std::vector<std::uint64_t>& w, std::size_t k, std::uint32_t v) {
    const int sh = 48 - 16 * static_cast<int>(k % 4);
    std::uint64_t& word = w[payload_word + k / 4];
    word = (word & ~(std::uint64_t(0xFFFF) << sh)) | (static_cast<std::uint64_t>(v & 0xFFFFu) << sh);
  };
  std::vector<std::uint64_t> base = smp.e.words;
  const std::uint32_t m = get(base, 1);
  const std::size_t table_units = (2 + 2 * std::size_t(m) + 3) / 4 * 4;
  ASSERT_EQ(base[8], 16 * table_units) << "the first chunk starts after the table";
  struct Case {
    std::string name;
    std::function<void(std::vector<std::uint64_t>&)> edit;
    std::string needle;
  };
  std::vector<Case> cases = {
      {"precision 0", [&](auto& w) { set(w, 0, 0); }, "precision"},
      {"precision 16", [&](auto& w) { set(w, 0, 16); }, "precision"},
      {"no symbols", [&](auto& w) { set(w, 1, 0); }, "symbols"},
      {"more symbols than the alphabet", [&](auto& w) { set(w, 1, 34); }, "symbols"},
      {"symbol outside the alphabet", [&](auto& w) { set(w, 2 + 2 * (m - 1), 40); }, "alphabet"},
      {"zero frequency", [&](auto& w) { set(w, 3, 0); }, "frequenc"},
      {"frequencies above 2^P", [&](auto& w) { set(w, 3, get(w, 3) + 1u); }, "frequenc"},
      {"frequencies below 2^P", [&](auto& w) { set(w, 3, get(w, 3) - 1u); }, "add up"},
      {"initial state below 2^15", [&](auto& w) { set(w, table_units + 1, 0); }, "rANS chunk 0"},
      {"initial state at 2^31", [&](auto& w) { set(w, table_units + 1, 0x8000); }, "rANS chunk 0"},
      {"chunk offset not unit-aligned", [&](auto& w) { w[9] += 8; }, "rANS chunk"},
      {"chunk offsets out of order", [&](auto& w) { std::swap(w[9], w[10]); }, "rANS chunk"},
      {"first chunk inside the table", [&](auto& w) { w[8] -= 16; }, "rANS chunk 0"},
      {"renormalization unit changed", [&](auto& w) { set(w, table_units + 8, get(w, table_units + 8) ^ 0x0100u); },
       "rANS chunk 0"},
  };
  if ((2 + 2 * m) % 4 != 0)
    cases.push_back({"table padding not zero", [&](auto& w) { set(w, 2 + 2 * m, 1); }, "padding"});
  for (const Case& cs : cases) {
    std::vector<std::uint64_t> w = base;
    cs.edit(w);
    reseal(w, smp.e.bytes);
    expect_rejected(w, smp.e.bytes, 400, "rans: " + cs.name, true);
    Codec codec(smp.cfg);
    const MsgBuf buf(w, smp.e.bytes);
    Values out("out", 300);
    const std::string what = expect_error(Errc::corrupt_message, [&] { codec.decode(buf.view(), buf.bytes(), out); },
                                          cs.name);
    EXPECT_NE(what.find(cs.needle), std::string::npos) << cs.name << ": " << what;
  }
}

// ---- 10. CRC32C -------------------------------------------------------------------------------

// The CRC32C check value (RFC 3720 / iSCSI): CRC32C("123456789") = 0xE3069283.
// The 256-entry table used on GPUs, applied byte by byte, agrees with the host
// path (SSE4.2 or slicing-by-8) on random data of every length up to 100.
TEST(Crc32c, KnownVectorAndTablePath) {
  const char* check = "123456789";
  EXPECT_EQ(qsgd::detail::crc32c_bytes_host(reinterpret_cast<const unsigned char*>(check), 9), 0xE3069283u);
  EXPECT_EQ(qsgd::detail::crc32c_bytes_host(nullptr, 0), 0u);
  const unsigned char zeros[32] = {};
  EXPECT_EQ(qsgd::detail::crc32c_bytes_host(zeros, 32), 0x8A9136AAu);  // RFC 3720 B.4: 32 bytes of zeros
  const std::uint32_t* table = qsgd::detail::crc32c_table();
  std::mt19937_64 rng(100);
  for (std::size_t len = 0; len <= 100; ++len) {
    std::vector<unsigned char> data(len);
    for (auto& b : data) b = static_cast<unsigned char>(rng());
    std::uint32_t crc = 0xFFFFFFFFu;
    for (unsigned char b : data) crc = table[(crc ^ b) & 0xFFu] ^ (crc >> 8);
    EXPECT_EQ(~crc, qsgd::detail::crc32c_bytes_host(data.data(), len)) << "length " << len;
  }
}

// The host path (on CPUs with SSE4.2: four interleaved runs of 16384, 1024
// or 128 bytes combined through zero-shift tables) equals the table path on
// random data of lengths around every run boundary and at odd offsets, from a
// non-trivial starting register.
TEST(Crc32c, InterleavedRunsEqualTheTablePath) {
  std::printf("[   INFO   ] host CRC32C path: %s\n", qsgd::detail::crc32c_host_isa());
  std::mt19937_64 rng(102);
  std::vector<unsigned char> data(4 * 16384 * 2 + 4 * 1024 * 2 + 4 * 128 * 2 + 256);
  for (auto& b : data) b = static_cast<unsigned char>(rng());
  std::vector<std::size_t> lengths;
  for (std::size_t base : {std::size_t(0), std::size_t(512), std::size_t(4096), std::size_t(4096 + 512),
                           std::size_t(65536), std::size_t(65536 + 4096 + 512), std::size_t(2 * 65536)})
    for (std::size_t k = 0; k < 12; ++k)
      for (long delta : {-9L, -8L, -1L, 0L, 1L, 7L, 8L, 13L}) {
        const long len = static_cast<long>(base + 8 * k) + delta;
        if (len >= 0) lengths.push_back(static_cast<std::size_t>(len));
      }
  for (std::size_t len : lengths)
    for (std::size_t off : {std::size_t(0), std::size_t(3)}) {
      if (off + len > data.size()) continue;
      const std::uint32_t init = static_cast<std::uint32_t>(rng());
      ASSERT_EQ(qsgd::detail::crc32c_host(init, data.data() + off, len),
                qsgd::detail::crc32c_host_portable(init, data.data() + off, len))
          << "length " << len << " offset " << off;
    }
}

// message_checksum in the execution space (64 KiB blocks, then the CRC of
// the block CRCs) equals message_checksum_host, for sizes around the block
// boundaries and the team path's 1 KiB runs; so does the team path (a team
// per block, a thread per run, runs joined by the zero-shift identity: what
// device memory takes), run here in this build's execution space.
TEST(Crc32c, DeviceTreeEqualsHostReference) {
  const std::size_t B = qsgd::checksum_block_bytes;
  Kokkos::View<std::uint32_t*, Mem> table("table", 256);
  {
    auto h = Kokkos::create_mirror_view(table);
    for (int i = 0; i < 256; ++i) h(i) = qsgd::detail::crc32c_table()[i];
    Kokkos::deep_copy(table, h);
  }
  std::mt19937_64 rng(101);
  for (std::size_t bytes : {std::size_t(64), std::size_t(72), std::size_t(64 + 1024), std::size_t(64 + 1032), 64 + B - 8,
                            64 + B, 64 + B + 8, 64 + 3 * B + 24, 64 + 5 * B + 3 * 1024 + 40}) {
    std::vector<std::uint64_t> words(bytes / 8);
    for (auto& x : words) x = rng();
    Words dw("msg", words.size());
    {
      auto h = Kokkos::create_mirror_view(dw);
      for (std::size_t i = 0; i < words.size(); ++i) h(i) = words[i];
      Kokkos::deep_copy(dw, h);
    }
    Kokkos::View<std::uint32_t*, Mem> scratch("scratch", qsgd::checksum_blocks(bytes));
    const std::uint32_t dev = qsgd::message_checksum(Exec(), dw, bytes, scratch, table);
    EXPECT_EQ(dev, qsgd::message_checksum_host(words.data(), bytes)) << bytes << " bytes";
    EXPECT_EQ(qsgd::message_checksum_teams(Exec(), dw, bytes, scratch, table), dev) << bytes << " bytes, team path";
    // The definition: CRC32C over the concatenated little-endian block CRCs.
    std::vector<unsigned char> cat;
    const auto* p = reinterpret_cast<const unsigned char*>(words.data());
    auto add = [&](std::uint32_t v) {
      for (int k = 0; k < 4; ++k) cat.push_back(static_cast<unsigned char>(v >> (8 * k)));
    };
    add(qsgd::detail::crc32c_bytes_host(p, 60));
    for (std::size_t b = 64; b < bytes; b += B) add(qsgd::detail::crc32c_bytes_host(p + b, std::min(B, bytes - b)));
    EXPECT_EQ(dev, qsgd::detail::crc32c_bytes_host(cat.data(), cat.size())) << bytes << " bytes";
  }
}

// The zero-shift operator of the team path: crc32c_shift(c, L) is the
// register after L zero bytes, for lengths around the run and block sizes.
TEST(Crc32c, ShiftEqualsFeedingZeros) {
  std::mt19937_64 rng(7);
  const std::vector<unsigned char> zeros(3 * qsgd::checksum_block_bytes, 0);
  for (std::size_t len : {std::size_t(0), std::size_t(1), std::size_t(3), std::size_t(4), std::size_t(1023),
                          std::size_t(1024), std::size_t(1025), qsgd::checksum_block_bytes - 1,
                          qsgd::checksum_block_bytes, 3 * qsgd::checksum_block_bytes}) {
    for (int rep = 0; rep < 4; ++rep) {
      const std::uint32_t c = static_cast<std::uint32_t>(rng());
      EXPECT_EQ(qsgd::detail::crc32c_shift(c, len), qsgd::detail::crc32c_host_portable(c, zeros.data(), len))
          << "length " << len << " register " << c;
    }
  }
}

}  // namespace
