#pragma once
// Which BLAS the models' matrix products call on the device.

#include <string>

namespace qsgd::models {

// On a CUDA build: "cuBLAS <major.minor.patch> (<file>)", the cuBLAS loaded at
// run time (detail/cublas_runtime.hpp: QSGD_CUBLAS, else libcublas.so.13, .12,
// .11), loading it on the first call; throws std::runtime_error naming every
// place it looked when none loads. On a host build: "" (the products call the
// BLAS the program links, which /proc/self/maps names).
std::string device_blas();

}  // namespace qsgd::models
