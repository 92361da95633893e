// A/B of the SGD update with and without the count of non-finite gradient
// coordinates (models/src/sgd.cpp): the update's kernel as a parallel_for
// (A) and as the parallel_reduce that counts (B), on the same arrays,
// alternating which runs first, one core (Serial). Prints each variant's median, min and max
// over 40 pairs (two warm-up pairs left out), and B / A.
#include <Kokkos_Core.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

int main(int argc, char** argv) {
  Kokkos::ScopeGuard guard(argc, argv);
  const std::size_t n = argc > 1 ? std::stoul(argv[1]) : 5824522;  // the sweep's MLP 784-2048-2048-10
  Kokkos::View<float*> p("p", n), buf("buf", n), grad("grad", n);
  Kokkos::parallel_for(n, KOKKOS_LAMBDA(std::size_t i) { p(i) = 0.001f * (i % 97); grad(i) = 0.01f * (i % 13) - 0.05f; });
  const float lr = 0.01f, mu = 0.9f, wd = 0.0f, scale = 1.0f;
  std::vector<double> ta, tb;
  std::size_t bad_total = 0;
  const auto run_a = [&] {
    const auto t0 = std::chrono::steady_clock::now();
    Kokkos::parallel_for("sgd_step", Kokkos::RangePolicy<>(0, n), KOKKOS_LAMBDA(std::size_t i) {
      const float g = scale * grad(i) + wd * p(i);
      const float b = mu * buf(i) + g;
      buf(i) = b;
      p(i) = p(i) - lr * b;
    });
    Kokkos::fence();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  const auto run_b = [&] {
    const auto t0 = std::chrono::steady_clock::now();
    std::size_t bad = 0;
    Kokkos::parallel_reduce("sgd_step", Kokkos::RangePolicy<>(0, n), KOKKOS_LAMBDA(std::size_t i, std::size_t& c) {
      const float gi = grad(i);
      c += (gi - gi == 0.0f) ? 0 : 1;
      const float g = scale * gi + wd * p(i);
      const float b = mu * buf(i) + g;
      buf(i) = b;
      p(i) = p(i) - lr * b;
    }, bad);
    Kokkos::fence();
    bad_total += bad;
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  for (int rep = 0; rep < 42; ++rep) {  // the order alternates; the first pair warms up
    double a, b;
    if (rep % 2) { b = run_b(); a = run_a(); } else { a = run_a(); b = run_b(); }
    if (rep > 1) { ta.push_back(a); tb.push_back(b); }
  }
  std::sort(ta.begin(), ta.end());
  std::sort(tb.begin(), tb.end());
  const double ma = ta[ta.size() / 2], mb = tb[tb.size() / 2];
  std::printf("n %zu, %zu pairs, alternating; non-finite counted %zu\n", n, ta.size(), bad_total);
  std::printf("A parallel_for (no count):   median %.3f ms, min %.3f, max %.3f\n", ma * 1e3, ta.front() * 1e3, ta.back() * 1e3);
  std::printf("B parallel_reduce (count):   median %.3f ms, min %.3f, max %.3f\n", mb * 1e3, tb.front() * 1e3, tb.back() * 1e3);
  std::printf("B / A: %.3f (medians)\n", mb / ma);
}
