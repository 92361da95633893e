// Exchange metadata and framing harness: the checks every receiver of an
// exchange runs on what a peer announces before it trusts a size
// (comm/src/detail/framing.hpp, as ExchangeBase calls them), on a framed
// message of the ring transport or on K ranks' gathered metadata of the
// library transport; then, for an accepted frame, the message decoded as the
// exchange decodes it (Codec::decode with the operation's n). Contract
// (docs/reliability.md):
//  - a fault carries exit code 3 (corrupt_message) when the metadata fails
//    its CRC32C (computed here bit by bit, independently of the library's),
//    when the size is outside 8..max_w or when the frame's bytes disagree;
//    exit code 4 (ranks disagree) only for intact metadata of another
//    operation; exit code 2 only for counts past INT_MAX; its text names the
//    first faulty rank, the step and the tensor;
//  - what is accepted is exactly what passes those rules (the harness
//    recomputes each), and a gathered layout's counts, displacements and wire
//    bytes are the announced sizes, their prefix sums and the other ranks'
//    messages plus metadata;
//  - the decoder refuses with qsgd::Error(corrupt_message) only, and what it
//    accepts is finite, fills n values and writes nothing past them; a frame
//    built by the library and not edited is accepted and decodes to what the
//    encoder's own message decodes to.

#include <Kokkos_Core.hpp>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <qsgd/kernels.hpp>

#include "common.hpp"
#include "detail/framing.hpp"
#include "exchange_meta_layout.hpp"
#include "qsgd/comm/communicator.hpp"

