# Sourced (not run) by the suite's scripts that start Open MPI jobs on one
# machine: the environment form of the flags cmake/QsgdMpi.cmake gives ctest
# (--allow-run-as-root: CI and containers run as root; --oversubscribe: 4
# ranks on 2 cores; --mca mpi_yield_when_idle 1: idle ranks yield the core).
# A value the caller set is kept; other MPIs ignore OMPI_* variables.
export OMPI_ALLOW_RUN_AS_ROOT="${OMPI_ALLOW_RUN_AS_ROOT:-1}"
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}"
export OMPI_MCA_rmaps_base_oversubscribe="${OMPI_MCA_rmaps_base_oversubscribe:-1}"
export OMPI_MCA_mpi_yield_when_idle="${OMPI_MCA_mpi_yield_when_idle:-1}"
