#include <qsgd/kernels.hpp>
#include <cstdio>
#include <random>
int main(int argc, char** argv) {
  Kokkos::ScopeGuard g(argc, argv);
  using Exec = Kokkos::DefaultExecutionSpace;
  const std::uint64_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 100000;
  Kokkos::View<float*> v("v", n);
  auto h = Kokkos::create_mirror_view(v);
  std::mt19937 rng(1); std::normal_distribution<float> nd;
  for (std::uint64_t i = 0; i < n; ++i) h(i) = nd(rng);
  Kokkos::deep_copy(v, h);
  for (auto c : {qsgd::CodecKind::fp32, qsgd::CodecKind::fp16, qsgd::CodecKind::bf16, qsgd::CodecKind::fixed, qsgd::CodecKind::elias_sparse, qsgd::CodecKind::elias_dense}) {
    qsgd::CodecConfig cfg; cfg.codec = c; cfg.s = 16; cfg.d = 512;
    qsgd::Codec<Exec> codec(cfg);
    Kokkos::View<std::uint64_t*> msg("msg", codec.max_message_bytes(n) / 8);
    std::size_t bytes = codec.encode(v, n, qsgd::RngKey{1,2,3,4}, msg);
    Kokkos::View<float*> out("out", n);
    codec.decode(msg, bytes, out);
    auto ho = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), out);
    double err = 0, nv = 0; for (std::uint64_t i = 0; i < n; ++i) { err += (ho(i)-h(i))*(ho(i)-h(i)); nv += h(i)*h(i); }
    std::printf("%-14s bytes %zu bits/dim %.3f rel err %.4g\n", qsgd::to_string(c).c_str(), bytes, 8.0*bytes/n, err/nv);
    if (qsgd::is_quantized(c)) {
      qsgd::Quantized<Exec::memory_space> q;
      codec.decode(msg, bytes, q);
      auto a = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), q.levels);
      auto b = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), codec.last_quantized().levels);
      if (c != qsgd::CodecKind::fixed) for (std::uint64_t i = 0; i < n; ++i) if (a(i) != b(i)) { std::printf("mismatch at %lu\n", (unsigned long)i); return 1; }
    }
  }
  return 0;
}
