// Uses each installed library once: a 4-bit fixed-width message round trip
// (qsgd::kernels), a one-rank exchange (qsgd::comm, serial: no MPI calls)
// and a small MLP (qsgd::models). Prints "qsgd-consumer: ok" or fails.
#include <Kokkos_Core.hpp>
#include <cmath>
#include <cstdio>
#include <qsgd/comm.hpp>
#include <qsgd/kernels.hpp>
#include <qsgd/models/mlp.hpp>

int main(int argc, char** argv) {
  Kokkos::ScopeGuard guard(argc, argv);
  const std::uint64_t n = 1000;
  Kokkos::View<float*> v("v", n), out("out", n);
  auto h = Kokkos::create_mirror_view(v);
  for (std::uint64_t i = 0; i < n; ++i) h(i) = std::sin(0.1 * static_cast<double>(i));
  Kokkos::deep_copy(v, h);

  qsgd::CodecConfig cc;
  cc.codec = qsgd::CodecKind::fixed;
  cc.s = 16;
  cc.d = 128;
  qsgd::Codec<> codec(cc);
  Kokkos::View<std::uint64_t*> msg("msg", (codec.max_message_bytes(n) + 7) / 8);
  const std::size_t bytes = codec.encode(v, n, qsgd::RngKey{}, msg);
  qsgd::Quantized<Kokkos::DefaultExecutionSpace::memory_space> q;
  codec.decode(msg, bytes, q);
  if (q.n != n) {
    std::fprintf(stderr, "qsgd-consumer: decoded %llu coordinates, not %llu\n", static_cast<unsigned long long>(q.n),
                 static_cast<unsigned long long>(n));
    return 1;
  }

  auto ex = qsgd::comm::make_exchange(qsgd::comm::StrategyKind::allgather, cc, qsgd::comm::Communicator::serial());
  ex->wait(ex->start(v, out, 0, 0));
  auto ho = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), out);
  double err = 0;
  for (std::uint64_t i = 0; i < n; ++i) err = std::fmax(err, std::fabs(ho(i) - h(i)));
  if (!(err < 0.2)) {
    std::fprintf(stderr, "qsgd-consumer: one-rank exchange off by %g\n", err);
    return 1;
  }

  qsgd::models::MlpConfig mc;
  mc.widths = {8, 4, 2};
  const qsgd::models::Mlp mlp(mc, 1);
  if (mlp.num_parameters() != 8 * 4 + 4 + 4 * 2 + 2) {
    std::fprintf(stderr, "qsgd-consumer: MLP has %zu parameters\n", mlp.num_parameters());
    return 1;
  }
  std::printf("qsgd-consumer: ok (%zu message bytes, exchange error %.3g, %zu MLP parameters)\n", bytes, err,
              mlp.num_parameters());
  return 0;
}
