// Shared main of the serial algorithm tests: Kokkos is initialized once per
// process. The algorithms never call MPI here (run_async has its own test).
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  Kokkos::ScopeGuard guard(argc, argv);
  return RUN_ALL_TESTS();
}
