# shellcheck shell=bash
# Site environment: sourced (bash) by every array task before it calls srun,
# and by the collect job before it runs Python. Load here what qsgd-train was
# built with on your cluster; module names differ between sites, for example:
#
#   module purge
#   module load gcc/11 cuda/11.8 openmpi/4.1 hdf5/1.12   # Open MPI with PMIx, HDF5
#   export Kokkos_DIR=$HOME/opt/kokkos-cuda/lib/cmake/Kokkos   # Kokkos with CUDA
#   export LD_LIBRARY_PATH=$HOME/opt/kokkos-cuda/lib:$LD_LIBRARY_PATH
#   module load python/3.11           # for qsgd-collect.sh: h5py, numpy, matplotlib
#   export QSGD_PYTHON=python3        #   (else /usr/bin/python3)
#
# Parallel file systems: HDF5 locks every file it opens (flock/fcntl); on a
# Lustre or GPFS mount without locking support that fails with "unable to
# lock file" and no trace can be written or resumed. Traces are written by
# one rank, closed and renamed whole, so locking can be turned off:
#   export HDF5_USE_FILE_LOCKING=FALSE
#
# Runtime settings that often matter at scale:
#   export OMPI_MCA_pml=ucx                    # InfiniBand through UCX
#   export KOKKOS_DEVICE_ID=0                  # one visible GPU per rank (srun --gpu-bind)
#   export OMP_NUM_THREADS=${SLURM_CPUS_PER_TASK:-1}
#
# Keep a site's own copy outside the repository and pass it with
# `slurm/qsgd-submit.sh --site-env FILE`. This default file does nothing, so
# the scripts run unchanged where the build's libraries are already found
# (the CPU test in tests/slurm).
:
