// A leak allocated by this project's code while Open MPI's library is on the
// stack (a user-defined reduction that MPI calls). LeakSanitizer must report
// it: the suppressions in tests/lsan_openmpi.supp cover only Open MPI's own
// initialization and finalization frames (and its internal event thread), not
// every allocation made under libmpi.so. Run by the sanitizers.leak_under_mpi
// test, which expects the report.
#include <mpi.h>

#include <cstdio>
#include <cstdlib>

namespace {
void* volatile g_sink = nullptr;

extern "C" void leaky_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const int*>(in);
  auto* b = static_cast<int*>(inout);
  for (int i = 0; i < *len; ++i) b[i] += a[i];
  // Lost: the pointer is overwritten below before anyone frees it.
  g_sink = std::malloc(4096);
  g_sink = nullptr;
}
}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Op op;
  MPI_Op_create(&leaky_sum, 1, &op);
  int x[4] = {1, 2, 3, 4}, y[4] = {0, 0, 0, 0};
  MPI_Reduce_local(x, y, 4, MPI_INT, op);
  MPI_Op_free(&op);
  std::printf("leak_in_mpi_callback: sum %d\n", y[0] + y[1] + y[2] + y[3]);
  MPI_Finalize();
  return 0;
}
