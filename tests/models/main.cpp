// Shared main of the qsgd::models test executables: Kokkos is initialized
// exactly once per process, before any test, and finalized after the last.
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);  // strips --gtest_* before Kokkos sees argv
  Kokkos::ScopeGuard guard(argc, argv);
  return RUN_ALL_TESTS();
}
