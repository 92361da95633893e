// Asynchronous parameter server's push harness: the server's checks of a
// worker's push (algorithms/src/push.hpp, as run_server calls them) and the
// channel's decode of its message (Channel::accumulate). Contract
// (docs/reliability.md):
//  - push_size_fault refuses exactly the counts below the header or beyond
//    the header plus the channel's buffer;
//  - parse_push throws qsgd::Error(corrupt_message) only, exactly for a
//    version above the server's or message bytes beyond the push's words,
//    and returns the header's fields otherwise;
//  - accumulate refuses with qsgd::Error only; what it accepts is finite;
//    a push the worker's channel built and nobody edited is accepted and adds
//    exactly what the worker's own accumulate of its message adds.

#include <Kokkos_Core.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "../algorithms/src/push.hpp"
#include "async_push_layout.hpp"
#include "common.hpp"
#include "qsgd/algorithms/channel.hpp"

namespace {

using namespace qsgd_fuzz;
namespace pd = qsgd::algorithms::detail;
namespace ap = qsgd_fuzz::async_push;
using qsgd::algorithms::Channel;
using qsgd::algorithms::Vec;
using qsgd::algorithms::WireConfig;

WireConfig wire(std::uint8_t kind, std::uint8_t shape) {
  WireConfig w;
  w.codec = static_cast<qsgd::CodecKind>(kind % 7);
  w.s = ap::levels[shape & 3];
  w.d = ap::buckets[(shape >> 2) & 1];
  w.norm = (shape & 8) ? qsgd::Norm::max : qsgd::Norm::l2;
  if (!qsgd::is_quantized(w.codec)) w.norm = qsgd::Norm::none;
  return w;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (!Kokkos::is_initialized()) Kokkos::initialize();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  ByteReader in(data, size);
  const std::uint8_t mode = in.u8();
  const WireConfig w = wire(in.u8(), in.u8());
  const std::size_t n = 1 + in.u16() % 2048;
  const std::uint64_t version = in.u8();
  Channel server(w, n);

  std::vector<std::uint64_t> push;
  Vec want;
  bool edited = false;
  if (mode & ap::built) {
    Channel worker(w, n);
    const std::uint8_t seed = in.u8();
    const std::uint64_t worker_version = in.u8();
    Vec g(n);
    std::mt19937 rng(seed);
    std::normal_distribution<double> normal(0.0, 1.0);
    for (double& x : g) x = normal(rng);
    const std::size_t bytes = worker.encode(g, qsgd::RngKey{seed, 5, 1, 0});
    const std::size_t words = (bytes + 7) / 8;
    push = {worker_version, 5, bytes};
    push.insert(push.end(), worker.buffer(), worker.buffer() + words);
    want.assign(n, 0.0);
    worker.accumulate(bytes, 1.0, want);
    while (in.left() >= 3) {
      const std::uint16_t at = in.u16();
      const std::uint8_t x = in.u8();
      if (at == ap::truncate) {
        push.resize(push.size() - std::min<std::size_t>(push.size(), x));
      } else if (!push.empty()) {
        reinterpret_cast<std::uint8_t*>(push.data())[at % (push.size() * 8)] ^= x;
      }
      edited = edited || x != 0;
    }
  } else {
    push.resize(in.left() / 8);
    if (!push.empty()) std::memcpy(push.data(), in.here(), push.size() * 8);
  }
  const bool clean = (mode & ap::built) && !edited;

  const std::size_t count = push.size();
  const std::string size_fault = pd::push_size_fault(count, server.buffer_words());
  const bool fits = count >= static_cast<std::size_t>(pd::push_header_words) &&
                    count - pd::push_header_words <= server.buffer_words();
  QSGD_FUZZ_CHECK(size_fault.empty() == fits, "push.size",
                  count << " words, channel " << server.buffer_words() << ": '" << size_fault << "'");
  QSGD_FUZZ_CHECK(fits || !clean, "push.built-fits", "a worker's push of " << count << " words does not fit");
  if (!fits) return 0;

  const bool header_ok = push[0] <= version && push[2] <= 8 * static_cast<std::uint64_t>(count - pd::push_header_words);
  pd::PushHeader h;
  try {
    h = pd::parse_push(push.data(), count, version);
  } catch (const qsgd::Error& e) {
    QSGD_FUZZ_CHECK(e.code() == qsgd::Errc::corrupt_message, "push.code", "parse_push: " << e.what());
    QSGD_FUZZ_CHECK(!header_ok, "push.header", "parse_push refused a valid header: " << e.what());
    return 0;
  }
  QSGD_FUZZ_CHECK(header_ok, "push.header",
                  "parse_push accepted version " << push[0] << " at server " << version << ", " << push[2]
                                                 << " bytes in " << count << " words");
  QSGD_FUZZ_CHECK(h.version == push[0] && h.step == push[1] && h.bytes == push[2], "push.fields",
                  "parse_push returned other fields than the push's");

  std::copy(push.begin() + pd::push_header_words, push.end(), server.buffer());
  Vec acc(n, 0.0);
  try {
    server.accumulate(static_cast<std::size_t>(h.bytes), 1.0, acc);
  } catch (const qsgd::Error& e) {
    QSGD_FUZZ_CHECK(!clean, "push.built-accepted", "a worker's push was refused: " << e.what());
    return 0;
  }
  for (std::size_t i = 0; i < n; ++i)
    QSGD_FUZZ_CHECK(std::isfinite(acc[i]), "push.finite", "coordinate " << i << " of " << n << " is " << acc[i]);
  if (clean) QSGD_FUZZ_CHECK(acc == want, "push.built-roundtrip", "the server adds other values than the worker's own decode");
  return 0;
}
