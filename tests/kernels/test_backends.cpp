// Bit identity across backends (docs/kernels.md, "Message format"; the wire
// format and every reduction order are the same on every backend): for the
// same input and key, a Codec in the default execution space (the GPU in a
// CUDA build) and one in the default host execution space produce the same
// message bytes, the same levels, the same decoded values and the same
// decode-accumulate sums, and each decodes the other's messages to the same
// bits. Label gpu: profiles/gpu/run.sh runs it on a GPU machine. In a build
// without a device backend both spaces are the host, so the comparison is
// trivially true there; the GPU script's dry run still runs it on such a
// build so that it cannot rot, but the README's test command does not.

#include <cstdio>
#include <limits>

#include "test_util.hpp"

namespace {

using namespace qsgd_test;
using qsgd::CodecKind;
using qsgd::Norm;

using HostExec = Kokkos::DefaultHostExecutionSpace;
using HostMem = HostExec::memory_space;
using HostCodec = qsgd::Codec<HostExec>;
using HostValues = Kokkos::View<float*, HostMem>;
using HostWordsV = Kokkos::View<std::uint64_t*, HostMem>;

struct Case {
  CodecKind codec;
  std::uint32_t s, d;
  Norm norm;
  std::uint64_t n;
  Input input;
  std::uint32_t chunk = 4096;
};

std::string name(const Case& c) {
  return qsgd::to_string(c.codec) + " s=" + std::to_string(c.s) + " d=" + std::to_string(c.d) + " norm=" +
         qsgd::to_string(c.norm) + " n=" + std::to_string(c.n) + " input=" + input_name(c.input) +
         " chunk=" + std::to_string(c.chunk);
}

std::vector<Case> cases() {
  std::vector<Case> out;
  const std::uint64_t sizes[] = {1, 511, 512, 513, 4097, (1u << 20) + 7};
  for (CodecKind codec : {CodecKind::fixed, CodecKind::elias_dense, CodecKind::elias_sparse, CodecKind::rans})
    for (std::uint32_t s : {1u, 7u, 16u, 256u})
      for (Norm norm : {Norm::max, Norm::l2})
        for (std::uint64_t n : sizes) out.push_back({codec, s, 512, norm, n, Input::gaussian});
  for (CodecKind codec : {CodecKind::fixed, CodecKind::elias_dense, CodecKind::elias_sparse, CodecKind::rans})
    for (Input in : {Input::heavy, Input::sparse, Input::zero, Input::huge})
      out.push_back({codec, 16, 512, Norm::max, 100003, in});
  // The Elias codes at chunk sizes on both sides of the encoder's team shape
  // (elias_team_min_chunk) and levels beyond the dense encoding table.
  for (CodecKind codec : {CodecKind::elias_dense, CodecKind::elias_sparse})
    for (std::uint32_t chunk : {1u, 64u, 1024u, 5000u})
      for (std::uint32_t s : {16u, 70000u})
        out.push_back({codec, s, 512, Norm::max, 100003, Input::heavy, chunk});
  // One bucket over the whole vector (d = 0), and the float codecs.
  out.push_back({CodecKind::fixed, 16, 0, Norm::l2, 70001, Input::gaussian});
  out.push_back({CodecKind::rans, 16, 0, Norm::max, 70001, Input::gaussian});
  for (CodecKind codec : {CodecKind::fp32, CodecKind::fp16, CodecKind::bf16})
    out.push_back({codec, 16, 512, Norm::none, 100003, Input::gaussian});
  return out;
}

std::vector<std::uint64_t> host_words(const HostWordsV& w, std::size_t bytes) {
  return std::vector<std::uint64_t>(w.data(), w.data() + bytes / 8);
}

// The first index where a and b differ in their bits, or -1.
template <class T>
long long first_difference(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) return static_cast<long long>(i);
  return -1;
}

