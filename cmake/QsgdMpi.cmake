# The mpiexec line of every MPI test and benchmark smoke test.
#
# Under Open MPI (detected once from `mpiexec --version`) the line adds
# --allow-run-as-root (CI and containers run as root), --oversubscribe (4
# ranks on a 2-core machine) and mpi_yield_when_idle (idle ranks yield
# instead of spinning, which would starve the working ones on shared cores).
#
#   qsgd_mpi_command(<out-var> <ranks> <program> [args...])
#     sets <out-var> to: mpiexec -n <ranks> [flags] <preflags> <program> [args...] <postflags>

if(NOT DEFINED QSGD_MPIEXEC_EXTRA_FLAGS)
  set(QSGD_MPIEXEC_EXTRA_FLAGS "")
  if(MPIEXEC_EXECUTABLE)
    execute_process(COMMAND ${MPIEXEC_EXECUTABLE} --version OUTPUT_VARIABLE _qsgd_mpiexec_version
      ERROR_VARIABLE _qsgd_mpiexec_version)
    if(_qsgd_mpiexec_version MATCHES "Open MPI|OpenRTE")
      set(QSGD_MPIEXEC_EXTRA_FLAGS --allow-run-as-root --oversubscribe --mca mpi_yield_when_idle 1)
    endif()
  endif()
endif()

function(qsgd_mpi_command out ranks)
  set(${out} ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${ranks} ${QSGD_MPIEXEC_EXTRA_FLAGS}
    ${MPIEXEC_PREFLAGS} ${ARGN} ${MPIEXEC_POSTFLAGS} PARENT_SCOPE)
endfunction()
