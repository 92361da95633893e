# shellcheck shell=bash
# Site environment of slurm/sites/example-gres-pmi2-8gpu.conf (sourced by the
# submitter, every array task and the collect job; slurm/site-env.sh explains
# each setting). Module names are this example cluster's; yours differ.
module purge
module load Stages/2024 GCC/11.3.0 CUDA/11.8 OpenMPI/4.1.5 HDF5/1.12.2 Python/3.11.3 h5py matplotlib
export Kokkos_DIR=$PROJECT/opt/kokkos-cuda/lib/cmake/Kokkos
export LD_LIBRARY_PATH=$PROJECT/opt/kokkos-cuda/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export HDF5_USE_FILE_LOCKING=FALSE   # GPFS scratch without locking
export QSGD_PYTHON=python3           # the module's Python has h5py and matplotlib
