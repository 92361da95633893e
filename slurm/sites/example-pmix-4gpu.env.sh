# shellcheck shell=bash
# Site environment of slurm/sites/example-pmix-4gpu.conf (sourced by the
# submitter, every array task and the collect job; slurm/site-env.sh explains
# each setting). Module names are this example cluster's; yours differ.
module purge
module load gcc/11.3 cuda/11.8 openmpi/4.1.5-pmix hdf5/1.12.2 python/3.11
export Kokkos_DIR=$HOME/opt/kokkos-cuda/lib/cmake/Kokkos
export LD_LIBRARY_PATH=$HOME/opt/kokkos-cuda/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export HDF5_USE_FILE_LOCKING=FALSE   # the sweep directory is on Lustre without flock
export OMPI_MCA_pml=ucx              # InfiniBand through UCX
export OMP_NUM_THREADS=${SLURM_CPUS_PER_TASK:-1}