// Both spaces encode the same input with the same key into the same bytes.
TEST(Backends, SameMessagesLevelsAndSums) {
  std::printf("device space %s (memory %s), host space %s (memory %s)\n", Exec::name(), Mem::name(),
              HostExec::name(), HostMem::name());
  const qsgd::RngKey key{20261203, 17, 3, 5};
  for (const Case& c : cases()) {
    SCOPED_TRACE(name(c));
    const auto cfg = config(c.codec, c.s, c.d, c.norm, c.chunk);
    const std::vector<float> x = make_input(c.input, c.n, 1000 + c.n);
    // Device side.
    Codec dev(cfg);
    const Values dx = to_device(x);
    Words dout("test::dev_out", dev.max_message_bytes(c.n) / 8 + 1);
    Kokkos::deep_copy(dout, ~std::uint64_t(0));  // a word the encoder fails to zero shows
    const std::size_t dbytes = dev.encode(dx, c.n, key, dout);
    const std::vector<std::uint64_t> dmsg = to_host(dout, dbytes / 8);
    // Host side.
    HostCodec host(cfg);
    HostValues hx("test::host_x", c.n);
    for (std::uint64_t i = 0; i < c.n; ++i) hx(i) = x[i];
    HostWordsV hout("test::host_out", host.max_message_bytes(c.n) / 8 + 1);
    const std::size_t hbytes = host.encode(hx, c.n, key, hout);
    const std::vector<std::uint64_t> hmsg = host_words(hout, hbytes);

    ASSERT_EQ(dbytes, hbytes) << "message sizes differ";
    ASSERT_EQ(first_difference(dmsg, hmsg), -1) << "message words differ";

    // Each side decodes the other's message: values, then weighted sums.
    Words dmsg_on_dev = Words("test::h2d", hmsg.size());
    {
      auto m = Kokkos::create_mirror_view(dmsg_on_dev);
      for (std::size_t i = 0; i < hmsg.size(); ++i) m(i) = hmsg[i];
      Kokkos::deep_copy(dmsg_on_dev, m);
    }
    HostWordsV hmsg_on_host("test::d2h", dmsg.size());
    for (std::size_t i = 0; i < dmsg.size(); ++i) hmsg_on_host(i) = dmsg[i];

    Values dvals("test::dvals", c.n);
    Kokkos::deep_copy(dvals, std::numeric_limits<float>::quiet_NaN());  // a coordinate never written shows
    dev.decode(dmsg_on_dev, hbytes, dvals);
    HostValues hvals("test::hvals", c.n);
    host.decode(hmsg_on_host, dbytes, hvals);
    const std::vector<float> dv = to_host(dvals, c.n);
    const std::vector<float> hv(hvals.data(), hvals.data() + c.n);
    ASSERT_EQ(first_difference(dv, hv), -1) << "decoded values differ";

    const std::vector<float> base = make_input(Input::gaussian, c.n, 7);
    Values dacc = to_device(base);
    HostValues hacc("test::hacc", c.n);
    for (std::uint64_t i = 0; i < c.n; ++i) hacc(i) = base[i];
    dev.decode_accumulate(dmsg_on_dev, hbytes, 0.25f, dacc);
    host.decode_accumulate(hmsg_on_host, dbytes, 0.25f, hacc);
    const std::vector<float> da = to_host(dacc, c.n);
    const std::vector<float> ha(hacc.data(), hacc.data() + c.n);
    ASSERT_EQ(first_difference(da, ha), -1) << "decode-accumulate sums differ";

    if (qsgd::is_quantized(c.codec)) {  // the levels the two decoders recover
      Quant dq;
      dev.decode(dmsg_on_dev, hbytes, dq);
      qsgd::Quantized<HostMem> hq;
      host.decode(hmsg_on_host, dbytes, hq);
      const std::vector<std::int32_t> dl = to_host(dq.levels, c.n);
      const std::vector<std::int32_t> hl(hq.levels.data(), hq.levels.data() + c.n);
      ASSERT_EQ(first_difference(dl, hl), -1) << "decoded levels differ";
    }
  }
}

// The deterministic quantizer (spec section 1) keeps the same set on both
// spaces: every mass its bisection compares is a fixed-order sum.
TEST(Backends, DeterministicQuantizerKeepsTheSameLevels) {
  for (std::uint64_t n : {std::uint64_t(513), std::uint64_t(100003)}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    const std::vector<float> x = make_input(Input::heavy, n, 31 + n);
    Quant dq;
    qsgd::quantize_deterministic(Exec(), to_device(x), n, dq);
    qsgd::Quantized<HostMem> hq;
    HostValues hx("test::host_x", n);
    for (std::uint64_t i = 0; i < n; ++i) hx(i) = x[i];
    qsgd::quantize_deterministic(HostExec(), hx, n, hq);
    const std::vector<std::int32_t> dl = to_host(dq.levels, n);
    const std::vector<std::int32_t> hl(hq.levels.data(), hq.levels.data() + n);
    ASSERT_EQ(first_difference(dl, hl), -1) << "levels differ";
    const std::vector<float> ds = to_host(dq.scales, dq.buckets());
    const std::vector<float> hs(hq.scales.data(), hq.scales.data() + hq.buckets());
    ASSERT_EQ(first_difference(ds, hs), -1) << "scales differ";
  }
}

}  // namespace
