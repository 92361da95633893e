#pragma once
// cuBLAS loaded at run time. A CUDA build's matrix products call cuBLAS
// through these pointers instead of linking it, so that a binary built
// against one CUDA toolkit multiplies with the cuBLAS its node has (any of
// 11, 12 or 13: the functions below have kept their ABI), and a package for
// a GPU node need not carry the library (CUDA 11.8's, with cuBLASLt, is
// 638 MiB). Compiled into every build, so that the host tests load a
// stand-in library through the same code (tests/models/test_cublas_runtime.cpp).
//
// Where it looks: the path or file name in QSGD_CUBLAS alone, when set; else
// libcublas.so.13, .12, .11, then libcublas.so, through the dynamic loader's
// search (LD_LIBRARY_PATH, the cache). The first that loads is used; it must
// export every function below, or loading fails naming the one it lacks.

#include <string>
#include <vector>

namespace qsgd::models::detail {

struct CublasRuntime {
  // cuBLAS's types as the ABI has them: handles and streams are pointers,
  // statuses and operations ints (CUBLAS_STATUS_SUCCESS = 0, CUBLAS_OP_N = 0,
  // CUBLAS_OP_T = 1), a libraryPropertyType an int (MAJOR_VERSION = 0,
  // MINOR_VERSION = 1, PATCH_LEVEL = 2).
  using Handle = void*;
  int (*create)(Handle*) = nullptr;                  // cublasCreate_v2
  int (*destroy)(Handle) = nullptr;                  // cublasDestroy_v2
  int (*set_stream)(Handle, void*) = nullptr;        // cublasSetStream_v2
  int (*get_property)(int, int*) = nullptr;          // cublasGetProperty
  int (*sgemm)(Handle, int, int, int, int, int, const float*, const float*, int, const float*, int, const float*,
               float*, int) = nullptr;               // cublasSgemm_v2
  int (*dgemm)(Handle, int, int, int, int, int, const double*, const double*, int, const double*, int,
               const double*, double*, int) = nullptr;  // cublasDgemm_v2
  std::string path;     // the file that was loaded (resolved through the loader)
  std::string version;  // "13.1.0": cublasGetProperty's major.minor.patch
};

// The names load_cublas tries, in order: QSGD_CUBLAS alone when set.
std::vector<std::string> cublas_candidates();

// Loads the first candidate that dlopen accepts and resolves every function.
// Throws std::runtime_error naming each candidate and why it failed, or the
// function a loaded library lacks. The library stays loaded (never closed).
CublasRuntime load_cublas(const std::vector<std::string>& candidates);

// load_cublas(cublas_candidates()), once per process; later calls return the
// same runtime (or throw the same error again).
const CublasRuntime& cublas_runtime();

}  // namespace qsgd::models::detail
