// Shared main of the MPI test executables: MPI and Kokkos are initialized once
// per process. Every rank runs every test (the tests are collective); rank 0
// prints GoogleTest's report, the other ranks print only their failures,
// prefixed with their rank. The exit status is the worst over ranks.
#include <gtest/gtest.h>
#include <mpi.h>

#include <Kokkos_Core.hpp>
#include <cstdio>

#include "qsgd/comm/communicator.hpp"

namespace {

class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_, r.file_name() ? r.file_name() : "?", r.line_number(),
                 r.summary());
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  using qsgd::comm::check_mpi;
  // MPI_THREAD_MULTIPLE: the Bucketer's progress thread needs it (as in qsgd-train).
  int provided = MPI_THREAD_SINGLE;
  check_mpi(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread", MPI_COMM_WORLD,
            {"test startup"});
  if (provided != MPI_THREAD_MULTIPLE) {
    std::fprintf(stderr, "qsgd-comm-mpi-tests: MPI provides thread level %d, not MPI_THREAD_MULTIPLE\n", provided);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  int rank = 0;
  check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank", MPI_COMM_WORLD, {"test startup"});
  ::testing::InitGoogleTest(&argc, argv);
  int result = 0;
  {
    Kokkos::ScopeGuard guard(argc, argv);
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    if (rank != 0) {
      delete listeners.Release(listeners.default_result_printer());
      listeners.Append(new RankFailurePrinter(rank));
    }
    result = RUN_ALL_TESTS();
  }
  int worst = 0;
  check_mpi(MPI_Allreduce(&result, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce", MPI_COMM_WORLD,
            {"test result reduction"});
  check_mpi(MPI_Finalize(), "MPI_Finalize", MPI_COMM_WORLD, {"test shutdown"});
  return worst;
}
