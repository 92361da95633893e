// Shared main of the qsgd::kernels test executables: Kokkos is initialized
// exactly once per process, before any test, and finalized after the last
// (every View a test creates is gone by then).
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);  // strips --gtest_* before Kokkos sees argv
  Kokkos::ScopeGuard guard(argc, argv);
  return RUN_ALL_TESTS();
}