namespace {

using namespace qsgd_fuzz;
namespace fr = qsgd::comm::detail;
namespace em = qsgd_fuzz::exchange_meta;
using Exec = Kokkos::DefaultHostExecutionSpace;
using Mem = Exec::memory_space;
using Codec = qsgd::Codec<Exec>;

constexpr std::size_t guard = 16;
constexpr std::uint32_t sentinel = 0x7fa5a5a5u;  // a NaN: no accepted decode writes one

// CRC32C bit by bit (reflected 0x82F63B78), independent of the library's paths.
std::uint32_t crc32c_bitwise(const unsigned char* p, std::size_t n) {
  std::uint32_t c = 0xFFFFFFFFu;
  for (std::size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
  }
  return c ^ 0xFFFFFFFFu;
}

bool crc_ok(const std::uint64_t* m) {
  unsigned char b[28];
  const std::uint64_t f[4] = {m[0], m[1], m[2] & 0xFFFFFFFFu, m[3]};
  const int width[4] = {8, 8, 4, 8};
  int at = 0;
  for (int w = 0; w < 4; ++w)
    for (int i = 0; i < width[w]; ++i) b[at++] = static_cast<unsigned char>(f[w] >> (8 * i));
  return static_cast<std::uint32_t>(m[2] >> 32) == crc32c_bitwise(b, sizeof b);
}

void reseal_meta(std::uint64_t* m) { m[2] = (m[2] & 0xFFFFFFFFu) | (std::uint64_t{fr::meta_crc(m)} << 32); }

constexpr std::uint64_t min_words = (qsgd::header_bytes + 7) / 8;

// What check_meta must say of m: 0 accepted, else the exit code.
int expected_meta(const fr::OpId& id, const std::uint64_t* m, std::uint64_t max_w) {
  if (!crc_ok(m)) return qsgd::comm::exit_corrupt_message;
  if (m[1] != id.n || (m[2] & 0xFFFFFFFFu) != id.tensor || m[3] != id.step) return qsgd::comm::exit_config_mismatch;
  if (m[0] < min_words || m[0] > max_w) return qsgd::comm::exit_corrupt_message;
  return 0;
}

void check_fault(const fr::FrameFault& f, int want, int source, const fr::OpId& id, const char* where) {
  QSGD_FUZZ_CHECK(f.exit_code == want, "meta.verdict",
                  where << ": exit code " << f.exit_code << ", expected " << want << " (" << f.what << ")");
  if (want == 0) return;
  const qsgd::Errc code = want == qsgd::comm::exit_config_mismatch || want == qsgd::comm::exit_exchange_error
                              ? qsgd::Errc::invalid_argument
                              : qsgd::Errc::corrupt_message;
  QSGD_FUZZ_CHECK(f.code == code, "meta.code", where << ": error code " << qsgd::to_string(f.code));
  if (want == qsgd::comm::exit_exchange_error) return;  // names the owner, not a rank
  const std::string who = want == qsgd::comm::exit_config_mismatch
                              ? "rank " + std::to_string(source) + " started"
                              : "from rank " + std::to_string(source) + " at step " + std::to_string(id.step) +
                                    ", tensor " + std::to_string(id.tensor) + ": ";
  QSGD_FUZZ_CHECK(f.what.find(who) != std::string::npos, "meta.names-source",
                  where << ": '" << f.what << "' does not name '" << who << "'");
}

Codec& codec_for(std::uint8_t kind, std::uint8_t shape) {
  static std::map<std::pair<int, int>, std::unique_ptr<Codec>> cache;
  auto& c = cache[{kind % 7, shape % 12}];
  if (!c) {
    qsgd::CodecConfig cfg;
    cfg.codec = static_cast<qsgd::CodecKind>(kind % 7);
    cfg.s = qsgd::is_quantized(cfg.codec) ? em::levels[shape & 3] : 16;
    cfg.d = em::buckets[(shape >> 2) % 3];
    cfg.chunk = 64;
    c = std::make_unique<Codec>(cfg);
  }
  return *c;
}

// The receiver's decode of an accepted frame's message (words at msg).
void decode_like_the_exchange(Codec& codec, const std::uint64_t* msg, std::uint64_t words, std::uint64_t n,
                              const std::vector<float>* want) {
  Kokkos::View<std::uint64_t*, Mem> w("w", words);  // exactly the message's words: ASan sees reads past it
  std::memcpy(w.data(), msg, words * 8);
  Kokkos::View<float*, Mem> out("out", n + guard);
  std::uint32_t* bits = reinterpret_cast<std::uint32_t*>(out.data());
  for (std::size_t i = 0; i < n + guard; ++i) bits[i] = sentinel;
  qsgd::Expect e;
  e.n = n;
  try {
    codec.decode(w, words * 8, Kokkos::subview(out, Kokkos::make_pair<std::size_t, std::size_t>(0, n)), e);
  } catch (const qsgd::Error& err) {
    QSGD_FUZZ_CHECK(err.code() == qsgd::Errc::corrupt_message, "meta.decode-code",
                    "decode refused with " << qsgd::to_string(err.code()) << ": " << err.what());
    QSGD_FUZZ_CHECK(want == nullptr, "meta.built-accepted", "a frame the library built was refused: " << err.what());
    return;
  }
  for (std::size_t i = 0; i < n; ++i)
    QSGD_FUZZ_CHECK(std::isfinite(out(i)), "meta.decode-finite", "value " << i << " of " << n << " is " << out(i));
  for (std::size_t i = n; i < n + guard; ++i)
    QSGD_FUZZ_CHECK(bits[i] == sentinel, "meta.decode-bounds", "decode wrote cell " << i << " past n = " << n);
  if (want != nullptr && n > 0)
    QSGD_FUZZ_CHECK(std::memcmp(out.data(), want->data(), n * 4) == 0, "meta.built-roundtrip",
                    "the built frame decodes to other values than the encoder's message");
}

// A frame from the library: the encoder's message of a gradient behind set_meta.
std::vector<std::uint64_t> build_frame(Codec& codec, const fr::OpId& id, std::uint8_t seed, std::vector<float>& decoded) {
  const std::uint64_t n = id.n;
  Kokkos::View<float*, Mem> g("g", n == 0 ? 1 : n);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (std::uint64_t i = 0; i < n; ++i) g(i) = i % 3 == 0 ? 0.0f : normal(rng);
  Kokkos::View<std::uint64_t*, Mem> msg("msg", codec.max_message_bytes(n) / 8);
  const std::size_t bytes = codec.encode(g, n, qsgd::RngKey{seed, id.step, 1, id.tensor}, msg);
  const std::uint64_t words = (bytes + 7) / 8;
  std::vector<std::uint64_t> frame(fr::meta_words + words);
  fr::set_meta(id, frame.data(), words);
  std::memcpy(frame.data() + fr::meta_words, msg.data(), words * 8);
  Kokkos::View<float*, Mem> out("out", n == 0 ? 1 : n);
  qsgd::Expect e;
  e.n = n;
  codec.decode(msg, words * 8, Kokkos::subview(out, Kokkos::make_pair<std::size_t, std::size_t>(0, n)), e);
  decoded.assign(out.data(), out.data() + n);
  return frame;
}

void framed(ByteReader& in, std::uint8_t mode, Codec& codec, const fr::OpId& id) {
  const int source = 1;
  const std::uint64_t max_w = codec.max_message_bytes(id.n) / 8;
  std::vector<std::uint8_t> bytes;
  std::vector<float> want;
  bool edited = false;
  if (mode & em::built) {
    const std::vector<std::uint64_t> frame = build_frame(codec, id, in.u8(), want);
    bytes.resize(frame.size() * 8);
    std::memcpy(bytes.data(), frame.data(), bytes.size());
    while (in.left() >= 3) {
      const std::uint16_t at = in.u16();
      const std::uint8_t x = in.u8();
      if (at == em::truncate) {
        bytes.resize(bytes.size() - std::min<std::size_t>(bytes.size(), x));
      } else if (!bytes.empty()) {
        bytes[at % bytes.size()] ^= x;
      }
      edited = edited || x != 0;
    }
  } else {
    bytes.assign(in.here(), in.here() + in.left());
  }
  std::vector<std::uint64_t> words((bytes.size() + 7) / 8, 0);
  if (!bytes.empty()) std::memcpy(words.data(), bytes.data(), bytes.size());
  if ((mode & em::reseal) && words.size() >= fr::meta_words) reseal_meta(words.data());

  const bool whole = bytes.size() >= fr::meta_words * 8 && bytes.size() % 8 == 0;
  const fr::FrameFault fb = fr::check_frame_bytes(id, source, bytes.size());
  check_fault(fb, whole ? 0 : qsgd::comm::exit_corrupt_message, source, id, "check_frame_bytes");
  if (!whole) return;
  const std::uint64_t* m = words.data();
  const int want_meta = expected_meta(id, m, max_w);
  check_fault(fr::check_meta(id, source, m, max_w), want_meta, source, id, "check_meta");
  if (want_meta != 0) return;
  const bool sized = (m[0] + fr::meta_words) * 8 == bytes.size();
  check_fault(fr::check_frame_size(id, source, m, bytes.size()), sized ? 0 : qsgd::comm::exit_corrupt_message, source,
              id, "check_frame_size");
  if (!sized) return;
  decode_like_the_exchange(codec, m + fr::meta_words, m[0], id.n, (mode & em::built) && !edited ? &want : nullptr);
}

void gathered(ByteReader& in, std::uint8_t mode, Codec& codec, const fr::OpId& id) {
  const int K = 1 + in.u8() % 8;
  const int self = in.u8() % K;
  const std::uint64_t max_w = codec.max_message_bytes(id.n) / 8;
  std::vector<std::uint64_t> meta(static_cast<std::size_t>(K) * fr::meta_words);
  for (auto& w : meta) w = in.u64();
  if (mode & em::reseal)
    for (int r = 0; r < K; ++r) reseal_meta(&meta[static_cast<std::size_t>(r) * fr::meta_words]);
  std::vector<int> counts, displs;
  std::uint64_t wire = ~std::uint64_t{0};
  const fr::FrameFault f = fr::layout_meta(id, meta.data(), K, self, max_w, "exchange-meta", counts, displs, wire);
  // The first rank whose metadata is refused decides the verdict.
  std::uint64_t total = 0, want_wire = 0;
  for (int r = 0; r < K; ++r) {
    const std::uint64_t* m = &meta[static_cast<std::size_t>(r) * fr::meta_words];
    const int v = expected_meta(id, m, max_w);
    if (v != 0) {
      check_fault(f, v, r, id, "layout_meta");
      return;
    }
    total += m[0];
    if (total > static_cast<std::uint64_t>(INT_MAX)) {
      check_fault(f, qsgd::comm::exit_exchange_error, r, id, "layout_meta");
      return;
    }
    if (r != self) want_wire += (m[0] + fr::meta_words) * 8;
  }
  check_fault(f, 0, 0, id, "layout_meta");
  QSGD_FUZZ_CHECK(wire == want_wire, "meta.layout-wire", "wire " << wire << ", expected " << want_wire);
  int at = 0;
  for (int r = 0; r < K; ++r) {
    const std::uint64_t w = meta[static_cast<std::size_t>(r) * fr::meta_words];
    QSGD_FUZZ_CHECK(counts[static_cast<std::size_t>(r)] == static_cast<int>(w) &&
                        displs[static_cast<std::size_t>(r)] == at,
                    "meta.layout-counts", "rank " << r << ": count " << counts[static_cast<std::size_t>(r)]
                                                  << " at " << displs[static_cast<std::size_t>(r)] << ", expected "
                                                  << w << " at " << at);
    at += static_cast<int>(w);
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (!Kokkos::is_initialized()) Kokkos::initialize();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  ByteReader in(data, size);
  const std::uint8_t mode = in.u8();
  const std::uint8_t kind = in.u8(), shape = in.u8();
  fr::OpId id;
  id.n = in.u16() % 4097;
  id.tensor = in.u16();
  id.step = in.u16();
  Codec& codec = codec_for(kind, shape);
  if (mode & em::gathered)
    gathered(in, mode, codec, id);
  else
    framed(in, mode, codec, id);
  return 0;
}
